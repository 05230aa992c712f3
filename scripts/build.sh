#!/usr/bin/env bash
# Configures and builds Datavo. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# DATAVO_JOBS sets the parallelism (default: the number of cores); DATAVO_TARGET builds only the targets it names
# (separated by spaces).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j "${DATAVO_JOBS:-$(nproc)}" ${DATAVO_TARGET:+--target $DATAVO_TARGET}
