#!/usr/bin/env bash
# Time to first sample (issue 19; docs/BENCHMARKS.md, "Time to first sample"): a cold shard of SHARD_MIB MiB read
# from `datavo serve` behind bench/throttle_proxy.py (RATE bytes/s for all connections together: one link), by
# `datavo --json read` (its first_sample_seconds: from the command's start, manifest and ticket included), with
# today's path (--read-while-fetching off: the shard is read once installed) and with reading while fetching (on).
# Readers: 1 process, and 8 processes started together on the same shard (one fetches, 7 wait on its single-flight
# lock), and 8 threads of one process (bench_first_sample_threads: a SampleStream each, released together once the
# streams are open, so their figure leaves out the process start and the manifest). Every repetition starts from an
# empty cache. Prints the rounds and the medians as JSON.
#
# Usage: bench/first_sample.sh [REPETITIONS]   (default 3)
# Environment:
#   DATAVO_BENCH_BUILD  build directory with cli/datavo and bench/bench_first_sample_threads (default
#                       <repo>/build-bench; cmake --build DIR --target datavo bench_first_sample_threads)
#   DATAVO_BENCH_DIR    parent of the temporary directory (default /var/tmp)
#   SHARD_MIB (default 256), SAMPLE_KIB (default 1024), RATE (default 50000000), PROCESSES (default 8)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
datavo="$build/cli/datavo"
reps="${1:-3}"
threads_bench="$build/bench/bench_first_sample_threads"
for exe in "$datavo" "$threads_bench"; do
  [ -x "$exe" ] || { echo "first_sample.sh: no $exe (cmake --build $build --target datavo bench_first_sample_threads)" >&2; exit 1; }
done
shard_mib="${SHARD_MIB:-256}" sample_kib="${SAMPLE_KIB:-1024}" rate="${RATE:-50000000}" processes="${PROCESSES:-8}"
per_shard=$((shard_mib * 1024 / sample_kib))
work="$(mktemp -d "${DATAVO_BENCH_DIR:-/var/tmp}/datavo-first-sample.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; exit 1; }

python3 - "$work/src" "$per_shard" "$sample_kib" <<'PY'
import os, random, sys
root, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
rng = random.Random(19)
for i in range(n):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(kib * 1024))
PY
"$datavo" pack "$work/src" --root "$work/store" --dataset first/train --samples-per-shard "$per_shard" >/dev/null
rm -rf "$work/src"
"$datavo" serve "$work/store" --port 0 --port-file "$work/origin.port" --quiet >"$work/serve.log" 2>&1 &
pids+=($!)
wait_port "$work/origin.port"
origin="http://127.0.0.1:$(cat "$work/origin.port")"
python3 "$root/bench/throttle_proxy.py" --upstream "${origin#http://}" --rate "$rate" --scope total \
  --port-file "$work/proxy.port" >"$work/proxy.log" 2>&1 &
pids+=($!)
wait_port "$work/proxy.port"
proxy="http://127.0.0.1:$(cat "$work/proxy.port")"
export DATAVO_MANIFEST_CACHE_DIR="$work/manifests"
unset DATAVO_OFFLINE DATAVO_SERVER

# The origin builds the tar on its first ticket: once, untimed, straight from the origin.
DATAVO_SHARD_CACHE_DIR="$work/warmup" "$datavo" read first/train --key bin --server "$origin" >/dev/null
rm -rf "$work/warmup"

# run MODE READERS REP: READERS processes read the shard cold together; one JSON report each in $work/out.
run() {
  local mode=$1 readers=$2 rep=$3 i
  local cache="$work/cache" out="$work/out/$mode-$readers-$rep"
  rm -rf "$cache" && mkdir -p "$out"
  local started=()
  for i in $(seq "$readers"); do
    DATAVO_SHARD_CACHE_DIR="$cache" "$datavo" --json read first/train --key bin --server "$proxy" \
      --read-while-fetching "$mode" >"$out/$i.json" 2>"$out/$i.err" &
    started+=($!)
  done
  for i in "${started[@]}"; do wait "$i"; done
}

# run_threads MODE REP: $processes threads of one process read the shard cold together; one JSON report.
run_threads() {
  local mode=$1 rep=$2 cache="$work/cache"
  rm -rf "$cache" && mkdir -p "$work/threads"
  DATAVO_SHARD_CACHE_DIR="$cache" "$threads_bench" --dataset first/train --key bin --server "$proxy" \
    --threads "$processes" --read-while-fetching "$mode" >"$work/threads/$mode-$rep.json"
}

for rep in $(seq "$reps"); do
  for mode in off on; do
    run "$mode" 1 "$rep"
    run "$mode" "$processes" "$rep"
    run_threads "$mode" "$rep"
  done
done

python3 - "$work/out" "$reps" "$processes" "$rate" <<'PY'
import glob, json, os, statistics, sys
out, reps, processes, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
chunk_seconds = 4 * 1024 * 1024 / rate
rows = {}
for mode in ("off", "on"):
    for readers in (1, processes):
        firsts, slowest, medians, totals, before = [], [], [], [], []
        for rep in range(1, reps + 1):
            runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "%s-%d-%d" % (mode, readers, rep), "*.json")))]
            assert len(runs) == readers, (mode, readers, rep, len(runs))
            fs = [r["first_sample_seconds"] for r in runs]
            slowest.append(max(fs))
            medians.append(statistics.median(fs))
            firsts.append(min(fs))
            totals.append(max(r["seconds"] for r in runs))
            before.append(sum(r["read_while_fetching"]["samples_before_install"] for r in runs))
        rows["%s_%d" % (mode, readers)] = {
            "first_sample_s_fastest_reader": statistics.median(firsts),
            "first_sample_s_median_reader": statistics.median(medians),
            "first_sample_s_slowest_reader": statistics.median(slowest),
            "read_s_slowest_reader": statistics.median(totals),
            "samples_before_install": statistics.median(before),
            "rounds_first_sample_s_slowest": slowest,
        }
for mode in ("off", "on"):
    threads = [json.load(open(os.path.join(out, "..", "threads", "%s-%d.json" % (mode, rep)))) for rep in range(1, reps + 1)]
    for t in threads:
        assert len(t["samples"]) == processes and all(n == t["samples"][0] for n in t["samples"]), t
    rows["%s_%d_threads" % (mode, processes)] = {
        "first_sample_s_fastest_reader": statistics.median(min(t["first_sample_seconds"]) for t in threads),
        "first_sample_s_median_reader": statistics.median(statistics.median(t["first_sample_seconds"]) for t in threads),
        "first_sample_s_slowest_reader": statistics.median(max(t["first_sample_seconds"]) for t in threads),
        "read_s_slowest_reader": statistics.median(max(t["seconds"]) for t in threads),
        "samples_before_install": statistics.median(t["samples_before_install"] for t in threads),
        "origin_fetches": [t["origin_fetches"] for t in threads],
        "rounds_first_sample_s_slowest": [max(t["first_sample_seconds"]) for t in threads],
    }
print(json.dumps({"chunk_seconds": chunk_seconds, "rate": rate, "reps": reps, "rows": rows}, indent=1))
PY
