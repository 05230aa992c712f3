#!/usr/bin/env bash
# The main-job benchmarks (docs/BENCHMARKS-main-job.md) in one command: builds build-bench3 (Release) and
# iterate_shard, runs items 1-6 of bench_main_job.py and prints their tables (Markdown) on stdout.
#
#   bench/main_job/run_all.sh                  # 5 repetitions of everything; about 6-8 minutes on 2 cores
#   REPS=7 ITEMS=1,2,3 bench/main_job/run_all.sh
#
# Env: WORK_BASE   where the scratch directory goes (default /var/tmp: the real disk, not a tmpfs); it needs about
#                  7 GiB free (item 4 holds 2 GiB of store objects, 2 GiB of served tars and a 2 GiB cache at once)
#      REPS        repetitions per measurement (default 5; medians are reported)
#      ITEMS       comma-separated subset of 1,2,3,4,5,6 (default all)
#      RESULTS     also write every raw measurement as JSON to this file
#      BENCH_BUILD_DIR, JOBS   as for build.sh
# Needs: cmake, g++, curl, openssl, python3, /usr/bin/time (Debian package `time`), sync, findmnt.
# The scratch directory is removed on exit, whatever happens; the servers the driver starts are stopped by it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${BENCH_BUILD_DIR:-$REPO/build-bench3}
WORK_BASE=${WORK_BASE:-/var/tmp}
REPS=${REPS:-5}
ITEMS=${ITEMS:-1,2,3,4,5,6}

for tool in cmake g++ curl openssl python3 sync findmnt; do
  command -v "$tool" >/dev/null || { echo "run_all.sh: $tool is missing" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "run_all.sh: /usr/bin/time is missing (apt-get install -y time)" >&2; exit 2; }

free_kib=$(df -Pk "$WORK_BASE" | awk 'NR == 2 {print $4}')
if [ "$free_kib" -lt $((7 * 1024 * 1024)) ]; then
  echo "run_all.sh: $WORK_BASE has $((free_kib / 1024)) MiB free; about 7 GiB are needed (set WORK_BASE)" >&2
  exit 2
fi

echo "# building (Release, $BUILD)" >&2
BENCH_BUILD_DIR=$BUILD "$HERE/build.sh" >&2

WORK=$(mktemp -d "$WORK_BASE/datavo-bench-main-job.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

args=(--datavo "$BUILD/cli/datavo" --iterate "$BUILD/main_job/iterate_shard" --fetch-model "$BUILD/main_job/fetch_model"
      --work "$WORK" --reps "$REPS" --items "$ITEMS")
if [ -n "${RESULTS:-}" ]; then args+=(--json "$RESULTS"); fi
python3 "$HERE/bench_main_job.py" "${args[@]}"
