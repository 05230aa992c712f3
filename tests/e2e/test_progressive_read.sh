#!/usr/bin/env bash
# Reading while fetching (docs/hierarchy.md, "Reading while fetching"), against a real `datavo serve` on loopback with
# chunk digests and the fault proxy (tests/support/fault_proxy.py) between it and the real client (`datavo read`):
#
#   - origin throttled: the first sample is handed out before its shard is installed. Shown by an order of events,
#     not by a time: `read --limit 1` stops after one sample, and the stream's counter says it came out of the
#     staging file while the shard was never installed at all (the download was cancelled when the reader stopped);
#     with --read-while-fetching off the same read installs the shard first;
#   - a whole read through the throttled origin yields the same samples (samples_sha256) as a read of the installed
#     shards, and installs every shard (the install is unchanged, `cache verify` re-hashes them);
#   - a flipped byte in chunk 2 of one download: the shard is fetched once more and the reader goes on; every sample it
#     handed out is the right one (the same samples_sha256 as a clean read); with the flip on every download the read
#     fails naming chunk 2, and nothing is installed;
#   - two processes reading the same dataset at once (the second one a single-flight waiter) through a flipped byte:
#     both succeed with the same samples;
#   - a second process while the first fetches the shard (a single-flight waiter): its first sample comes out of the
#     holder's staging file (its counter, and it fetched nothing itself), with `--limit 1` it exits before the
#     holder's install (it stops waiting for the lock), and it reads the clean samples; a flipped
#     byte in chunk 2 of the holder's download while it follows: both end with the clean samples; the holder killed
#     -9 mid-shard: the follower takes over and ends right, no staging file or progress record left; a dead holder's
#     staging file (its progress record gone): the next reader continues it and reads its first sample out of the
#     inherited bytes (checked against the chunk list) before the rest arrives;
#   - the origin killed mid-shard while two processes stream it: both fail, naming the shard; no staging file is
#     left and whatever was installed before the kill re-hashes ok.
#
# The origin runs with --chunk-size 16384; samples of 24 KiB span two chunks each.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_proxy_lib.sh"

DATASET=progressive_v1/train
KEYS=(--key bin --key txt)
SHARDS=3
CHUNK=16384

make_samples "$E2E_TMP/src" 24 $((24 * 1024))
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DATASET" --samples-per-shard 8
[ "$RC" -eq 0 ] || die "datavo pack" "rc $RC: $(e2e_abbrev "$ERR")"
start_origin "$E2E_TMP/store" --chunk-size "$CHUNK"

start_fault_proxy
CACHE="$E2E_TMP/cache"
export DATAVO_SHARD_CACHE_DIR="$CACHE" DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/manifests"

installed_tars() { [ -d "$CACHE" ] && find "$CACHE" -name '*.tar' -not -path '*/.staging/*' | sort; return 0; }
cold() { rm -rf "$CACHE" "$DATAVO_MANIFEST_CACHE_DIR"; }
# read_via URL OUTFILE [ARGS...]: `datavo --json read` of the dataset from URL, with samples_sha256; RC, OUT, ERR.
read_via() {
  local url=$1 out=$2
  shift 2
  RC=0
  DATAVO_SERVER=$url timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest "$@" \
    >"$out" 2>"$out.err" || RC=$?
  OUT=$(cat "$out")
  ERR=$(cat "$out.err")
}
field() { json "$1" <<<"$OUT" 2>/dev/null; }

# --- 0. the clean samples: a read of the installed shards ----------------------------------------------------------

cold
read_via "$ORIGIN_URL" "$E2E_TMP/warmup.json" --read-while-fetching off
[ "$RC" -eq 0 ] || die "a clean read" "rc $RC: $(e2e_abbrev "$ERR")"
read_via "$ORIGIN_URL" "$E2E_TMP/clean.json"
expect_eq "a read of the installed shards: every shard a hit, none read while fetching" "0 0 0" \
  "$RC $(field '"%d %d" % (j["origin"]["shards"], j["read_while_fetching"]["samples_before_install"])')"
