#!/usr/bin/env bash
# Faults of an Azure Blob tier on Azurite, through `datavo cache fetch` and `datavo warm`, with
# tests/support/cloud_proxy.py between datavo and Azurite to count the Blob operations and make it misbehave. In
# every case the read succeeds (from a slower folder tier or the origin), the tier degrades with a WARNING, nothing
# bad is installed locally (the bytes served are checked, `cache verify` finds nothing bad, no staging file is left)
# or remotely (the container's blobs are listed and read back with @azure/storage-blob), and no secret (the
# account key, a SAS signature) appears in any output:
#   1. Azurite (a dedicated one) killed with SIGKILL mid-upload (during the Put Blocks): the read succeeds, the
#      upload is reported failed; the same Azurite started again on its data holds no committed blob (uncommitted
#      blocks are invisible);
#   2. that Azurite killed mid-download: the slower folder tier serves the shard, the origin is not asked;
#   3. a 503 storm with Retry-After: a short one is ridden out (Retry-After honoured); a long one opens the breaker
#      with one WARNING, and the origin serves every shard;
#   4. the blob rewritten between ranges (a new ETag): Azurite answers 412 to the pinned ranges' If-Match, the read
#      restarts once and succeeds; a 412 to every pinned range (the proxy): the origin serves;
#   5. a blob whose bytes do not match its metadata (datavo_sha256 lies): never installed, deleted from a writable
#      container and replaced by good bytes; left alone by a read-only tier;
#   6. a wrong account key and an expired SAS (se= an hour ago, signed with Azurite's account key): HTTP 403, the
#      WARNING and `cache check` name the tier (the error is permission_denied: not retried); a container that
#      does not exist.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)
MIB=$((1024 * 1024))
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

cloud_up azurite
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"  # SharedKey, unless a case says otherwise
start_proxy AZ "${AZURITE_BLOB_ENDPOINT%/"$AZURITE_ACCOUNT_NAME"}"
aztool create faults || die "create container faults" ""
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"
ALL_OUTPUT="$E2E_TMP/all-output"  # every datavo stdout and stderr, searched for secrets at the end

# vm NAME PROXY_URL CONTAINER [FIELD...]: $E2E_TMP/NAME.yaml (a local folder tier, the Azure tier "blob" through
# the proxy, a slower folder tier "slow"), made the config.
vm() {
  local name=$1 url=$2 container=$3
  shift 3
  write_config "$E2E_TMP/$name.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n  - name: slow\n    path: %s\n' \
    "$E2E_TMP/$name" "$(AZURITE_BLOB_ENDPOINT="$url/$AZURITE_ACCOUNT_NAME" azure_tier_yaml blob "$container" \
      'part_size: 5MiB' 'concurrency: 2' "$@")" "$E2E_TMP/$name-slow")
}

# fetch NAME SHA [ARGS...]: `cache fetch` of the file NAME from the origin, expecting SHA; sets RC OUT ERR.
fetch() {
  local name=$1 sha=$2
  shift 2
  run --json cache fetch "$(hash_for "$name")" --url "$SERVER_URL/$name" --sha256 "$sha" "$@"
  printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
}

# served_ok WHAT SHA SOURCE: the fetch succeeded from SOURCE with the right bytes, nothing left in staging.
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

# mid_transfer URL OP: a request of OP is under way and has moved bytes.
mid_transfer() {
  [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and not r['done'] and (r['bytes_out'] + r['bytes_in']) > 0])")" -gt 0 ]
}
# pinned_arrived URL OP N: N requests of OP pinned to a version (If-Match, ifGenerationMatch) have arrived.
pinned_arrived() { [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and r['if_match']])")" -ge "$3" ]; }

# doomed_azurite: an Azurite of its own, to be killed, started in $E2E_TMP/emulators-doomed (on the data a killed
# one left there, if any), behind a proxy of its own: DOOMED_URL (the proxy), DOOMED_AZ_PID, DOOMED_CS (its
# connection string, for the reference client).
DOOMED_RUN="$E2E_TMP/emulators-doomed"
on_exit_first "DATAVO_EMULATOR_RUN_DIR='$DOOMED_RUN' emulators_down >/dev/null 2>&1"
doomed_azurite() {
  local lines
  rm -f "$DOOMED_RUN/azurite.pid" "$DOOMED_RUN/azurite.port" "$DOOMED_RUN/azurite.start"  # a killed one
  lines=$(DATAVO_EMULATOR_RUN_DIR="$DOOMED_RUN" emu_up_print azurite 2>"$E2E_TMP/doomed.err") ||
    die "a dedicated Azurite" "$(cat "$E2E_TMP/doomed.err")"
  DOOMED_CS=$(sed -n "s/^export AZURITE_CONNECTION_STRING='\(.*\)'$/\1/p" <<<"$lines")
  DOOMED_AZ_PID=$(cat "$DOOMED_RUN/azurite.pid")
  start_proxy DOOMED "$(sed -n 's/^export AZURITE_BLOB_ENDPOINT=\(.*\)\/[^/]*$/\1/p' <<<"$lines")"
}

