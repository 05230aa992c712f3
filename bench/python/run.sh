#!/usr/bin/env bash
# The Python SDK benchmarks (docs/BENCHMARKS-python.md): builds libdatavo, the CLI and the extension in Release
# (build-pybench, or $BENCH_BUILD_DIR), cpp_loop (bench/python/cpp_loop.cpp, the C++ SampleStream doing the Python
# loop's work) against the same libdatavo.a, then runs bench/python/bench_sdk.py with /usr/bin/python3 in a work directory that it
# removes at the end.
#   bench/python/run.sh [bench_sdk.py options, e.g. --reps 5 --samples 20000 --markdown OUT]
#   bench/python/run.sh batches [bench_batches.py options]   (the batch path: stream.batches(n) against C++)
# JOBS=N sets the build parallelism (default 1: the machine's 2 cores are shared).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BENCH_BUILD_DIR:-$REPO/build-pybench}
JOBS=${JOBS:-1}
PY=${PYTHON:-/usr/bin/python3}

cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDATAVO_BUILD_TESTS=OFF -DDATAVO_BUILD_BENCH=OFF \
  -DDATAVO_PYTHON=ON -DPython_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target datavo datavo_python >/dev/null
LOOP=$BUILD/pybench/cpp_loop
mkdir -p "$BUILD/pybench"
if [ ! -x "$LOOP" ] || [ "$REPO/bench/python/cpp_loop.cpp" -nt "$LOOP" ] || [ "$BUILD/src/libdatavo.a" -nt "$LOOP" ]; then
  # -O3 -DNDEBUG: CMake's Release flags, as libdatavo.a and the extension are built.
  g++ -std=c++20 -O3 -DNDEBUG -Wall -Wextra -I"$REPO/include" "$REPO/bench/python/cpp_loop.cpp" -o "$LOOP.tmp" \
    "$BUILD/src/libdatavo.a" -lcurl -lcrypto -lyaml-cpp -lcpp-httplib -lexpat -lzstd -lz -lpthread
  mv "$LOOP.tmp" "$LOOP"
fi
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/datavo-pybench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
SCRIPT=bench_sdk.py
if [ "${1:-}" = batches ]; then
  SCRIPT=bench_batches.py
  shift
fi
PYTHONPATH="$BUILD/python" "$PY" "$REPO/bench/python/$SCRIPT" --datavo "$BUILD/cli/datavo" --cpp-loop "$LOOP" \
  --work "$WORK" --python "$PY" "$@"
