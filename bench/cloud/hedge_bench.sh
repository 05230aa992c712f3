#!/usr/bin/env bash
# Hedged reads (issue 19; docs/BENCHMARKS-s3.md, "Hedged reads"): a SIZE_MIB object stored by Datavo in SERVER (moto
# or s3rver) is read back (`datavo cache fetch`, a remote hit: parallel ranged GETs of PART_MIB, 8 at once) by a
# fresh VM through tests/support/cloud_proxy.py, which delays a random 5% of the GetObject requests (hedges
# included) by 2 s ("delay seconds=2 op=GetObject fraction=0.05 seed=<round>": the same draws for both modes of a
# round), with hedging off (hedge: false) and on (no hedge field: the default, a deadline on silence at the p95 of
# the time to first byte, 5%; and the ON_FIELD given), in REPS interleaved rounds. Per run: the total time of the download (the command's wall time), the p50 and p99 of the ranges' latency
# as the client saw it (per range: from its first request's arrival at the proxy to the end of the first request
# that brought its whole body), and the extra GETs (GETs at the proxy minus ranges). Prints one line per run and the
# medians per mode, then the percentiles of every range of every round of a mode together.
#
# Usage: bench/cloud/hedge_bench.sh [SIZE_MIB] [REPS] [SERVER] [PART_MIB] [ON_FIELD]
#        (defaults 1024, 3, s3rver, 16 and none; ON_FIELD e.g. 'hedge_max_fraction: 10%')
# moto copies the whole object for every GET, ranged or not (docs/BENCHMARKS-s3.md, "Concurrency"): a 1 GiB object
# in 64 ranges costs it 64 GiB of copies, minutes per download; s3rver serves ranges as S3 does.
# Environment: DATAVO_BIN (default <repo>/build/cli/datavo), DATAVO_BENCH_DIR (default /var/tmp: a disk),
# HEDGE_BENCH_KEEP (a directory: each run's /_proxy/stats JSON is copied there as stats-<round>-<off|on>.json).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
size="${1:-1024}"
reps="${2:-3}"
server="${3:-s3rver}"
part="${4:-16}"
on_field="${5:-}"
datavo="${DATAVO_BIN:-$root/build/cli/datavo}"
. "$root/bench/emulator_bench.sh"
bench_start datavo-hedge-bench
. "$harness"
eval "$(emu_up_print "$server")"
python=$(emu_moto_python)
if [ "$server" = s3rver ]; then
  upstream=$S3RVER_ENDPOINT bucket=$S3RVER_BUCKET
  export AWS_ACCESS_KEY_ID=$S3RVER_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$S3RVER_SECRET_ACCESS_KEY
else
  upstream=$MOTO_S3_ENDPOINT bucket=hedged
  export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench-secret
fi
export AWS_REGION=us-east-1
export AWS_CONFIG_FILE="$work/no-aws-config" AWS_SHARED_CREDENTIALS_FILE="$work/no-aws-credentials"
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION

python3 "$root/tests/support/cloud_proxy.py" --upstream "$upstream" --port-file "$work/proxy.port" \
  >"$work/proxy.log" 2>&1 &
proxy_pid=$!
trap 'kill $proxy_pid 2>/dev/null; bash "$harness" down >/dev/null 2>&1; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
proxy="http://127.0.0.1:$(cat "$work/proxy.port")"
[ "$server" = s3rver ] || "$python" "$root/tests/support/s3_tool.py" --endpoint "$upstream" mb "$bucket" >/dev/null

# config DIR [FIELD...]: a VM with an empty folder tier above the bucket, through the proxy.
config() {
  local dir=$1 field
  shift
  {
    printf 'tiers:\n  - name: local\n    path: %s\n' "$dir"
    printf '  - name: bucket\n    type: s3\n    bucket: %s\n    endpoint_url: %s\n    region: us-east-1\n' "$bucket" "$proxy"
    printf '    upload: sync\n    single_flight: false\n    part_size: %sMiB\n' "$part"
    for field in "$@"; do printf '    %s\n' "$field"; done
  } >"$dir.yaml"
  export DATAVO_SHARD_CACHE_CONFIG="$dir.yaml"
}

echo "== machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $server, object $size MiB, parts $part MiB," \
  "$reps rounds" >&2
