#!/usr/bin/env bash
# Faults of an S3 tier on moto (and s3rver, which checks signatures), through `datavo cache fetch` and
# `datavo warm`: the scenarios every cloud flavour runs (tests/e2e/cloud_faults_lib.sh: the server killed
# mid-upload and mid-download, 503 storms, 412s between ranges, lying metadata, a missing bucket), and S3's own:
#   - no multipart upload is left open (ListMultipartUploads on moto) after any of them;
#   - the parts of a multipart upload refused (the server going away for UploadPart only): aborted, none open;
#   - a wrong secret (s3rver: SignatureDoesNotMatch, permission_denied), never shown.
# S3 has no rewrite between ranges here: its ETag is the MD5 of the bytes, so a rewrite with the same bytes keeps
# it (If-Match still holds); the 412 that S3 answers to a changed object is shown through the proxy.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
. "$(dirname "$0")/cloud_faults_lib.sh"
E2E_CMD_TIMEOUT=120

FLAVOUR=s3 CF_TIER=bucket CF_TYPE=s3 CF_BUCKET=faults CF_PART=5MiB
# The two dedicated motos of the kill scenarios start with the shared ones.
DOOMED_RUNS=("$E2E_TMP/doomed-1" "$E2E_TMP/doomed-2")
cf_prestart moto "${DOOMED_RUNS[0]}"
cf_prestart moto "${DOOMED_RUNS[1]}"
s3_up s3rver moto
start_cloud_proxy MOTO "$MOTO_S3_ENDPOINT"
CF_URL=$MOTO_URL
make_bucket "$MOTO_S3_ENDPOINT" faults
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# --- the flavour's adapter (cloud_faults_lib.sh) ------------------------------------------------------------------

cf_tier_yaml() {
  local url=$1 bucket=$2 part=$3
  shift 3
  s3_tier_yaml "$CF_TIER" "$bucket" "$url" "part_size: $part" "$@"
}

# The next dedicated moto, to be killed (moto keeps its state in memory: each one starts empty).
cf_doomed_up() {
  local endpoint
  cf_started "${DOOMED_RUNS[0]}"
  cf_doomed_server "${DOOMED_RUNS[0]}" moto
  DOOMED_RUNS=("${DOOMED_RUNS[@]:1}")
  endpoint=$(sed -n 's/^export MOTO_S3_ENDPOINT=//p' <<<"$CF_LINES")
  DOOMED_BUCKET=doomed
  make_bucket "$endpoint" "$DOOMED_BUCKET"
  start_cloud_proxy DOOMED "$endpoint"
}

cf_put() { s3tool "$MOTO_S3_ENDPOINT" put "$1" "$2" "$3" "datavo-sha256=$4" "datavo-size=$5"; }
cf_get() { s3tool "$MOTO_S3_ENDPOINT" get "$1" "$2" "$3"; }
cf_version() { s3tool "$MOTO_S3_ENDPOINT" head "$1" "$2" | json "j['etag']"; }

open_uploads() { s3tool "$MOTO_S3_ENDPOINT" uploads faults; }

# --- the shared scenarios -----------------------------------------------------------------------------------------

cf_kill_mid_upload $((12 * MIB + 5)) UploadPart
echo "# (the killed moto kept its state in memory: its open uploads died with it; the refused parts below check the abort)"
cf_kill_mid_download $((12 * MIB + 5))

section "a 503 storm with Retry-After"
cf_short_storm
pack_dataset 54 6 20000
start_origin "$E2E_TMP/store"
cf_long_storm "$ORIGIN_URL" "$DS" "$SHARDS"

cf_one_412
cf_every_412
cf_lying_metadata
section "a bucket that does not exist"
cf_missing_container no-such-bucket "the bucket no-such-bucket does not exist"
expect_eq "moto: no multipart upload left open after the shared scenarios" 0 "$(open_uploads)"

# --- the parts of a multipart upload refused ----------------------------------------------------------------------

section "the parts of a multipart upload refused"
SHA3=$(make_shard "$E2E_TMP/files/parts.bin" $((12 * MIB + 5)))
cf_vm vm-parts "$MOTO_URL" faults 5MiB
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "drop op=UploadPart after=1"
fetch parts.bin "$SHA3"
proxy_mode "$MOTO_URL" ok
served_ok "parts refused" "$SHA3" fetched
expect_eq "parts refused: the upload failed" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
expect_eq "parts refused: the upload was aborted" 1 "$(proxy_op "$MOTO_URL" AbortMultipartUpload)"
expect_eq "parts refused: no multipart upload left open" 0 "$(open_uploads)"
s3tool "$MOTO_S3_ENDPOINT" head faults "$(object_of parts.bin)" >/dev/null && rc=0 || rc=$?
expect_eq "parts refused: no object in the bucket" 3 "$rc"

# --- a wrong secret -----------------------------------------------------------------------------------------------

section "a wrong secret"
SHA8=$(make_shard "$E2E_TMP/files/secret.bin" 100000)
cf_vm vm-secret "$S3RVER_ENDPOINT" "$S3RVER_BUCKET" 5MiB 'single_flight: false'
AWS_ACCESS_KEY_ID=$S3RVER_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=not-the-secret fetch secret.bin "$SHA8"
served_ok "a wrong secret (s3rver)" "$SHA8" fetched
expect_contains "wrong secret: the WARNING says the credentials were refused" "HTTP 403" "$ERR"
AWS_ACCESS_KEY_ID=$S3RVER_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=not-the-secret run --json cache check
expect_eq "wrong secret: cache check fails" 1 "$RC"
expect_contains "wrong secret: the put probe says SignatureDoesNotMatch" "SignatureDoesNotMatch" "$OUT"
expect_eq "wrong secret: it never appears in the output" "" "$(grep -l not-the-secret <<<"$OUT$ERR")"
AWS_ACCESS_KEY_ID=$S3RVER_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$S3RVER_SECRET_ACCESS_KEY \
  s3tool "$S3RVER_ENDPOINT" ls "$S3RVER_BUCKET" >"$E2E_TMP/rver-ls.json"
expect_eq "wrong secret: nothing was written to the bucket" 0 "$(json "len(j)" <"$E2E_TMP/rver-ls.json")"

expect_eq "moto: no multipart upload left open at the end" 0 "$(open_uploads)"
echo "# suite took $(($(date +%s) - CF_STARTED)) s"
finish
