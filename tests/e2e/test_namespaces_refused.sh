#!/usr/bin/env bash
# test_two_hosts.sh tells a machine that refuses namespaces apart from a failure of the product. It runs here on
# such a machine, made with setpriv(1) (util-linux): root without CAP_SYS_ADMIN in its bounding and inheritable
# sets, so that unshare(2) of a mount namespace fails with EPERM, as in an unprivileged container or a chroot.
#   - without DATAVO_REQUIRE_NAMESPACES, the suite exits with the skip code, ctest (run on the real test
#     definitions) reports it as skipped and the run passes, and the suite prints the reason: the refusal, with
#     unshare's own message;
#   - with DATAVO_REQUIRE_NAMESPACES=1 (as .ci/run sets it), the suite fails, with the same reason, and so does
#     the ctest run.
# Needs root: dropping a capability from the bounding set needs CAP_SETPCAP. CI runs as root.
. "$(dirname "$0")/lib.sh"

need_root "namespaces-refused suite" "setpriv drops CAP_SYS_ADMIN from the bounding set"
command -v setpriv >/dev/null || die "setup" "setpriv (util-linux) is required"
two_hosts="$DATAVO_SOURCE_DIR/tests/e2e/test_two_hosts.sh"
[ -f "$two_hosts" ] || die "setup" "$two_hosts is missing"

# refusing CMD...: CMD as root without CAP_SYS_ADMIN.
refusing() { setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin -- "$@"; }

# The control: under setpriv, the namespaces of a simulated host are refused (or this suite would prove nothing).
out=$(refusing unshare --mount --uts --pid --fork --mount-proc --propagation private true 2>&1) && rc=0 || rc=$?
expect_ne "control: without CAP_SYS_ADMIN, unshare of mount, UTS and PID namespaces fails" 0 "$rc"
expect_match "control: with EPERM" "[Oo]peration not permitted" "$out"

# ctest's verdict, through the real test definitions (tests/CMakeLists.txt), read from a copy of the
# CTestTestfile.cmake that defines them, so that this nested ctest writes its logs here, not into the build tree
# that the ctest running this suite writes to.
ctest_dir=${DATAVO_CTEST_DIR:-$(dirname "$(dirname "$DATAVO_BIN")")/tests}
[ -f "$ctest_dir/CTestTestfile.cmake" ] || die "setup" "no CTestTestfile.cmake in $ctest_dir (set DATAVO_CTEST_DIR)"
mkdir -p "$E2E_TMP/ctest"
cp "$ctest_dir/CTestTestfile.cmake" "$E2E_TMP/ctest/"
out=$(cd "$E2E_TMP/ctest" && refusing env -u DATAVO_REQUIRE_NAMESPACES timeout -k 5 150 \
  ctest -R '^e2e\.test_two_hosts$' --no-tests=error 2>&1) && rc=0 || rc=$?
expect_eq "ctest, refused: the run passes" 0 "$rc"
expect_match "ctest, refused: e2e.test_two_hosts is reported as skipped" 'e2e\.test_two_hosts [ .]*\*+Skipped' "$out"
expect_match "ctest, refused: and counted as such in the summary" \
  'The following tests did not run:.*e2e\.test_two_hosts \(Skipped\)' "$out"
out=$(cd "$E2E_TMP/ctest" && refusing env DATAVO_REQUIRE_NAMESPACES=1 timeout -k 5 150 \
  ctest -R '^e2e\.test_two_hosts$' --no-tests=error 2>&1) && rc=0 || rc=$?
expect_ne "ctest, refused, DATAVO_REQUIRE_NAMESPACES=1: the run fails" 0 "$rc"
expect_match "ctest, refused, DATAVO_REQUIRE_NAMESPACES=1: e2e.test_two_hosts failed" \
  'e2e\.test_two_hosts [ .]*\*+Failed' "$out"

# The suite's own output, without ctest.
# Bounded: a suite that ran its cases instead of stopping at the refusal would take minutes.
out=$(refusing env -u DATAVO_REQUIRE_NAMESPACES timeout -k 5 120 bash "$two_hosts" 2>&1) && rc=0 || rc=$?
expect_eq "refused, no DATAVO_REQUIRE_NAMESPACES: the suite exits with the skip code" "$E2E_SKIP_CODE" "$rc"
expect_match "refused: it says it is skipped, and why" "SKIP - test_two_hosts: namespaces: this machine refuses" "$out"
expect_contains "refused: the reason holds unshare's message" "Operation not permitted" "$out"
expect_contains "refused: it says how to make it a failure" "DATAVO_REQUIRE_NAMESPACES=1" "$out"
expect_eq "refused: no case ran, nothing failed" "" "$(grep -E '^(ok|FAIL) - ' <<<"$out")"

out=$(refusing env DATAVO_REQUIRE_NAMESPACES=1 timeout -k 5 120 bash "$two_hosts" 2>&1) && rc=0 || rc=$?
expect_eq "refused, DATAVO_REQUIRE_NAMESPACES=1: the suite fails (exit 1)" 1 "$rc"
expect_match "DATAVO_REQUIRE_NAMESPACES=1: a failure that says why" \
  "FAIL - namespaces: this machine refuses .*Operation not permitted.*DATAVO_REQUIRE_NAMESPACES=1" "$out"
expect_contains "DATAVO_REQUIRE_NAMESPACES=1: the summary counts it" "0 passed, 1 failed" "$out"

finish
