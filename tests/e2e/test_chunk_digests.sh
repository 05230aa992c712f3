#!/usr/bin/env bash
# Chunk digests (docs/protocol.md, "Chunk digests"), against a real `datavo serve` on loopback and the real client
# (`datavo warm`), with the fault proxy (tests/support/fault_proxy.py) between them for the cases that lie:
#
#   - the origin's ticket carries chunk_size, one SHA-256 per chunk of the tar and chunks_sha256, and they are the
#     digests of the bytes it serves;
#   - a body cut in the middle of a chunk is resumed with Range, and the chunk checks pass across the cut;
#   - a flipped byte in chunk k of the served tar stops the download at chunk k: the error names the shard, the chunk
#     and its byte offset, it comes from the chunk check (not the whole-shard one), and nothing is installed;
#   - a lying list that is consistent with itself (its chunks_sha256 recomputed) is caught at the first chunk it
#     lies about; a list that is not the ticket's (chunks_sha256 does not match), or that does not fit the ticket's
#     size, is refused before any shard byte is asked for;
#   - a new client and an old server (a ticket without the chunk fields, made by the proxy): the download works, and
#     a flipped byte is caught by the whole-shard SHA-256 as before;
#   - an old client and a new server: when DATAVO_OLD_BIN names a `datavo` built from the code before chunk digests,
#     it warms the dataset from the new server (its ticket parser ignores the new fields). Without it that case is
#     reported as not run.
#
# The origin runs with --chunk-size 16384, so that the ~100 KiB shards of this suite have 7 chunks each.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault_proxy_lib.sh"

DATASET=chunks_v1/train
KEYS=(--key bin --key txt)
SHARDS=2
CHUNK=16384

make_samples "$E2E_TMP/src" 8 $((24 * 1024))
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DATASET" --samples-per-shard 4
[ "$RC" -eq 0 ] || die "datavo pack" "rc $RC: $(e2e_abbrev "$ERR")"
start_origin "$E2E_TMP/store" --chunk-size "$CHUNK"

start_fault_proxy
CACHE="$E2E_TMP/cache"
export DATAVO_SHARD_CACHE_DIR="$CACHE" DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/manifests"

