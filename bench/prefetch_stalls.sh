#!/usr/bin/env bash
# Stalls (issue 18; docs/BENCHMARKS.md, "Stalls"): a consumer doing fixed work per sample (bench_prefetch_stalls,
# a sleep per sample) reads a dataset cold from `datavo serve` behind bench/throttle_proxy.py, which limits the
# origin's bandwidth to RATIO times the consumer's rate, per connection and (separately) in total. Compares the
# prefetch window by bytes (the defaults: --prefetch 8, budget 0.1 of a tier large enough for 8 shards to fit in
# the budget) with today's prefetcher (2 shards). Reports the consumer's wait for shards after the first one
# (shard_wait_after_first), medians over the repetitions, each a fresh tier. A third row reads from the origin
# directly (no throttle): the wait that the machine's load alone causes.
#
# Usage: bench/prefetch_stalls.sh [REPETITIONS]   (default 5)
# Environment:
#   DATAVO_BENCH_BUILD  build directory with cli/datavo and bench/bench_prefetch_stalls (default <repo>/build-bench)
#   DATAVO_BENCH_DIR    parent of the temporary directory (default /var/tmp)
#   SHARDS (default 40), SAMPLE_KIB (default 128; 4 samples per shard), WORK_MS (per sample, default 25),
#   RATIO (origin rate / consumer rate, default 1.5), PREFETCHES (the --prefetch values to compare, default "8 2"),
#   SCOPES (default "connection total none")
# Raw results stay in $DATAVO_BENCH_BUILD/bench-results/prefetch_stalls/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
datavo="$build/cli/datavo"
consumer="$build/bench/bench_prefetch_stalls"
reps="${1:-5}"
for bin in "$datavo" "$consumer"; do
  [ -x "$bin" ] || { echo "prefetch_stalls.sh: no $bin (cmake --build $build --target datavo bench_prefetch_stalls)" >&2; exit 1; }
done
shards="${SHARDS:-40}" sample_kib="${SAMPLE_KIB:-128}" work_ms="${WORK_MS:-25}" ratio="${RATIO:-1.5}"
read -r -a prefetches <<<"${PREFETCHES:-8 2}"
read -r -a scopes <<<"${SCOPES:-connection total none}"
per_shard=4
results="$build/bench-results/prefetch_stalls"
rm -rf "$results" && mkdir -p "$results"
work="$(mktemp -d "${DATAVO_BENCH_DIR:-/var/tmp}/datavo-stalls.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# wait_port FILE: until the server writing FILE listens.
wait_port() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; exit 1; }

python3 - "$work/src" "$((shards * per_shard))" "$sample_kib" <<'PY'
import os, random, sys
root, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
rng = random.Random(18)
for i in range(n):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(kib * 1024))
PY
"$datavo" pack "$work/src" --root "$work/store" --dataset stalls/train --samples-per-shard "$per_shard" >/dev/null
"$datavo" serve "$work/store" --port 0 --port-file "$work/origin.port" --quiet >"$work/serve.log" 2>&1 &
pids+=($!)
wait_port "$work/origin.port"
origin="127.0.0.1:$(cat "$work/origin.port")"
export DATAVO_MANIFEST_CACHE_DIR="$work/manifests"
unset DATAVO_OFFLINE DATAVO_SHARD_CACHE_DIR DATAVO_SERVER

# The shard's size as the tier holds it, from one unthrottled read; the consumer's rate is that per shard's work.
printf 'tiers:\n  - name: top\n    path: %s\n' "$work/probe" >"$work/probe.yaml"
"$consumer" --dataset stalls/train --key bin --server "http://$origin" --config "$work/probe.yaml" --prefetch 2 \
  >/dev/null
entry_bytes=$(find "$work/probe" -name '*.tar' -not -path '*/.staging/*' -printf '%s\n' | sort -n | tail -n 1)
consumer_rate=$(python3 -c "print($entry_bytes / ($per_shard * $work_ms / 1000.0))")
rate=$(python3 -c "print(int($ratio * $consumer_rate))")
echo "shard: $entry_bytes bytes; consumer: $consumer_rate B/s; origin throttled to $rate B/s" >&2

for scope in connection total; do
  python3 "$root/bench/throttle_proxy.py" --upstream "$origin" --rate "$rate" --scope "$scope" \
    --port-file "$work/proxy-$scope.port" &
  pids+=($!)
  wait_port "$work/proxy-$scope.port"
done

# One tier large enough: the byte budget (0.1 of max_bytes) holds 8 shards with room to spare.
max_bytes=$((entry_bytes * 8 * 10 * 2))
for rep in $(seq "$reps"); do
  for scope in "${scopes[@]}"; do
    for prefetch in "${prefetches[@]}"; do
      tag="$scope-p$prefetch-$rep"
      printf 'tiers:\n  - name: top\n    path: %s\n    max_bytes: %d\n' "$work/cache-$tag" "$max_bytes" >"$work/$tag.yaml"
      server="http://$origin"
      [ "$scope" = none ] || server="http://127.0.0.1:$(cat "$work/proxy-$scope.port")"
      "$consumer" --dataset stalls/train --key bin --server "$server" \
        --config "$work/$tag.yaml" --prefetch "$prefetch" --work-us $((work_ms * 1000)) >"$results/$tag.json"
      rm -rf "$work/cache-$tag"
      echo "== $tag: $(cat "$results/$tag.json")" >&2
    done
  done
done

python3 - "$results" "$reps" "${scopes[*]}" "${prefetches[*]}" <<'PY'
import json, statistics, sys
results, reps = sys.argv[1], int(sys.argv[2])
scopes, prefetches = sys.argv[3].split(), [int(p) for p in sys.argv[4].split()]
names = {"connection": "per connection", "total": "in total", "none": "none (the floor)"}
print("| origin throttle | prefetch | wait after the first shard, s (median) | runs | first-shard wait, s | "
      "pass, s | work, s | peak shards ahead | window bytes |")
print("|---|---|---|---|---|---|---|---|---|")
for scope in scopes:
    for prefetch in prefetches:
        runs = [json.load(open("%s/%s-p%d-%d.json" % (results, scope, prefetch, r))) for r in range(1, reps + 1)]
        med = lambda f: statistics.median(f(j) for j in runs)
        after = [j["shard_wait_after_first_seconds"] for j in runs]
        label = {8: "8 (the default, by bytes)", 2: "2 (today's)"}.get(prefetch, str(prefetch))
        print("| %s | %s | %.3f | %s | %.3f | %.2f | %.2f | %d | %s |" % (
            names[scope], label, statistics.median(after), ", ".join("%.3f" % a for a in after),
            med(lambda j: j["shard_wait_seconds"] - j["shard_wait_after_first_seconds"]),
            med(lambda j: j["seconds"]), med(lambda j: j["work_seconds"]),
            max(j["max_prefetched"] for j in runs), runs[0]["prefetch_window_bytes"]))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