# background_fetch NAME SHA: fetch in the background (FETCHER); collect_fetch waits for it and sets RC OUT ERR.
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

SIZE=$((6 * MIB + 5))  # the killed transfers: 2 blocks or ranges of 5MiB
section() { echo "# $(($(date +%s) - SUITE_STARTED)) s: $1"; }

# --- 1. Azurite killed mid-upload ---------------------------------------------------------------------------------

section "1. Azurite killed mid-upload"

doomed_azurite
AZURITE_CONNECTION_STRING=$DOOMED_CS aztool create doomed || die "create container doomed" ""
# Azurite saves its metadata (LokiJS) every few seconds: the container must be on disk before the kill, so that
# the restart below has something to list.
wait_until 30 grep -q -a '"doomed"' "$DOOMED_RUN/azurite-data/__azurite_db_blob__.json" ||
  die "Azurite saved the container" "no 'doomed' in $DOOMED_RUN/azurite-data/__azurite_db_blob__.json"
SHA1=$(make_shard "$E2E_TMP/files/kill-upload.bin" "$SIZE")
vm vm1 "$DOOMED_URL" doomed
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=PutBlock count=2"
background_fetch kill-upload.bin "$SHA1"
wait_until 30 mid_transfer "$DOOMED_URL" PutBlock ||
  fail "kill mid-upload" "no upload under way: $(proxy_json "$DOOMED_URL" "[(r['op'], r['done'], r['bytes_in']) for r in j['log']]")"
kill -KILL "$DOOMED_AZ_PID"
collect_fetch
served_ok "kill mid-upload" "$SHA1" fetched
expect_eq "kill mid-upload: the upload is reported failed, the read is not" '[0, 1]' \
  "$(json "[j['uploads']['uploaded'], j['uploads']['failed']]" <<<"$OUT")"
expect_contains "kill mid-upload: a WARNING says the read succeeded" "(the read it served succeeded)" "$ERR"
expect_eq "kill mid-upload: no Put Block List was sent" 0 "$(proxy_op "$DOOMED_URL" PutBlockList)"
verify_local "kill mid-upload"
# The same Azurite again, on the data it left: the container, without a committed blob of the shard (its
# uncommitted blocks are not listed; the lease it held may be, until it expires).
doomed_azurite
AZURITE_CONNECTION_STRING=$DOOMED_CS aztool list doomed >"$E2E_TMP/doomed.list" 2>&1 ||
  fail "kill mid-upload: list the container after the restart" "$(cat "$E2E_TMP/doomed.list")"
expect_eq "kill mid-upload: Azurite restarted on its data: no committed blob of the shard" "" \
  "$(grep -E "^[^/]+/$(hash_for kill-upload.bin)\.tar$" "$E2E_TMP/doomed.list")"

# --- 2. Azurite killed mid-download -------------------------------------------------------------------------------

section "2. Azurite killed mid-download"

SHA2=$(make_shard "$E2E_TMP/files/kill-download.bin" "$SIZE")
vm seed "$DOOMED_URL" doomed
fetch kill-download.bin "$SHA2"
expect_eq "kill mid-download: the shard is in the container (2 Put Blocks, 1 Put Block List)" "[1, 2, 1]" \
  "[$(json "j['uploads']['uploaded']" <<<"$OUT"), $(proxy_op "$DOOMED_URL" PutBlock), $(proxy_op "$DOOMED_URL" PutBlockList)]"
