#!/usr/bin/env bash
# Streamed against cached reads (issue 19; docs/BENCHMARKS.md, "Streamed reads"): a shuffle-once pass (`datavo read
# --shuffle`, every shard read once, cold) over a dataset from `datavo serve` on loopback, in the cached mode (each
# shard fetched into a folder tier, then mapped) and in the streamed mode (`--stream`: verified chunks in a window,
# no local copy). Per pass: samples/s, the bytes the pass left in the cache (installed shards and staging files),
# the bytes the process wrote to storage (/usr/bin/time's "File system outputs", 512-byte blocks: ru_oublock), and
# the peak RSS (ru_maxrss). The two modes alternate in each repetition (the first one alternates too); medians.
# With SOURCE=bucket the shards come from a region bucket instead (moto, started by tests/support/emulators.sh and
# stopped by PID): a seed VM warms the dataset into it, and each pass is a fresh VM (a new folder tier, the same
# bucket) whose cached pass promotes every shard out of the bucket and whose streamed pass streams them from it.
#
# Usage: bench/stream_read.sh [REPETITIONS]   (default 3)
# Environment:
#   DATAVO_BENCH_BUILD  build directory with cli/datavo (default <repo>/build)
#   DATAVO_BENCH_DIR    parent of the temporary directory (default /var/tmp)
#   SHARDS (default 8), SAMPLE_KIB (default 128), PER_SHARD (samples per shard, default 256: 32 MiB shards),
#   WINDOW (the --stream-window, default 64MiB), SOURCE (origin, the default, or bucket)
# Prints one JSON line per pass and a Markdown table of the medians.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build}"
datavo="$build/cli/datavo"
reps="${1:-3}"
[ -x "$datavo" ] || { echo "stream_read.sh: no $datavo (cmake --build $build --target datavo)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "stream_read.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
shards="${SHARDS:-8}" sample_kib="${SAMPLE_KIB:-128}" per_shard="${PER_SHARD:-256}" window="${WINDOW:-64MiB}"
source_kind="${SOURCE:-origin}"
case "$source_kind" in origin | bucket) ;; *) echo "stream_read.sh: SOURCE is origin or bucket" >&2; exit 2 ;; esac
work="$(mktemp -d "${DATAVO_BENCH_DIR:-/var/tmp}/datavo-stream.XXXXXX")"
server_pid=""
export DATAVO_EMULATOR_RUN_DIR="$work/emulators"
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ "$source_kind" = bucket ] && bash "$root/tests/support/emulators.sh" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

python3 - "$work/src" $((shards * per_shard)) $((sample_kib * 1024)) <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
for i in range(n):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
PY
"$datavo" pack "$work/src" --root "$work/store" --dataset bench_stream/train --samples-per-shard "$per_shard" >/dev/null
"$datavo" serve "$work/store" --port 0 --port-file "$work/port" --quiet >"$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
export DATAVO_SERVER="http://127.0.0.1:$(cat "$work/port")"
export DATAVO_SHARD_CACHE_DIR="$work/cache" DATAVO_MANIFEST_CACHE_DIR="$work/manifests"
# The origin builds each key group's tar on its first ticket: one warm-up pass, so that no measured pass pays it.
"$datavo" read bench_stream/train --key bin --stream --stream-window "$window" >/dev/null
if [ "$source_kind" = bucket ]; then
  . "$root/tests/support/emulators.sh"
  eval "$(emu_up_print moto)"
  export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1
  export AWS_CONFIG_FILE="$work/no-aws-config" AWS_SHARED_CREDENTIALS_FILE="$work/no-aws-credentials"
  "$(emu_moto_python)" "$root/tests/support/s3_tool.py" --endpoint "$MOTO_S3_ENDPOINT" mb region
  vm_config() {  # vm_config FOLDER: a VM's shards.yaml (its folder tier, the region's bucket), on stdout
    printf 'tiers:\n  - name: local\n    path: %s\n  - name: region\n    type: s3\n    bucket: region\n' "$1"
    printf '    endpoint_url: %s\n    region: us-east-1\n    upload: sync\n' "$MOTO_S3_ENDPOINT"
  }
  vm_config "$work/seed" >"$work/seed.yaml"
  vm_config "$work/cache" >"$work/vm.yaml"
  "$datavo" --config "$work/seed.yaml" warm bench_stream/train --key bin >/dev/null
  export DATAVO_SHARD_CACHE_CONFIG="$work/vm.yaml"
fi

