#!/usr/bin/env bash
# Faults of a GCS tier on the firebase-tools Storage emulator, through `datavo cache fetch` and `datavo warm`, with
# tests/support/cloud_proxy.py between datavo and the emulator (endpoint_url) to count the JSON API operations and
# make it misbehave. In every case the read succeeds (from a slower folder tier or the origin), the tier degrades
# with a WARNING, nothing bad is installed locally (the bytes served are checked, `cache verify` finds nothing
# bad, no staging file is left) or remotely (the bucket's objects are listed and read back with
# @google-cloud/storage):
#   1. the emulator (a dedicated one) killed with SIGKILL mid-upload (uploadType=multipart): the read succeeds, the
#      upload is reported failed and was never answered (the emulator keeps its objects in memory: nothing of it
#      survives the kill to be listed);
#   2. the emulator killed mid-download: the slower folder tier serves the shard, the origin is not asked;
#   3. a 503 storm with Retry-After: a short one is ridden out (Retry-After honoured); a long one opens the breaker
#      with one WARNING, and the origin serves every shard;
#   4. the object rewritten between ranges (a new generation). The emulator IGNORES ifGenerationMatch on media
#      downloads: it answers the ranges pinned to the old generation 206, with the new generation's bytes and
#      x-goog-generation. Datavo checks that header against the pin, so the read restarts once and succeeds
#      (before that check, this test found the ranges of two generations read as one object). The 412 real GCS
#      answers is shown through the proxy (and in tests/unit/tier/gcs/test_gcs_tier.cpp, against a fake server):
#      once, the read restarts; on every pinned range, the origin serves;
#   5. an object whose bytes do not match its metadata (datavo-sha256 lies): never installed, deleted from a
#      writable bucket and replaced by good bytes; left alone by a read-only tier;
#   6. a bucket that does not exist: the emulator creates buckets on the first write and answers a read of a
#      missing one as a missing object (so the first upload creates it); as GCS answers (404 "The specified bucket
#      does not exist.", through the proxy): the WARNING names the bucket, the upload fails, the read does not.
# The emulator takes no credentials (STORAGE_EMULATOR_HOST): there is no secret to leak here; the refusal of a token
# is covered by tests/unit/tier/gcs/test_gcs_tier.cpp against a fake GCS server. single_flight: false throughout
# (the emulator ignores ifGenerationMatch=0 too, see test_gcs_cli.sh), and uploads stay under part_size (64MiB):
# the emulator cannot take resumable uploads in chunks; the ranged reads use objects the reference client wrote.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)
MIB=$((1024 * 1024))
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

cloud_up gcs
start_proxy GCSP "$GCS_EMULATOR_ENDPOINT"
BUCKET=datavo-faults
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# vm NAME PROXY_URL BUCKET PART_SIZE [FIELD...]: $E2E_TMP/NAME.yaml (a local folder tier, the GCS tier "bucket"
# through the proxy, a slower folder tier "slow"), made the config.
vm() {
  local name=$1 url=$2 bucket=$3 part=$4
  shift 4
  write_config "$E2E_TMP/$name.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n  - name: slow\n    path: %s\n' \
    "$E2E_TMP/$name" "$(gcs_tier_yaml bucket "$bucket" "endpoint_url: $url" 'single_flight: false' \
      "part_size: $part" 'concurrency: 2' "$@")" "$E2E_TMP/$name-slow")
}

fetch() {
  local name=$1 sha=$2
  shift 2
  run --json cache fetch "$(hash_for "$name")" --url "$SERVER_URL/$name" --sha256 "$sha" "$@"
}

served_ok() {
  local what=$1 sha=$2 source=$3 path
  expect_eq "$what: exit 0, served from $source" "[0, \"$source\"]" "[$RC, \"$(json "j['source']" <<<"$OUT" 2>/dev/null)\"]"
  path=$(json "j['path']" <<<"$OUT" 2>/dev/null)
  expect_eq "$what: the bytes served are the shard's" "$sha" "$( [ -n "$path" ] && sha256_of "$path")"
  expect_eq "$what: no staging file left" "" "$(staging_files "$(dirname "$(dirname "$path")")" 2>/dev/null)"
}

