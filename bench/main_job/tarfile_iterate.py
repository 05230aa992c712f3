#!/usr/bin/env python3
"""The Python baseline of item 3 (docs/BENCHMARKS-main-job.md): iterate a shard with the standard library's tarfile.

    tarfile_iterate.py SHARD.tar

Reads every member in archive order exactly as the brief says (`for m in tf: tf.extractfile(m).read()`), groups
consecutive members into samples by the WebDataset rule (sample id = path up to the first dot of the basename), and
prints one JSON line: {"mode": "python-tarfile", "samples": N, "fields": N, "bytes": N, "seconds": S}. `seconds` runs
from before tarfile.open to after the last read; the driver also times the whole process.
"""
import json
import os
import sys
import tarfile
import time


def sample_id(name: str) -> str:
    head, base = os.path.split(name)
    stem = base.split(".", 1)[0]
    return os.path.join(head, stem) if head else stem


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: tarfile_iterate.py SHARD.tar")
    start = time.perf_counter()
    samples = fields = nbytes = 0
    last = None
    with tarfile.open(sys.argv[1]) as tf:
        for m in tf:
            f = tf.extractfile(m)
            if f is None:  # not a regular file
                continue
            data = f.read()
            fields += 1
            nbytes += len(data)
            sid = sample_id(m.name)
            if sid != last:
                samples += 1
                last = sid
    seconds = time.perf_counter() - start
    print(json.dumps({"mode": "python-tarfile", "samples": samples, "fields": fields, "bytes": nbytes,
                      "seconds": seconds}))


if __name__ == "__main__":
    main()
