#!/usr/bin/env python3
"""Per-call latency of an fsspec ``simplecache`` hit: the peer of a Datavo top-tier hit.

The file is copied into the cache once (the fill, untimed); then every timed call is a hit that opens the cached
copy and closes it. Two ways a user writes it:

  url  fsspec.open("simplecache::file://<path>", "rb", simplecache={"cache_storage": <dir>}) as a context manager
  fs   fsspec.filesystem("simplecache", target_protocol="file", cache_storage=<dir>).open(<path>, "rb").close()

Each run times --iterations calls with time.perf_counter; the result is the median over --runs runs, in
nanoseconds per call. bench_hit_path runs this with --runs 1 --format ns once per repetition, so that the peer is
interleaved with the Datavo measurements; run it by hand with the defaults for a standalone figure.

Needs fsspec (Debian's python3-fsspec: run it with /usr/bin/python3 where another python3 comes first in PATH).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import fsspec


def make_call(variant, path, cache_dir):
    if variant == "url":
        url = "simplecache::file://" + path
        options = {"cache_storage": cache_dir}

        def call():
            with fsspec.open(url, "rb", simplecache=options):
                pass

        return call
    fs = fsspec.filesystem("simplecache", target_protocol="file", cache_storage=cache_dir)

    def call():
        fs.open(path, "rb").close()

    return call


def time_runs(call, iterations, runs, warmup):
    for _ in range(warmup):
        call()
    per_call_ns = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(iterations):
            call()
        per_call_ns.append((time.perf_counter() - start) / iterations * 1e9)
    return per_call_ns


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the file to cache (absolute path)")
    parser.add_argument("--variant", choices=["url", "fs", "both"], default="both")
    parser.add_argument("--iterations", type=int, default=5000, help="timed calls per run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200, help="untimed hits after the fill")
    parser.add_argument("--cache-dir", help="cache_storage; by default a directory under $TMPDIR, removed after")
    parser.add_argument("--format", choices=["text", "json", "ns"], default="text",
                        help="ns: only the median ns per call (one variant)")
    args = parser.parse_args()
    path = os.path.abspath(args.path)
    if not os.path.isfile(path):
        sys.exit(f"fsspec_hit.py: no such file: {path}")
    variants = ["url", "fs"] if args.variant == "both" else [args.variant]
    if args.format == "ns" and len(variants) != 1:
        sys.exit("fsspec_hit.py: --format ns needs one --variant")

    with tempfile.TemporaryDirectory(prefix="fsspec-hit.") as scratch:
        cache_dir = args.cache_dir or scratch
        results = {}
        for variant in variants:
            call = make_call(variant, path, cache_dir)
            call()  # the fill: copies the file into cache_dir
            runs = time_runs(call, args.iterations, args.runs, args.warmup)
            results[variant] = {"median_ns": statistics.median(runs), "runs_ns": runs}

    if args.format == "ns":
        print(f"{results[variants[0]]['median_ns']:.1f}")
    elif args.format == "json":
        json.dump({"fsspec": fsspec.__version__, "python": sys.version.split()[0], "iterations": args.iterations,
                   "results": results}, sys.stdout, indent=2)
        print()
    else:
        print(f"fsspec {fsspec.__version__}, python {sys.version.split()[0]}, "
              f"{args.iterations} calls x {args.runs} runs")
        for variant, r in results.items():
            print(f"  simplecache hit ({variant}): median {r['median_ns'] / 1000:.2f} us/call "
                  f"(runs: {', '.join(f'{x / 1000:.2f}' for x in r['runs_ns'])})")


if __name__ == "__main__":
    main()
