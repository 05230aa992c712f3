#!/usr/bin/env bash
# SIGINT and SIGTERM stop transfers cleanly: `datavo warm`, `datavo read` and `datavo cache fetch` are interrupted
# in the middle of a slow download (the fault proxy's `slow` mode in front of `datavo serve`, the fault server's
# rate= for cache fetch). Each exits 130 (SIGINT) or 143 (SIGTERM) within seconds, prints one line saying so (and,
# under --json, an error object with code "cancelled"), closes the progress bar's line, and leaves no staging file,
# no per-shard lock and no entry behind. A SIGINT ends a wait for another process's per-shard lock at once. A second
# SIGINT ends a process whose clean stop waits (here for the tier's stats lock, held by the test) at once, saying so.
# A SIGINT ends `datavo pack`'s wait for another pack of the same dataset the same way.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
PROXY_SCRIPT="$DATAVO_SOURCE_DIR/tests/support/fault_proxy.py"

# 3 shards of 2 MB; through the proxy at 256 KiB/s each takes 8 s.
make_samples "$E2E_TMP/src" 3 2000000
run pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset slow/train --samples-per-shard 1
expect_eq "pack: exit 0" 0 "$RC"
start_origin "$E2E_TMP/store"
printf 'slow rate=262144\n' >"$E2E_TMP/proxy.mode"
python3 "$PROXY_SCRIPT" --upstream "$ORIGIN_URL" --mode-file "$E2E_TMP/proxy.mode" --port-file "$E2E_TMP/proxy.port" \
  >"$E2E_TMP/proxy.log" 2>&1 &
proxy_pid=$!
track_pid "$proxy_pid"
proxy_up() { [ -s "$E2E_TMP/proxy.port" ] || { kill -0 "$proxy_pid" 2>/dev/null || return 2; return 1; }; }
wait_until 15 proxy_up || die "start the fault proxy" "$(cat "$E2E_TMP/proxy.log")"
export DATAVO_SERVER="http://127.0.0.1:$(cat "$E2E_TMP/proxy.port")"

cache="$E2E_TMP/cache"
write_config <<EOF
tiers:
  - name: local
    path: $cache
EOF

mkdir -p "$E2E_TMP/www"
sha=$(make_shard "$E2E_TMP/www/big.bin" $((4 * 1024 * 1024)))
start_server "$E2E_TMP/www"