vm vm2 "$DOOMED_URL" doomed
printf 'tiers:\n  - name: slow\n    path: %s\n' "$E2E_TMP/vm2-slow" >"$E2E_TMP/slow-only.yaml"
timeout 30 "$DATAVO_BIN" --config "$E2E_TMP/slow-only.yaml" cache put "$(hash_for kill-download.bin)" \
  "$E2E_TMP/files/kill-download.bin" >/dev/null || fail "seed the slower folder tier" "cache put failed"
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=GetBlob count=3"
proxy_reset "$DOOMED_URL"
origin_before=$(server_requests /kill-download.bin)
background_fetch kill-download.bin "$SHA2"
wait_until 30 mid_transfer "$DOOMED_URL" GetBlob || fail "kill mid-download" "no download under way"
kill -KILL "$DOOMED_AZ_PID"
collect_fetch
served_ok "kill mid-download" "$SHA2" promoted
expect_eq "kill mid-download: the slower folder tier served it, promoted into the local one" local \
  "$(json "j['tier']" <<<"$OUT")"
expect_eq "kill mid-download: the origin was not asked" "$origin_before" "$(server_requests /kill-download.bin)"
expect_contains "kill mid-download: the tier degraded with a WARNING" "WARNING: tier 'blob' (azure_blob): download failed" "$ERR"
verify_local "kill mid-download"

# --- 3. a 503 storm with Retry-After ------------------------------------------------------------------------------

section "3. a 503 storm with Retry-After"

SHA3=$(make_shard "$E2E_TMP/files/storm.bin" 200000)
vm vm3a "$AZ_URL" faults
fetch storm.bin "$SHA3"  # into the container
vm vm3 "$AZ_URL" faults
proxy_reset "$AZ_URL"
proxy_mode "$AZ_URL" "status503 retry_after=1 count=2 op=GetBlob"
started=$(date +%s%N)
fetch storm.bin "$SHA3"
took=$((($(date +%s%N) - started) / 1000000))
served_ok "a short 503 storm" "$SHA3" promoted
expect_eq "a short 503 storm: two 503s (ServerBusy), then the GET" "2 1" \
  "$(proxy_json "$AZ_URL" "str(j['statuses']['GetBlob'].get('503', 0)) + ' ' + str(j['statuses']['GetBlob'].get('206', 0) + j['statuses']['GetBlob'].get('200', 0))")"
expect_cmp "a short 503 storm: Retry-After: 1 honoured twice (ms)" "$took" -ge 1900
expect_eq "a short 503 storm: no WARNING" "" "$(grep WARNING <<<"$ERR")"

pack_dataset azstorm 54 6 20000
start_origin "$E2E_TMP/store"
vm vm3w "$AZ_URL" faults
proxy_reset "$AZ_URL"
proxy_mode "$AZ_URL" "status503 retry_after=1 op=GetBlob"
DATAVO_SERVER=$ORIGIN_URL run --json warm "$DS" --key bin --key txt --jobs 3
printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
proxy_mode "$AZ_URL" ok
expect_eq "a long 503 storm: warm succeeds, every shard from the origin" "[0, $SHARDS, 0]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "a long 503 storm: the breaker opened once" 1 "$(grep -c 'failed 3 times in a row' <<<"$ERR")"
gets=$(proxy_op "$AZ_URL" GetBlob)
expect_eq "a long 503 storm: each failed lookup made 5 attempts (Retry-After honoured)" 0 "$((gets % 5))"
expect_cmp "a long 503 storm: then the container is skipped: failed lookups (of $SHARDS shards)" "$((gets / 5))" -le 5
expect_cmp "a long 503 storm: one WARNING per failed lookup and one for the breaker, none per skipped shard" \
  "$(grep -c "WARNING: tier 'blob'" <<<"$ERR")" -le 6
verify_local "a long 503 storm"

# --- 4. the blob rewritten between ranges -------------------------------------------------------------------------

section "4. the blob rewritten between ranges (a new ETag)"

