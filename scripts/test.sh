#!/usr/bin/env bash
# Sets everything up and runs every test: the unit tests and the end-to-end suites in a warnings-as-errors build,
# then the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer, and again under ThreadSanitizer,
# then a bounded fuzz run of the tar reader. This is the command README.md gives and .ci/run calls.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

echo "== build (-Werror)"
"$root/scripts/build.sh" "$root/build" -DDATAVO_WERROR=ON
echo "== ctest: unit and end-to-end"
(cd "$root/build" && ctest --output-on-failure --timeout 900 -j "${DATAVO_TEST_JOBS:-2}")

if [ "${DATAVO_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== build with ASan + UBSan"
  "$root/scripts/build.sh" "$root/build-asan" -DDATAVO_WERROR=ON -DDATAVO_SANITIZE=ON -DDATAVO_BUILD_BENCH=OFF
  echo "== ctest under ASan + UBSan: unit tests"
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure --timeout 900 --no-tests=error -L unit -j 2)
  echo "== build with TSan"
  "$root/scripts/build.sh" "$root/build-tsan" -DDATAVO_WERROR=ON -DDATAVO_TSAN=ON -DDATAVO_BUILD_BENCH=OFF
  echo "== ctest under TSan: unit tests"
  (cd "$root/build-tsan" && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
    ctest --output-on-failure --timeout 900 --no-tests=error -L unit -j 2)
fi

if [ -x "$root/fuzz/build.sh" ] && [ "${DATAVO_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz the tar reader (bounded)"
  DATAVO_FUZZ_SECONDS=${DATAVO_FUZZ_SECONDS:-60} "$root/fuzz/build.sh"
fi
echo "== all tests passed"