verify_local() {
  local out
  out=$(dv --json cache verify 2>&1)
  expect_eq "$1: cache verify: nothing bad installed locally" 0 "$(json "sum(t['bad'] for t in j['tiers'])" <<<"$out")"
}

mid_transfer() {
  [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and not r['done'] and (r['bytes_out'] + r['bytes_in']) > 0])")" -gt 0 ]
}
# pinned_arrived URL OP N: N requests of OP pinned to a version (If-Match, ifGenerationMatch) have arrived.
pinned_arrived() { [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and r['if_match']])")" -ge "$3" ]; }

background_fetch() {
  FETCH_STARTED=$(date +%s%N)
  ( fetch "$1" "$2"; echo "$RC" >"$E2E_TMP/rc"; echo "$OUT" >"$E2E_TMP/out"; echo "$ERR" >"$E2E_TMP/err" ) &
  FETCHER=$!
}
collect_fetch() {
  wait "$FETCHER"
  RC=$(cat "$E2E_TMP/rc") OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
  echo "# (the fetch took $((($(date +%s%N) - FETCH_STARTED) / 1000000)) ms)"
}

# doomed_gcs: an emulator of its own, to be killed, behind a proxy of its own: DOOMED_URL, DOOMED_GCS_PID.
DOOMED_RUN="$E2E_TMP/emulators-doomed"
on_exit_first "DATAVO_EMULATOR_RUN_DIR='$DOOMED_RUN' emulators_down >/dev/null 2>&1"
doomed_gcs() {
  local lines
  rm -f "$DOOMED_RUN/gcs.pid" "$DOOMED_RUN/gcs.port" "$DOOMED_RUN/gcs.start"  # a killed one
  lines=$(DATAVO_EMULATOR_RUN_DIR="$DOOMED_RUN" emu_up_print gcs 2>"$E2E_TMP/doomed.err") ||
    die "a dedicated GCS emulator" "$(cat "$E2E_TMP/doomed.err")"
  DOOMED_GCS_PID=$(cat "$DOOMED_RUN/gcs.pid")
  start_proxy DOOMED "$(sed -n 's/^export GCS_EMULATOR_ENDPOINT=//p' <<<"$lines")"
}

# generation BUCKET NAME: the object's generation (the reference client's view).
generation() { gcstool head "$1" "$2" | json "j['generation']"; }

SIZE=$((6 * MIB + 5))  # the killed transfers (one request each: under part_size)
section() { echo "# $(($(date +%s) - SUITE_STARTED)) s: $1"; }

# --- 1. the emulator killed mid-upload ----------------------------------------------------------------------------

section "1. the emulator killed mid-upload"

doomed_gcs
SHA1=$(make_shard "$E2E_TMP/files/kill-upload.bin" "$SIZE")
vm vm1 "$DOOMED_URL" doomed 64MiB
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=UploadMultipart count=1"
background_fetch kill-upload.bin "$SHA1"
wait_until 30 mid_transfer "$DOOMED_URL" UploadMultipart ||
  fail "kill mid-upload" "no upload under way: $(proxy_json "$DOOMED_URL" "[(r['op'], r['done'], r['bytes_in']) for r in j['log']]")"
kill -KILL "$DOOMED_GCS_PID"
collect_fetch
served_ok "kill mid-upload" "$SHA1" fetched
expect_eq "kill mid-upload: the upload is reported failed, the read is not" '[0, 1]' \
  "$(json "[j['uploads']['uploaded'], j['uploads']['failed']]" <<<"$OUT")"
expect_contains "kill mid-upload: a WARNING says the read succeeded" "(the read it served succeeded)" "$ERR"
expect_eq "kill mid-upload: the upload was never answered" "[null]" \
  "$(proxy_json "$DOOMED_URL" "[r['status'] for r in j['log'] if r['op'] == 'UploadMultipart'][:1]")"