CLEAN=$(field 'j["samples_sha256"]')
expect_match "the clean read reports samples_sha256" '^[0-9a-f]{64}$' "$CLEAN"

# --- 1. throttled origin: the first sample before the install -------------------------------------------------------

set_mode "slow rate=65536"
cold
read_via "$PROXY_URL" "$E2E_TMP/first.json" --limit 1 --prefetch 0
expect_eq "throttled, --limit 1: one sample, and it came out of the staging file" "0 1 1" \
  "$RC $(field '"%d %d" % (j["samples"], j["read_while_fetching"]["samples_before_install"])')"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
expect_eq "throttled, --limit 1: the shard of that sample was never installed (its download stopped with the reader)" \
  "" "$(installed_tars)"

cold
read_via "$PROXY_URL" "$E2E_TMP/first_off.json" --limit 1 --prefetch 0 --read-while-fetching off
expect_eq "throttled, --limit 1, --read-while-fetching off: the sample came after the install" "0 1 0 1" \
  "$RC $(field '"%d %d" % (j["samples"], j["read_while_fetching"]["samples_before_install"])') $(installed_tars | wc -l)"

cold
read_via "$PROXY_URL" "$E2E_TMP/whole.json" --prefetch 0
expect_eq "throttled, the whole dataset: exit 0, every shard fetched and read while fetching, no refetch" \
  "0 $SHARDS $SHARDS 0" \
  "$RC $(field '"%d %d %d" % (j["origin"]["shards"], j["read_while_fetching"]["shards"], j["read_while_fetching"]["refetches"])')"
expect_cmp "throttled, the whole dataset: samples handed out before their shard's install" \
  "$(field 'j["read_while_fetching"]["samples_before_install"]')" -gt 0
expect_eq "throttled, the whole dataset: the same samples as the clean read" "$CLEAN" "$(field 'j["samples_sha256"]')"
vrc=0
vout=$(DATAVO_SERVER=$ORIGIN_URL dv --json cache verify 2>&1) || vrc=$?
expect_eq "throttled, the whole dataset: $SHARDS shards installed, and cache verify re-hashes them all ok" \
  "$SHARDS 0 $SHARDS 0" \
  "$(installed_tars | wc -l) $vrc $(printf '%s' "$vout" | json '"%d %d" % (sum(r["ok"] for r in j["tiers"]), sum(r["bad"] for r in j["tiers"]))' 2>/dev/null)"

# --- 2. a flipped byte in chunk 2 ------------------------------------------------------------------------------------

FLIP=$((2 * CHUNK + 100))
set_mode "flipbyte offset=$FLIP count=1"
cold
read_via "$PROXY_URL" "$E2E_TMP/flip1.json" --prefetch 0
expect_eq "flipped byte in chunk 2 of one download: exit 0, the shard fetched once more" "0 1" \
  "$RC $(field 'j["read_while_fetching"]["refetches"]')"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
expect_eq "flipped byte in chunk 2 of one download: every sample handed out is the right one" "$CLEAN" \
  "$(field 'j["samples_sha256"]')"
expect_match "flipped byte in chunk 2 of one download: the refetch is logged with the chunk" \
  "chunk 2 \\(byte offset $((2 * CHUNK)),.*fetching it again" "$ERR"
expect_eq "flipped byte in chunk 2 of one download: every shard installed" "$SHARDS" "$(installed_tars | wc -l)"

set_mode "flipbyte offset=$FLIP"
cold
read_via "$PROXY_URL" "$E2E_TMP/flipall.json" --prefetch 0
expect_eq "flipped byte in chunk 2 of every download: the read fails" 1 "$RC"
expect_match "flipped byte in chunk 2 of every download: the error names the shard and chunk 2" \
  "shard [0-9]+ of $DATASET: .*chunk 2 \\(byte offset $((2 * CHUNK))," "$ERR"
