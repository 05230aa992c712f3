#!/usr/bin/env bash
# A fetch killed with SIGKILL leaves nothing under a final name: the rename from .staging/ is the only commit point.
#
#   A. mid-download: the server trickles the body (rate=512 KiB/s, a 4 MiB shard takes 8 s); the fetch is killed
#      as soon as its staging file has bytes. Then: no entry, the staging file and the lock file are left behind,
#      and the next fetch (given the SHA-256) continues the dead writer's download with a Range request from the
#      byte where it stopped, verifies the whole, and installs the right bytes.
#   C. the lock holder is killed while a second fetch of the same hash waits on its shard lock: the kernel releases
#      the flock, the waiter takes over, takes the holder's staging file over, downloads and installs the right
#      bytes, and leaves nothing in .staging/. The holder's parent reaps it only after the waiter is done, as a
#      launcher slow to reap would: the waiter meets a killed writer that is still a zombie (and, whatever the
#      parent, a writer wakes a waiter while it is still exiting), which is a dead writer all the same.
# B, a fetch killed just before its rename (stopped there by gdb), is in test_kill_at_rename.sh.
. "$(dirname "$0")/lib.sh"

www="$E2E_TMP/www"
mkdir -p "$www"
big_size=$((4 * 1024 * 1024))
sha_big=$(make_shard "$www/big.bin" "$big_size")
start_server "$www"

t1="$E2E_TMP/t1"
t2="$E2E_TMP/t2"
write_config <<EOF
tiers:
  - name: t1
    path: $t1
  - name: t2
    path: $t2
EOF

