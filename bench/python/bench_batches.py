#!/usr/bin/env python3
"""The batch path (`SampleStream.batches(n)`, issue 17) against the C++ SampleStream and the per-sample iterator, by
CPU time and by wall time. Written to docs/BENCHMARKS-python.md by bench/python/run.sh --batches.

Two warm datasets of 20,000 samples in shards of 1,000 (every shard in the folder tier and the page cache; revision
pinned, so no request is made):
  - tokens: fixed-size fields, `tokens.bin` (2 KiB: 1,024 16-bit token ids) and `label.cls` (8 bytes), the case the
    batch path is for: each key of a batch is one (64 x size) array;
  - voice: the other Python benchmarks' dataset (a 3-5 KB WAV and a transcript, sizes vary), where a batch's fields
    are lists of memoryviews.
Every loop does the same work per field: its size and first byte, over --passes passes (default 5; one pass is
about 0.1 s, too short to time). The C++ loop (bench/python/cpp_loop.cpp) per sample; the per-sample Python
iterator per sample; the batch loop per batch, with NumPy for the arrays
(`arr.size`, `arr[:, 0].sum()`) and a Python loop over the lists; and, as the floor of any batch path, the batch
loop's body alone over one pass's batches read and kept ("body"). Each variant runs in a fresh process, timed inside
it (the loop apart from `from_dataset`, as wall time and as the process's CPU time, every thread included);
variants interleaved and their order rotated per repetition; ratios within each repetition; medians (min-max) of
--reps (default 5).

    bench_batches.py --datavo BIN --cpp-loop BIN --work DIR [--samples 20000] [--reps 5] [--batch 64] [--passes 5]
                     [--markdown OUT]
with datavo_sdk importable (PYTHONPATH) by /usr/bin/python3 (or --python), and python3-numpy installed.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_sdk  # noqa: E402  (the voice dataset, the server and the helpers of the other Python benchmarks)
from bench_sdk import fmt, run_json, served_dataset  # noqa: E402

TOKENS = "bench_tokens/train"
TOKEN_KEYS = ["label.cls", "tokens.bin"]

BATCH_LOOP = r"""
import json, sys, time
import numpy
from datavo_sdk import SampleStream
dataset, revision, keys, size = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
passes, kept = int(sys.argv[5]), sys.argv[6:] == ["kept"]
wall0, cpu0 = time.perf_counter(), time.process_time()
batches = SampleStream.from_dataset(dataset, keys=keys, revision=revision).batches(size)
if kept:  # the floor ("body"): one pass's batches read and kept here, so that the loop below is the body alone
    batches = list(batches)
wall1, cpu1 = time.perf_counter(), time.process_time()
samples = fields = total = checksum = 0
for _ in range(passes):
    for batch in batches:
        samples += batch.num_samples
        for key in keys:
            value = batch[key]
            if isinstance(value, numpy.ndarray):  # one (samples x size) array: each field's size and first byte
                fields += value.shape[0]
                total += value.size
                checksum += int(value[:, 0].sum())
            else:
                for field in value:
                    fields += 1
                    total += len(field)
                    checksum += field[0]
wall2, cpu2 = time.perf_counter(), time.process_time()
print(json.dumps(dict(samples=samples, fields=fields, bytes=total, checksum=checksum, setup_seconds=wall1 - wall0,
                      loop_seconds=wall2 - wall1, setup_cpu=cpu1 - cpu0, loop_cpu=cpu2 - cpu1, seconds=wall2 - wall0)))
"""

SAMPLE_LOOP = r"""
import json, sys, time
from datavo_sdk import SampleStream
dataset, revision, keys, passes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
wall0, cpu0 = time.perf_counter(), time.process_time()
stream = SampleStream.from_dataset(dataset, keys=keys, revision=revision)
wall1, cpu1 = time.perf_counter(), time.process_time()
samples = fields = total = checksum = 0
for _ in range(passes):
    for sample in stream:
        samples += 1
        for key in keys:
            value = sample[key]
            fields += 1
            total += len(value)
            checksum += value[0]
wall2, cpu2 = time.perf_counter(), time.process_time()
print(json.dumps(dict(samples=samples, fields=fields, bytes=total, checksum=checksum, setup_seconds=wall1 - wall0,
                      loop_seconds=wall2 - wall1, setup_cpu=cpu1 - cpu0, loop_cpu=cpu2 - cpu1, seconds=wall2 - wall0)))
