#!/usr/bin/env bash
# The Azure Blob and GCS benchmarks of docs/BENCHMARKS-cloud.md: builds bench_cloud_transfer in Release
# (build-bench/), installs the reference clients (@azure/storage-blob, @google-cloud/storage) and starts Azurite and
# the GCS emulator with tests/support/emulators.sh, runs bench/cloud/cloud_bench.py (downloads and uploads through
# the Azure and GCS tiers beside the Node SDKs and curl, medians of REPS interleaved rounds, with the CPU of the
# clients and of the emulators), and stops the emulators by PID (their run dir is this run's own).
#
# Usage: bench/cloud/run_benchmarks.sh [REPS] [SIZE_MIB] [GCS_UPLOAD_MIB]   (defaults 5, 256 and SIZE_MIB; about 15
#        minutes on 2 cores)
# Environment: DATAVO_BENCH_BUILD (default <repo>/build-bench), DATAVO_BENCH_DIR (default /var/tmp: a disk),
#              DATAVO_JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
reps="${1:-5}"
size="${2:-256}"
gcs_upload="${3:-$size}"
. "$root/bench/emulator_bench.sh"
bench_start datavo-cloud-bench
bench_build bench_cloud_transfer

NODE_PATH="$(bash "$harness" clients)"
export NODE_PATH
. "$harness"
eval "$(emu_up_print azurite gcs)"
node=$(emu_node)
version() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "${2:-$NODE_PATH}/$1/package.json"; }
echo "== machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); node $("$node" -v)," \
  "@azure/storage-blob $(version @azure/storage-blob), @google-cloud/storage $(version @google-cloud/storage)," \
  "azurite $(version azurite "$(emu_dir)/node_modules"), firebase-tools $(version firebase-tools "$(emu_dir)/node_modules")," \
  "$(curl -V | head -1)" >&2

python3 "$root/bench/cloud/cloud_bench.py" --reps "$reps" --size-mib "$size" --gcs-upload-mib "$gcs_upload" \
  --bench-bin "$build/bench/bench_cloud_transfer" --node "$node" --work "$work/data" \
  --json "$build/cloud-bench-results.json" \
  --azurite-pid "$(cat "$DATAVO_EMULATOR_RUN_DIR/azurite.pid")" --gcs-pid "$(cat "$DATAVO_EMULATOR_RUN_DIR/gcs.pid")"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
