#!/usr/bin/env bash
# The emulator harness (tests/support/emulators.sh) end to end, and the live Azure signing tests on top of it:
#   1. `up azurite s3rver moto gcs`: installs the pinned npm packages into $DATAVO_EMULATOR_DIR unless present, starts
#      the four on free loopback ports, prints their endpoints as `export` lines (timed; shown as "# " lines);
#   2. each emulator answers with curl: Azurite refuses an anonymous request (it checks auth), s3rver checks SigV4
#      (curl --aws-sigv4: right secret 200, wrong one 403), moto refuses If-None-Match: * on an existing key (412),
#      the GCS emulator stores and serves an object (with a Range);
#   3. the C++ SharedKey and SAS signers against Azurite: `datavo_unit_tests --gtest_filter='AzuriteLive*'` with the
#      harness's exports and DATAVO_REQUIRE_EMULATORS=1, so that a missing endpoint fails instead of skipping;
#   4. `down` stops them by PID: every recorded PID is gone and every port closed afterwards;
#   5. a warm `up` (the install skipped) and `down` again, timed; `up moto` without a python that has moto fails
#      saying "moto is missing".
#
# Run by ctest (tests/CMakeLists.txt sets DATAVO_BIN, DATAVO_SOURCE_DIR, DATAVO_UNIT_TESTS), or by hand:
#   bash tests/e2e/test_emulators.sh        (after building datavo and datavo_unit_tests in build/)
# The first run installs about 400 MB of npm packages (about a minute); later runs reuse them.
# Needs: curl, node + npm, network access to the npm registry on the first run.

# lib.sh moves HOME into the suite's temp dir: keep the install cache and the image's pyenv (moto) of the real one.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"

HARNESS="$DATAVO_SOURCE_DIR/tests/support/emulators.sh"
UNIT_TESTS=${DATAVO_UNIT_TESTS:-$DATAVO_SOURCE_DIR/build/tests/datavo_unit_tests}
export DATAVO_EMULATOR_RUN_DIR="$E2E_TMP/emulators"
NAMES=(azurite s3rver moto gcs)
# Whatever happens below, the emulators this suite started are stopped (by the PIDs the harness recorded).
on_exit_first "bash '$HARNESS' down >/dev/null 2>&1"

[ -f "$HARNESS" ] || die "setup" "$HARNESS is missing"
[ -x "$UNIT_TESTS" ] || die "setup" "DATAVO_UNIT_TESTS=$UNIT_TESTS is not an executable (build datavo_unit_tests)"
command -v curl >/dev/null || die "setup" "curl is required"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }

# --- 1. up ------------------------------------------------------------------------------------------------------

started=$(now_ms)
if ! exports=$(bash "$HARNESS" up "${NAMES[@]}" 2>"$E2E_TMP/up.err"); then
  die "up ${NAMES[*]}" "$(e2e_abbrev "$(cat "$E2E_TMP/up.err")")"
fi
echo "# up (install $(grep -q 'install skipped' "$E2E_TMP/up.err" && echo skipped || echo cold)):" \
  "$(($(now_ms) - started)) ms"
sed 's/^/#   /' "$E2E_TMP/up.err"
pass "up: ${NAMES[*]} ready"
eval "$exports"
expect_match "azurite endpoint exported" '^http://127\.0\.0\.1:[0-9]+/devstoreaccount1$' "${AZURITE_BLOB_ENDPOINT:-}"
expect_match "s3rver endpoint exported" '^http://127\.0\.0\.1:[0-9]+$' "${S3RVER_ENDPOINT:-}"
expect_match "moto endpoint exported" '^http://127\.0\.0\.1:[0-9]+$' "${MOTO_S3_ENDPOINT:-}"
expect_match "gcs endpoint exported" '^http://127\.0\.0\.1:[0-9]+$' "${GCS_EMULATOR_ENDPOINT:-}"
expect_eq "STORAGE_EMULATOR_HOST is the gcs endpoint" "${GCS_EMULATOR_ENDPOINT:-}" "${STORAGE_EMULATOR_HOST:-}"
ports=$(for name in "${NAMES[@]}"; do cat "$DATAVO_EMULATOR_RUN_DIR/$name.port"; done | sort -u | wc -l)
expect_eq "four distinct ports" 4 "$ports"
expect_eq "env prints the same exports" "$exports" "$(bash "$HARNESS" env 2>/dev/null)"

pids=()
for name in "${NAMES[@]}"; do
  pid=$(cat "$DATAVO_EMULATOR_RUN_DIR/$name.pid" 2>/dev/null)
  pids+=("$pid")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then pass "$name runs as recorded pid $pid"; else fail "$name pid" "'$pid'"; fi
done
out=$(bash "$HARNESS" up azurite 2>&1)
expect_contains "a second up refuses while it runs" "already running" "$out"

# --- 2. each emulator answers -----------------------------------------------------------------------------------

expect_eq "azurite: an anonymous list is refused (auth is checked)" 403 \
  "$(code "$AZURITE_BLOB_ENDPOINT?comp=list")"