"""

def make_tokens(root, count):
    os.makedirs(root, exist_ok=True)
    for i in range(count):
        tokens = bytes((i * 31 + j) % 256 for j in range(2048))
        with open(os.path.join(root, "s%06d.tokens.bin" % i), "wb") as f:
            f.write(tokens)
        with open(os.path.join(root, "s%06d.label.cls" % i), "wb") as f:
            f.write((i % 1000).to_bytes(8, "little"))


def warm(datavo, env, dataset, keys):
    done = subprocess.run([datavo, "--json", "warm", dataset] + sum((["--key", k] for k in keys), []), env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["revision"]


def measure(args, work, dataset, keys, make):
    """{variant: [result per repetition]} over `dataset`, served from `work`."""
    with served_dataset(args.datavo, work, args.samples, args.per_shard, dataset=dataset, make=make) as env:
        revision = str(warm(args.datavo, env, dataset, keys))
        joined, passes = ",".join(keys), str(args.passes)
        variants = {
            "cpp": lambda: run_json([args.cpp_loop, dataset, revision, joined, passes], env),
            "batches": lambda: run_json([args.python, "-c", BATCH_LOOP, dataset, revision, joined, str(args.batch),
                                         passes], env),
            "samples": lambda: run_json([args.python, "-c", SAMPLE_LOOP, dataset, revision, joined, passes], env),
            # The floor of any Python batch path: the loop body alone, over one pass's batches read and kept (views
            # of the mapped shards, as the batch loop gets them). A batch path costs at least the C++ stream's own
            # work (its reader does the same) plus this, so C++ / (C++ + body) bounds the CPU-time ratio that any
            # batch path with this loop body can reach.
            "body": lambda: run_json([args.python, "-c", BATCH_LOOP, dataset, revision, joined, str(args.batch),
                                      passes, "kept"], env),
        }
        results = {name: [] for name in variants}
        names = list(variants)
        for rep in range(args.reps):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                result = variants[name]()
                assert result["samples"] == args.samples * args.passes, (name, result)
                results[name].append(result)
        for name in names:  # the same work: every field's size and first byte, summed alike
            assert all((r["fields"], r["bytes"], r["checksum"]) == (results["cpp"][0]["fields"],
                       results["cpp"][0]["bytes"], results["cpp"][0]["checksum"]) for r in results[name]), name
        return results


def table(title, results, samples):
    def rates(field):
        return {n: [r["samples"] / r[field] for r in rs] for n, rs in results.items()}

    def ratio(rate, a, b):
        return [x / y for x, y in zip(rate[a], rate[b])]

    wall, cpu = rates("loop_seconds"), rates("loop_cpu")
    labels = {"cpp": "C++ `SampleStream` (cpp_loop.cpp)", "batches": "Python `stream.batches(64)`",
              "samples": "Python per-sample iterator",
              "body": "the batch loop's body alone, over kept batches (no reading)"}
    lines = [
        "**%s** (%.1f MB of fields)" % (title, results["cpp"][0]["bytes"] / 1e6),
        "",
        "| loop | samples/s (loop, CPU time) | samples/s (loop, wall) |",
        "| --- | ---: | ---: |",
    ]
    for name in ("cpp", "batches", "samples", "body"):
        lines.append("| %s | %s | %s |" % (labels[name], fmt(cpu[name]), fmt(wall[name])))
    lines += [
        "",
        "| ratio (within each repetition) | CPU time | wall | goal |",
        "| --- | ---: | ---: | ---: |",
        "| batches / C++ | %s | %s | >= 0.95 (both) |" % (fmt(ratio(cpu, "batches", "cpp"), 2),
                                                        fmt(ratio(wall, "batches", "cpp"), 2)),
        "| per-sample iterator / C++ | %s | %s | >= 0.8 (wall) |" % (fmt(ratio(cpu, "samples", "cpp"), 2),
                                                                   fmt(ratio(wall, "samples", "cpp"), 2)),
        "| bound for any batch path: C++ / (C++ + body), CPU time | %s | | |" % fmt(
            [1 / (1 + c / b) for c, b in zip(cpu["cpp"], cpu["body"])], 2),
        "",
    ]
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--cpp-loop", required=True, help="bench/python/cpp_loop.cpp built against the same libdatavo")
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--passes", type=int, default=5, help="passes per process (a pass alone is ~0.1 s)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    tokens = measure(args, os.path.join(work, "tokens"), TOKENS, TOKEN_KEYS, make_tokens)
    voice = measure(args, os.path.join(work, "voice"), bench_sdk.DATASET, bench_sdk.KEYS, bench_sdk.make_source)
    lines = ["%d samples in shards of %d, batches of %d, %d passes per process (each a stream of its own); %d "
             "repetitions, median (min-max)." % (args.samples, args.per_shard, args.batch, args.passes, args.reps), ""]
    lines += table("tokens: fixed-size fields (`tokens.bin` 2 KiB, `label.cls` 8 B), as arrays", tokens, args.samples)
    lines += table("voice: fields of varying size (`audio.wav`, `transcript.txt`), as lists", voice, args.samples)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"tokens": tokens, "voice": voice}, f, indent=1)


if __name__ == "__main__":
    main()
