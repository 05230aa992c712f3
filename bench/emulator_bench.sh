# Sourced by the benchmarks that run against the cloud emulators (bench/s3/run_benchmarks.sh,
# bench/cloud/run_benchmarks.sh, bench/cloud/range_cost.sh), after they set `root` (the repository).
#
#   bench_start NAME     a fresh work dir $work under $DATAVO_BENCH_DIR (default /var/tmp: a disk), the emulators'
#                        run dir in it (DATAVO_EMULATOR_RUN_DIR, so that concurrent runs never share emulators), and
#                        an EXIT trap that stops the emulators it recorded (by PID) and removes $work; sets harness
#                        (tests/support/emulators.sh)
#   bench_build TARGET...  a Release build of TARGET... in $build (DATAVO_JOBS at once, default 2), output on stderr
bench_start() {
  work="$(mktemp -d "${DATAVO_BENCH_DIR:-/var/tmp}/$1.XXXXXX")"
  export DATAVO_EMULATOR_RUN_DIR="$work/emulators"
  harness="$root/tests/support/emulators.sh"
  trap 'bash "$harness" down >/dev/null 2>&1; rm -rf "$work"' EXIT
}

bench_build() {
  echo "== build (Release, $build)" >&2
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDATAVO_BUILD_TESTS=OFF >&2
  make -C "$build" -j"${DATAVO_JOBS:-2}" "$@" >&2
}
