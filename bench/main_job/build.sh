#!/usr/bin/env bash
# Builds what the main-job benchmarks need, in Release, in build-bench3 (or $BENCH_BUILD_DIR):
#   - the datavo CLI and libdatavo.a (cmake target `datavo`);
#   - bench/main_job/iterate_shard.cpp, compiled with g++ against libdatavo.a into $BUILD/main_job/iterate_shard;
#   - bench/main_job/fetch_model.cpp (libcurl + OpenSSL only) into $BUILD/main_job/fetch_model.
# Usage: bench/main_job/build.sh            (-j1 by default: the machine's 2 cores are shared; JOBS=N to change)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BENCH_BUILD_DIR:-$REPO/build-bench3}
JOBS=${JOBS:-1}

cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDATAVO_BUILD_TESTS=OFF >/dev/null
make -C "$BUILD" -j"$JOBS" datavo >/dev/null

mkdir -p "$BUILD/main_job"
OUT=$BUILD/main_job/iterate_shard
SRC=$REPO/bench/main_job/iterate_shard.cpp
if [ ! -x "$OUT" ] || [ "$SRC" -nt "$OUT" ] || [ "$BUILD/src/libdatavo.a" -nt "$OUT" ]; then
  g++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra -I"$REPO/include" -I"$REPO/src" "$SRC" -o "$OUT.tmp" \
    "$BUILD/src/libdatavo.a" -lcurl -lssl -lcrypto -lyaml-cpp -lexpat -lpthread
  mv "$OUT.tmp" "$OUT"
fi
# fetch_model does not use Datavo at all: libcurl, OpenSSL and POSIX only.
MODEL=$BUILD/main_job/fetch_model
MODEL_SRC=$REPO/bench/main_job/fetch_model.cpp
if [ ! -x "$MODEL" ] || [ "$MODEL_SRC" -nt "$MODEL" ]; then
  g++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra "$MODEL_SRC" -o "$MODEL.tmp" -lcurl -lcrypto -lpthread
  mv "$MODEL.tmp" "$MODEL"
fi
echo "datavo:        $BUILD/cli/datavo"
echo "iterate_shard: $OUT"
echo "fetch_model:   $MODEL"
