#!/usr/bin/env python3
"""A torch DataLoader over a SampleStream with 2 workers against 0, at about 200 µs of work per sample (issue 17; goal:
at least 1.6x on this 2-core machine), beside its floor: the same DataLoader and work over torch alone (an
IterableDataset of as many integers, split by worker id, no datavo). Written to docs/BENCHMARKS-python.md.

The work is CPU time spent in Python on each sample (a busy loop of `--work-us` microseconds, standing in for decoding
and augmenting), done inside the dataset, where a DataLoader worker runs it. Each run is a fresh /usr/bin/python3
process over a warm cache (every shard in the folder tier): DataLoader(batch_size=32, num_workers=N) over the stream
wrapped in a map, the clock from the first batch asked to the last one received (worker start-up included); the
loader's samples/s. Interleaved and rotated per repetition; medians (min-max) of --reps (default 5).

    bench_loader.py --datavo BIN --work DIR [--reps 5] [--samples 8000] [--work-us 200] [--markdown OUT]
with datavo_sdk importable (PYTHONPATH) by /usr/bin/python3 (or --python), and python3-torch installed.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sdk import DATASET, KEYS, fmt, served_dataset  # noqa: E402  (the dataset of the other Python benchmarks)

LOADER = r"""
import json, sys, time
import torch.utils.data
import datavo_sdk

WORK = float(sys.argv[3]) / 1e6


def work():
    until = time.perf_counter() + WORK  # the stand-in for decoding: CPU time in Python
    while time.perf_counter() < until:
        pass


class Decoded(torch.utils.data.IterableDataset):
    def __init__(self, stream):
        self.stream = stream

    def __iter__(self):
        for sample in self.stream:
            work()
            yield len(sample["audio.wav"])


class Floor(torch.utils.data.IterableDataset):
    # The same loop over torch alone: `count` integers, split by worker id as the stream splits its shards.

    def __init__(self, count):
        self.count = count

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        for i in range(worker, self.count, workers):
            work()
            yield i


if sys.argv[4] == "floor":
    dataset = Floor(int(sys.argv[5]))
else:
    dataset = Decoded(datavo_sdk.SampleStream.from_dataset(sys.argv[1], keys=["audio.wav"], copy=True))
loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=int(sys.argv[2]))
started = time.perf_counter()
samples = 0
for batch in loader:
    samples += len(batch)
seconds = time.perf_counter() - started
print(json.dumps({"samples": samples, "seconds": seconds, "samples_per_second": samples / seconds}))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--samples", type=int, default=8000)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--work-us", type=float, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown")
    args = parser.parse_args()

    workers = [0, 2]
    sides = ["datavo", "floor"]
    runs = [(side, w) for side in sides for w in workers]
    results = {run: [] for run in runs}
    with served_dataset(args.datavo, os.path.abspath(args.work), args.samples, args.per_shard) as env:
        subprocess.run([args.datavo, "warm", DATASET] + sum((["--key", k] for k in KEYS), []), env=env, check=True,
                       stdout=subprocess.DEVNULL)
        for rep in range(args.reps + 1):  # the first round warms the page cache and the imports; not kept
            for side, w in runs[rep % len(runs):] + runs[:rep % len(runs)]:
                done = subprocess.run([args.python, "-c", LOADER, DATASET, str(w), str(args.work_us), side,
                                       str(args.samples)], env=env, capture_output=True, text=True, timeout=900)
                if done.returncode != 0:
                    raise RuntimeError("%s with %d workers failed:\n%s" % (side, w, done.stderr[-3000:]))
                answer = json.loads(done.stdout.strip().splitlines()[-1])
                assert answer["samples"] == args.samples, answer
                if rep > 0:
                    results[(side, w)].append(answer["samples_per_second"])

    median = {run: sorted(results[run])[len(results[run]) // 2] for run in runs}
    lines = ["| dataset | DataLoader num_workers | samples/s, median (min-max) | vs 0 workers | vs the floor |",
             "|---|---|---|---|---|"]
    for side, w in runs:
        lines.append("| %s | %d | %s | %.2fx | %.2fx |" % (
            "SampleStream" if side == "datavo" else "torch alone (the floor)", w, fmt(results[(side, w)]),
            median[(side, w)] / median[(side, 0)], median[(side, w)] / median[("floor", w)]))
    lines.append("")
    lines.append("%d samples in shards of %d, %.0f µs of Python work per sample, batch_size 32, a warm folder tier; "
                 "medians of %d fresh processes each, the four runs interleaved and rotated." % (
                     args.samples, args.per_shard, args.work_us, args.reps))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
