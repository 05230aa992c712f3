#!/usr/bin/env python3
"""boto3 as a reference S3 client for the end-to-end suites: what boto3 sees of what Datavo wrote, and objects
written the way boto3 writes them (put_object, upload_file with its transfer manager, multipart included).

Needs boto3 (the image's python: tests/e2e/s3_lib.sh finds it; CI's /usr/bin/python3 has none). Loopback only.

    s3_tool.py --endpoint URL COMMAND ARGS...
        mb BUCKET                        create a bucket (already owning it is fine)
        ls BUCKET [PREFIX]               JSON list of {"key", "size"}
        head BUCKET KEY                  JSON {"size", "etag", "metadata": {...}}; exit 3 when there is no object
        put BUCKET KEY FILE [k=v ...]    put_object with user metadata k=v (x-amz-meta-k)
        upload BUCKET KEY FILE [--part-size BYTES] [--threshold BYTES] [--concurrency N]
                                         upload_file through boto3's transfer manager (multipart above threshold)
        download BUCKET KEY FILE [--part-size BYTES] [--concurrency N]
                                         download_file through the transfer manager
        get BUCKET KEY FILE              get_object, whole
        uploads BUCKET                   the number of open multipart uploads (ListMultipartUploads)
        rm BUCKET KEY                    delete_object
Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment (default "test"/"test").
"""

import argparse
import json
import os
import sys

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2, "mode": "standard"}),
    )


def transfer_config(args):
    kwargs = {}
    if getattr(args, "part_size", None):
        kwargs["multipart_chunksize"] = args.part_size
    if getattr(args, "threshold", None):
        kwargs["multipart_threshold"] = args.threshold
    if getattr(args, "concurrency", None):
        kwargs["max_concurrency"] = args.concurrency
    return TransferConfig(**kwargs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoint", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("mb").add_argument("bucket")
    p = sub.add_parser("ls")
    p.add_argument("bucket")
    p.add_argument("prefix", nargs="?", default="")
    for name in ("head", "rm"):
        p = sub.add_parser(name)
        p.add_argument("bucket")
        p.add_argument("key")
    p = sub.add_parser("put")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("file")
    p.add_argument("meta", nargs="*")
    for name in ("upload", "download"):
        p = sub.add_parser(name)
        p.add_argument("bucket")
        p.add_argument("key")
        p.add_argument("file")
        p.add_argument("--part-size", type=int)
        p.add_argument("--threshold", type=int)
        p.add_argument("--concurrency", type=int)
    p = sub.add_parser("get")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("file")
    sub.add_parser("uploads").add_argument("bucket")
    args = parser.parse_args(argv)
    s3 = client(args.endpoint)

    if args.command == "mb":
        try:
            s3.create_bucket(Bucket=args.bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
    elif args.command == "ls":
        out = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket, Prefix=args.prefix):
            out += [{"key": o["Key"], "size": o["Size"]} for o in page.get("Contents", [])]
        print(json.dumps(out))
    elif args.command == "head":
        try:
            h = s3.head_object(Bucket=args.bucket, Key=args.key)
        except s3.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return 3
            raise
        print(json.dumps({"size": h["ContentLength"], "etag": h["ETag"], "metadata": h.get("Metadata", {})}))
    elif args.command == "put":
        meta = dict(kv.split("=", 1) for kv in args.meta)
        with open(args.file, "rb") as f:
            s3.put_object(Bucket=args.bucket, Key=args.key, Body=f.read(), Metadata=meta)
    elif args.command == "upload":
        s3.upload_file(args.file, args.bucket, args.key, Config=transfer_config(args))
    elif args.command == "download":
        s3.download_file(args.bucket, args.key, args.file, Config=transfer_config(args))
    elif args.command == "get":
        body = s3.get_object(Bucket=args.bucket, Key=args.key)["Body"].read()
        with open(args.file, "wb") as f:
            f.write(body)
    elif args.command == "uploads":
        print(len(s3.list_multipart_uploads(Bucket=args.bucket).get("Uploads", [])))
    elif args.command == "rm":
        s3.delete_object(Bucket=args.bucket, Key=args.key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
