#!/usr/bin/env python3
"""Benchmarks of the Python SDK (issue 8 §4), written to docs/BENCHMARKS-python.md by bench/python/run.sh:

  A. samples/s over a warm dataset, each field touched (its length and first byte), in one run:
       - the Python SampleStream (datavo_sdk, zero-copy memoryviews), and with copy=True (bytes);
       - the C++ SampleStream doing the same loop (bench/python/cpp_loop.cpp);
       - a WebDataset-style loop over Python's tarfile on the same cached shards (open each tar, group members
         into samples by id, read each member);
     ratios: Python / C++ (goal >= 0.8) and Python / tarfile (goal >= 10);
  B. per-sample overhead of the Python SampleStream in µs: (Python time - C++ time) / samples;
  C. a torch DataLoader over the SampleStream with 2 workers against 0 workers (batch_size=64), without and with a
     per-sample decode (the WAV's PCM summed with array('h'), once or 8 times), on this 2-core machine.

Every variant runs in a fresh process of its own (timed inside it, from before from_dataset / the first open to after
the last sample), variants interleaved and their order rotated per repetition; tables give the median of --reps
(default 5) with min-max.

    bench_sdk.py --datavo BIN --cpp-loop BIN --work DIR [--samples 20000] [--reps 5] [--markdown OUT]
with datavo_sdk importable (PYTHONPATH) by /usr/bin/python3 (or --python).
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time

DATASET = "bench_voice/train"
KEYS = ["audio.wav", "transcript.txt"]

PY_LOOP = r"""
import json, sys, time
from datavo_sdk import SampleStream
dataset, revision, copy, keys = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4].split(",")
touch = sys.argv[5] == "1"
wall0, cpu0 = time.perf_counter(), time.process_time()
stream = iter(SampleStream.from_dataset(dataset, keys=keys, revision=revision, copy=copy))
wall1, cpu1 = time.perf_counter(), time.process_time()
samples = fields = size = checksum = 0
if touch:
    for sample in stream:
        samples += 1
        for key in keys:
            value = sample[key]
            fields += 1
            size += len(value)
            checksum += value[0]
else:  # the binding's own cost: samples made and dropped, no field looked at
    for sample in stream:
        samples += 1
wall2, cpu2 = time.perf_counter(), time.process_time()
print(json.dumps(dict(samples=samples, fields=fields, bytes=size, checksum=checksum, setup_seconds=wall1 - wall0,
                      loop_seconds=wall2 - wall1, setup_cpu=cpu1 - cpu0, loop_cpu=cpu2 - cpu1, seconds=wall2 - wall0)))
"""

TAR_LOOP = r"""
import json, os, sys, tarfile, time
paths = sys.argv[1].split(",")
keys = set(sys.argv[2].split(","))

def samples(path):
    # WebDataset's tar_file_expander + group_by_keys: members in order, grouped by the id before the first dot.
    with tarfile.open(path) as tf:
        current = None
        for member in tf:
            if not member.isfile():
                continue
            base = os.path.basename(member.name)
            dot = base.find(".")
            if dot <= 0:
                continue
            key = os.path.join(os.path.dirname(member.name), base[:dot])
            if current is None or current["__key__"] != key:
                if current is not None:
                    yield current
                current = {"__key__": key}
            if base[dot + 1:] in keys:
                current[base[dot + 1:]] = tf.extractfile(member).read()
        if current is not None:
            yield current

wall0, cpu0 = time.perf_counter(), time.process_time()
n = fields = size = checksum = 0
for path in paths:
    for sample in samples(path):
        n += 1
        for key in sorted(keys):
            value = sample[key]
            fields += 1
            size += len(value)
            checksum += value[0]
wall1, cpu1 = time.perf_counter(), time.process_time()
print(json.dumps(dict(samples=n, fields=fields, bytes=size, checksum=checksum, setup_seconds=0.0, setup_cpu=0.0,
                      loop_seconds=wall1 - wall0, loop_cpu=cpu1 - cpu0, seconds=wall1 - wall0)))
