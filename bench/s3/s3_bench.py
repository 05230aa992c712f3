#!/usr/bin/env python3
"""The S3 transfer benchmarks of docs/BENCHMARKS-s3.md, run by bench/s3/run_benchmarks.sh (which starts the servers).

For each server (moto, s3rver), REPS rounds; in each round every client runs once, in a shuffled order, so that
the ratios come from the same run and the same machine load:
  download of one SIZE object: the S3 tier (bench_cloud_transfer --tier s3, concurrency 8 = the default, and 1, 2, 4), the whole
  `datavo cache fetch` path (staging, SHA-256, commit; the origin URL is unreachable, so the bucket serves it),
  boto3's transfer manager (download_file, its defaults) and `aws s3 cp`;
  upload of the same file: the S3 tier (install_copy: multipart, 16 MiB parts, 8 at a time) and boto3 upload_file.
Prints Markdown tables of medians (MB/s, CPU seconds per GB) and the ratios; writes every run to --json.
Needs the image's python (boto3) and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for each server in --servers.
"""

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

import boto3
from botocore.config import Config

HERE = os.path.dirname(os.path.abspath(__file__))


def s3_client(endpoint, key, secret):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(s3={"addressing_style": "path"}))


def run(argv, env):
    """Runs argv; returns (wall seconds, child CPU seconds, stdout)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()  # reaps it: its rusage is in RUSAGE_CHILDREN now
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (argv[0], proc.returncode, err.decode()[-2000:]))
    return wall, out.decode()


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def hash_of(text):
    return hashlib.sha256(text.encode()).hexdigest()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size-mib", type=int, default=256)
    p.add_argument("--bench-bin", required=True)
    p.add_argument("--datavo", required=True)
    p.add_argument("--aws", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--servers", required=True, help="name=endpoint=key=secret,...")
    args = p.parse_args()

    os.makedirs(args.work, exist_ok=True)
    size = args.size_mib << 20
    source = os.path.join(args.work, "source.bin")
    with open(source, "wb") as f:
        for _ in range(args.size_mib):
            f.write(os.urandom(1 << 20))
    sha = hashlib.sha256(open(source, "rb").read()).hexdigest()
    python = sys.executable
    results = []

    for spec in args.servers.split(","):
        name, endpoint, key, secret = spec.split("=", 3)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1",
                   AWS_EC2_METADATA_DISABLED="true")
        s3 = s3_client(endpoint, key, secret)
        bucket = "bench"
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        h = hash_of("bench-download")
        obj = "local/%s.tar" % h
        s3.upload_file(source, bucket, obj)
        out_file = os.path.join(args.work, "out.bin")

        def ours(concurrency):
            def go(rep):
                _, out = run([args.bench_bin, "download", "--endpoint", endpoint, "--bucket", bucket, "--hash", h,
                              "--file", out_file, "--concurrency", str(concurrency)], env)
                return json.loads(out)
            return go

        def fetch(rep):
            cache = os.path.join(args.work, "cache")
            shutil.rmtree(cache, ignore_errors=True)
            config = os.path.join(args.work, "shards.yaml")
            with open(config, "w") as f:
                f.write("tiers:\n  - name: local\n    path: %s\n    durability: none\n  - name: bucket\n    type: s3\n"
                        "    bucket: %s\n    endpoint_url: %s\n    region: us-east-1\n    single_flight: false\n"
                        % (cache, bucket, endpoint))
            wall, out = run([args.datavo, "--config", config, "--instance", "local", "--json", "cache", "fetch", h,
                             "--url", "http://127.0.0.1:9/unreachable", "--sha256", sha], env)
            got = json.loads(out)
            assert got["source"] == "promoted", got
            return {"seconds": wall, "bytes": size}

        def boto3_download(rep):
            _, out = run([python, os.path.join(HERE, "boto3_transfer.py"), "download", "--endpoint", endpoint,
                          "--bucket", bucket, "--key", obj, "--file", out_file], env)
            return json.loads(out)

        def awscli(rep):
            wall, _ = run([args.aws, "--endpoint-url", endpoint, "--region", "us-east-1", "s3", "cp",
                           "s3://%s/%s" % (bucket, obj), out_file, "--only-show-errors"], env)
            return {"seconds": wall, "bytes": size}

        def ours_upload(rep):
            _, out = run([args.bench_bin, "upload", "--endpoint", endpoint, "--bucket", bucket, "--hash",
                          hash_of("up-%s-%d" % (name, rep)), "--file", source], env)
            s3.delete_object(Bucket=bucket, Key="local/%s.tar" % hash_of("up-%s-%d" % (name, rep)))
            return json.loads(out)

        def boto3_upload(rep):
            k = "boto3-up/%d" % rep
            _, out = run([python, os.path.join(HERE, "boto3_transfer.py"), "upload", "--endpoint", endpoint,
                          "--bucket", bucket, "--key", k, "--file", source], env)
            s3.delete_object(Bucket=bucket, Key=k)
            return json.loads(out)

        clients = {"download: S3 tier, concurrency 8": ours(8), "download: S3 tier, concurrency 4": ours(4),
                   "download: S3 tier, concurrency 2": ours(2), "download: S3 tier, concurrency 1": ours(1),
                   "download: datavo cache fetch (whole path)": fetch, "download: boto3 download_file": boto3_download,
                   "download: aws s3 cp": awscli, "upload: S3 tier (install_copy)": ours_upload,
                   "upload: boto3 upload_file": boto3_upload}
        for rep in range(args.reps):
            order = list(clients)
            random.shuffle(order)
            for client in order:
                before = child_cpu()
                got = clients[client](rep)
                process_cpu = child_cpu() - before
                record = {"server": name, "client": client, "rep": rep, "seconds": got["seconds"],
                          "bytes": got["bytes"], "cpu_seconds": got.get("cpu_seconds", process_cpu),
                          "process_cpu_seconds": process_cpu, "in_process": "cpu_seconds" in got}
                results.append(record)
                print("# %-7s %-45s rep %d: %7.1f MB/s, %.2f CPU s/GB" % (
                    name, client, rep, record["bytes"] / 1e6 / record["seconds"],
                    record["cpu_seconds"] / (record["bytes"] / 1e9)), file=sys.stderr)
                if os.path.exists(out_file):
                    os.unlink(out_file)

    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)

    def median(server, client, field):
        rows = [r for r in results if r["server"] == server and r["client"] == client]
        if field == "mbps":
            return statistics.median(r["bytes"] / 1e6 / r["seconds"] for r in rows)
        return statistics.median(r[field] / (r["bytes"] / 1e9) for r in rows)

    servers = [s.split("=")[0] for s in args.servers.split(",")]
    print("| server | client | MB/s (median of %d) | CPU s/GB (median) | CPU s/GB, whole process |" % args.reps)
    print("|---|---|---|---|---|")
    for server in servers:
        for client in clients:
            print("| %s | %s | %.1f | %.2f | %.2f |" % (server, client, median(server, client, "mbps"),
                                                     median(server, client, "cpu_seconds"),
                                                     median(server, client, "process_cpu_seconds")))
    print()
    print("| server | ratio (medians, same run) | value |")
    print("|---|---|---|")
    for server in servers:
        m = lambda c: median(server, c, "mbps")
        pairs = [("S3 tier (c=8) / boto3 download_file", "download: S3 tier, concurrency 8", "download: boto3 download_file"),
                 ("S3 tier (c=8) / aws s3 cp", "download: S3 tier, concurrency 8", "download: aws s3 cp"),
                 ("datavo cache fetch / boto3 download_file", "download: datavo cache fetch (whole path)",
                  "download: boto3 download_file"),
                 ("datavo cache fetch / aws s3 cp", "download: datavo cache fetch (whole path)", "download: aws s3 cp"),
                 ("S3 tier upload / boto3 upload_file", "upload: S3 tier (install_copy)", "upload: boto3 upload_file")]
        for label, a, b in pairs:
            print("| %s | %s | %.2fx |" % (server, label, m(a) / m(b)))


if __name__ == "__main__":
    main()