SIZE4=$((12 * MIB + 5))  # a first range and 2 pinned ones
SHA4=$(make_shard "$E2E_TMP/files/etag.bin" "$SIZE4")
vm vm4a "$AZ_URL" faults
fetch etag.bin "$SHA4"
OBJ4=$(entry_name local "$(hash_for etag.bin)")
etag_before=$(aztool head faults "$OBJ4" | json "j['etag']")
vm vm4 "$AZ_URL" faults
proxy_reset "$AZ_URL"
# The 2 pinned ranges wait in the proxy while another writer puts the blob again (same bytes, a new ETag); setting
# the mode again releases them.
proxy_mode "$AZ_URL" "delay seconds=60 op=GetBlob ifmatch=1 count=2"
DATAVO_LOG_LEVEL=info background_fetch etag.bin "$SHA4"
wait_until 30 pinned_arrived "$AZ_URL" GetBlob 2 || fail "rewritten between ranges" "no pinned range"
aztool put faults "$OBJ4" "$E2E_TMP/files/etag.bin" --meta "datavo_sha256=$SHA4" --meta "datavo_size=$SIZE4" 2>/dev/null
proxy_mode "$AZ_URL" ok  # releases the held ranges
collect_fetch
expect_ne "rewritten between ranges: the blob has a new ETag" "$etag_before" "$(aztool head faults "$OBJ4" | json "j['etag']")"
served_ok "rewritten between ranges" "$SHA4" promoted
expect_eq "rewritten between ranges: Azurite refused the 2 pinned ranges (412 to If-Match)" 2 \
  "$(proxy_json "$AZ_URL" "j['statuses']['GetBlob'].get('412', 0)")"
expect_contains "rewritten between ranges: the blob is read again" "changed while it was read; reading it again" "$ERR"
expect_eq "rewritten between ranges: 3 GETs, then 3 again (the first range twice)" "6 2" \
  "$(proxy_json "$AZ_URL" "str(j['ops']['GetBlob']) + ' ' + str(len([r for r in j['log'] if r['op'] == 'GetBlob' and r['range'] == 'bytes=0-5242879']))")"
expect_eq "rewritten between ranges: no WARNING (the restart succeeded)" "" "$(grep WARNING <<<"$ERR")"
vm vm4b "$AZ_URL" faults
proxy_mode "$AZ_URL" "status412 op=GetBlob ifmatch=1"
fetch etag.bin "$SHA4"
proxy_mode "$AZ_URL" ok
served_ok "412 on every pinned range" "$SHA4" fetched
expect_contains "412 on every pinned range: the tier degraded" "WARNING: tier 'blob' (azure_blob): download failed" "$ERR"
verify_local "412 on every pinned range"

# --- 5. a blob whose bytes do not match its metadata --------------------------------------------------------------

section "5. a blob whose bytes do not match its metadata"

SHA5=$(make_shard "$E2E_TMP/files/lying.bin" 300000)
OBJ5=$(entry_name local "$(hash_for lying.bin)")
head -c 300000 /dev/urandom >"$E2E_TMP/rotten.bin"
ROTTEN=$(sha256_of "$E2E_TMP/rotten.bin")
aztool put faults "$OBJ5" "$E2E_TMP/rotten.bin" --meta "datavo_sha256=$SHA5" --meta datavo_size=300000 2>/dev/null
vm vm5r "$AZ_URL" faults 'read_only: true'
run --json cache fetch "$(hash_for lying.bin)" --url "$SERVER_URL/lying.bin"  # no --sha256: only the metadata knows
printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
served_ok "lying metadata, a read-only tier" "$SHA5" fetched
expect_contains "lying metadata, read-only: a WARNING" "WARNING: tier 'blob'" "$ERR"
aztool get faults "$OBJ5" "$E2E_TMP/now.bin" >/dev/null 2>&1
expect_eq "lying metadata, read-only: the blob is left as it was" "$ROTTEN" "$(sha256_of "$E2E_TMP/now.bin")"
verify_local "lying metadata, read-only"
vm vm5 "$AZ_URL" faults
run --json cache fetch "$(hash_for lying.bin)" --url "$SERVER_URL/lying.bin"
printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
served_ok "lying metadata" "$SHA5" fetched
expect_contains "lying metadata: deleted with a WARNING" "deleted the object" "$ERR"
aztool get faults "$OBJ5" "$E2E_TMP/now.bin" >/dev/null 2>&1
expect_eq "lying metadata: the container now holds the good bytes" "$SHA5" "$(sha256_of "$E2E_TMP/now.bin")"
verify_local "lying metadata"

# --- 6. a wrong key, an expired SAS, a container that does not exist ----------------------------------------------

section "6. a wrong account key, an expired SAS, a container that does not exist"

before=$(aztool list faults)
WRONG_KEY=$(head -c 64 /dev/urandom | base64 -w0)
WRONG_CS="DefaultEndpointsProtocol=http;AccountName=$AZURITE_ACCOUNT_NAME;AccountKey=$WRONG_KEY;BlobEndpoint=$AZURITE_BLOB_ENDPOINT;"
SHA6=$(make_shard "$E2E_TMP/files/wrongkey.bin" 100000)
vm vm6 "$AZ_URL" faults
proxy_reset "$AZ_URL"
AZURE_STORAGE_CONNECTION_STRING=$WRONG_CS fetch wrongkey.bin "$SHA6"
served_ok "a wrong account key" "$SHA6" fetched
expect_contains "wrong key: the WARNING names the tier and says 403" \
  "WARNING: tier 'blob' (azure_blob): download failed, skipping it: GET $AZ_URL/" "$ERR"
