#!/usr/bin/env python3
"""One download_file or upload_file through boto3's transfer manager, timed in-process (boto3 imported before the
clock starts), for bench/s3/run_benchmarks.sh. Prints one JSON line like bench_cloud_transfer's:
{"op", "bytes", "seconds", "cpu_seconds", "mb_per_s"}; cpu_seconds is this process's user + system time during the
transfer, every thread.

    boto3_transfer.py download|upload --endpoint URL --bucket NAME --key KEY --file PATH
        [--concurrency N] [--part-size BYTES]     (defaults: the transfer manager's, 10 threads and 8 MiB)
Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""

import argparse
import json
import os
import resource
import time

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=["download", "upload"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--file", required=True)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--part-size", type=int)
    args = parser.parse_args()
    s3 = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}))
    kwargs = {}
    if args.concurrency:
        kwargs["max_concurrency"] = args.concurrency
    if args.part_size:
        kwargs["multipart_chunksize"] = args.part_size
        kwargs["multipart_threshold"] = args.part_size
    config = TransferConfig(**kwargs)
    s3.head_bucket(Bucket=args.bucket)  # the connection and the credentials are set up before the clock
    c0, t0 = cpu(), time.monotonic()
    if args.op == "download":
        s3.download_file(args.bucket, args.key, args.file, Config=config)
    else:
        s3.upload_file(args.file, args.bucket, args.key, Config=config)
    seconds, cpu_seconds = time.monotonic() - t0, cpu() - c0
    size = os.path.getsize(args.file)
    print(json.dumps({"op": args.op, "bytes": size, "seconds": round(seconds, 4), "cpu_seconds": round(cpu_seconds, 4),
                      "mb_per_s": round(size / 1e6 / seconds, 1)}))


if __name__ == "__main__":
    main()
