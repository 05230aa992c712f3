#!/usr/bin/env bash
# What one GET costs each emulator, in its own CPU (utime + stime of its PID from /proc/PID/stat), for
# docs/BENCHMARKS-cloud.md: a whole SIZE object, its first 16 MiB, 1 MiB from its middle, and (GCS) the object
# resource; the whole object asked with a range beyond its end (as the GCS tier's first GET with part_size 512 MiB).
# Starts Azurite and the GCS emulator in a run dir of its own and stops them by PID.
#
# Usage: bench/cloud/range_cost.sh [SIZE_MIB] [REPS]     (defaults 256 and 3; prints one line per request and rep)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
size="${1:-256}"
reps="${2:-3}"
. "$root/bench/emulator_bench.sh"
bench_start datavo-range-cost
NODE_PATH="$(bash "$harness" clients)"
export NODE_PATH
. "$harness"
eval "$(emu_up_print azurite gcs)"
node=$(emu_node)
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"
head -c $((size << 20)) /dev/urandom >"$work/object.bin"
"$node" "$root/tests/support/azure_tool.js" create bench
"$node" "$root/tests/support/azure_tool.js" put bench object.bin "$work/object.bin" >/dev/null 2>&1
"$node" "$root/tests/support/gcs_tool.js" put bench object.bin "$work/object.bin" --resumable >/dev/null 2>&1
sas=$("$node" "$root/tests/support/azure_tool.js" sas bench)

cpu() { awk -v t="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.3f", (f[12] + f[13]) / t }' "/proc/$1/stat"; }
measure() { # EMULATOR LABEL URL [RANGE]
  local pid before after wall
  pid=$(cat "$DATAVO_EMULATOR_RUN_DIR/$1.pid")
  before=$(cpu "$pid")
  wall=$(curl -sf -o /dev/null -w '%{time_total}' ${4:+-H "Range: bytes=$4"} "$3")
  after=$(cpu "$pid")
  echo "$1 | $2 | emulator CPU $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.3f", a - b }') s | wall ${wall} s"
}
mid=$((size << 19))
for rep in $(seq "$reps"); do
  az="$AZURITE_BLOB_ENDPOINT/bench/object.bin?$sas"
  gcs="$GCS_EMULATOR_ENDPOINT/download/storage/v1/b/bench/o/object.bin?alt=media"
  measure azurite "whole object ($size MiB)" "$az"
  measure azurite "first 16 MiB" "$az" "0-$(((16 << 20) - 1))"
  measure azurite "1 MiB from the middle" "$az" "$mid-$((mid + (1 << 20) - 1))"
  measure gcs "whole object ($size MiB)" "$gcs"
  measure gcs "first 16 MiB" "$gcs" "0-$(((16 << 20) - 1))"
  measure gcs "1 MiB from the middle" "$gcs" "$mid-$((mid + (1 << 20) - 1))"
  measure gcs "whole object, asked as bytes=0-(512 MiB - 1) (the GCS tier's first GET at part_size 512 MiB)" "$gcs" \
    "0-$(((512 << 20) - 1))"
  measure gcs "object resource (JSON)" "$GCS_EMULATOR_ENDPOINT/storage/v1/b/bench/o/object.bin"
done
