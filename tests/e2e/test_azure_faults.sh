#!/usr/bin/env bash
# Faults of an Azure Blob tier on Azurite, through `datavo cache fetch` and `datavo warm`: the scenarios every cloud
# flavour runs (tests/e2e/cloud_faults_lib.sh: Azurite killed mid-upload and mid-download, 503 storms, the blob
# rewritten between ranges and 412s to pinned ranges, lying metadata, a missing container), with Azure's own
# checks, and Azure's own scenarios; no secret (the account key, a SAS signature) appears in any output:
#   - Azurite killed mid-upload (during the Put Blocks): no Put Block List was sent, and the same Azurite started
#     again on its data holds no committed blob (uncommitted blocks are invisible);
#   - the blob rewritten between ranges: Azurite answers 412 to the pinned ranges' If-Match;
#   - a wrong account key and an expired SAS (se= an hour ago, signed with Azurite's account key): HTTP 403, the
#     WARNING and `cache check` name the tier (the error is permission_denied: not retried).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
. "$(dirname "$0")/cloud_faults_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

FLAVOUR=azure CF_TIER=blob CF_TYPE=azure_blob CF_BUCKET=faults CF_PART=5MiB
# The dedicated Azurite of the kill scenarios starts with the shared one.
DOOMED_RUN="$E2E_TMP/emulators-doomed"
cf_prestart azurite "$DOOMED_RUN"
cloud_up azurite
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"  # SharedKey, unless a case says otherwise
start_cloud_proxy AZ "${AZURITE_BLOB_ENDPOINT%/"$AZURITE_ACCOUNT_NAME"}"
CF_URL=$AZ_URL
aztool create faults || die "create container faults" ""
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# --- the flavour's adapter (cloud_faults_lib.sh) ------------------------------------------------------------------

cf_tier_yaml() {
  local url=$1 container=$2 part=$3
  shift 3
  AZURITE_BLOB_ENDPOINT="$url/$AZURITE_ACCOUNT_NAME" azure_tier_yaml "$CF_TIER" "$container" "part_size: $part" "$@"
}

# The dedicated Azurite (to be killed) of the export lines CF_LINES, behind a proxy of its own; DOOMED_CS: its
# connection string, for the reference client.
doomed_azurite() {
  DOOMED_CS=$(sed -n "s/^export AZURITE_CONNECTION_STRING='\(.*\)'$/\1/p" <<<"$CF_LINES")
  cf_doomed_server "$DOOMED_RUN" azurite
  DOOMED_BUCKET=doomed
  start_cloud_proxy DOOMED "$(sed -n 's/^export AZURITE_BLOB_ENDPOINT=\(.*\)\/[^/]*$/\1/p' <<<"$CF_LINES")"
}
cf_doomed_up() {
  cf_started "$DOOMED_RUN"
  doomed_azurite
  AZURITE_CONNECTION_STRING=$DOOMED_CS aztool create doomed || die "create container doomed" ""
  # Azurite saves its metadata (LokiJS) every few seconds: the container must be on disk before the kill, so that
  # the restart after it has something to list.
  wait_until 30 grep -q -a '"doomed"' "$DOOMED_RUN/azurite-data/__azurite_db_blob__.json" ||
    die "Azurite saved the container" "no 'doomed' in $DOOMED_RUN/azurite-data/__azurite_db_blob__.json"
}
# The killed Azurite started again on the data it left in $DOOMED_RUN.
restart_doomed_azurite() {
  rm -f "$DOOMED_RUN/azurite.pid" "$DOOMED_RUN/azurite.port" "$DOOMED_RUN/azurite.start"
  CF_LINES=$(DATAVO_EMULATOR_RUN_DIR="$DOOMED_RUN" emu_up_print azurite 2>"$E2E_TMP/doomed.err") ||
    die "restart the dedicated Azurite" "$(cat "$E2E_TMP/doomed.err")"
  doomed_azurite
}

cf_put() { aztool put "$1" "$2" "$3" --meta "datavo_sha256=$4" --meta "datavo_size=$5" 2>/dev/null; }
cf_get() { aztool get "$1" "$2" "$3" >/dev/null 2>&1; }
cf_version() { aztool head "$1" "$2" | json "j['etag']"; }

# --- the shared scenarios, with Azure's own checks ----------------------------------------------------------------

cf_kill_mid_upload $((6 * MIB + 5)) UploadPart  # 2 blocks of 5MiB
expect_eq "kill mid-upload: no Put Block List was sent" 0 "$(proxy_op "$DOOMED_URL" CompleteMultipartUpload)"
# The same Azurite again, on the data it left: the container, without a committed blob of the shard (its
# uncommitted blocks are not listed; the lease it held may be, until it expires).
restart_doomed_azurite
AZURITE_CONNECTION_STRING=$DOOMED_CS aztool list doomed >"$E2E_TMP/doomed.list" 2>&1 ||
  fail "kill mid-upload: list the container after the restart" "$(cat "$E2E_TMP/doomed.list")"
expect_eq "kill mid-upload: Azurite restarted on its data: no committed blob of the shard" "" \
  "$(grep -E "^[^/]+/$(hash_for "$KILLED_NAME")\.tar$" "$E2E_TMP/doomed.list")"

