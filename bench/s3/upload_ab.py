#!/usr/bin/env python3
"""Uploads of one file through two builds of bench_cloud_transfer (A and B: say, before and after a change) and
boto3's upload_file, interleaved in a shuffled order in every round, so that their ratios come from one run under
one machine load (docs/BENCHMARKS-s3.md, "The chunk digests' cost to uploads"). Prints the medians as a Markdown
table.

  upload_ab.py --a BIN --b BIN --endpoint URL --work DIR [--reps 5] [--size-mib 256] [--python PY]

Needs AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for the server, and boto3 in --python (bench/s3/boto3_transfer.py).
"""
import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(argv):
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size-mib", type=int, default=256)
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    source = os.path.join(args.work, "upload.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(args.size_mib << 20))
    subprocess.run([args.python, "-c", "import boto3, sys; from botocore.config import Config; boto3.client('s3', "
                    "endpoint_url=sys.argv[1], region_name='us-east-1', config=Config(s3={'addressing_style': "
                    "'path'})).create_bucket(Bucket='upload-ab')", args.endpoint], check=True)
    results = {"A": [], "B": [], "boto3": []}
    for rep in range(args.reps):
        order = list(results)
        random.shuffle(order)
        for label in order:
            if label == "boto3":
                got = run_json([args.python, os.path.join(HERE, "boto3_transfer.py"), "upload", "--endpoint",
                                args.endpoint, "--bucket", "upload-ab", "--key", "boto3/%d" % rep, "--file", source])
            else:
                h = hashlib.sha256(("%s-%d-%s" % (label, rep, random.random())).encode()).hexdigest()
                got = run_json([args.a if label == "A" else args.b, "upload", "--endpoint", args.endpoint,
                                "--bucket", "upload-ab", "--hash", h, "--file", source])
            mbps = (args.size_mib << 20) / got["seconds"] / 1e6
            cpu = got.get("cpu_seconds")
            results[label].append((mbps, cpu / ((args.size_mib << 20) / 1e9) if cpu is not None else None))
            print("# %-6s rep %d: %7.1f MB/s" % (label, rep, mbps), file=sys.stderr)
    med = {k: statistics.median(m for m, _ in v) for k, v in results.items()}
    print("| client | MB/s: median (min-max) of %d | CPU s/GB (median) |" % args.reps)
    print("|---|---|---|")
    for k, v in results.items():
        cpus = [c for _, c in v if c is not None]
        print("| %s | %.1f (%.1f-%.1f) | %s |" % (k, med[k], min(m for m, _ in v), max(m for m, _ in v),
                                                "%.2f" % statistics.median(cpus) if cpus else "-"))
    print("\nB / A: %.2fx; A / boto3: %.2fx; B / boto3: %.2fx" % (med["B"] / med["A"], med["A"] / med["boto3"],
                                                               med["B"] / med["boto3"]))


if __name__ == "__main__":
    main()