staging_has_bytes() {
  local f
  for f in "$cache"/.staging/*.tmp; do [ -s "$f" ] && return 0; done
  return 1
}
# alive PID: still running (a zombie is not).
alive() { kill -0 "$1" 2>/dev/null && ! e2e_is_zombie "$1"; }


# interrupt SIGNAL NAME CMD...: runs datavo CMD in the background, waits until its download has bytes in .staging,
# sends SIGNAL, waits for the exit; sets RC, OUT, ERR and SECONDS_TO_EXIT.
interrupt() {
  local sig=$1 name=$2 pid start deadline
  shift 2
  "${WITH_SIGINT[@]}" "$DATAVO_BIN" --config "$E2E_CONFIG" "$@" >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" &
  pid=$!
  track_pid "$pid"
  wait_until 30 staging_has_bytes || fail "$name: a download started" "no staging file with bytes after 30 s"
  start=$(date +%s%N)
  kill "-$sig" "$pid"
  deadline=$(($(date +%s) + 20))
  while alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
  local timed_out=0
  if alive "$pid"; then
    timed_out=1
    kill -KILL "$pid"
  fi
  wait "$pid"
  RC=$?
  [ "$timed_out" -eq 0 ] || RC="timeout (killed)"
  SECONDS_TO_EXIT=$((($(date +%s%N) - start) / 1000000))
  OUT=$(cat "$E2E_TMP/$name.out")
  ERR=$(cat "$E2E_TMP/$name.err")
}

# expect_clean NAME EXIT_CODE SIGNAL_NAME: the assertions every interrupted command must pass.
expect_clean() {
  local name=$1 code=$2 signame=$3
  expect_eq "$name: exit $code" "$code" "$RC"
  expect_cmp "$name: stops within 5 s of the signal (${SECONDS_TO_EXIT} ms)" "$SECONDS_TO_EXIT" -le 5000
  expect_eq "$name: one line says it was interrupted by $signame" 1 "$(grep -c "interrupted by $signame" <<<"$ERR")"
  expect_eq "$name: nothing else on stderr (no FAILED, no ERROR per shard)" 1 "$(grep -c . <<<"$ERR")"
  expect_eq "$name: no staging file left" "" "$(find "$cache/.staging" -name '*.tmp' 2>/dev/null)"
  expect_eq "$name: no per-shard lock left" "" "$(shard_locks "$cache")"
  expect_eq "$name: no entry installed" "" "$(find "$cache" -name '*.tar' -not -path '*/.staging/*' 2>/dev/null)"
}

for sig in INT TERM; do
  code=$((128 + $(kill -l "$sig")))
  rm -rf "$cache"
  interrupt "$sig" "warm-$sig" warm slow/train --key bin --key txt --jobs 2
  expect_clean "warm, SIG$sig" "$code" "SIG$sig"

  rm -rf "$cache"
  interrupt "$sig" "read-$sig" read slow/train --key bin
  expect_clean "read, SIG$sig" "$code" "SIG$sig"

  rm -rf "$cache"
  interrupt "$sig" "fetch-$sig" --json cache fetch "$(hash_for "big-$sig")" --url "$SERVER_URL/big.bin?rate=262144" \
    --sha256 "$sha"
  expect_clean "cache fetch --json, SIG$sig" "$code" "SIG$sig"
  expect_eq "cache fetch --json, SIG$sig: an error object with code cancelled" cancelled \
    "$(json "j['error']['code']" <<<"$OUT")"
done

# On a terminal: the progress bar's line is closed before the message (the message starts a line of its own).
rm -rf "$cache"
script -qfec "exec python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); \
os.execvp(sys.argv[1], sys.argv[1:])' '$DATAVO_BIN' --config '$E2E_CONFIG' warm slow/train --key bin --jobs 1" \
  "$E2E_TMP/typescript" >/dev/null 2>&1 &
script_pid=$!
track_pid "$script_pid"
wait_until 30 staging_has_bytes || fail "warm on a terminal: a download started" "no staging bytes after 30 s"
warm_pid=$(pgrep -P "$script_pid" | head -1)
kill -INT "$warm_pid"
wait "$script_pid" && RC=0 || RC=$?
expect_eq "warm on a terminal, SIGINT: exit 130" 130 "$RC"
typescript=$(tr -d '\000' <"$E2E_TMP/typescript")
expect_contains "warm on a terminal: the bar was drawn" "shards" "$typescript"
expect_match "warm on a terminal: the bar's line is ended before the message" \
  $'\n''datavo: interrupted by SIGINT' "$typescript"
expect_eq "warm on a terminal: no staging file left" "" "$(find "$cache/.staging" -name '*.tmp' 2>/dev/null)"

# A SIGINT ends a wait for another process's per-shard lock at once: warm B waits for a lock that warm A holds (A is
# stopped with SIGSTOP, so it holds it for as long as the case lasts). The wait polls the lock (docs/layout.md), so B
# is seen waiting by the lock file it holds open; it leaves at the first SIGINT, exits 130 and leaves nothing.
rm -rf "$cache"
"${WITH_SIGINT[@]}" "$DATAVO_BIN" --config "$E2E_CONFIG" warm slow/train --key bin --key txt --jobs 3 \
  >"$E2E_TMP/holder.out" 2>"$E2E_TMP/holder.err" &
holder=$!
track_pid "$holder"
three_locks() { [ "$(shard_locks "$cache" | grep -c '\.lock$')" -ge 3 ]; }
wait_until 30 three_locks || fail "lock wait: warm A holds every shard's lock" "$(shard_locks "$cache")"
kill -STOP "$holder"
# waits_for_lock PID: PID has a per-shard lock file open (it polls it) while A holds them all.
waits_for_lock() {
  local fd
  for fd in /proc/"$1"/fd/*; do
    case $(readlink "$fd" 2>/dev/null) in "$cache"/.locks/.*) ;; "$cache"/.locks/*.lock) return 0 ;; esac
  done
  return 1
}
# start_waiting_warm NAME CASE: starts warm B in the background (stdout and stderr to $E2E_TMP/NAME.out, .err), sets
# $waiter to its pid and waits until it polls A's lock.
start_waiting_warm() {
  "${WITH_SIGINT[@]}" "$DATAVO_BIN" --config "$E2E_CONFIG" warm slow/train --key bin --key txt --jobs 3 \
    >"$E2E_TMP/$1.out" 2>"$E2E_TMP/$1.err" &
  waiter=$!
  track_pid "$waiter"
  wait_until 30 waits_for_lock "$waiter" ||
    fail "$2: warm B ($waiter) waits for A's lock ($holder)" "$(ls -l /proc/$waiter/fd; cat "$E2E_TMP/$1.err")"
}
# sigint_and_reap PID BOUND: sends PID a SIGINT, waits up to BOUND s for it to end and reaps it; sets RC and ms (the
# time from the signal to the exit).
sigint_and_reap() {
  local start
  start=$(date +%s%N)
  kill -INT "$1"
  wait_until "$2" eval '! alive '"$1"
  wait "$1" && RC=0 || RC=$?
  ms=$((($(date +%s%N) - start) / 1000000))
}
# hold_flock FILE MARKER: a process of the test takes flock(LOCK_EX) on FILE, creates MARKER once it holds it, and
# keeps it for 120 s; sets flock_holder to its pid.
hold_flock() {
  python3 -c 'import fcntl, sys, time; f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(120)' \
    "$1" "$2" &
  flock_holder=$!
  track_pid "$flock_holder"
  wait_until 10 test -e "$2" || fail "the test holds $1" "no marker"
}
sigint_taken() {
  local pending
  pending=$(awk '/^ShdPnd:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
  (((16#$pending & 2) == 0))
}
start_waiting_warm waiter "lock wait"
sigint_and_reap "$waiter" 10
expect_eq "lock wait: one SIGINT ends B's wait for A's lock: exit 130" 130 "$RC"
expect_cmp "lock wait: B exits within seconds of the SIGINT (${ms} ms)" "$ms" -le 5000
expect_contains "lock wait: B says it was interrupted" "interrupted by SIGINT" "$(cat "$E2E_TMP/waiter.err")"
expect_eq "lock wait: A still holds its 3 locks (B took none, removed none)" 3 "$(shard_locks "$cache" | grep -c '\.lock$')"

# A second signal ends the process at once, also where the clean stop would wait: B's last act before it exits is to
# flush its counters into the tier's stats under .locks/.stats.lock, which a process of the test holds here for the whole case.
# B takes the first SIGINT (no longer pending: /proc/PID/status ShdPnd), leaves the shard lock wait, then waits for
# the stats lock, and exits at the second.
hold_flock "$cache/.locks/.stats.lock" "$E2E_TMP/stats_lock.held"
stats_holder=$flock_holder
start_waiting_warm second "second signal"
# waits_for_stats PID: PID has the stats lock file open (blocked in its flock: the test's process holds it).
waits_for_stats() { ls -l /proc/"$1"/fd 2>/dev/null | grep -q -- "$cache/.locks/.stats.lock"; }
kill -INT "$waiter"
wait_until 10 sigint_taken "$waiter" || fail "second signal: B took the first SIGINT" "still pending"
wait_until 10 waits_for_stats "$waiter" || fail "second signal: after the first SIGINT, B waits for the stats lock" \
  "$(ls -l /proc/$waiter/fd 2>&1; cat "$E2E_TMP/second.err")"
expect_eq "second signal: after the first, B is still running (its clean stop waits for the stats lock)" yes \
  "$(alive "$waiter" && waits_for_stats "$waiter" && echo yes)"
sigint_and_reap "$waiter" 5
expect_eq "second signal: exit 130" 130 "$RC"
expect_cmp "second signal: exits at once (${ms} ms)" "$ms" -le 2000
expect_contains "second signal: says so" "datavo: SIGINT again: exiting at once" "$(cat "$E2E_TMP/second.err")"
kill "$stats_holder" 2>/dev/null
wait "$stats_holder" 2>/dev/null
kill -KILL "$holder"
kill -CONT "$holder"
wait "$holder" 2>/dev/null


# A SIGINT ends a pack's wait for another pack of the same dataset at once: a process of the test holds the dataset's
# .pack.lock; the pack waits with it open, exits 130 at the first SIGINT, says so, publishes no revision and leaves
# no temporary file in the store.
latest="$E2E_TMP/store/datasets/slow/train/LATEST"
latest_before=$(cat "$latest")
hold_flock "$E2E_TMP/store/datasets/slow/train/.pack.lock" "$E2E_TMP/pack_lock.held"
pack_holder=$flock_holder
"${WITH_SIGINT[@]}" "$DATAVO_BIN" pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset slow/train \
  --samples-per-shard 2 >"$E2E_TMP/pack.out" 2>"$E2E_TMP/pack.err" &
packer=$!
track_pid "$packer"
waits_for_pack_lock() { ls -l /proc/"$1"/fd 2>/dev/null | grep -q -- "/datasets/slow/train/.pack.lock"; }
wait_until 30 waits_for_pack_lock "$packer" ||
  fail "pack lock: the pack waits for the dataset's lock" "$(ls -l /proc/$packer/fd 2>&1; cat "$E2E_TMP/pack.err")"
sigint_and_reap "$packer" 10
expect_eq "pack lock: one SIGINT ends a pack's wait for another pack of the dataset: exit 130" 130 "$RC"
expect_cmp "pack lock: the pack exits within seconds of the SIGINT (${ms} ms)" "$ms" -le 5000
expect_contains "pack lock: the pack says it was interrupted" "interrupted by SIGINT" "$(cat "$E2E_TMP/pack.err")"
expect_eq "pack lock: no revision published" "$latest_before" "$(cat "$latest")"
expect_eq "pack lock: no temporary file left in the store" "" "$(find "$E2E_TMP/store" -name '*.tmp*')"
kill "$pack_holder" 2>/dev/null
wait "$pack_holder" 2>/dev/null

finish