verify_local "kill mid-upload"

# --- 2. the emulator killed mid-download --------------------------------------------------------------------------

section "2. the emulator killed mid-download"

doomed_gcs
SHA2=$(make_shard "$E2E_TMP/files/kill-download.bin" "$SIZE")
vm seed "$DOOMED_URL" doomed 64MiB
fetch kill-download.bin "$SHA2"
expect_eq "kill mid-download: the shard is in the bucket (one multipart upload)" "[1, 1]" \
  "[$(json "j['uploads']['uploaded']" <<<"$OUT"), $(proxy_op "$DOOMED_URL" UploadMultipart)]"
vm vm2 "$DOOMED_URL" doomed 64MiB
printf 'tiers:\n  - name: slow\n    path: %s\n' "$E2E_TMP/vm2-slow" >"$E2E_TMP/slow-only.yaml"
timeout 30 "$DATAVO_BIN" --config "$E2E_TMP/slow-only.yaml" cache put "$(hash_for kill-download.bin)" \
  "$E2E_TMP/files/kill-download.bin" >/dev/null || fail "seed the slower folder tier" "cache put failed"
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=GetMedia count=3"
proxy_reset "$DOOMED_URL"
origin_before=$(server_requests /kill-download.bin)
background_fetch kill-download.bin "$SHA2"
wait_until 30 mid_transfer "$DOOMED_URL" GetMedia || fail "kill mid-download" "no download under way"
kill -KILL "$DOOMED_GCS_PID"
collect_fetch
served_ok "kill mid-download" "$SHA2" promoted
expect_eq "kill mid-download: the slower folder tier served it, promoted into the local one" local \
  "$(json "j['tier']" <<<"$OUT")"
expect_eq "kill mid-download: the origin was not asked" "$origin_before" "$(server_requests /kill-download.bin)"
expect_contains "kill mid-download: the tier degraded with a WARNING" "WARNING: tier 'bucket' (gcs): download failed" "$ERR"
verify_local "kill mid-download"

# --- 3. a 503 storm with Retry-After ------------------------------------------------------------------------------

section "3. a 503 storm with Retry-After"

SHA3=$(make_shard "$E2E_TMP/files/storm.bin" 200000)
vm vm3a "$GCSP_URL" $BUCKET 64MiB
fetch storm.bin "$SHA3"  # into the bucket
expect_eq "a short 503 storm: the shard is in the bucket" 1 "$(json "j['uploads']['uploaded']" <<<"$OUT")"
vm vm3 "$GCSP_URL" $BUCKET 64MiB
proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "status503 retry_after=1 count=2 op=GetMedia"
started=$(date +%s%N)
fetch storm.bin "$SHA3"
took=$((($(date +%s%N) - started) / 1000000))
served_ok "a short 503 storm" "$SHA3" promoted
expect_eq "a short 503 storm: two 503s, then the GET" "2 1" \
  "$(proxy_json "$GCSP_URL" "str(j['statuses']['GetMedia'].get('503', 0)) + ' ' + str(j['statuses']['GetMedia'].get('206', 0) + j['statuses']['GetMedia'].get('200', 0))")"
expect_cmp "a short 503 storm: Retry-After: 1 honoured twice (ms)" "$took" -ge 1900
expect_eq "a short 503 storm: no WARNING" "" "$(grep WARNING <<<"$ERR")"

