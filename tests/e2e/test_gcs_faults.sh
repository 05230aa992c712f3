#!/usr/bin/env bash
# Faults of a GCS tier on the firebase-tools Storage emulator, through `datavo cache fetch` and `datavo warm`: the
# scenarios every cloud flavour runs (tests/e2e/cloud_faults_lib.sh: the emulator killed mid-upload and
# mid-download, 503 storms, the object rewritten between ranges and 412s to pinned ranges, lying metadata, a
# missing bucket), with what is GCS's own:
#   - the emulator killed mid-upload (uploadType=multipart): the upload was never answered (the emulator keeps its
#     objects in memory: nothing of it survives the kill to be listed);
#   - the object rewritten between ranges (a new generation). The emulator IGNORES ifGenerationMatch on media
#     downloads: it answers the ranges pinned to the old generation 206, with the new generation's bytes and
#     x-goog-generation. Datavo checks that header against the pin, so the read restarts once and succeeds
#     (before that check, this test found the ranges of two generations read as one object). The 412 real GCS
#     answers is shown through the proxy (and in tests/unit/tier/gcs/test_gcs_tier.cpp, against the fake store);
#   - a bucket that does not exist: the emulator creates buckets on the first write and answers a read of a missing
#     one as a missing object (so the first upload creates it); as GCS answers (404 "The specified bucket does not
#     exist.", through the proxy): the WARNING names the bucket, the upload fails, the read does not.
# The emulator takes no credentials (STORAGE_EMULATOR_HOST): there is no secret to leak here; the refusal of a token
# is covered by tests/unit/tier/gcs/test_gcs_tier.cpp against the fake store. single_flight: false throughout (the
# emulator ignores ifGenerationMatch=0 too, see test_gcs_cli.sh), and uploads stay under part_size (64MiB): the
# emulator cannot take resumable uploads in chunks; the ranged reads use objects the reference client wrote.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
. "$(dirname "$0")/cloud_faults_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

FLAVOUR=gcs CF_TIER=bucket CF_TYPE=gcs CF_BUCKET=datavo-faults CF_PART=64MiB
# The two dedicated emulators of the kill scenarios start with the shared one.
DOOMED_RUNS=("$E2E_TMP/doomed-1" "$E2E_TMP/doomed-2")
cf_prestart gcs "${DOOMED_RUNS[0]}"
cf_prestart gcs "${DOOMED_RUNS[1]}"
cloud_up gcs
start_cloud_proxy GCSP "$GCS_EMULATOR_ENDPOINT"
CF_URL=$GCSP_URL
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# --- the flavour's adapter (cloud_faults_lib.sh) ------------------------------------------------------------------

cf_tier_yaml() {
  local url=$1 bucket=$2 part=$3
  shift 3
  gcs_tier_yaml "$CF_TIER" "$bucket" "endpoint_url: $url" 'single_flight: false' "part_size: $part" "$@"
}

# The next dedicated emulator, to be killed, behind a proxy of its own.
cf_doomed_up() {
  cf_started "${DOOMED_RUNS[0]}"
  cf_doomed_server "${DOOMED_RUNS[0]}" gcs
  DOOMED_RUNS=("${DOOMED_RUNS[@]:1}")
  DOOMED_BUCKET=doomed
  start_cloud_proxy DOOMED "$(sed -n 's/^export GCS_EMULATOR_ENDPOINT=//p' <<<"$CF_LINES")"
}

cf_put() { gcstool put "$1" "$2" "$3" --meta "datavo-sha256=$4" --meta "datavo-size=$5" 2>/dev/null; }
cf_get() { gcstool get "$1" "$2" "$3" >/dev/null 2>&1; }
cf_version() { echo "generation=$(gcstool head "$1" "$2" | json "j['generation']")"; }

# --- the shared scenarios, with GCS's own checks ------------------------------------------------------------------

cf_kill_mid_upload $((6 * MIB + 5)) PutObject  # one uploadType=multipart request
expect_eq "kill mid-upload: the upload was never answered" "[null]" \
  "$(proxy_json "$DOOMED_URL" "[r['status'] for r in j['log'] if r['op'] == 'PutObject'][:1]")"

cf_kill_mid_download $((6 * MIB + 5))  # a first range, and one pinned
expect_eq "kill mid-download: the shard went up as one multipart upload" 1 "$(json "j.get('PutObject', 0)" <<<"$SEED_COUNTS")"

section "a 503 storm with Retry-After"
cf_short_storm
pack_dataset gcsstorm 54 6 20000
start_origin "$E2E_TMP/store"
cf_long_storm "$ORIGIN_URL" "$DS" "$SHARDS"

cf_rewrite_between_ranges "[206, 206]"  # ifGenerationMatch ignored; x-goog-generation gives the new one away
cf_one_412 PreconditionFailed
cf_every_412 PreconditionFailed
cf_lying_metadata

# --- a bucket that does not exist ---------------------------------------------------------------------------------

section "a bucket that does not exist"
SHA6=$(make_shard "$E2E_TMP/files/nobucket.bin" 100000)
cf_vm vm-not-yet "$GCSP_URL" datavo-not-yet 64MiB
fetch nobucket.bin "$SHA6"
served_ok "a bucket the emulator does not have" "$SHA6" fetched
expect_eq "the emulator: no WARNING (a missing bucket reads as a missing object), the upload creates it" \
  "[\"\", 1, \"$(object_of nobucket.bin)\"]" \
  "[\"$(grep WARNING <<<"$ERR")\", $(json "j['uploads']['uploaded']" <<<"$OUT"), \"$(gcstool list datavo-not-yet)\"]"

proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "status404 code=NoSuchBucket path=/b/datavo-gone"
cf_missing_container datavo-gone "the bucket datavo-gone does not exist"
proxy_mode "$GCSP_URL" ok
expect_eq "missing bucket: nothing reached the emulator" "" "$(gcstool list datavo-gone 2>/dev/null)"

expect_eq "only entries in the bucket: no probe or stray object left" "" \
  "$(gcstool list "$CF_BUCKET" | grep -v -E '^[^/]+/[0-9a-f]{64}\.tar$')"
echo "# suite took $(($(date +%s) - CF_STARTED)) s"
finish