expect_eq "flipped byte in chunk 2 of every download: nothing installed" "" "$(installed_tars)"

# --- 3. two processes, one of them a single-flight waiter, through a flipped byte ----------------------------------

set_mode "flipbyte offset=$FLIP count=1"
cold
rc_a=0 rc_b=0
DATAVO_SERVER=$PROXY_URL timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest \
  >"$E2E_TMP/a.json" 2>"$E2E_TMP/a.err" &
pid_a=$!
DATAVO_SERVER=$PROXY_URL timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest \
  >"$E2E_TMP/b.json" 2>"$E2E_TMP/b.err" &
pid_b=$!
wait "$pid_a" || rc_a=$?
wait "$pid_b" || rc_b=$?
expect_eq "two processes through a flipped byte: both exit 0 with the clean samples" "0 0 $CLEAN $CLEAN" \
  "$rc_a $rc_b $(json 'j["samples_sha256"]' <"$E2E_TMP/a.json" 2>/dev/null) $(json 'j["samples_sha256"]' <"$E2E_TMP/b.json" 2>/dev/null)"
expect_eq "two processes through a flipped byte: every shard installed once" "$SHARDS" "$(installed_tars | wc -l)"

# --- 5. other processes follow the holder's verified chunks (its lock's progress record) ----------------------------

# read_bg NAME [ARGS...]: a whole `datavo --json read` through the proxy in the background, into $E2E_TMP/NAME.json;
# sets BG_PID.
read_bg() {
  local name=$1
  shift
  DATAVO_SERVER=$PROXY_URL timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest "$@" \
    >"$E2E_TMP/$name.json" 2>"$E2E_TMP/$name.err" &
  BG_PID=$!
}
# kill_read_bg PID: kills (-9) the datavo process of a read_bg (PID is its `timeout` wrapper's: killing that one
# would leave datavo running) and reaps the wrapper.
kill_read_bg() {
  local child
  child=$(pgrep -P "$1" | head -1)
  [ -n "$child" ] || fail "kill a background read" "no process under its timeout wrapper $1"
  kill -KILL "$child" 2>/dev/null
  wait "$1" 2>/dev/null
}
# past_chunks N: a staging file holds more than N chunks.
past_chunks() {
  [ -d "$CACHE/.staging" ] &&
    [ -n "$(find "$CACHE/.staging" -type f -size +$(($1 * CHUNK / 1024))k 2>/dev/null | head -1)" ]
}
progress_records() { [ -d "$CACHE/.locks" ] && find "$CACHE/.locks" -name '*.progress' | sort; return 0; }
bg_field() { json "$2" <"$E2E_TMP/$1.json" 2>/dev/null; }

set_mode "slow rate=32768"
cold
read_bg holder --prefetch 0
pid_a=$BG_PID
wait_until 60 past_chunks 1 || fail "a waiting process: the holder's download began" "no staging file past 1 chunk"
read_via "$PROXY_URL" "$E2E_TMP/wait1.json" --limit 1 --prefetch 0
expect_eq "a second process, --limit 1, while the first fetches the shard: one sample, out of the holder's staging file (1 shard read while fetching), no fetch of its own" \
  "0 1 1 1 0" \
  "$RC $(field '"%d %d %d %d" % (j["samples"], j["read_while_fetching"]["samples_before_install"], j["read_while_fetching"]["shards"], j["origin"]["shards"])')"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
# Once it has its sample the waiter stops waiting for the holder's lock (its fetch thread's wait is cancellable): it
# exits while the holder is still on its first shard, not after that shard's install.
alive_a=dead
kill -0 "$pid_a" 2>/dev/null && alive_a=running
expect_eq "a second process, --limit 1: it exits while the first still fetches the shard (nothing installed yet), not after the install" \
  "running 0" "$alive_a $(installed_tars | wc -l)"