staging_with_bytes() {
  local f
  for f in "$t1"/.staging/*.tmp; do [ -s "$f" ] && return 0; done
  return 1
}
pid_of_staging() { basename "$1" | awk -F. '{print $2}'; }
gc_field() { json "[r['$2'] for r in j['tiers'] if r['tier'] == '$1'][0]"; }

# --- A. SIGKILL mid-download ------------------------------------------------------------------------------------

ha=$(hash_for killed_mid_download)
"$DATAVO_BIN" --config "$E2E_CONFIG" cache fetch "$ha" --url "$SERVER_URL/big.bin?rate=524288" \
  >"$E2E_TMP/a.out" 2>"$E2E_TMP/a.err" &
fetch_pid=$!
track_pid "$fetch_pid"
if wait_until 30 staging_with_bytes; then
  pass "A: the download started (staging file has bytes)"
else
  fail "A: the download started" "no staging file with bytes in 30 s; stderr: $(cat "$E2E_TMP/a.err")"
fi
kill -KILL "$fetch_pid"
rc=0
wait "$fetch_pid" 2>/dev/null || rc=$?
expect_eq "A: the fetch died of SIGKILL (exit 137)" 137 "$rc"

staged=$(find "$t1/.staging" -name '*.tmp' -type f)
expect_eq "A: exactly one staging file left behind" 1 "$(grep -c . <<<"$staged")"
expect_eq "A: the staging file is the killed writer's (<host>.<pid>.<random>.tmp)" "$fetch_pid" \
  "$(pid_of_staging "$staged")"
staged_size=$(file_size "$staged")
expect_cmp "A: the staging file is partial ($staged_size of $big_size bytes)" "$staged_size" -lt "$big_size"
expect_no_file "A: nothing under the final name in t1" "$t1/local/$ha.tar"
expect_no_file "A: nothing under the final name in t2" "$t2/local/$ha.tar"
expect_eq "A: cache ls shows no entry" "[0, []]" "$(dv --json cache ls | json "[j['entries'], j['entry_list']]")"
expect_file "A: the killed writer's lock file is left behind" "$t1/.locks/local.$ha.lock"

# A dry run sees the dead writer's staging file, but not the lock: it is younger than the 60 s orphan guard.
OUT=$(dv --json cache gc --dry-run)
expect_eq "A: gc --dry-run would sweep the dead writer's staging file" 1 "$(gc_field t1 staging_swept <<<"$OUT")"
expect_eq "A: gc --dry-run would not sweep a lock younger than 60 s" 0 "$(gc_field t1 locks_swept <<<"$OUT")"
expect_file "A: gc --dry-run removed nothing" "$staged"

# The next fetch (with a SHA-256 to check the whole against) continues the dead writer's download: it adopts the
# staging file and asks for the rest with a Range request, instead of starting over from byte 0.
staged_size=$(file_size "$staged")
run --json cache fetch "$ha" --url "$SERVER_URL/big.bin" --sha256 "$sha_big"
expect_eq "A: the next fetch exits 0" 0 "$RC"
expect_eq "A: the next fetch downloads it" '["fetched", "t1"]' "$(json "[j['source'], j['tier']]" <<<"$OUT")"
expect_eq "A: the next fetch continues from byte $staged_size (a Range request)" "[\"bytes=$staged_size-\"]" \
  "$(server_stats | json "[e['range'] for e in j['log'] if e['path'] == '/big.bin' and not e['query']]")"
expect_eq "A: the next fetch installs the right bytes" "$sha_big" "$(sha256_of "$t1/local/$ha.tar" 2>&1)"
expect_eq "A: t2 has the right bytes too" "$sha_big" "$(sha256_of "$t2/local/$ha.tar" 2>&1)"
expect_no_file "A: the dead writer's staging file was taken over" "$staged"
expect_no_file "A: the next fetch took over and released the lock file" "$t1/.locks/local.$ha.lock"
expect_empty_dir "A: t1/.staging is empty" "$t1/.staging"

run --json cache gc
expect_eq "A: gc exits 0" 0 "$RC"
expect_eq "A: gc has no staging file left to sweep" 0 "$(gc_field t1 staging_swept <<<"$OUT")"
expect_file "A: gc kept the entry" "$t1/local/$ha.tar"

# --- C. the lock holder is killed: a waiter takes over (include/datavo/hierarchy.hpp, "Single flight") ----------

hc=$(hash_for killed_holder)
# The launcher: starts the holder, writes its pid, and reaps it only once c_holder.reap exists (bounded).
python3 - "$E2E_TMP/c_holder" "$DATAVO_BIN" --config "$E2E_CONFIG" cache fetch "$hc" \
  --url "$SERVER_URL/big.bin?rate=524288" <<'PY' &
import os, subprocess, sys, time
base = sys.argv[1]
with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
    holder = subprocess.Popen(sys.argv[2:], stdout=out, stderr=err)
with open(base + ".pid.tmp", "w") as f:
    f.write(str(holder.pid))
os.rename(base + ".pid.tmp", base + ".pid")
deadline = time.monotonic() + 120
while not os.path.exists(base + ".reap") and time.monotonic() < deadline:
    time.sleep(0.05)
holder.kill()
holder.wait()
PY
launcher_pid=$!
track_pid "$launcher_pid"
wait_until "$E2E_START_TIMEOUT" test -s "$E2E_TMP/c_holder.pid" ||
  die "C: start the holder" "no pid file in $E2E_START_TIMEOUT s"
holder_pid=$(cat "$E2E_TMP/c_holder.pid")
track_pid "$holder_pid"
wait_until 30 staging_with_bytes || fail "C: the holder's download started" "no staging bytes in 30 s"
"$DATAVO_BIN" --config "$E2E_CONFIG" --json cache fetch "$hc" --url "$SERVER_URL/big.bin" \
  >"$E2E_TMP/c_waiter.out" 2>"$E2E_TMP/c_waiter.err" &
waiter_pid=$!
track_pid "$waiter_pid"
# The waiter polls the lock (flock with LOCK_NB, docs/layout.md): it waits with the lock file open, which the holder
# holds (/proc/locks: a FLOCK WRITE of the holder's pid).
waiter_blocked() {
  grep -qE "^[0-9]+: FLOCK +ADVISORY +WRITE +$holder_pid " /proc/locks || return 1
  ls -l "/proc/$waiter_pid/fd" 2>/dev/null | grep -q -- "/.locks/.*$hc\.lock\$"
}
if wait_until 30 waiter_blocked; then
  pass "C: the second fetch waits on the holder's shard lock"
else
  fail "C: the second fetch waits on the holder's shard lock" \
    "not waiting in 30 s: $(grep FLOCK /proc/locks); $(ls -l "/proc/$waiter_pid/fd" 2>&1)"
fi
kill -KILL "$holder_pid"
holder_is_zombie() { [ "$(awk '{print $3}' "/proc/$holder_pid/stat" 2>/dev/null)" = Z ]; }
if wait_until 10 holder_is_zombie; then
  pass "C: the killed holder is a zombie (its parent has not reaped it)"
else
  fail "C: the killed holder is a zombie" "state: $(cat "/proc/$holder_pid/stat" 2>&1)"
fi
rc=0
wait "$waiter_pid" || rc=$?
expect_eq "C: the holder is still a zombie when the waiter is done" Z \
  "$(awk '{print $3}' "/proc/$holder_pid/stat" 2>&1)"
touch "$E2E_TMP/c_holder.reap"
wait "$launcher_pid"
expect_eq "C: after the holder is killed, the waiter takes over and exits 0" 0 "$rc"
expect_eq "C: the waiter downloads it itself" '["fetched", "t1"]' \
  "$(json "[j['source'], j['tier']]" <"$E2E_TMP/c_waiter.out" 2>&1)"
expect_eq "C: the waiter installs the right bytes" "$sha_big" "$(sha256_of "$t1/local/$hc.tar" 2>&1)"
# Without a SHA-256 to check it against, the holder's partial download is not continued but started over (the
# waiter's URL fetcher restarts the adopted staging file), and nothing is left behind: the zombie's staging file
# was taken over, not left for gc.
expect_empty_dir "C: t1/.staging is empty" "$t1/.staging"
run --json cache gc
expect_eq "C: gc has nothing to sweep" 0 "$(gc_field t1 staging_swept <<<"$OUT")"

expect_eq "no per-shard lock files left" "" "$(shard_locks "$t1")"
run cache verify
expect_eq "verify: every entry matches its digest" 0 "$RC"

stop_server
finish
