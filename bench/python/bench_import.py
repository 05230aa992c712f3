#!/usr/bin/env python3
"""What a job pays to start reading: `import datavo_sdk` plus `SampleStream.from_dataset(...)`, in a fresh process, on
a machine where torch is installed (issue 17, item 8; goal: under 0.2 s). Written to docs/BENCHMARKS-python.md.

Variants, each a fresh /usr/bin/python3 process, timed twice: inside, from its first line to after from_dataset; and
outside, the whole process from spawn to exit (interpreter start and shutdown included); with its peak RSS from
getrusage. Interleaved and rotated per repetition; the tables give medians of --reps (default 9):
  floor       the interpreter alone (the probe without the SDK), the floor;
  sdk         import datavo_sdk; from_dataset (datavo_sdk never imports torch);
  sdk+torch   import torch first, then the same: what the SDK cost before, when it imported torch itself, and what a
              job that uses a DataLoader pays anyway.

    bench_import.py --datavo BIN --work DIR [--reps 9] [--markdown OUT]
with datavo_sdk importable (PYTHONPATH) by /usr/bin/python3 (or --python).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sdk import DATASET, KEYS, served_dataset  # noqa: E402  (the same dataset as the other Python benchmarks)

PROBE = r"""
import time
t0 = time.perf_counter()
import json, os, resource, sys
if sys.argv[1] in ("sdk", "sdk+torch"):
    if sys.argv[1] == "sdk+torch":
        import torch.utils.data
    import datavo_sdk
    stream = datavo_sdk.SampleStream.from_dataset(sys.argv[2], keys=sys.argv[3].split(","))
    assert stream.num_samples > 0
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "torch": "torch" in sys.modules,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--markdown")
    args = parser.parse_args()

    with served_dataset(args.datavo, os.path.abspath(args.work), 2000, 500) as env:
        names = ["floor", "sdk", "sdk+torch"]
        results = {name: [] for name in names}
        for rep in range(args.reps + 1):  # the first round warms the page cache and the manifest cache; not kept
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                started = time.perf_counter()
                done = subprocess.run([args.python, "-c", PROBE, name, DATASET, ",".join(KEYS)], env=env,
                                      capture_output=True, text=True, check=True, timeout=300)
                result = json.loads(done.stdout)
                result["process_seconds"] = time.perf_counter() - started
                assert result["torch"] == (name == "sdk+torch"), (name, result)
                if rep > 0:
                    results[name].append(result)

    def median(name, field):
        return statistics.median(r[field] for r in results[name])

    lines = [
        "| variant | import + from_dataset, median (min-max) | whole process, median | peak RSS, median | torch |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        seconds = [r["seconds"] for r in results[name]]
        lines.append("| %s | %.3f s (%.3f-%.3f) | %.3f s | %.0f MiB | %s |" % (
            name, median(name, "seconds"), min(seconds), max(seconds), median(name, "process_seconds"),
            median(name, "peak_rss_mib"), "imported" if name == "sdk+torch" else "not imported"))
    lines.append("")
    lines.append("whole process, sdk / floor: %.2fx; sdk+torch / sdk: %.1fx (reps: %d, %s)" % (
        median("sdk", "process_seconds") / median("floor", "process_seconds"),
        median("sdk+torch", "process_seconds") / median("sdk", "process_seconds"), args.reps,
        time.strftime("%Y-%m-%d")))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