read_via "$PROXY_URL" "$E2E_TMP/wait_all.json" --prefetch 0
rc_a=0
wait "$pid_a" || rc_a=$?
expect_eq "a second process reading the whole dataset while the first fetches it: both exit 0 with the clean samples" \
  "0 0 $CLEAN $CLEAN" "$rc_a $RC $(bg_field holder 'j["samples_sha256"]') $(field 'j["samples_sha256"]')"
expect_cmp "a second process reading the whole dataset: samples handed out before an install" \
  "$(field 'j["read_while_fetching"]["samples_before_install"]')" -gt 0
expect_eq "a second process: every shard installed once, no staging file, no progress record left" "$SHARDS  " \
  "$(installed_tars | wc -l) $(staging_files "$CACHE") $(progress_records)"

# A flipped byte in chunk 2 of the holder's first download, at a pace that lets a second process follow it: the
# follower gets nothing of chunk 2 on from that download, and ends with the clean samples.
set_mode "flipbyte offset=$FLIP count=1 rate=32768"
cold
read_bg holder_flip --prefetch 0
pid_a=$BG_PID
wait_until 60 past_chunks 1 || fail "a waiter through a flipped byte: the holder's download began" "no staging file"
read_via "$PROXY_URL" "$E2E_TMP/wait_flip.json" --prefetch 0
rc_a=0
wait "$pid_a" || rc_a=$?
expect_eq "a waiter through a flipped byte in the holder's chunk 2: both exit 0 with the clean samples" \
  "0 0 $CLEAN $CLEAN" "$rc_a $RC $(bg_field holder_flip 'j["samples_sha256"]') $(field 'j["samples_sha256"]')"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
expect_eq "a waiter through a flipped byte: every shard installed once, no staging file, no progress record left" \
  "$SHARDS  " "$(installed_tars | wc -l) $(staging_files "$CACHE") $(progress_records)"

# The holder killed (-9) mid-shard while a second process follows it: the follower takes over and ends right.
set_mode "slow rate=32768"
cold
read_bg holder_kill --prefetch 0
pid_a=$BG_PID
wait_until 60 past_chunks 1 || fail "the holder killed: its download began" "no staging file past 1 chunk"
read_bg follower_kill --prefetch 0
pid_b=$BG_PID
wait_until 60 past_chunks 4 || fail "the holder killed: its download went on" "no staging file past 4 chunks"
kill_read_bg "$pid_a"
rc_b=0
wait "$pid_b" || rc_b=$?
expect_eq "the holder killed mid-shard: the follower exits 0 with the clean samples" "0 $CLEAN" \
  "$rc_b $(bg_field follower_kill 'j["samples_sha256"]')"
