#!/usr/bin/env bash
# The streamed read mode (`datavo read --stream`, issue 19; docs/hierarchy.md "Streamed reads"), against a real
# `datavo serve` on loopback, with the fault proxy (tests/support/fault_proxy.py) between them for the faults:
#
#   - a streamed read yields the same samples as the cached read (count and a checksum of ids, keys and payloads),
#     and writes nothing: no .tar in the folder tier, nothing in .staging;
#   - a flipped byte in chunk k: the read fails with an error naming chunk k, after fewer samples than a clean run;
#   - a body cut once is resumed with Range and reads the same samples; a source that resets or stalls on every
#     attempt ends after the transport's bounded attempts with a clear error, and nothing is written;
#   - memory: the peak RSS (ru_maxrss through /usr/bin/time -v) of a streamed read of 32 MiB shards with a 2 MiB
#     window stays under the window plus a baseline of 24 MiB (measured: 18.4 MiB) (the process, libcurl, OpenSSL, the manifest), below
#     one shard; the cached read of the same shards is shown for comparison (its mapped shard pages count).
#   - an old server (a ticket without chunk digests): the streamed read is refused with an error that says so;
#   - a hit is read as in the cached mode: once the cached read has installed the shards, a streamed read streams
#     none.
#
# The origin runs with --chunk-size 262144 (256 KiB): a 2 MiB window holds 8 chunks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_proxy_lib.sh"

DATASET=streamed_v1/train
KEYS=(--key bin --key txt)
CHUNK=262144
WINDOW_MIB=2
BASELINE_MIB=24
SAMPLES=1024

make_samples "$E2E_TMP/src" "$SAMPLES" $((60 * 1024))
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DATASET" --samples-per-shard 512
[ "$RC" -eq 0 ] || die "datavo pack" "rc $RC: $(e2e_abbrev "$ERR")"
start_origin "$E2E_TMP/store" --chunk-size "$CHUNK"

start_fault_proxy
CACHE="$E2E_TMP/cache"
export DATAVO_SHARD_CACHE_DIR="$CACHE" DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/manifests"

written_files() {
  # Every shard or staging file under the cache, with its size: a streamed read leaves none.
  [ -d "$CACHE" ] && find "$CACHE" -type f \( -name '*.tar' -o -path '*/.staging/*' \) -printf '%p %s\n' | sort
  return 0
}
expect_nothing_written() {
  expect_eq "$1: no .tar and no staging file under the cache" "" "$(written_files)"
}
# read_via URL MODE [ARGS...]: a cold `datavo read --json --digest` of the whole dataset (MODE: cached or stream),
# under /usr/bin/time -v; sets RC, OUT, ERR and RSS_KIB.
read_via() {
  local url=$1 mode=$2
  shift 2
  local extra=()
  [ "$mode" = stream ] && extra=(--stream --stream-window "${WINDOW_MIB}MiB")
  RC=0
  DATAVO_SERVER=$url timeout -k 5 120 /usr/bin/time -v -o "$E2E_TMP/time.out" "$DATAVO_BIN" --json read "$DATASET" \
    "${KEYS[@]}" --digest "${extra[@]}" "$@" >"$E2E_TMP/read.out" 2>"$E2E_TMP/read.err" || RC=$?
  OUT=$(cat "$E2E_TMP/read.out")
  ERR=$(cat "$E2E_TMP/read.err")
  RSS_KIB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$E2E_TMP/time.out")
}
cold() { rm -rf "$CACHE" "$DATAVO_MANIFEST_CACHE_DIR"; }

# --- 1. the cached read: the reference ------------------------------------------------------------------------------

set_mode ok
cold
read_via "$ORIGIN_URL" cached
expect_eq "cached read: exits 0 and reads all $SAMPLES samples" "0 $SAMPLES" \
  "$RC $(echo "$OUT" | json 'j["samples"]' 2>/dev/null)"
REF_SUM=$(echo "$OUT" | json 'j["samples_sha256"]' 2>/dev/null)
CACHED_RSS_KIB=$RSS_KIB
SHARD_BYTES=$(find "$CACHE" -name '*.tar' -printf '%s\n' | sort -n | tail -1)

# --- 2. the streamed read: the same samples, nothing written, memory within the window --------------------------------

cold
read_via "$PROXY_URL" stream
expect_eq "streamed read: exits 0, the same $SAMPLES samples and checksum as the cached read" "0 $SAMPLES $REF_SUM" \
  "$RC $(echo "$OUT" | json '"%d %s" % (j["samples"], j["samples_sha256"])' 2>/dev/null)"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
expect_eq "streamed read: 2 shards streamed, none fetched into the cache" "2 0" \
  "$(echo "$OUT" | json '"%d %d" % (j["streamed"]["shards"], j["origin"]["shards"])' 2>/dev/null)"
expect_nothing_written "streamed read"
expect_eq "streamed read: the folder tier holds 0 entries" "0" \
  "$(DATAVO_SERVER=$ORIGIN_URL dv --json cache info 2>/dev/null | json 'sum(t.get("entries", 0) or 0 for t in j["tiers"])' 2>/dev/null)"