SIG=(--aws-sigv4 "aws:amz:$S3RVER_REGION:s3" --user "$S3RVER_ACCESS_KEY_ID:$S3RVER_SECRET_ACCESS_KEY"
  -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
object="$S3RVER_ENDPOINT/$S3RVER_BUCKET/smoke.txt"
expect_eq "s3rver: signed PUT" 200 \
  "$(code "${SIG[@]}" -X PUT -H 'Content-Type: application/octet-stream' --data-binary hello "$object")"
expect_eq "s3rver: signed GET" hello "$(curl -s --max-time 10 "${SIG[@]}" "$object")"
expect_eq "s3rver: a wrong secret is refused (SigV4 is checked)" 403 \
  "$(code --aws-sigv4 "aws:amz:$S3RVER_REGION:s3" --user "$S3RVER_ACCESS_KEY_ID:wrong" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$object")"

MOTO=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "any:any" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
expect_eq "moto: create bucket" 200 "$(code "${MOTO[@]}" -X PUT "$MOTO_S3_ENDPOINT/smoke-bucket")"
expect_eq "moto: put" 200 "$(code "${MOTO[@]}" -X PUT -H 'Content-Type: application/octet-stream' \
  --data-binary 0123456789 "$MOTO_S3_ENDPOINT/smoke-bucket/k")"
expect_eq "moto: If-None-Match: * on an existing key" 412 "$(code "${MOTO[@]}" -X PUT -H 'If-None-Match: *' \
  -H 'Content-Type: application/octet-stream' --data-binary x "$MOTO_S3_ENDPOINT/smoke-bucket/k")"

G=$GCS_EMULATOR_ENDPOINT
expect_eq "gcs: media upload" 200 "$(code -X POST -H 'Content-Type: application/octet-stream' --data-binary hello \
  "$G/upload/storage/v1/b/smoke-bucket/o?uploadType=media&name=d%2Fa.txt")"
expect_eq "gcs: download" hello "$(curl -s --max-time 10 "$G/storage/v1/b/smoke-bucket/o/d%2Fa.txt?alt=media")"
expect_eq "gcs: ranged download" ell \
  "$(curl -s --max-time 10 -H 'Range: bytes=1-3' "$G/storage/v1/b/smoke-bucket/o/d%2Fa.txt?alt=media")"

# --- 3. the C++ signers against Azurite ---------------------------------------------------------------------------

live_rc=0
DATAVO_REQUIRE_EMULATORS=1 timeout -k 5 120 "$UNIT_TESTS" --gtest_filter='AzuriteLive*' >"$E2E_TMP/live.out" 2>&1 ||
  live_rc=$?
live=$(cat "$E2E_TMP/live.out")
expect_eq "AzuriteLive tests exit 0" 0 "$live_rc"
expect_contains "AzuriteLive: both tests passed" "[  PASSED  ] 2 tests." "$live"
if [[ "$live" == *SKIPPED* || "$live_rc" != 0 ]]; then echo "$live" | sed 's/^/#   /'; fi

# --- 4. down: nothing left behind -----------------------------------------------------------------------------

started=$(now_ms)
bash "$HARNESS" down 2>"$E2E_TMP/down.err"
echo "# down: $(($(now_ms) - started)) ms"
for i in "${!NAMES[@]}"; do
  pid=${pids[$i]}
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  if [ -z "$state" ] || [ "$state" = Z ]; then pass "${NAMES[$i]} (pid $pid) is gone"; else fail "${NAMES[$i]} (pid $pid) still runs" "state $state"; fi
done
expect_eq "azurite port closed" 000 "$(code --max-time 2 "$AZURITE_BLOB_ENDPOINT?comp=list")"
expect_eq "s3rver port closed" 000 "$(code --max-time 2 "$S3RVER_ENDPOINT/")"
expect_eq "moto port closed" 000 "$(code --max-time 2 "$MOTO_S3_ENDPOINT/moto-api/")"
expect_eq "gcs port closed" 000 "$(code --max-time 2 "$G/b")"
expect_eq "no PID files left" "" "$(cd "$DATAVO_EMULATOR_RUN_DIR" && ls ./*.pid 2>/dev/null)"

# --- 5. warm start; moto missing --------------------------------------------------------------------------------

started=$(now_ms)
if bash "$HARNESS" up "${NAMES[@]}" >/dev/null 2>"$E2E_TMP/up2.err"; then
  echo "# warm up: $(($(now_ms) - started)) ms"
  expect_contains "warm up: the install is skipped" "install skipped" "$(cat "$E2E_TMP/up2.err")"
else
  fail "warm up" "$(e2e_abbrev "$(cat "$E2E_TMP/up2.err")")"
fi
bash "$HARNESS" down 2>/dev/null
expect_eq "down again: no PID files left" "" "$(cd "$DATAVO_EMULATOR_RUN_DIR" && ls ./*.pid 2>/dev/null)"

if /usr/bin/python3 -c 'import moto.server' 2>/dev/null; then
  pass "moto missing: not checkable here (Debian's /usr/bin/python3 has moto)"
else
  rc=0
  out=$(PYENV_ROOT=/nonexistent DATAVO_MOTO_PYTHON= PATH=/usr/bin:/bin bash "$HARNESS" up moto 2>&1) || rc=$?
  expect_ne "up moto without moto fails" 0 "$rc"
  expect_contains "and says that moto is missing" "moto is missing" "$out"
fi

finish