one_pass() {  # one_pass MODE: a cold pass, one JSON line
  local mode=$1 extra=()
  [ "$mode" = streamed ] && extra=(--stream --stream-window "$window")
  rm -rf "$work/cache" "$work/manifests"
  sync
  /usr/bin/time -v -o "$work/time.out" "$datavo" --json read bench_stream/train --key bin --shuffle --seed 7 \
    "${extra[@]}" >"$work/read.json"
  local left
  left=$(find "$work/cache" -type f \( -name '*.tar' -o -path '*/.staging/*' \) -printf '%s\n' 2>/dev/null |
    awk '{s += $1} END {print s + 0}')
  python3 - "$mode" "$work/read.json" "$work/time.out" "$left" <<'PY'
import json, re, sys
mode, read_path, time_path, left = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = json.load(open(read_path))
t = open(time_path).read()
field = lambda name: int(re.search(re.escape(name) + r"[^:\n]*: (\d+)", t).group(1))
print(json.dumps({"mode": mode, "samples": r["samples"], "tier_hits": [t["hits"] for t in r["tiers"]],
                  "origin_shards": r["origin"]["shards"], "shard_requests": r["requests"]["shard"],
                  "ticket_requests": r["requests"]["ticket"], "samples_per_second": round(r["samples_per_second"], 1),
                  "mb_per_second": round(r["mb_per_second"], 1), "left_in_cache_bytes": left,
                  "fs_output_bytes": field("File system outputs") * 512,
                  "max_rss_kib": field("Maximum resident set size"), "seconds": round(r["seconds"], 3),
                  "cpu_seconds": round(sum(float(re.search(name + r" \(seconds\): ([0-9.]+)", t).group(1))
                                           for name in ("User time", "System time")), 2),
                  "streamed_shards": r["streamed"]["shards"], "max_window_bytes": r["streamed"]["max_buffered_bytes"]}))
PY
}

# The floors of a bucket pass, with boto3, every shard object in turn (one stream at a time, as the streamed mode
# reads), the bodies read and dropped: "floor-get", one GET per object; "floor-ranged", the requests the tier sends
# (a HEAD, then a GET of the first part_size of 16 MiB and one of the rest), which moto serves at about half the
# speed of one GET (it reads the whole object for each ranged GET).
floor_pass() {
  "$(emu_moto_python)" - "$MOTO_S3_ENDPOINT" $((shards * per_shard)) "$1" <<'PY'
import json, sys, time
import boto3
endpoint, samples, pattern = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="region")["Contents"] if o["Key"].endswith(".tar")]
started, size = time.monotonic(), 0
for key in keys:
    ranges = [None]
    if pattern == "floor-ranged":
        length, part = s3.head_object(Bucket="region", Key=key)["ContentLength"], 16 << 20
        ranges = ["bytes=%d-%d" % (start, min(start + part, length) - 1) for start in (0, part) if start < length]
        ranges[-1] = ranges[-1].rsplit("-", 1)[0] + "-%d" % (length - 1)
    for byte_range in ranges:
        extra = {"Range": byte_range} if byte_range else {}
        body = s3.get_object(Bucket="region", Key=key, **extra)["Body"]
        while chunk := body.read(1 << 20):
            size += len(chunk)
seconds = time.monotonic() - started
print(json.dumps({"mode": pattern, "samples_per_second": round(samples / seconds, 1),
                  "object_mb_per_second": round(size / 1e6 / seconds, 1), "objects": len(keys)}))
PY
}

for rep in $(seq "$reps"); do
  if [ $((rep % 2)) -eq 1 ]; then order=(cached streamed); else order=(streamed cached); fi
  for mode in "${order[@]}"; do one_pass "$mode" | tee -a "$work/passes.jsonl"; done
  if [ "$source_kind" = bucket ]; then
    for floor in floor-get floor-ranged; do floor_pass "$floor" | tee -a "$work/passes.jsonl"; done
  fi
done

python3 - "$work/passes.jsonl" "$shards" "$per_shard" "$sample_kib" "$window" "$source_kind" <<'PY'
import json, statistics, sys
path, shards, per_shard, kib, window, source = sys.argv[1:7]
rows = [json.loads(l) for l in open(path)]
print("\n%s shards of %s samples of %s KiB from the %s, --stream-window %s, medians of %d passes per mode\n"
      % (shards, per_shard, kib, source, window, len([x for x in rows if x["mode"] == "cached"])))
print("| mode | samples/s | MB/s | left in the cache | written to storage | peak RSS | window peak |")
print("|---|---|---|---|---|---|---|")
floors = {"floor-get": "floor: boto3, one GET per object, in turn",
          "floor-ranged": "floor: boto3, the tier's requests (HEAD, 2 ranged GETs), in turn"}
for name, label in floors.items():
    floor = [x for x in rows if x["mode"] == name]
    if floor:
        print("| %s | %.0f (%s) | %.0f (of the objects) | - | - | - | - |" % (
            label, statistics.median(x["samples_per_second"] for x in floor),
            ", ".join("%.0f" % x["samples_per_second"] for x in floor),
            statistics.median(x["object_mb_per_second"] for x in floor)))
for mode in ("cached", "streamed"):
    r = [x for x in rows if x["mode"] == mode]
    med = lambda k: statistics.median(x[k] for x in r)
    print("| %s | %.0f (%s) | %.0f | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |" % (
        mode, med("samples_per_second"), ", ".join("%.0f" % x["samples_per_second"] for x in r),
        med("mb_per_second"), med("left_in_cache_bytes") / 2**20, med("fs_output_bytes") / 2**20,
        med("max_rss_kib") / 1024, med("max_window_bytes") / 2**20))
PY