cf_kill_mid_download $((6 * MIB + 5))  # on the restarted Azurite
expect_eq "kill mid-download: the shard went up as 2 Put Blocks and 1 Put Block List" "[2, 1]" \
  "$(json "[j.get('UploadPart', 0), j.get('CompleteMultipartUpload', 0)]" <<<"$SEED_COUNTS")"

section "a 503 storm with Retry-After"
cf_short_storm
pack_dataset azstorm 54 6 20000
start_origin "$E2E_TMP/store"
cf_long_storm "$ORIGIN_URL" "$DS" "$SHARDS"

cf_rewrite_between_ranges "[412, 412]"  # If-Match refused
cf_one_412
cf_every_412
cf_lying_metadata

# --- a wrong key, an expired SAS, a container that does not exist -------------------------------------------------

section "a wrong account key"
before=$(aztool list faults)
WRONG_KEY=$(head -c 64 /dev/urandom | base64 -w0)
WRONG_CS="DefaultEndpointsProtocol=http;AccountName=$AZURITE_ACCOUNT_NAME;AccountKey=$WRONG_KEY;BlobEndpoint=$AZURITE_BLOB_ENDPOINT;"
SHA6=$(make_shard "$E2E_TMP/files/wrongkey.bin" 100000)
cf_vm vm-wrong-key "$AZ_URL" faults 5MiB
proxy_reset "$AZ_URL"
AZURE_STORAGE_CONNECTION_STRING=$WRONG_CS fetch wrongkey.bin "$SHA6"
served_ok "a wrong account key" "$SHA6" fetched
expect_contains "wrong key: the WARNING names the tier and says 403" \
  "WARNING: tier 'blob' (azure_blob): download failed, skipping it: GET $AZ_URL/" "$ERR"
expect_contains "wrong key: ... HTTP 403, the authentication refused" "HTTP 403 Server failed to authenticate" "$ERR"
expect_eq "wrong key: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
expect_eq "wrong key: the refused GET was not retried (one 403)" 1 "$(proxy_json "$AZ_URL" "j['statuses']['GetObject'].get('403', 0)")"
AZURE_STORAGE_CONNECTION_STRING=$WRONG_CS run --json cache check
printf '%s\n%s\n' "$OUT" "$ERR" >>"$CF_ALL_OUTPUT"
expect_eq "wrong key: cache check fails" 1 "$RC"
PUT_PROBE="[[t['ok'], [s['ok'] for s in t['steps'] if s['step'] == 'put'][0], 'HTTP 403' in [s['detail'] for s in t['steps'] if s['step'] == 'put'][0]] for t in j['tiers'] if t['tier'] == 'blob'][0]"
expect_eq "wrong key: cache check: the tier is not usable, its put probe refused with 403" '[false, false, true]' \
  "$(json "$PUT_PROBE" <<<"$OUT")"
expect_eq "wrong key: never in the output" "" "$(grep -l -F "$WRONG_KEY" <<<"$OUT$ERR")"
expect_eq "wrong key: nothing was written to the container" "$before" "$(aztool list faults)"

section "an expired SAS"
SAS=$(aztool sas faults --expired) || die "make an expired SAS" ""
SE=$(sed -n 's/.*[?&]se=\([^&]*\).*/\1/p' <<<"$SAS" | python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read().strip()))')
expect_cmp "expired SAS: its se= is in the past (s)" "$(date -d "$SE" +%s)" -lt "$(($(date +%s) - 3000))"
SIG=$(sed -n 's/.*[?&]sig=\([^&]*\).*/\1/p' <<<"$SAS")
SHA7=$(make_shard "$E2E_TMP/files/expired.bin" 100000)
cf_vm vm-expired "$AZ_URL" faults 5MiB "sas_token: \"$SAS\""
unset AZURE_STORAGE_CONNECTION_STRING  # the SAS alone
fetch expired.bin "$SHA7"
served_ok "an expired SAS" "$SHA7" fetched
expect_contains "expired SAS: the WARNING names the tier" \
  "WARNING: tier 'blob' (azure_blob): download failed, skipping it: GET $AZ_URL/" "$ERR"
expect_contains "expired SAS: ... HTTP 403, the authentication refused" "HTTP 403 Server failed to authenticate" "$ERR"
run --json cache check
printf '%s\n%s\n' "$OUT" "$ERR" >>"$CF_ALL_OUTPUT"
expect_eq "expired SAS: cache check fails" 1 "$RC"
expect_eq "expired SAS: cache check: the tier is not usable, its put probe refused with 403" '[false, false, true]' \
  "$(json "$PUT_PROBE" <<<"$OUT")"
expect_eq "expired SAS: nothing was written to the container" "$before" "$(aztool list faults)"
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"

section "a container that does not exist"
cf_missing_container no-such-container "no-such-container does not exist"
aztool list no-such-container >/dev/null 2>&1 && rc=0 || rc=$?
expect_ne "missing container: still not there" 0 "$rc"

expect_eq "no account key in any output" "" "$(grep -o -F -e "$AZURITE_ACCOUNT_KEY" "$CF_ALL_OUTPUT" | head -1)"
expect_eq "no SAS signature in any output" "" "$(grep -o -F -e "$SIG" -e "sig=" "$CF_ALL_OUTPUT" | head -1)"
expect_eq "only entries in the container: no lease or probe left" "" \
  "$(aztool list faults | grep -v -E '^[^/]+/[0-9a-f]{64}\.tar$')"
echo "# suite took $(($(date +%s) - CF_STARTED)) s"
finish
