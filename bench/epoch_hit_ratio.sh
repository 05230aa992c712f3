#!/usr/bin/env bash
# The epoch-aware hit ratio (issue 18; docs/BENCHMARKS.md, "Epoch-aware hit ratio"). Packs 200 shards of equal size,
# serves them with `datavo serve` on loopback, and reads 4 shuffled epochs (`datavo read --shuffle --seed S
# --epoch e`, e = 0..3) through one folder tier whose max_bytes is 25%, 50% and 75% of the dataset, with 1 reader
# process and with 4 at once (--world-size 4, all four started together per epoch, each epoch after the last has
# ended), order hints on and off, a fresh tier per configuration. Sums the tier's hits and misses and the origin
# bytes from the readers' --json, and computes Belady's optimum and LRU over the same sequence (the library's global
# order of the 4 epochs) with bench_epoch_belady. Prints a Markdown table of medians over the seeds.
#
# Usage: bench/epoch_hit_ratio.sh [SEEDS...]        (default: 1 2 3; each seed is one repetition)
# Environment:
#   DATAVO_BENCH_BUILD  build directory with cli/datavo and bench/bench_epoch_belady (default <repo>/build-bench)
#   DATAVO_BENCH_DIR    parent of the temporary directory (default /var/tmp)
#   SHARD_KIB           the payload of a shard in KiB (default 96: 2 samples of 48 KiB)
#   EXTRA_READ_ARGS     more `datavo read` options for every reader (e.g. "--prefetch 0"), for investigations
# The tier has lru_resolution 0s, so that every hit bumps its mtime and hints off is plain LRU (with the default
# 10 s, every hit of a run this short is "fresh" and LRU degrades towards FIFO).
# Raw results (every reader's JSON, the simulations) stay in $DATAVO_BENCH_BUILD/bench-results/epoch_hit_ratio/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
datavo="$build/cli/datavo"
belady="$build/bench/bench_epoch_belady"
if [ $# -gt 0 ]; then seeds=("$@"); else seeds=(1 2 3); fi
shard_kib="${SHARD_KIB:-96}"
shards=200 epochs=4
read -r -a extra_read_args <<<"${EXTRA_READ_ARGS:-}"
for bin in "$datavo" "$belady"; do
  [ -x "$bin" ] || { echo "epoch_hit_ratio.sh: no $bin (cmake --build $build --target datavo bench_epoch_belady)" >&2; exit 1; }
done
results="$build/bench-results/epoch_hit_ratio${EXTRA_READ_ARGS:+-extra}"
rm -rf "$results" && mkdir -p "$results"
work="$(mktemp -d "${DATAVO_BENCH_DIR:-/var/tmp}/datavo-epoch-hits.XXXXXX")"
origin_pid=""
cleanup() {
  [ -z "$origin_pid" ] || kill "$origin_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- the dataset: 200 shards of 2 samples, every sample the same size, so every shard's tar is the same size --------
python3 - "$work/src" "$shards" "$shard_kib" <<'PY'
import os, random, sys
root, shards, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
rng = random.Random(18)
for i in range(shards * 2):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(kib * 512))
PY
"$datavo" pack "$work/src" --root "$work/store" --dataset epochs/train --samples-per-shard 2 >/dev/null
"$datavo" serve "$work/store" --port 0 --port-file "$work/port" --quiet >"$work/serve.log" 2>&1 &
origin_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
export DATAVO_SERVER="http://127.0.0.1:$port" DATAVO_MANIFEST_CACHE_DIR="$work/manifests"
unset DATAVO_OFFLINE DATAVO_SHARD_CACHE_DIR

# tier_bytes DIR: the bytes of the entries (*.tar) in the tier at DIR, and how many distinct sizes they have.
tier_bytes() {
  find "$1" -name '*.tar' -not -path '*/.staging/*' -printf '%s\n' | sort -n | uniq -c |
    awk '{n += $1; b += $1 * $2; sizes += 1; size = $2} END {print b, n, sizes, size}'
}

# The dataset's bytes as the tier holds them: one read of every shard into an unbounded tier.
printf 'tiers:\n  - name: top\n    path: %s\n' "$work/probe" >"$work/probe.yaml"
"$datavo" --config "$work/probe.yaml" read epochs/train --key bin >/dev/null
read -r dataset_bytes entries distinct entry_bytes < <(tier_bytes "$work/probe")
if [ "$entries" -ne "$shards" ] || [ "$distinct" -ne 1 ]; then
  echo "epoch_hit_ratio.sh: expected $shards entries of one size, got $entries of $distinct sizes" >&2
  exit 1
fi
echo "dataset: $shards shards of $entry_bytes bytes in the tier ($dataset_bytes bytes)" >&2

# run_config SEED PERCENT READERS HINTS: 4 epochs into a fresh tier; each reader's JSON into $results.
run_config() {
  local seed=$1 percent=$2 readers=$3 hints=$4 tag="s$1-p$2-r$3-h$4" epoch rank
  local max_bytes=$((dataset_bytes * percent / 100))
  printf 'tiers:\n  - name: top\n    path: %s\n    max_bytes: %d\n    lru_resolution: 0s\n' "$work/cache-$tag" \
    "$max_bytes" >"$work/$tag.yaml"
  for epoch in $(seq 0 $((epochs - 1))); do
    local pids=()
    for rank in $(seq 0 $((readers - 1))); do
      "$datavo" --config "$work/$tag.yaml" --json read epochs/train --key bin --shuffle --seed "$seed" \
        --epoch "$epoch" --world-size "$readers" --rank "$rank" --order-hints "$hints" \
        "${extra_read_args[@]}" >"$results/$tag-e$epoch-r$rank.json" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
  done
  rm -rf "$work/cache-$tag"
}

for seed in "${seeds[@]}"; do
  for percent in 25 50 75; do
    "$belady" --shards "$shards" --seed "$seed" --epochs "$epochs" --entry-bytes "$entry_bytes" \
      --capacity-bytes $((dataset_bytes * percent / 100)) >"$results/belady-s$seed-p$percent.json"
    for readers in 1 4; do
      for hints in on off; do
        echo "== seed $seed, top tier $percent%, $readers reader(s), hints $hints" >&2
        run_config "$seed" "$percent" "$readers" "$hints"
      done
    done
  done
done

python3 "$root/bench/epoch_hit_ratio_table.py" "$results" "${seeds[@]}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
