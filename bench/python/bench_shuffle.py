#!/usr/bin/env python3
"""What the sample shuffle buffer costs (issue 17): a warm pass over the dataset with shuffle_buffer N = 0 (samples in
shard order), 1,000 and 10,000, through the C++ stream (`datavo read --shuffle-buffer N`) and through the Python
iterator (`SampleStream(shuffle_buffer=N)`, fields read as memoryviews). Written to docs/BENCHMARKS-python.md.

Each run is a fresh process over a warm cache (every shard in the folder tier; no shard request); its samples/s come
from the process itself (the `read --json` report, from_dataset included; the Python loop's own clock, from after
from_dataset to the last sample: both include the buffer's first fill), its peak RSS from wait4(2). Peak RSS counts the resident pages of the mapped shards: the buffer
keeps the shards of its samples mapped, so that is where its memory shows. Runs are interleaved and rotated per
repetition; the table gives medians (min-max) of --reps (default 5).

    bench_shuffle.py --datavo BIN --work DIR [--reps 5] [--samples 20000] [--per-shard 1000] [--markdown OUT]
with datavo_sdk importable (PYTHONPATH) by /usr/bin/python3 (or --python).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sdk import DATASET, KEYS, fmt, served_dataset  # noqa: E402  (the dataset of the other Python benchmarks)

PY_PASS = r"""
import json, sys, time
import datavo_sdk
stream = datavo_sdk.SampleStream.from_dataset(sys.argv[1], keys=sys.argv[2].split(","), shuffle_buffer=int(sys.argv[3]))
count = 0
size = 0
started = time.perf_counter()
for sample in stream:
    size += len(sample["audio.wav"])
    count += 1
seconds = time.perf_counter() - started
print(json.dumps({"samples": count, "samples_per_second": count / seconds, "field_bytes": size}))
"""

BUFFERS = [0, 1000, 10000]


def run(command, env):
    """Runs `command`; its JSON answer (the last line of its stdout) with its peak RSS in MiB."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    out, err = process.stdout.read(), process.stderr.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (command[:4], process.returncode, err[-3000:]))
    answer = json.loads(out.strip().splitlines()[-1])
    answer["peak_rss_mib"] = usage.ru_maxrss / 1024
    answer["process_seconds"] = time.perf_counter() - started
    return answer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown")
    args = parser.parse_args()

    with served_dataset(args.datavo, os.path.abspath(args.work), args.samples, args.per_shard) as env:
        subprocess.run([args.datavo, "warm", DATASET] + sum((["--key", k] for k in KEYS), []), env=env, check=True,
                       stdout=subprocess.DEVNULL)
        variants = []
        for n in BUFFERS:
            variants.append(("C++ (datavo read)", n, [args.datavo, "--json", "read", DATASET] +
                             sum((["--key", k] for k in KEYS), []) + ["--shuffle-buffer", str(n)]))
            variants.append(("Python iterator", n, [args.python, "-c", PY_PASS, DATASET, ",".join(KEYS), str(n)]))
        results = {(front, n): [] for front, n, _ in variants}
        for rep in range(args.reps + 1):  # the first round warms the page cache; not kept
            shift = rep % len(variants)
            for front, n, command in variants[shift:] + variants[:shift]:
                answer = run(command, env)
                assert answer["samples"] == args.samples, (front, n, answer)
                if rep > 0:
                    results[(front, n)].append(answer)

    lines = ["| front end | shuffle_buffer | samples/s, median (min-max) | vs no buffer | peak RSS MiB, median (min-max) |",
             "|---|---|---|---|---|"]
    for front in ("C++ (datavo read)", "Python iterator"):
        base = sorted(r["samples_per_second"] for r in results[(front, 0)])[len(results[(front, 0)]) // 2]
        for n in BUFFERS:
            rows = results[(front, n)]
            rate = [r["samples_per_second"] for r in rows]
            median_rate = sorted(rate)[len(rate) // 2]
            lines.append("| %s | %s | %s | %.2fx | %s |" % (front, "{:,}".format(n), fmt(rate), median_rate / base,
                                                             fmt([r["peak_rss_mib"] for r in rows])))
    lines.append("")
    lines.append("%d samples in shards of %d, keys %s, a warm folder tier; medians of %d fresh processes each, "
                 "interleaved." % (args.samples, args.per_shard, "+".join(KEYS), args.reps))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
