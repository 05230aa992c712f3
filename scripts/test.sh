#!/usr/bin/env bash
# Sets everything up and runs every test: the unit tests, the end-to-end suites and the install tests (tests/install/)
# in a warnings-as-errors build, then the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer, and
# again under ThreadSanitizer, then a bounded fuzz run of the tar reader. This is the command README.md gives and
# .ci/run calls.
#
# Usage: scripts/test.sh [FILTER]
#   no FILTER   every stage above
#   unit        the unit tests only (normal build)
#   e2e         the end-to-end suites only (normal build)
#   install     the installed library and packages only (tests/install/: cmake --install, consumers, the .deb)
#   python      the Python SDK only: builds the extension, a wheel of it, installs that wheel into build/python-site
#               and runs python/tests/ with Debian's /usr/bin/python3 (pytest), the emulators up (python_stage below)
#   REGEX       the ctest tests whose name matches REGEX (normal build), e.g. 'e2e.test_kill' or 'FolderTier'
# With a FILTER the sanitizer builds and the fuzz run are skipped. Without one the Python stage runs after ctest.
#
# What it needs from the environment: HOME and a PATH holding Debian's tools (CI runs it under `env -i` with
# HOME, PATH and LANG only, see .ci/run). It sets the rest below. Optional knobs: DATAVO_TEST_JOBS (ctest
# parallelism, default 2), DATAVO_SKIP_SANITIZERS=1, DATAVO_SKIP_FUZZ=1, DATAVO_FUZZ_SECONDS (default 60), and
# DATAVO_REQUIRE_PRIVILEGES=1 / DATAVO_REQUIRE_NAMESPACES=1 (.ci/run sets both): an end-to-end suite that needs
# what the machine refuses (root, a tmpfs mount, ptrace / new namespaces) then fails instead of being reported by
# ctest as skipped with its reason.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
filter=${1:-}
# Each stage's heading says when it starts, in seconds since the run began: CI keeps only the log, and the whole
# run must stay well inside CI's 90 minutes.
run_started=$(date +%s)
stage() { echo "== $* [at $(($(date +%s) - run_started)) s]"; }

# No test may reach a cloud metadata server (169.254.169.254, metadata.google.internal): the SDKs' overrides
# point them at a closed loopback port, or turn them off. Tests that exercise a credential chain start their own
# fake endpoint on loopback and set these per process.
export AWS_EC2_METADATA_DISABLED=true
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:9
export GCE_METADATA_HOST=127.0.0.1:9
export GCE_METADATA_IP=127.0.0.1:9
export AZURE_POD_IDENTITY_AUTHORITY_HOST=http://127.0.0.1:9
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_CONTAINER_CREDENTIALS_RELATIVE_URI \
  AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_WEB_IDENTITY_TOKEN_FILE GOOGLE_APPLICATION_CREDENTIALS IDENTITY_ENDPOINT \
  AZURE_CLIENT_ID AZURE_TENANT_ID AZURE_CLIENT_SECRET AZURE_FEDERATED_TOKEN_FILE MSI_ENDPOINT IDENTITY_HEADER \
  AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY STORAGE_EMULATOR_HOST

"$root/scripts/install-deps.sh"

# The structure of the tree, before anything is built: every include looks down the layer table
# (ARCHITECTURE.md, "Layers"), and no function is over 80 lines without saying why (universal-ctags).
stage "structure: layers and function lengths"
python3 "$root/scripts/check_layers.py"
python3 "$root/scripts/function_lengths.py" | tail -n 1

stage "build (-Werror)"
"$root/scripts/build.sh" "$root/build" -DDATAVO_WERROR=ON -DDATAVO_PYTHON=ON -DPython_EXECUTABLE=/usr/bin/python3
jobs=${DATAVO_TEST_JOBS:-2}

