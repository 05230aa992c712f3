#!/usr/bin/env bash
# Single flight across processes: 16 `datavo cache fetch` processes ask for the same cold hash at once. The server
# delays every file response by 2 s (--delay-ms), so all 16 look the hash up while the first download is still in
# flight (on CI's loaded 2 cores the last of 16 spawns can start well after 300 ms: the margin is the delay). Exactly one download happens; everyone gets the same installed path.
. "$(dirname "$0")/lib.sh"

N=16
www="$E2E_TMP/www"
mkdir -p "$www"
sha=$(make_shard "$www/shard.bin" $((2 * 1024 * 1024)))
start_server "$www" --delay-ms 2000

t1="$E2E_TMP/t1"
t2="$E2E_TMP/t2"
write_config <<EOF
tiers:
  - name: t1
    path: $t1
  - name: t2
    path: $t2
EOF
h=$(hash_for stampede)

# stampede ROUND: starts N fetches at once (no waiting between the spawns), then reaps them.
stampede() {
  local round=$1 i
  local pids=()
  for ((i = 0; i < N; i++)); do
    timeout -k 5 60 "$DATAVO_BIN" --config "$E2E_CONFIG" --json cache fetch "$h" --url "$SERVER_URL/shard.bin" \
      >"$E2E_TMP/$round.out.$i" 2>"$E2E_TMP/$round.err.$i" &
    pids+=($!)
    track_pid $!
  done
  for ((i = 0; i < N; i++)); do
    local rc=0
    wait "${pids[$i]}" || rc=$?
    echo "$rc" >"$E2E_TMP/$round.rc.$i"
  done
}

# summarize ROUND EXPR: EXPR over the N JSON outputs (a list j), e.g. sorted(set(x['path'] for x in j)).
summarize() {
  local round=$1 i
  for ((i = 0; i < N; i++)); do cat "$E2E_TMP/$round.out.$i"; done |
    python3 -c '
import json, sys
j = [json.loads(line) for line in sys.stdin if line.strip()]
print(json.dumps(eval(sys.argv[1])))
' "$2"
}

started=$(date +%s%N)
stampede cold
elapsed_ms=$((($(date +%s%N) - started) / 1000000))

rcs=$(cat "$E2E_TMP"/cold.rc.* | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
expect_eq "cold stampede: all $N processes exit 0" "0x$N " "$rcs"
if [ "$rcs" != "0x$N " ]; then
  for ((i = 0; i < N; i++)); do
    [ "$(cat "$E2E_TMP/cold.rc.$i")" = 0 ] || echo "# process $i: rc $(cat "$E2E_TMP/cold.rc.$i"): $(cat "$E2E_TMP/cold.err.$i")"
  done
fi
expect_eq "cold stampede: $N JSON results" "$N" "$(summarize cold 'len(j)')"
expect_eq "cold stampede: all print the same path" "[\"$t1/local/$h.tar\"]" "$(summarize cold 'sorted(set(x["path"] for x in j))')"
expect_eq "cold stampede: all report the full size" "[2097152]" "$(summarize cold 'sorted(set(x["size_bytes"] for x in j))')"
expect_eq "cold stampede: exactly one process fetched, the others hit after waiting" '{"fetched": 1, "hit": 15}' \
  "$(summarize cold '{s: [x["source"] for x in j].count(s) for s in sorted(set(x["source"] for x in j))}')"
expect_eq "cold stampede: the installed bytes are right" "$sha" "$(sha256_of "$t1/local/$h.tar" 2>&1)"
expect_eq "cold stampede: the server got exactly 1 request for the shard" 1 "$(server_requests /shard.bin)"
expect_eq "cold stampede: the server got exactly 1 request in all" 1 "$(server_stats | json "j['total']")"
expect_cmp "cold stampede: took at least the server's 2 s delay (${elapsed_ms} ms)" "$elapsed_ms" -ge 2000
# Every process missed on its first look: they really ran at the same time, before the one install.
expect_stat t1 misses "$N"
expect_stat t1 installs 1
expect_stat t2 installs 1
expect_stat t1 hits $((N - 1))
expect_stat t1 errors 0
expect_stat t2 errors 0
expect_empty_dir "cold stampede: nothing left in t1/.staging" "$t1/.staging"
expect_empty_dir "cold stampede: nothing left in t2/.staging" "$t2/.staging"
expect_eq "cold stampede: no per-shard lock file left in t1/.locks" "" "$(shard_locks "$t1")"
errs=$(cat "$E2E_TMP"/cold.err.*)
expect_eq "cold stampede: nothing on stderr" "" "$errs"

# A warm stampede: all hits, no request.
stampede warm
rcs=$(cat "$E2E_TMP"/warm.rc.* | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
expect_eq "warm stampede: all $N processes exit 0" "0x$N " "$rcs"
expect_eq "warm stampede: all hits on t1" "[[\"hit\", \"t1\"]]" \
  "$(summarize warm 'sorted(set((x["source"], x["tier"]) for x in j))')"
expect_eq "warm stampede: still exactly 1 request for the shard" 1 "$(server_requests /shard.bin)"
expect_stat t1 installs 1
expect_stat t1 hits $((2 * N - 1))

stop_server
finish