"""

LOADER_LOOP = r"""
import array, json, sys, time
import torch
from torch.utils.data import DataLoader
from datavo_sdk import SampleStream
dataset, revision, workers, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

class Decoded(torch.utils.data.IterableDataset):
    # Per-sample work standing in for decoding: the WAV's 16-bit PCM summed `decode` times (about 25 us each).
    def __init__(self, ds):
        self.ds = ds
    def __iter__(self):
        for sample in self.ds:
            if decode:
                w = sample["audio.wav"]
                pcm = array.array("h", w[44:44 + (len(w) - 44) // 2 * 2])
                sample["energy"] = sum(sum(pcm) for _ in range(decode))
            yield sample

start = time.perf_counter()
# copy=True: the stream is wrapped, so it cannot tell that a DataLoader collates its samples.
ds = SampleStream.from_dataset(dataset, keys=["audio.wav", "transcript.txt"], revision=revision, copy=True)
n = 0
first = None
for batch in DataLoader(Decoded(ds), batch_size=64, num_workers=workers):
    if first is None:
        first, n_first = time.perf_counter(), len(batch["__key__"])
    n += len(batch["__key__"])
end = time.perf_counter()
print(json.dumps(dict(samples=n, seconds=end - start, steady=(n - n_first) / (end - first))))
"""


def make_source(root, count):
    os.makedirs(root, exist_ok=True)
    for i in range(count):
        frames = 1500 + 10 * (i % 100)  # 3-5 KB of 16-bit PCM: small fields, where per-sample costs show
        pcm = struct.pack("<%dh" % frames, *(int(6000 * math.sin(2 * math.pi * (200 + i % 300) * t / 16000))
                                             for t in range(frames)))
        header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack(
            "<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" + struct.pack("<I", len(pcm))
        with open(os.path.join(root, "utt_%06d.audio.wav" % i), "wb") as f:
            f.write(header + pcm)
        with open(os.path.join(root, "utt_%06d.transcript.txt" % i), "w") as f:
            f.write("utterance %d\n" % i)


@contextlib.contextmanager
def served_dataset(datavo, work, samples, per_shard, dataset=DATASET, make=make_source):
    """Packs `samples` synthetic samples (`make(source_dir, samples)`) into `dataset` under `work` (once: a store
    already there is reused), serves them with `datavo serve` on loopback, and yields the environment of a client
    (HOME, the cache and manifest directories under `work`, DATAVO_SERVER); stops the server on the way out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATAVO_")}
    env.update(HOME=os.path.join(work, "home"), DATAVO_SHARD_CACHE_DIR=os.path.join(work, "cache"),
               DATAVO_MANIFEST_CACHE_DIR=os.path.join(work, "manifests"), DATAVO_OFFLINE="0")
    os.makedirs(env["HOME"], exist_ok=True)
    source, store = os.path.join(work, "src"), os.path.join(work, "store")
    if not os.path.isdir(store):
        make(source, samples)
        subprocess.run([datavo, "pack", source, "--root", store, "--dataset", dataset, "--samples-per-shard",
                        str(per_shard)], check=True, stdout=subprocess.DEVNULL, env=env)
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    server = subprocess.Popen([datavo, "serve", store, "--port", "0", "--port-file", port_file, "--quiet"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (os.path.exists(port_file) and os.path.getsize(port_file)):
            time.sleep(0.05)
        env["DATAVO_SERVER"] = "http://127.0.0.1:%s" % open(port_file).read().strip()
        yield env
    finally:
        server.terminate()
        server.wait(10)


def run_json(command, env, timeout=900):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (command[:3], done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(values):
    return statistics.median(values), min(values), max(values)


def fmt(values, digits=0):
    med, lo, hi = summary(values)
    return "%.*f (%.*f-%.*f)" % (digits, med, digits, lo, digits, hi)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--cpp-loop", required=True, help="bench/python/cpp_loop.cpp built against the same libdatavo")
    parser.add_argument("--work", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown")
    parser.add_argument("--skip-loader", action="store_true")
    args = parser.parse_args()

    work = os.path.abspath(args.work)
    store = os.path.join(work, "store")
    with served_dataset(args.datavo, work, args.samples, args.per_shard) as env:
        warm = subprocess.run([args.datavo, "--json", "warm", DATASET] + sum((["--key", k] for k in KEYS), []),
                              env=env, capture_output=True, text=True, check=True)
        revision = json.loads(warm.stdout)["revision"]
        # The cache's directory for this server: its instance_id (GET /v1/instance, the store's instance.json).
        with open(os.path.join(store, "instance.json")) as f:
            instance = json.load(f)["instance_id"]
        instance_dir = os.path.join(env["DATAVO_SHARD_CACHE_DIR"], instance)
        shards = sorted(os.path.join(instance_dir, f) for f in os.listdir(instance_dir) if f.endswith(".tar"))
        variants = {
            "python": lambda: run_json([args.python, "-c", PY_LOOP, DATASET, str(revision), "0", ",".join(KEYS), "1"],
                                       env),
            "python_copy": lambda: run_json([args.python, "-c", PY_LOOP, DATASET, str(revision), "1", ",".join(KEYS),
                                             "1"], env),
            "python_iter": lambda: run_json([args.python, "-c", PY_LOOP, DATASET, str(revision), "0", ",".join(KEYS),
                                             "0"], env),
            "cpp": lambda: run_json([args.cpp_loop, DATASET, str(revision), ",".join(KEYS)], env),
            "tarfile": lambda: run_json([args.python, "-c", TAR_LOOP, ",".join(shards), ",".join(KEYS)], env),
        }
        results = {name: [] for name in variants}
        names = list(variants)
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                result = variants[name]()
                assert result["samples"] == args.samples, (name, result)
                results[name].append(result)
        def rates(field):
            return {n: [r["samples"] / r[field] for r in rs] for n, rs in results.items()}

        def per_rep(rate, a, b):
            return [x / y for x, y in zip(rate[a], rate[b])]

        loop_wall, loop_cpu = rates("loop_seconds"), rates("loop_cpu")
        total = {n: [r["samples"] / (r["setup_seconds"] + r["loop_seconds"]) for r in rs] for n, rs in results.items()}
        overhead_cpu = [(p["loop_cpu"] - c["loop_cpu"]) / args.samples * 1e6
                        for p, c in zip(results["python"], results["cpp"])]
        overhead_wall = [(p["loop_seconds"] - c["loop_seconds"]) / args.samples * 1e6
                         for p, c in zip(results["python"], results["cpp"])]
        binding_cpu = [(p["loop_cpu"] - c["loop_cpu"]) / args.samples * 1e6
                       for p, c in zip(results["python_iter"], results["cpp"])]
        loader = {}
        if not args.skip_loader:
            for decode in ("0", "1", "8"):
                for rep in range(args.reps):
                    for workers in ((0, 2) if rep % 2 == 0 else (2, 0)):
                        r = run_json([args.python, "-c", LOADER_LOOP, DATASET, str(revision), str(workers), decode],
                                     env)
                        assert r["samples"] == args.samples, r
                        loader.setdefault((decode, workers), []).append((args.samples / r["seconds"], r["steady"]))

    fields = results["python"][0]["fields"]
    size = results["python"][0]["bytes"]
    labels = {
        "cpp": "C++ `SampleStream` (bench/python/cpp_loop.cpp)",
        "python": "Python `SampleStream` (memoryview fields)",
        "python_copy": "Python `SampleStream`, `copy=True` (bytes fields)",
        "python_iter": "Python `SampleStream`, samples made but no field looked at",
        "tarfile": "WebDataset-style loop over `tarfile`",
    }
    lines = [
        "Dataset: %d samples (%s) in %d shards of %d, %.1f MB of fields, warm in the page cache and in the cache "
        "(`datavo warm`); revision pinned, so no request is made. Each field: its length and first byte. %d "
        "repetitions, each variant in a fresh process, timed inside it (the loop apart from `from_dataset`, as wall "
        "time and as the process's CPU time, every thread included); median (min-max)."
        % (args.samples, ", ".join(KEYS), len(shards), args.per_shard, size / 1e6, args.reps),
        "",
        "| loop | samples/s (loop, CPU time) | samples/s (loop, wall) | samples/s (with `from_dataset`, wall) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in ("cpp", "python", "python_copy", "python_iter", "tarfile"):
        lines.append("| %s | %s | %s | %s |" % (labels[name], fmt(loop_cpu[name]), fmt(loop_wall[name]),
                                                fmt(total[name])))
    lines += [
        "",
        "| ratio (within each repetition) | loop, CPU time | loop, wall | with `from_dataset`, wall | goal |",
        "| --- | ---: | ---: | ---: | ---: |",
        "| Python / C++ | %s | %s | %s | >= 0.8 |" % (fmt(per_rep(loop_cpu, "python", "cpp"), 2),
                                                    fmt(per_rep(loop_wall, "python", "cpp"), 2),
                                                    fmt(per_rep(total, "python", "cpp"), 2)),
        "| Python / tarfile | %s | %s | %s | >= 10 |" % (fmt(per_rep(loop_cpu, "python", "tarfile"), 1),
                                                       fmt(per_rep(loop_wall, "python", "tarfile"), 1),
                                                       fmt(per_rep(total, "python", "tarfile"), 1)),
        "| Python, no field looked at / C++ | %s | %s | %s | |" % (fmt(per_rep(loop_cpu, "python_iter", "cpp"), 2),
                                                                 fmt(per_rep(loop_wall, "python_iter", "cpp"), 2),
                                                                 fmt(per_rep(total, "python_iter", "cpp"), 2)),
        "",
        "Per-sample overhead of the Python SampleStream, (Python - C++) / samples: %s µs of CPU time (%s µs wall; "
        "the iterator's reader thread runs the C++ stream on another core than the Python loop, so wall time can "
        "be below the C++ loop's: negative); %d fields per sample. Of which the binding itself (a Sample with its "
        "memoryviews made and dropped, no field looked at, against the C++ loop, the reader thread's hand-over "
        "included): %s µs of CPU time; the rest is the Python loop body (two lookups, two len(), two indexings, six "
        "additions)." % (fmt(overhead_cpu, 2), fmt(overhead_wall, 2), fields // args.samples, fmt(binding_cpu, 2)),
    ]
    if loader:
        lines += [
            "",
            "DataLoader(batch_size=64) over the SampleStream (copy=True), samples/s: the whole pass (workers' start "
            "included), and after the first batch.",
            "",
            "| per-sample work | 0 workers | 2 workers | 2 / 0 | 0 workers, after the 1st batch | 2 workers, after "
            "the 1st batch | 2 / 0 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for decode, label in (("0", "none"), ("1", "decode: PCM summed once (~25 µs)"),
                              ("8", "decode: PCM summed 8 times (~200 µs)")):
            zero, two = loader[(decode, 0)], loader[(decode, 2)]
            z_all, t_all = [a for a, _ in zero], [a for a, _ in two]
            z_st, t_st = [b for _, b in zero], [b for _, b in two]
            lines.append("| %s | %s | %s | %.2f | %s | %s | %.2f |" % (
                label, fmt(z_all), fmt(t_all), statistics.median(t_all) / statistics.median(z_all), fmt(z_st),
                fmt(t_st), statistics.median(t_st) / statistics.median(z_st)))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    raw = {n: [dict(r) for r in rs] for n, rs in results.items()}
    raw["loader"] = {"decode %s, %s workers" % k: v for k, v in loader.items()}
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
