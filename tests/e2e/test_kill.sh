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
#   B. just before the rename: the fetch runs under gdb (batch mode) with a breakpoint on renameat2, the commit
#      point (ShardCacheTier::Impl::commit_staged). While it is stopped there (alive, holding the shard lock) gc
#      must sweep neither its staging file nor its lock; then the inferior gets SIGKILL (kill -KILL from this
#      script, while gdb holds it stopped at the breakpoint). Then: no entry, gc sweeps the dead writer's staging
#      file and the orphaned lock (aged past the 60 s guard with touch -d), the next fetch succeeds.
#      gdb is used, not the SIGSTOP fallback: the breakpoint stops the process exactly before the rename, where
#      polling the staging file's size could not (the last write, fdatasync and rename are microseconds apart).
. "$(dirname "$0")/lib.sh"

www="$E2E_TMP/www"
mkdir -p "$www"
big_size=$((4 * 1024 * 1024))
sha_big=$(make_shard "$www/big.bin" "$big_size")
mid_size=$((1024 * 1024))
sha_mid=$(make_shard "$www/mid.bin" "$mid_size")
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
# /proc/locks lists a blocked flock request as "N: -> FLOCK ADVISORY WRITE <pid> ...".
waiter_blocked() { grep -qE "^[0-9]+: -> FLOCK +ADVISORY +WRITE +$waiter_pid " /proc/locks; }
if wait_until 30 waiter_blocked; then
  pass "C: the second fetch waits on the holder's shard lock"
else
  fail "C: the second fetch waits on the holder's shard lock" "not blocked in 30 s: $(grep FLOCK /proc/locks)"
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

# --- B. SIGKILL just before the rename (gdb breakpoint on renameat2) --------------------------------------------

if ! command -v gdb >/dev/null; then
  fail "B: gdb" "gdb is required for the just-before-rename case and is not installed"
  stop_server
  finish
fi

hb=$(hash_for killed_before_rename)
gdb_dir="$E2E_TMP/gdb"
mkdir -p "$gdb_dir"
# gdb stops the fetch at renameat2 and prints the breakpoint and the rename's arguments (x86-64: rsi = old path,
# rcx = new path) into a file of their own, at_rename: gdb's logging file, closed and so flushed by `set logging
# enabled off` before at_break exists. (gdb's stdout to a file is block-buffered unless PYTHONUNBUFFERED is set, so
# the main log may not hold those lines yet when at_break appears.) It then creates at_break, and waits (bounded)
# for this script to create `go` before it quits.
gdb_wait="i=0; while [ ! -e $gdb_dir/go ] && [ \$i -lt 900 ]; do sleep 0.1; i=\$((i+1)); done"
timeout -k 5 120 gdb -q -batch -nx --readnever \
  -ex 'set breakpoint pending on' -ex 'set disable-randomization off' -ex 'set confirm off' \
  -ex "set logging file $gdb_dir/at_rename" -ex 'set logging overwrite on' -ex 'set logging redirect on' \
  -ex 'set logging enabled on' -ex 'break renameat2' -ex run \
  -ex 'x/s $rsi' -ex 'x/s $rcx' -ex 'set logging enabled off' \
  -ex "shell touch $gdb_dir/at_break" -ex "shell $gdb_wait" \
  -ex kill -ex quit \
  --args "$DATAVO_BIN" --config "$E2E_CONFIG" cache fetch "$hb" --url "$SERVER_URL/mid.bin" \
  >"$gdb_dir/log" 2>&1 &
gdb_pid=$!
track_pid "$gdb_pid"
# If the suite ends early, release gdb first (it then kills the inferior it started) and SIGKILL the inferior.
inferior=
on_exit_first "touch '$gdb_dir/go'; [ -z \"\$inferior\" ] || kill -KILL \"\$inferior\" 2>/dev/null; true"

if ! wait_until 60 test -e "$gdb_dir/at_break"; then
  fail "B: gdb stopped the fetch at renameat2" "no breakpoint within 60 s; gdb log: $(e2e_abbrev "$(cat "$gdb_dir/log")")"
  stop_server
  finish
fi
if grep -q 'Breakpoint 1,.*renameat2' "$gdb_dir/at_rename"; then
  pass "B: gdb stopped the fetch at renameat2"