[ "$rc_b" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$(cat "$E2E_TMP/follower_kill.err")")"
expect_eq "the holder killed mid-shard: every shard installed, no staging file, no progress record left" \
  "$SHARDS  " "$(installed_tars | wc -l) $(staging_files "$CACHE") $(progress_records)"
vrc=0
vout=$(DATAVO_SERVER=$ORIGIN_URL dv --json cache verify 2>&1) || vrc=$?
expect_eq "the holder killed mid-shard: cache verify re-hashes every shard ok" "$SHARDS 0 0" \
  "$(printf '%s' "$vout" | json '"%d %d" % (sum(r["ok"] for r in j["tiers"]), sum(r["bad"] for r in j["tiers"]))' 2>/dev/null) $vrc"

# The holder killed (-9) mid-shard, alone, and its progress record gone (gc removes an old one; a holder may die
# before it writes one): the next reader takes the staging file over, checks the bytes there against the chunk list
# and reads its first sample out of them at once (before the rest of the shard arrives, which at this pace takes
# seconds); with --limit 1 it then stops, and the shard is never installed. (With the record there, the reader may
# also start on the prefix the dead holder had verified.)
set_mode "slow rate=32768"
cold
read_bg holder_dead --prefetch 0
pid_a=$BG_PID
wait_until 60 past_chunks 4 || fail "a dead holder's file: its download went on" "no staging file past 4 chunks"
kill_read_bg "$pid_a"
left=$(staging_files "$CACHE")
expect_eq "a dead holder's file: the killed holder left its staging file" 1 "$(wc -w <<<"$left")"
left_size=$(file_size "$CACHE/.staging/$left")
rm -f "$CACHE"/.locks/*.progress
set_mode "slow rate=32768" # its counters from 0
read_via "$PROXY_URL" "$E2E_TMP/takeover.json" --limit 1 --prefetch 0
expect_eq "a dead holder's file, the next reader with --limit 1: one sample, out of the file it took over (read while fetching), no refetch, nothing installed" \
  "0 1 1 1 0 0" \
  "$RC $(field '"%d %d %d %d" % (j["samples"], j["read_while_fetching"]["samples_before_install"], j["read_while_fetching"]["shards"], j["read_while_fetching"]["refetches"])') $(installed_tars | wc -l)"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
# Its sample came before any byte more: the download of the rest (a Range from the file's end) may have been stopped
# before it reached the origin. Either way, nothing was asked for from byte 0.
expect_eq "a dead holder's file: nothing fetched from byte 0 (at most one shard request, a Range from the file's $left_size bytes)" \
  yes \
  "$(python3 -c 'import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1] + "/_proxy_stats", timeout=10))["shard"]
print("yes" if s["requests"] <= 1 and s["ranges"] == ["bytes=%s-" % sys.argv[2]] * s["requests"] else json.dumps(s))' \
    "$PROXY_URL" "$left_size")"

# --- 4. the origin killed mid-shard while two processes stream it ---------------------------------------------------

set_mode "slow rate=16384"
cold
DATAVO_SERVER=$PROXY_URL timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest \
  >"$E2E_TMP/ka.json" 2>"$E2E_TMP/ka.err" &
pid_a=$!
DATAVO_SERVER=$PROXY_URL timeout -k 5 120 "$DATAVO_BIN" --json read "$DATASET" "${KEYS[@]}" --digest \
  >"$E2E_TMP/kb.json" 2>"$E2E_TMP/kb.err" &
pid_b=$!
# Mid-shard: a staging file holds more than 3 chunks (none of the ~200 KiB shards is complete at 16 KiB/s).
mid_shard() {
  [ -d "$CACHE/.staging" ] && [ -n "$(find "$CACHE/.staging" -type f -size +$((3 * CHUNK / 1024))k 2>/dev/null | head -1)" ]
}
wait_until 60 mid_shard || fail "origin killed: the downloads began" "no staging file past 3 chunks"
# The origin and the proxy in front of it (what the readers talk to) go away mid-shard.
kill -KILL "$PROXY_PID" "$ORIGIN_PID" 2>/dev/null
rc_a=0 rc_b=0
wait "$pid_a" || rc_a=$?
wait "$pid_b" || rc_b=$?
expect_eq "origin killed mid-shard: both readers fail" "1 1" "$rc_a $rc_b"
expect_match "origin killed mid-shard: the first reader's error names a shard" "shard [0-9]+ of $DATASET" \
  "$(cat "$E2E_TMP/ka.err")"
expect_match "origin killed mid-shard: the second reader's error names a shard" "shard [0-9]+ of $DATASET" \
  "$(cat "$E2E_TMP/kb.err")"
# A shard whose last byte came through before the kill may be installed; nothing else, and nothing wrong.
vrc=0
vout=$(dv --json cache verify 2>&1) || vrc=$?
expect_eq "origin killed mid-shard: whatever was installed re-hashes ok (cache verify: no bad entry)" "0 0" \
  "$vrc $(printf '%s' "$vout" | json 'sum(r["bad"] for r in j["tiers"])' 2>/dev/null)"
expect_cmp "origin killed mid-shard: not every shard was installed" "$(installed_tars | wc -l)" -lt "$SHARDS"
expect_eq "origin killed mid-shard: no staging file left" "" "$(staging_files "$CACHE")"

finish
