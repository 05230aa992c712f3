#!/usr/bin/env bash
# The S3 benchmarks of docs/BENCHMARKS-s3.md: builds bench_cloud_transfer and datavo in Release (build-bench/), starts
# moto and s3rver with tests/support/emulators.sh, runs bench/s3/s3_bench.py (downloads and uploads of a 256 MiB
# object: the S3 tier beside boto3's transfer manager and the aws CLI, medians of REPS interleaved rounds), then the
# region simulation (tests/e2e/test_s3_region.sh) with larger shards and its figures of interrupts and outages
# (bench/s3/region_figures.sh), and stops the servers by PID.
#
# Usage: bench/s3/run_benchmarks.sh [REPS] [SIZE_MIB]     (defaults 5 and 256; about 10 minutes on 2 cores)
# Environment: DATAVO_BENCH_BUILD (default <repo>/build-bench), DATAVO_BENCH_DIR (default /var/tmp: a disk).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
reps="${1:-5}"
size="${2:-256}"
. "$root/bench/emulator_bench.sh"
bench_start datavo-s3-bench
bench_build bench_cloud_transfer datavo

. "$harness"
eval "$(emu_up_print s3rver moto)"
python=$(emu_moto_python)
echo "== machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); python $("$python" -V 2>&1)," \
  "boto3 $("$python" -c 'import boto3; print(boto3.__version__)'), $("$(dirname "$python")/aws" --version 2>&1)" >&2

"$python" "$root/bench/s3/s3_bench.py" --reps "$reps" --size-mib "$size" \
  --bench-bin "$build/bench/bench_cloud_transfer" --datavo "$build/cli/datavo" --aws "$(dirname "$python")/aws" \
  --work "$work/data" --json "$build/s3-bench-results.json" \
  --servers "moto=$MOTO_S3_ENDPOINT=AKIDBENCH=bench-secret,s3rver=$S3RVER_ENDPOINT=$S3RVER_ACCESS_KEY_ID=$S3RVER_SECRET_ACCESS_KEY"

echo "== region simulation (8 VMs, 8 shards of about 4 MB, one of 6 MiB)" >&2
DATAVO_BIN="$build/cli/datavo" DATAVO_SOURCE_DIR="$root" REGION_SHARD_BYTES=4000000 \
  bash "$root/tests/e2e/test_s3_region.sh" | grep -E '^# (region|  single)|passed'

echo "== region figures (issue 16: an interrupted VM, a bucket outage; medians of 3 rounds)" >&2
DATAVO_BIN="$build/cli/datavo" REGION_SHARD_BYTES=4000000 bash "$root/bench/s3/region_figures.sh" 3 | grep -E '^#   '