pack_dataset gcsstorm 54 6 20000
start_origin "$E2E_TMP/store"
vm vm3w "$GCSP_URL" $BUCKET 64MiB
proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "status503 retry_after=1 op=GetMedia"
DATAVO_SERVER=$ORIGIN_URL run --json warm "$DS" --key bin --key txt --jobs 3
proxy_mode "$GCSP_URL" ok
expect_eq "a long 503 storm: warm succeeds, every shard from the origin" "[0, $SHARDS, 0]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "a long 503 storm: the breaker opened once" 1 "$(grep -c 'failed 3 times in a row' <<<"$ERR")"
gets=$(proxy_op "$GCSP_URL" GetMedia)
expect_eq "a long 503 storm: each failed lookup made 5 attempts (Retry-After honoured)" 0 "$((gets % 5))"
expect_cmp "a long 503 storm: then the bucket is skipped: failed lookups (of $SHARDS shards)" "$((gets / 5))" -le 5
expect_cmp "a long 503 storm: one WARNING per failed lookup and one for the breaker, none per skipped shard" \
  "$(grep -c "WARNING: tier 'bucket'" <<<"$ERR")" -le 6
verify_local "a long 503 storm"

# --- 4. the object rewritten between ranges -----------------------------------------------------------------------

section "4. the object rewritten between ranges (a new generation)"

SIZE4=$((11 * MIB + 5))
SHA4=$(make_shard "$E2E_TMP/files/generation.bin" "$SIZE4")
OBJ4=$(entry_name local "$(hash_for generation.bin)")
gcstool put $BUCKET "$OBJ4" "$E2E_TMP/files/generation.bin" --meta "datavo-sha256=$SHA4" --meta "datavo-size=$SIZE4" \
  2>/dev/null || die "put $OBJ4" ""
gen_before=$(generation $BUCKET "$OBJ4")
vm vm4 "$GCSP_URL" $BUCKET 5MiB  # a first range and 2 pinned ones
proxy_reset "$GCSP_URL"
# The 2 pinned ranges wait in the proxy while another writer puts the object again (same bytes, a new
# generation); setting the mode again releases them.
proxy_mode "$GCSP_URL" "delay seconds=60 op=GetMedia ifmatch=1 count=2"
DATAVO_LOG_LEVEL=info background_fetch generation.bin "$SHA4"
wait_until 30 pinned_arrived "$GCSP_URL" GetMedia 2 || fail "rewritten between ranges" "no pinned range"
gcstool put $BUCKET "$OBJ4" "$E2E_TMP/files/generation.bin" --meta "datavo-sha256=$SHA4" --meta "datavo-size=$SIZE4" \
  2>/dev/null
proxy_mode "$GCSP_URL" ok  # releases the held ranges
collect_fetch
expect_ne "rewritten between ranges: the object has a new generation" "$gen_before" "$(generation $BUCKET "$OBJ4")"
expect_eq "rewritten between ranges: the emulator answered the 2 ranges pinned to the old generation 206" \
  "[206, 206]" \
  "$(proxy_json "$GCSP_URL" "[r['status'] for r in j['log'] if r['op'] == 'GetMedia' and r['if_match'] == 'generation=$gen_before'][:2]")"
served_ok "rewritten between ranges" "$SHA4" promoted
expect_contains "rewritten between ranges: the object is read again" "changed while it was read; reading it again" "$ERR"
expect_eq "rewritten between ranges: 3 media GETs, then 3 again (the first range twice)" "6 2" \
  "$(proxy_json "$GCSP_URL" "str(j['ops']['GetMedia']) + ' ' + str(len([r for r in j['log'] if r['op'] == 'GetMedia' and r['range'] == 'bytes=0-5242879']))")"
expect_eq "rewritten between ranges: no WARNING (the restart succeeded)" "" "$(grep WARNING <<<"$ERR")"

vm vm4b "$GCSP_URL" $BUCKET 5MiB
proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "status412 code=PreconditionFailed op=GetMedia ifmatch=1 count=1"
DATAVO_LOG_LEVEL=info fetch generation.bin "$SHA4"
served_ok "one 412 to a pinned range (as GCS answers)" "$SHA4" promoted
expect_contains "one 412: the object is read again" "changed while it was read; reading it again" "$ERR"
vm vm4c "$GCSP_URL" $BUCKET 5MiB
proxy_mode "$GCSP_URL" "status412 code=PreconditionFailed op=GetMedia ifmatch=1"
fetch generation.bin "$SHA4"
proxy_mode "$GCSP_URL" ok
served_ok "412 on every pinned range" "$SHA4" fetched
expect_contains "412 on every pinned range: the tier degraded" "WARNING: tier 'bucket' (gcs): download failed" "$ERR"
verify_local "412 on every pinned range"