installed_tars() { [ -d "$CACHE" ] && find "$CACHE" -name '*.tar' | sort; return 0; }
expect_nothing_installed() {
  expect_eq "$1: no .tar anywhere under the cache" "" "$(installed_tars)"
  expect_empty_dir "$1: nothing left in .staging" "$CACHE/.staging"
}
# warm_via URL [BIN]: a cold `warm --json` of the whole dataset from URL (by BIN, default $DATAVO_BIN).
warm_via() {
  rm -rf "$CACHE" "$DATAVO_MANIFEST_CACHE_DIR"
  local bin=${2:-$DATAVO_BIN}
  RC=0
  DATAVO_SERVER=$1 timeout -k 5 60 "$bin" --json warm "$DATASET" "${KEYS[@]}" >"$E2E_TMP/warm.out" \
    2>"$E2E_TMP/warm.err" || RC=$?
  OUT=$(cat "$E2E_TMP/warm.out")
  ERR=$(cat "$E2E_TMP/warm.err")
}
expect_warmed() {
  expect_eq "$1: warm exits 0, all $SHARDS shards fetched from the origin" "0 0 $SHARDS" \
    "$RC $(echo "$OUT" | json '"%d %d" % (j["failed"], j["origin"]["shards"])' 2>/dev/null)"
  [ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
  local vrc=0 vout
  vout=$(DATAVO_SERVER=$ORIGIN_URL dv --json cache verify 2>&1) || vrc=$?
  expect_eq "$1: $SHARDS shards installed, and datavo cache verify re-hashes them all ok" "$SHARDS 0 $SHARDS 0" \
    "$(installed_tars | wc -l) $vrc $(printf '%s' "$vout" | json '"%d %d" % (sum(r["ok"] for r in j["tiers"]), sum(r["bad"] for r in j["tiers"]))' 2>/dev/null)"
}

# --- 0. the new origin's tickets carry chunk digests of the bytes it serves ----------------------------------------

expect_eq "the origin's tickets: chunk_size, one digest per chunk of the served bytes, chunks_sha256 their binding" \
  "ok ok" "$(python3 - "$ORIGIN_URL" "$DATASET" "$CHUNK" <<'PY'
import hashlib, json, sys, urllib.parse, urllib.request
base, dataset, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
manifest = json.load(urllib.request.urlopen(base + "/v1/datasets/" + dataset + "/manifest", timeout=10))
ds, split = dataset.split("/")
out = []
for shard in manifest["shards"]:
    body = json.dumps({"dataset": ds, "split": split, "revision": manifest["revision"], "shard_index": shard["index"],
                       "keys": ["bin", "txt"]}).encode()
    req = urllib.request.Request(base + "/v1/stream-tickets", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    t = json.load(urllib.request.urlopen(req, timeout=10))
    data = urllib.request.urlopen(urllib.parse.urljoin(base + "/", t["url"]), timeout=10).read()
    want = [hashlib.sha256(data[i:i + chunk]).hexdigest() for i in range(0, len(data), chunk)]
    problems = []
    if t.get("chunk_size") != chunk: problems.append("chunk_size %r" % t.get("chunk_size"))
    if t.get("chunks") != want: problems.append("chunks differ from the served bytes' (%d chunks)" % len(want))
    if len(want) < 4: problems.append("only %d chunks: the suite needs at least 4" % len(want))
    if t.get("chunks_sha256") != hashlib.sha256("".join(c + "\n" for c in want).encode()).hexdigest():
        problems.append("chunks_sha256 is not the SHA-256 of the canonical list")
    out.append("; ".join(problems) or "ok")
print(" ".join(out))
PY
)"

# --- 1. no fault --------------------------------------------------------------------------------------------------

set_mode ok
warm_via "$PROXY_URL"
expect_warmed "no fault"

# --- 1b. a body cut in the middle of a chunk, resumed with Range: the chunk is hashed on across the cut ------------

set_mode "truncate count=2"
warm_via "$PROXY_URL"
expect_warmed "cut mid-chunk and resumed"
expect_eq "cut mid-chunk and resumed: the two cut downloads were resumed with a Range request (206)" "2 [200, 200, 206, 206]" \
  "$(python3 -c 'import json, sys, urllib.request; s = json.load(urllib.request.urlopen(sys.argv[1] + "/_proxy_stats", timeout=10))["shard"]; print(s["range_requests"], sorted(s["statuses"]))' "$PROXY_URL")"

# --- 2. a flipped byte in chunk 2: stopped at chunk 2 --------------------------------------------------------------

FLIP=$((2 * CHUNK + 100))
set_mode "flipbyte offset=$FLIP"
warm_via "$PROXY_URL"
expect_eq "flipped byte in chunk 2: warm exits 1, every shard failed" "1 $SHARDS" \
  "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "flipped byte in chunk 2: the error names the shard, chunk 2 and its byte offset" \
  "shard [0-9]+ of $DATASET revision 1: content hash [0-9a-f]{64}: chunk 2 \\(byte offset $((2 * CHUNK))," "$ERR"
expect_eq "flipped byte in chunk 2: caught by the chunk check, not by the whole-shard SHA-256 at the end" "" \
  "$(grep -E 'has SHA-256 [0-9a-f]{64}, expected' <<<"$ERR")"
expect_nothing_installed "flipped byte in chunk 2"
echo "# the error: $(grep -m1 -o 'shard [0-9]* of .*' <<<"$ERR" | cut -c1-400)"

# --- 3. a lying chunk list, consistent with itself: caught at the chunk it lies about -------------------------------

set_mode "ok ticket=lie:3"
warm_via "$PROXY_URL"
expect_eq "lying list (chunk 3): warm exits 1, every shard failed" "1 $SHARDS" \
  "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "lying list (chunk 3): the error names chunk 3 and its offset" \
  "chunk 3 \\(byte offset $((3 * CHUNK)),.*the ticket's chunk list gives" "$ERR"
expect_nothing_installed "lying list"

# --- 4. a list that is not the ticket's: refused before any byte ----------------------------------------------------

set_mode "ok ticket=unbound:1"
warm_via "$PROXY_URL"
expect_eq "unbound list: warm exits 1, every shard failed" "1 $SHARDS" \
  "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "unbound list: the error names chunks_sha256" '"chunks_sha256" is not the SHA-256 of the canonical list' \
  "$ERR"
expect_eq "unbound list: refused before any byte: no shard request reached the proxy" 0 "$(proxy_shard_requests)"
expect_nothing_installed "unbound list"

# --- 4b. a list one chunk short of the ticket's size (its binding recomputed): refused before any byte -------------

set_mode "ok ticket=drop:0"
warm_via "$PROXY_URL"
expect_eq "short list: warm exits 1, every shard failed" "1 $SHARDS" "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "short list: the error names the field and the counts" \
  '"chunks" does not fit the ticket: size: [0-9]+ chunk digests, but [0-9]+ bytes in chunks of 16384 make [0-9]+' "$ERR"
expect_eq "short list: refused before any byte: no shard request reached the proxy" 0 "$(proxy_shard_requests)"
expect_nothing_installed "short list"

# --- 5. a new client and an old server: whole-shard verification as before ----------------------------------------

set_mode "ok ticket=strip"
warm_via "$PROXY_URL"
expect_warmed "old server (no chunk fields)"
set_mode "flipbyte offset=$FLIP ticket=strip"
warm_via "$PROXY_URL"
expect_eq "old server, flipped byte: warm exits 1, every shard failed" "1 $SHARDS" \
  "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "old server, flipped byte: caught by the whole-shard SHA-256" 'has SHA-256 [0-9a-f]{64}, expected' "$ERR"
expect_eq "old server, flipped byte: no chunk is named (there is no list)" "" "$(grep -E 'chunk [0-9]+ \(' <<<"$ERR")"
expect_nothing_installed "old server, flipped byte"

# --- 6. an old client and a new server -----------------------------------------------------------------------------

if [ -n "${DATAVO_OLD_BIN:-}" ]; then
  expect_eq "old client: $DATAVO_OLD_BIN predates chunk digests (no --chunk-size in its serve)" "" \
    "$("$DATAVO_OLD_BIN" serve --help 2>&1 | grep -e --chunk-size)"
  warm_via "$ORIGIN_URL" "$DATAVO_OLD_BIN"
  expect_warmed "old client against the new server"
else
  echo "# old client against the new server: not run (set DATAVO_OLD_BIN to a datavo built before chunk digests)"
fi

finish