head -c $((size * 1024 * 1024)) /dev/urandom >"$work/object.bin"
sha=$(sha256sum "$work/object.bin" | cut -c1-64)
hash=$(printf 'hedge-bench-%s' "$size" | sha256sum | cut -c1-64)
config "$work/writer" 'hedge: false'
"$datavo" cache put "$hash" "$work/object.bin" >/dev/null
rm -f "$work/object.bin"

results="$work/results.txt"
for round in $(seq "$reps"); do
  for mode in off on; do
    dir="$work/vm-$round-$mode"
    if [ "$mode" = off ]; then config "$dir" 'hedge: false'; else config "$dir" ${on_field:+"$on_field"}; fi
    curl -s -X POST "$proxy/_proxy/reset" >/dev/null
    curl -s -X POST --data-binary "delay seconds=2 op=GetObject fraction=0.05 seed=$round" "$proxy/_proxy/mode" >/dev/null
    start=$(date +%s%N)
    out=$("$datavo" --json cache fetch "$hash" --url http://127.0.0.1:9/unused --sha256 "$sha")
    end=$(date +%s%N)
    curl -s -X POST --data-binary ok "$proxy/_proxy/mode" >/dev/null
    source=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["source"])' <<<"$out")
    [ "$source" = promoted ] || { echo "round $round $mode: $source, not a hit in the bucket" >&2; exit 1; }
    curl -s "$proxy/_proxy/stats" >"$work/stats.json"
    [ -z "${HEDGE_BENCH_KEEP:-}" ] || cp "$work/stats.json" "$HEDGE_BENCH_KEEP/stats-$round-$mode.json"
    python3 -c '
import json, sys
total_ms, mode, round_ = float(sys.argv[1]), sys.argv[2], sys.argv[3]
j = json.load(sys.stdin)
gets = [r for r in j["log"] if r["op"] == "GetObject"]
ranges = {}
for r in gets:
    first, last = (int(x) for x in r["range"].split("=")[1].split("-"))
    entry = ranges.setdefault(r["range"], {"start": r["at"], "ends": []})
    entry["start"] = min(entry["start"], r["at"])
    if r.get("end") is not None and r["bytes_out"] == last - first + 1:
        entry["ends"].append(r["end"])
lat = sorted((min(e["ends"]) - e["start"]) * 1000 for e in ranges.values())
with open(sys.argv[4], "a") as pooled:
    pooled.write("".join(f"{x:.0f}\n" for x in lat))
def pct(p):
    return lat[min(len(lat) - 1, max(0, -(-p * len(lat) // 100) - 1))]
print(f"round {round_} hedge {mode}: total {total_ms:.0f} ms, range p50 {pct(50):.0f} ms, p99 {pct(99):.0f} ms, "
      f"{len(ranges)} ranges, {len(gets)} GETs, extra {len(gets) - len(ranges)}")
' "$(((end - start) / 1000000))" "$mode" "$round" "$work/latencies-$mode.txt" <"$work/stats.json" |
      tee -a "$results"
    rm -rf "$dir"
  done
done

python3 - "$results" "$work" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ hedge (\w+): total (\d+) ms, range p50 (\d+) ms, p99 (\d+) ms, (\d+) ranges, (\d+) GETs, extra (\d+)", line)
    if m:
        rows.setdefault(m.group(1), []).append([int(x) for x in m.groups()[1:]])
print("| hedging | total (s) | range p50 (ms) | range p99 (ms) | GETs | extra GETs |")
print("|---|---|---|---|---|---|")
for mode in ("off", "on"):
    cols = list(zip(*rows[mode]))
    med = [statistics.median(c) for c in cols]
    print(f"| {mode} | {med[0] / 1000:.2f} | {med[1]:.0f} | {med[2]:.0f} | {med[4]:.0f} | {med[5]:.0f} |")
on, off = (statistics.median(list(zip(*rows[m]))[0]) for m in ("on", "off"))
print(f"total time, on / off: {on / off:.2f}")
# Every range of every round together: the per-download p99 of 64 ranges is its slowest range.
for mode in ("off", "on"):
    lat = sorted(float(x) for x in open(f"{sys.argv[2]}/latencies-{mode}.txt"))
    pct = lambda p: lat[min(len(lat) - 1, max(0, -(-p * len(lat) // 100) - 1))]
    slow = sum(1 for x in lat if x >= 2000)
    print(f"pooled, hedge {mode}: {len(lat)} ranges, p50 {pct(50):.0f} ms, p95 {pct(95):.0f} ms, "
          f"p99 {pct(99):.0f} ms, {slow} ranges took 2 s or more")
PY