else
  fail "B: gdb stopped the fetch at renameat2" \
    "at_rename: $(cat "$gdb_dir/at_rename" 2>&1); gdb log: $(e2e_abbrev "$(cat "$gdb_dir/log")")"
fi
if [ "$(uname -m)" = x86_64 ]; then
  expect_contains "B: the stopped rename is the commit of our entry (target $hb.tar)" "\"$t1/local/$hb.tar\"" \
    "$(cat "$gdb_dir/at_rename" 2>&1)"
fi
staged=$(find "$t1/.staging" -name '*.tmp' -type f)
expect_eq "B: one staging file" 1 "$(grep -c . <<<"$staged")"
inferior=$(pid_of_staging "$staged")
expect_eq "B: the fetch is alive and stopped by the debugger" t "$(awk '{print $3}' "/proc/$inferior/stat" 2>&1)"
expect_eq "B: the staging file is complete at the rename" "$mid_size" "$(file_size "$staged")"
expect_eq "B: the staging file holds the right bytes" "$sha_mid" "$(sha256_of "$staged")"
expect_no_file "B: nothing under the final name before the rename" "$t1/local/$hb.tar"
expect_file "B: the writer holds its lock file" "$t1/.locks/local.$hb.lock"

# A live writer's staging file and a held lock are never swept, even with the lock aged past the guard.
touch -d '2 minutes ago' "$t1/.locks/local.$hb.lock"
run --json cache gc
expect_eq "B: gc with a live writer: exit 0" 0 "$RC"
expect_eq "B: gc does not sweep a live writer's staging file" 0 "$(gc_field t1 staging_swept <<<"$OUT")"
expect_eq "B: gc does not sweep a held lock (even 2 minutes old)" 0 "$(gc_field t1 locks_swept <<<"$OUT")"
expect_file "B: the live writer's staging file is still there" "$staged"
expect_file "B: the held lock file is still there" "$t1/.locks/local.$hb.lock"

kill -KILL "$inferior"
touch "$gdb_dir/go"
rc=0
wait "$gdb_pid" || rc=$?
expect_eq "B: gdb finished" 0 "$rc"
if kill -0 "$inferior" 2>/dev/null; then
  fail "B: the fetch is dead" "pid $inferior is still there: $(cat "/proc/$inferior/stat" 2>&1)"
else
  pass "B: the fetch is dead"
fi

expect_no_file "B: nothing under the final name in t1" "$t1/local/$hb.tar"
expect_no_file "B: nothing under the final name in t2" "$t2/local/$hb.tar"
expect_file "B: the complete staging file is left behind" "$staged"
expect_file "B: the orphaned lock file is left behind" "$t1/.locks/local.$hb.lock"

touch -d '2 minutes ago' "$t1/.locks/local.$hb.lock"
run --json cache gc
expect_eq "B: gc exits 0" 0 "$RC"
expect_cmp "B: gc --json reports staging_swept >= 1" "$(gc_field t1 staging_swept <<<"$OUT")" -ge 1
expect_cmp "B: gc --json reports locks_swept >= 1" "$(gc_field t1 locks_swept <<<"$OUT")" -ge 1
expect_no_file "B: gc swept the dead writer's staging file" "$staged"
expect_no_file "B: gc swept the orphaned lock" "$t1/.locks/local.$hb.lock"

before=$(server_requests /mid.bin)
run --json cache fetch "$hb" --url "$SERVER_URL/mid.bin"
expect_eq "B: the next fetch exits 0" 0 "$RC"
expect_eq "B: the next fetch downloads it again" fetched "$(json "j['source']" <<<"$OUT")"
expect_eq "B: one more request" $((before + 1)) "$(server_requests /mid.bin)"
expect_eq "B: the next fetch installs the right bytes" "$sha_mid" "$(sha256_of "$t1/local/$hb.tar" 2>&1)"
run --json cache gc
expect_eq "B: a final gc has nothing left to sweep" '[0, 0]' \
  "$(json "[sum(r['staging_swept'] for r in j['tiers']), sum(r['locks_swept'] for r in j['tiers'])]" <<<"$OUT")"
expect_empty_dir "B: t1/.staging is empty" "$t1/.staging"
expect_empty_dir "B: t2/.staging is empty" "$t2/.staging"
expect_eq "no per-shard lock files left" "" "$(shard_locks "$t1")"
run cache verify
expect_eq "verify: every entry matches its digest" 0 "$RC"

stop_server
finish