# --- 5. an object whose bytes do not match its metadata -----------------------------------------------------------

section "5. an object whose bytes do not match its metadata"

SHA5=$(make_shard "$E2E_TMP/files/lying.bin" 300000)
OBJ5=$(entry_name local "$(hash_for lying.bin)")
head -c 300000 /dev/urandom >"$E2E_TMP/rotten.bin"
ROTTEN=$(sha256_of "$E2E_TMP/rotten.bin")
gcstool put $BUCKET "$OBJ5" "$E2E_TMP/rotten.bin" --meta "datavo-sha256=$SHA5" --meta datavo-size=300000 2>/dev/null
vm vm5r "$GCSP_URL" $BUCKET 64MiB 'read_only: true'
run --json cache fetch "$(hash_for lying.bin)" --url "$SERVER_URL/lying.bin"  # no --sha256: only the metadata knows
served_ok "lying metadata, a read-only tier" "$SHA5" fetched
expect_contains "lying metadata, read-only: a WARNING" "WARNING: tier 'bucket'" "$ERR"
gcstool get $BUCKET "$OBJ5" "$E2E_TMP/now.bin" >/dev/null 2>&1
expect_eq "lying metadata, read-only: the object is left as it was" "$ROTTEN" "$(sha256_of "$E2E_TMP/now.bin")"
verify_local "lying metadata, read-only"
vm vm5 "$GCSP_URL" $BUCKET 64MiB
run --json cache fetch "$(hash_for lying.bin)" --url "$SERVER_URL/lying.bin"
served_ok "lying metadata" "$SHA5" fetched
expect_contains "lying metadata: deleted with a WARNING" "deleted the object" "$ERR"
gcstool get $BUCKET "$OBJ5" "$E2E_TMP/now.bin" >/dev/null 2>&1
expect_eq "lying metadata: the bucket now holds the good bytes" "$SHA5" "$(sha256_of "$E2E_TMP/now.bin")"
verify_local "lying metadata"

# --- 6. a bucket that does not exist ------------------------------------------------------------------------------

section "6. a bucket that does not exist"

SHA6=$(make_shard "$E2E_TMP/files/nobucket.bin" 100000)
vm vm6 "$GCSP_URL" datavo-not-yet 64MiB
fetch nobucket.bin "$SHA6"
served_ok "a bucket the emulator does not have" "$SHA6" fetched
expect_eq "the emulator: no WARNING (a missing bucket reads as a missing object), the upload creates it" \
  "[\"\", 1, \"$(entry_name local "$(hash_for nobucket.bin)")\"]" \
  "[\"$(grep WARNING <<<"$ERR")\", $(json "j['uploads']['uploaded']" <<<"$OUT"), \"$(gcstool list datavo-not-yet)\"]"

SHA7=$(make_shard "$E2E_TMP/files/gone.bin" 100000)
vm vm7 "$GCSP_URL" datavo-gone 64MiB
proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "status404 code=NoSuchBucket path=/b/datavo-gone"
fetch gone.bin "$SHA7"
proxy_mode "$GCSP_URL" ok
served_ok "a bucket that does not exist (as GCS answers)" "$SHA7" fetched
expect_contains "missing bucket: the WARNING says so" "the bucket datavo-gone does not exist" "$ERR"
expect_eq "missing bucket: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
expect_eq "missing bucket: nothing reached the emulator" "" "$(gcstool list datavo-gone 2>/dev/null)"
verify_local "missing bucket"

expect_eq "only entries in the bucket: no probe or stray object left" "" \
  "$(gcstool list $BUCKET | grep -v -E '^[^/]+/[0-9a-f]{64}\.tar$')"
echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