echo "# files under the cache after the streamed read (its counters): $(find "$CACHE" -type f -printf '%P %s; ' 2>/dev/null)"
expect_cmp "streamed read: the window held at most ${WINDOW_MIB} MiB" \
  "$(echo "$OUT" | json 'j["streamed"]["max_buffered_bytes"]' 2>/dev/null)" -le $((WINDOW_MIB << 20))
expect_cmp "streamed read: peak RSS ${RSS_KIB} KiB <= window ${WINDOW_MIB} MiB + baseline ${BASELINE_MIB} MiB" \
  "${RSS_KIB:-999999999}" -le $(((WINDOW_MIB + BASELINE_MIB) << 10))
expect_cmp "the bound means something: a shard ($SHARD_BYTES bytes) is larger than window + baseline" \
  "${SHARD_BYTES:-0}" -gt $(((WINDOW_MIB + BASELINE_MIB) << 20))
echo "# peak RSS: streamed ${RSS_KIB} KiB, cached ${CACHED_RSS_KIB} KiB; shards of ${SHARD_BYTES} bytes"

# --- 3. a flipped byte in chunk 5: an error naming chunk 5, fewer samples ---------------------------------------------

FLIP=$((5 * CHUNK + 100))
set_mode "flipbyte offset=$FLIP"
cold
read_via "$PROXY_URL" stream
expect_eq "flipped byte in chunk 5: read exits 1" "1" "$RC"
expect_match "flipped byte in chunk 5: the error names the shard and chunk 5 with its byte offset" \
  "shard [0-9]+ of $DATASET revision 1: content hash [0-9a-f]{64}: chunk 5 \\(byte offset $((5 * CHUNK))," "$ERR"
GOT=$(grep -o 'after [0-9]* samples' <<<"$ERR" | grep -o '[0-9]*')
expect_cmp "flipped byte in chunk 5: some samples came before it (${GOT:-none})" "${GOT:-0}" -gt 0
expect_cmp "flipped byte in chunk 5: fewer than chunk 5's start allows (${GOT:-none} of $SAMPLES)" "${GOT:-999999}" -lt \
  $((5 * CHUNK / (61 * 1024)))
expect_nothing_written "flipped byte"
echo "# the error: $(grep -m1 -o 'shard [0-9]* of .*' <<<"$ERR" | cut -c1-300)"

# --- 4. a body cut once: resumed with Range, the same samples -----------------------------------------------------------

set_mode "reset count=1"
cold
read_via "$PROXY_URL" stream
expect_eq "reset once: exits 0 with the same checksum" "0 $REF_SUM" \
  "$RC $(echo "$OUT" | json 'j["samples_sha256"]' 2>/dev/null)"
expect_eq "reset once: the cut download was resumed with a Range request" "1" \
  "$(python3 -c 'import json, sys, urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_proxy_stats", timeout=10))["shard"]["range_requests"])' "$PROXY_URL")"
expect_nothing_written "reset once"

# --- 5. a source that resets or stalls on every attempt: bounded retries, then a clear error --------------------------

set_mode "reset count=1000"
cold
read_via "$PROXY_URL" stream
expect_eq "reset always: read exits 1" "1" "$RC"
expect_eq "reset always: 5 attempts (the transport's max_attempts), no more" "5" "$(proxy_shard_requests)"
expect_match "reset always: the error names the shard" "shard [0-9]+ of $DATASET revision 1: " "$ERR"
expect_nothing_written "reset always"

set_mode "stall count=1000 seconds=30"
cold
DATAVO_STALL_TIMEOUT=1 read_via "$PROXY_URL" stream
expect_eq "stall always: read exits 1" "1" "$RC"
expect_eq "stall always: 5 attempts, no more" "5" "$(proxy_shard_requests)"
expect_match "stall always: the error says it timed out" "shard [0-9]+ of $DATASET revision 1: .*(stall|timed out|timeout)" "$ERR"
expect_nothing_written "stall always"

# --- 5b. an old server (a ticket without chunk digests, made by the proxy): refused, saying so, before any byte -------

set_mode "ok ticket=strip"
cold
read_via "$PROXY_URL" stream
expect_eq "old server: read exits 1, and no shard request was made" "1 0" "$RC $(proxy_shard_requests)"
expect_match "old server: the error says a streamed read needs chunk digests" \
  "no chunk digests.*a streamed read needs them; read this dataset without --stream" "$ERR"
expect_nothing_written "old server"

# --- 6. a hit is read as in the cached mode ----------------------------------------------------------------------------

set_mode ok
cold
read_via "$ORIGIN_URL" cached
HITS_BEFORE=$(DATAVO_SERVER=$ORIGIN_URL stat_of default hits)
read_via "$PROXY_URL" stream
expect_eq "hits: the streamed read streams no shard, reads the cached ones, same checksum" "0 0 $REF_SUM 0" \
  "$RC $(echo "$OUT" | json '"%d %s" % (j["streamed"]["shards"], j["samples_sha256"])' 2>/dev/null) $(proxy_shard_requests)"
expect_eq "hits: each shard counts one hit in the tier (one lookup, not two)" "2" \
  "$(($(DATAVO_SERVER=$ORIGIN_URL stat_of default hits) - ${HITS_BEFORE:-0}))"

finish
