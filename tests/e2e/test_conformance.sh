#!/usr/bin/env bash
# The cloud instances of the tier conformance suite (tests/conformance/): starts s3rver, moto, Azurite and the
# firebase-tools Storage emulator with the emulator harness (tests/support/emulators.sh), runs
# `datavo_conformance_tests` on the S3 (S3rver, Moto), Azure Blob (AzuriteSharedKey, AzuriteSas) and GCS
# (FirebaseGcs) instances with DATAVO_REQUIRE_EMULATORS=1 (a case whose emulator is not there fails, it never
# skips), and stops them by PID. An emulator that cannot start fails the suite, naming it (e.g. "moto is missing:
# ..."). The only skip allowed is a documented emulator bug (s3rver's answer to a Range on an empty object); what
# an emulator cannot do otherwise is a trait of its harness, and the cases check what it does instead
# (tests/conformance/harness_*.cpp say which, and where the rest is tested).
#
# Run by ctest (DATAVO_CONFORMANCE_TESTS is set by tests/CMakeLists.txt), or by hand after a build:
#   bash tests/e2e/test_conformance.sh
# Needs: node + npm (s3rver, azurite, firebase-tools; the first run installs the pinned packages), the image's
# python with moto, python3.

# lib.sh moves HOME into the suite's temp dir: keep the install cache and the image's pyenv (moto) of the real one.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"

HARNESS="$DATAVO_SOURCE_DIR/tests/support/emulators.sh"
CONFORMANCE=${DATAVO_CONFORMANCE_TESTS:-$DATAVO_SOURCE_DIR/build/tests/datavo_conformance_tests}
export DATAVO_EMULATOR_RUN_DIR="$E2E_TMP/emulators"
on_exit_first "bash '$HARNESS' down >/dev/null 2>&1"
[ -x "$CONFORMANCE" ] || die "setup" "DATAVO_CONFORMANCE_TESTS=$CONFORMANCE is not an executable"

started=$(date +%s%N)
# One `up` per emulator, so that the one that cannot start is named (its own error, not a list).
for name in s3rver moto azurite gcs; do
  if ! exports=$(bash "$HARNESS" up "$name" 2>"$E2E_TMP/up-$name.err"); then
    die "emulators up: $name" "$(e2e_abbrev "$(cat "$E2E_TMP/up-$name.err")")"
  fi
  eval "$exports"
done
echo "# s3rver, moto, azurite and gcs up in $((($(date +%s%N) - started) / 1000000)) ms"
pass "emulators up: s3rver at $S3RVER_ENDPOINT, moto at $MOTO_S3_ENDPOINT, azurite at $AZURITE_BLOB_ENDPOINT, \
gcs at $STORAGE_EMULATOR_HOST"

INSTANCES=(S3rver Moto AzuriteSharedKey AzuriteSas FirebaseGcs)
filter=$(printf '%s/*:' "${INSTANCES[@]}")
started=$(date +%s%N)
DATAVO_REQUIRE_EMULATORS=1 DATAVO_LOG_LEVEL=error timeout -k 5 540 "$CONFORMANCE" --gtest_filter="${filter%:}" \
  >"$E2E_TMP/conformance.out" 2>&1
rc=$?
echo "# conformance (${INSTANCES[*]}) took $((($(date +%s%N) - started) / 1000000)) ms"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$E2E_TMP/conformance.out" | sed 's/^/# /'
if [ "$rc" -eq 0 ]; then
  pass "TierConformanceTest on S3 (s3rver, moto), Azure Blob (Azurite: SharedKey, SAS), GCS (firebase): every case passed"
else
  sed 's/^/# /' "$E2E_TMP/conformance.out" | tail -n 80
  fail "TierConformanceTest on S3, Azure Blob and GCS" "exit $rc"
fi
# Every instance ran every case: as many OK lines as the Memory instance has cases (less the one allowed skip).
total=$("$CONFORMANCE" --gtest_list_tests --gtest_filter='Memory/*' | grep -c '^  ')
for instance in "${INSTANCES[@]}"; do
  cases=$(grep -c -E "^\[ +OK +\] $instance/" "$E2E_TMP/conformance.out")
  want=$total
  [ "$instance" = S3rver ] && want=$((total - 1))
  expect_eq "$instance ran every case (OK lines)" "$want" "$cases"
done
# The one skip allowed: s3rver's answer to a Range on an empty object (an s3rver bug; shards are never empty).
skipped=$(grep -E '^\[ +SKIPPED +\] [A-Za-z0-9]+/.* \(' "$E2E_TMP/conformance.out" |
  grep -v -c 'S3rver/TierConformanceTest.AnEmptyObjectIsAHitOfZeroBytes')
expect_eq "no other case was skipped" 0 "$skipped"

# Without the emulators' endpoints, the S3 cases fail by name under DATAVO_REQUIRE_EMULATORS=1.
out=$(env -u MOTO_S3_ENDPOINT DATAVO_REQUIRE_EMULATORS=1 timeout 60 "$CONFORMANCE" \
  --gtest_filter='Moto/TierConformanceTest.MissIsAValueAndLeavesTheSinkEmpty/*' 2>&1) && rc=0 || rc=$?
expect_ne "a missing moto fails the case" 0 "$rc"
expect_contains "... naming it" "MOTO_S3_ENDPOINT is not set: moto is not running" "$out"
out=$(env -u AZURITE_BLOB_ENDPOINT DATAVO_REQUIRE_EMULATORS=1 timeout 60 "$CONFORMANCE" \
  --gtest_filter='AzuriteSas/TierConformanceTest.MissIsAValueAndLeavesTheSinkEmpty/*' 2>&1) && rc=0 || rc=$?
expect_ne "a missing azurite fails the case" 0 "$rc"
expect_contains "... naming it" "AZURITE_BLOB_ENDPOINT not set: azurite is not running" "$out"
out=$(env -u STORAGE_EMULATOR_HOST DATAVO_REQUIRE_EMULATORS=1 timeout 60 "$CONFORMANCE" \
  --gtest_filter='FirebaseGcs/TierConformanceTest.MissIsAValueAndLeavesTheSinkEmpty/*' 2>&1) && rc=0 || rc=$?
expect_ne "a missing gcs emulator fails the case" 0 "$rc"
expect_contains "... naming it" "STORAGE_EMULATOR_HOST is not set: the firebase-tools Storage emulator" "$out"

bash "$HARNESS" down >/dev/null 2>&1
finish