# The Python SDK (python/): a wheel built the way `pip install --no-build-isolation .` builds it (setup.py, reusing
# the extension and CLI just built in build/), installed into build/python-site, then python/tests/ against that
# installed package with /usr/bin/python3, torch required, the cloud emulators up and required.
# A subshell: the emulators' exports (AZURITE_BLOB_ENDPOINT, ...) must not outlive the emulators, or the sanitizer
# runs after this stage would find endpoints that are down.
python_stage() (
  local py=/usr/bin/python3 site=$root/build/python-site dist=$root/build/python-dist started
  stage "Python SDK: wheel, install, pytest"
  started=$(date +%s)
  rm -rf "$site" "$dist"
  (cd "$root" && DATAVO_CMAKE_BUILD_DIR="$root/build" "$py" -m pip wheel --quiet --no-build-isolation --no-deps \
    --no-index -w "$dist" .)
  "$py" -m pip install --quiet --no-deps --no-index --target "$site" "$dist"/datavo_sdk-*.whl
  # The cloud-tier tests read and write through the local emulators (tests/support/emulators.sh).
  export DATAVO_EMULATOR_DIR=${DATAVO_EMULATOR_DIR:-$HOME/.cache/datavo/emulators}
  export DATAVO_EMULATOR_RUN_DIR=$root/build/python-emulators
  local exports
  if exports=$("$root/tests/support/emulators.sh" up azurite s3rver moto gcs); then
    eval "$exports"
  else
    echo "== Python SDK: the emulators did not start; the emulator tests will fail (DATAVO_REQUIRE_EMULATORS=1)"
  fi
  local status=0
  (cd "$root/python/tests" && PYTHONPATH="$site" DATAVO_BIN="$site/datavo_sdk/bin/datavo" DATAVO_REQUIRE_TORCH=1 \
    DATAVO_REQUIRE_EMULATORS=1 PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -p no:cacheprovider -q -ra \
    "$root/python/tests") || status=$?
  "$root/tests/support/emulators.sh" down >/dev/null 2>&1 || true
  echo "== Python SDK stage: $(($(date +%s) - started)) s"
  exit "$status"
)

# The `datavo` from before chunk digests, built from this clone's history, so that tests/e2e/test_chunk_digests.sh also
# runs an old client against the new server (DATAVO_OLD_BIN). A clone without that history (shallow) says so here,
# and the suite prints that its old-client checks did not run.
old_client() {
  stage "build the client from before chunk digests (old-client checks of test_chunk_digests)"
  local binary rc=0
  binary=$("$root/scripts/build-old-client.sh" "$root/build-old-client") || rc=$?
  case $rc in
    0) export DATAVO_OLD_BIN=$binary ;;
    3) echo "   not built: the old-client checks of test_chunk_digests will not run" ;;
    *) exit "$rc" ;;
  esac
}

case "$filter" in
  python)
    python_stage
    echo "== the Python SDK tests passed"
    exit 0
    ;;
  "")
    old_client
    stage "ctest: unit, end-to-end and install"
    (cd "$root/build" && ctest --output-on-failure --timeout 900 -j "$jobs")
    python_stage
    ;;
  unit | e2e | install)
    [ "$filter" = e2e ] && old_client
    echo "== ctest: $filter tests"
    (cd "$root/build" && ctest --output-on-failure --timeout 900 --no-tests=error -L "^$filter\$" -j "$jobs")
    echo "== the $filter tests passed"
    exit 0
    ;;
  *)
    echo "== ctest: tests matching '$filter'"
    (cd "$root/build" && ctest --output-on-failure --timeout 900 --no-tests=error -R "$filter" -j "$jobs")
    echo "== the tests matching '$filter' passed"
    exit 0
    ;;
esac

if [ "${DATAVO_SKIP_SANITIZERS:-0}" != 1 ]; then
  # The sanitizer builds make only what the unit tests run, at -O1 -g1 (cmake/Warnings.cmake says why).
  unit_targets="datavo_unit_tests datavo_conformance_tests"
  stage "build with ASan + UBSan"
  DATAVO_TARGET=$unit_targets "$root/scripts/build.sh" "$root/build-asan" -DDATAVO_WERROR=ON -DDATAVO_SANITIZE=ON \
    -DDATAVO_BUILD_BENCH=OFF
  stage "ctest under ASan + UBSan: unit tests"
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure --timeout 900 --no-tests=error -L unit -j 2)
  stage "build with TSan"
  DATAVO_TARGET=$unit_targets "$root/scripts/build.sh" "$root/build-tsan" -DDATAVO_WERROR=ON -DDATAVO_TSAN=ON \
    -DDATAVO_BUILD_BENCH=OFF
  stage "ctest under TSan: unit tests"
  (cd "$root/build-tsan" && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
    ctest --output-on-failure --timeout 900 --no-tests=error -L unit -j 2)
fi

if [ -x "$root/fuzz/build.sh" ] && [ "${DATAVO_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz the tar reader (bounded)"
  DATAVO_FUZZ_SECONDS=${DATAVO_FUZZ_SECONDS:-60} "$root/fuzz/build.sh"
fi
stage "all tests passed"
