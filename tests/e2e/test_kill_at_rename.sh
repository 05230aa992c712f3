#!/usr/bin/env bash
# A fetch killed with SIGKILL just before its rename leaves nothing under a final name: the rename from .staging/
# is the only commit point (test_kill.sh kills fetches mid-download and while a second fetch waits on the lock).
#
#   B. the fetch runs under gdb (batch mode) with a breakpoint on renameat2, the commit point
#      (ShardCacheTier::Impl::commit_staged). While it is stopped there (alive, holding the shard lock) gc
#      must sweep neither its staging file nor its lock; then the inferior gets SIGKILL (kill -KILL from this
#      script, while gdb holds it stopped at the breakpoint). Then: no entry, gc sweeps the dead writer's staging
#      file and the orphaned lock (aged past the 60 s guard with touch -d), the next fetch succeeds.
#      gdb is used, not the SIGSTOP fallback: the breakpoint stops the process exactly before the rename, where
#      polling the staging file's size could not (the last write, fdatasync and rename are microseconds apart).
# Needs gdb (scripts/install-deps.sh) and a kernel that lets it trace its child (ptrace): skipped with the reason
# where ptrace is refused, a failure under DATAVO_REQUIRE_PRIVILEGES=1 (.ci/run sets it).
. "$(dirname "$0")/lib.sh"

need_ptrace gdb

www="$E2E_TMP/www"
mkdir -p "$www"
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

pid_of_staging() { basename "$1" | awk -F. '{print $2}'; }
gc_field() { json "[r['$2'] for r in j['tiers'] if r['tier'] == '$1'][0]"; }

# --- B. SIGKILL just before the rename (gdb breakpoint on renameat2) --------------------------------------------

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
# Only while $inferior still is that process (tests/support/pids.sh): once dead, its PID may be another suite's.
inferior= inferior_start=
on_exit_first "touch '$gdb_dir/go'; ! same_process \"\$inferior\" \"\$inferior_start\" || kill -KILL \"\$inferior\"; true"

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
pid_start_time "$inferior" inferior_start
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
if same_process "$inferior" "$inferior_start"; then
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