expect_contains "wrong key: ... HTTP 403, the authentication refused" "HTTP 403 Server failed to authenticate" "$ERR"
expect_eq "wrong key: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
expect_eq "wrong key: the refused GET was not retried (one 403)" 1 "$(proxy_json "$AZ_URL" "j['statuses']['GetBlob'].get('403', 0)")"
AZURE_STORAGE_CONNECTION_STRING=$WRONG_CS run --json cache check
printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
expect_eq "wrong key: cache check fails" 1 "$RC"
expect_eq "wrong key: cache check: the tier is not usable, its put probe refused with 403" '[false, false, true]' \
  "$(json "[[t['ok'], [s['ok'] for s in t['steps'] if s['step'] == 'put'][0], 'HTTP 403' in [s['detail'] for s in t['steps'] if s['step'] == 'put'][0]] for t in j['tiers'] if t['tier'] == 'blob'][0]" <<<"$OUT")"
expect_eq "wrong key: never in the output" "" "$(grep -l -F "$WRONG_KEY" <<<"$OUT$ERR")"
expect_eq "wrong key: nothing was written to the container" "$before" "$(aztool list faults)"

SAS=$(aztool sas faults --expired) || die "make an expired SAS" ""
SE=$(sed -n 's/.*[?&]se=\([^&]*\).*/\1/p' <<<"$SAS" | python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read().strip()))')
expect_cmp "expired SAS: its se= is in the past (s)" "$(date -d "$SE" +%s)" -lt "$(($(date +%s) - 3000))"
SIG=$(sed -n 's/.*[?&]sig=\([^&]*\).*/\1/p' <<<"$SAS")
SHA7=$(make_shard "$E2E_TMP/files/expired.bin" 100000)
vm vm7 "$AZ_URL" faults "sas_token: \"$SAS\""
unset AZURE_STORAGE_CONNECTION_STRING  # the SAS alone
fetch expired.bin "$SHA7"
served_ok "an expired SAS" "$SHA7" fetched
expect_contains "expired SAS: the WARNING names the tier" \
  "WARNING: tier 'blob' (azure_blob): download failed, skipping it: GET $AZ_URL/" "$ERR"
expect_contains "expired SAS: ... HTTP 403, the authentication refused" "HTTP 403 Server failed to authenticate" "$ERR"
run --json cache check
printf '%s\n%s\n' "$OUT" "$ERR" >>"$ALL_OUTPUT"
expect_eq "expired SAS: cache check fails" 1 "$RC"
expect_eq "expired SAS: cache check: the tier is not usable, its put probe refused with 403" '[false, false, true]' \
  "$(json "[[t['ok'], [s['ok'] for s in t['steps'] if s['step'] == 'put'][0], 'HTTP 403' in [s['detail'] for s in t['steps'] if s['step'] == 'put'][0]] for t in j['tiers'] if t['tier'] == 'blob'][0]" <<<"$OUT")"
expect_eq "expired SAS: nothing was written to the container" "$before" "$(aztool list faults)"
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"

SHA8=$(make_shard "$E2E_TMP/files/nocontainer.bin" 100000)
vm vm8 "$AZ_URL" no-such-container
fetch nocontainer.bin "$SHA8"
served_ok "a container that does not exist" "$SHA8" fetched
expect_contains "missing container: the WARNING says so" "no-such-container does not exist" "$ERR"
expect_eq "missing container: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
aztool list no-such-container >/dev/null 2>&1 && rc=0 || rc=$?
expect_ne "missing container: still not there" 0 "$rc"
verify_local "missing container"

expect_eq "no account key in any output" "" "$(grep -o -F -e "$AZURITE_ACCOUNT_KEY" "$ALL_OUTPUT" | head -1)"
expect_eq "no SAS signature in any output" "" "$(grep -o -F -e "$SIG" -e "sig=" "$ALL_OUTPUT" | head -1)"
expect_eq "only entries in the container: no lease or probe left" "" \
  "$(aztool list faults | grep -v -E '^[^/]+/[0-9a-f]{64}\.tar$')"
echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
