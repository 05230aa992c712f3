#!/usr/bin/env python3
"""Checks that every layer of Datavo only looks down (ARCHITECTURE.md, "Layers").

Usage: scripts/check_layers.py [--list] [--root DIR]
  --root  the tree to check (default: this checkout); the tests check a small tree with a deliberate violation

Each source file of the product (src/, include/datavo/, cli/, python/src/) belongs to one component, and each
component to one layer (the table below). A file may include a header of its own component, or of any component
of a lower layer; never one of a higher layer, nor one of another component of its own layer. A public header
(include/datavo/) may include only public headers. Every product file must belong to a component, so that a new
directory or public header is placed in a layer when it is made. Exit status 0 when every include looks down, 1
otherwise (each violation printed as "file:line: ..."); --list prints the table.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (layer, component, directories, public headers of include/datavo/) from the ground up.
LAYERS = [
    (0, "base", ["src/base"], ["result", "units", "byte_sink", "content_hash", "chunk_digests", "fetcher", "access", "lease"]),
    (1, "util", ["src/util"], ["log"]),
    (2, "tar", ["src/tar"], ["tar"]),
    (2, "net", ["src/net"], ["transport", "url_fetcher"]),
    (2, "protocol", ["src/protocol"], ["protocol"]),
    (3, "tier", ["src/tier"], ["tier", "tier_config", "tier_registry", "folder_tier", "memory_tier", "cloud_tier",
                               "s3_tier", "gcs_tier", "azure_blob_tier"]),
    (4, "config", ["src/config"], ["config"]),
    (5, "core", ["src/core"], ["hierarchy"]),
    (6, "client", ["src/client"], ["origin_client", "dataset", "sample_stream", "sample_pipeline"]),
    (6, "origin", ["src/origin"], ["origin"]),
    (7, "ops", ["src/ops"], ["operations", "warm", "demo", "metrics"]),
    (8, "cli", ["cli"], []),
    (8, "python", ["python/src"], []),
]
PRODUCT_DIRS = ["src", "include/datavo", "cli", "python/src"]
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def component_of(path):
    """The (layer, component) of a repository-relative path, or None."""
    if path.startswith("include/datavo/"):
        stem = os.path.splitext(os.path.basename(path))[0]
        for layer, name, _, headers in LAYERS:
            if stem in headers:
                return layer, name
        return None
    for layer, name, dirs, _ in LAYERS:
        if any(path == d or path.startswith(d + "/") for d in dirs):
            return layer, name
    return None


def resolve(includer, target):
    """The repository-relative path an include names: include/, src/, the includer's folder, or the root."""
    for base in ("include", "src", os.path.dirname(includer), ""):
        candidate = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def product_files():
    for top in PRODUCT_DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def main():
    global ROOT
    args = sys.argv[1:]
    if "--root" in args:
        at = args.index("--root")
        if at + 1 >= len(args):
            print("check_layers: --root needs a directory", file=sys.stderr)
            return 2
        ROOT = os.path.abspath(args[at + 1])
    if "--list" in args:
        for layer, name, dirs, headers in LAYERS:
            public = ", ".join(f"datavo/{h}.hpp" for h in headers) or "-"
            print(f"{layer}  {name:9s} {' '.join(dirs):14s} public: {public}")
        return 0
    problems = []
    for path in product_files():
        own = component_of(path)
        if own is None:
            problems.append(f"{path}:1: belongs to no component: add it to LAYERS in scripts/check_layers.py")
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = resolve(path, match.group(1))
                if target is None:
                    continue  # a system or generated header
                if path.startswith("include/") and not target.startswith("include/"):
                    problems.append(f"{path}:{number}: a public header includes the private {target}")
                    continue
                theirs = component_of(target)
                if theirs is None:
                    problems.append(f"{path}:{number}: includes {target}, which belongs to no component")
                elif theirs[0] > own[0]:
                    problems.append(f"{path}:{number}: {own[1]} (layer {own[0]}) includes {target} of the higher "
                                    f"layer {theirs[1]} ({theirs[0]})")
                elif theirs[0] == own[0] and theirs[1] != own[1]:
                    problems.append(f"{path}:{number}: {own[1]} includes {target} of {theirs[1]}, a component "
                                    f"of its own layer ({own[0]})")
    for problem in problems:
        print(problem)
    print(f"check_layers: {len(problems)} include(s) that do not look down")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
