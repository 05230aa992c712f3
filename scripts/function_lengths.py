#!/usr/bin/env python3
"""Lists the length of every C++ function of the product code and fails when one is over the limit.

Usage: scripts/function_lengths.py [--limit N] [--top K] [--root DIR] [PATH...]
  --root DIR  the tree PATHs are relative to (default: this checkout)
  PATH   files or directories to measure (default: src cli python/src include)
  --top  print the K longest functions (default: only those over the limit)

A function is measured from its first line to its closing brace, as Universal Ctags reports them (lambdas count in
the function that holds them). A function that is clearer long says why on the line before its definition, in a
comment that starts with "// Long:"; it is listed, and not counted as a failure. Exit status: 0 when no function is
over the limit without such a comment, 1 otherwise, 2 when ctags is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATHS = ["src", "cli", "python/src", "include"]
EXCUSE = "// Long:"


def functions(root, paths):
    """Yields (path, name, first line, last line) for every function definition under `paths`."""
    cmd = ["ctags", "-R", "--languages=C++", "--langmap=C++:+.hpp", "--kinds-C++=f", "--fields=+ne",
           "--extras=-F", "-f", "-"] + paths
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
    for row in out.splitlines():
        cols = row.split("\t")
        fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
        if "line" not in fields or "end" not in fields or cols[0].startswith("__anon"):
            continue
        scope = fields.get("class") or fields.get("struct") or ""
        name = f"{scope.split('::')[-1]}::{cols[0]}" if scope else cols[0]
        yield cols[1], name, int(fields["line"]), int(fields["end"])


def excused(root, path, first):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    before = lines[first - 2].strip() if first >= 2 else ""
    return before.startswith(EXCUSE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if shutil.which("ctags") is None:
        print("function_lengths: ctags (Debian's universal-ctags) is required", file=sys.stderr)
        return 2
    measured = sorted(((last - first + 1, path, name, first) for path, name, first, last in functions(root, args.paths)),
                      reverse=True)
    failures = 0
    for rank, (length, path, name, first) in enumerate(measured):
        over = length > args.limit
        if not over and rank >= args.top:
            break
        note = ""
        if over and excused(root, path, first):
            note = "  (over the limit; says why)"
        elif over:
            note = "  OVER THE LIMIT"
            failures += 1
        print(f"{length:5d}  {path}:{first}  {name}{note}")
    print(f"function_lengths: {len(measured)} functions, {failures} over {args.limit} lines without a reason")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
