#!/usr/bin/env bash
# `datavo cache verify` on a GCS tier (issue 16, the verify row), on the firebase-tools Storage emulator behind
# tests/support/cloud_proxy.py: GCS keeps an MD5 and a CRC32C of an object, not a SHA-256, so nothing the service
# says proves an object's bytes against its recorded datavo-sha256:
#   1. a shard fetched into the bucket is "metadata only": exit 0, a HEAD and no GET, and the text says that
#      --full downloads it;
#   2. --full downloads it (one GET) and counts it verified by download;
#   3. an object overwritten out of band with other bytes of the same size under the same metadata: metadata only
#      still (exit 0), bad with --full (exit 1, named); --full --repair deletes it.
# The S3 cases (the service's SHA-256, sizes, read-only tiers, an unreachable bucket): tests/e2e/test_cloud_verify.sh.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120

cloud_up gcs
BUCKET=datavo-e2e-verify
start_proxy G "$GCS_EMULATOR_ENDPOINT" --flavour gcs
# single_flight: false: the emulator ignores ifGenerationMatch=0 (test_gcs_cli.sh).
vm_config "$E2E_TMP/vm.yaml" "$E2E_TMP/vm" "$(gcs_tier_yaml bucket $BUCKET "endpoint_url: $G_URL" \
  "single_flight: false" "upload: sync")"
E2E_CONFIG="$E2E_TMP/vm.yaml"
INSTANCE=$(dv --json cache info | json "j['instance']")

mkdir -p "$E2E_TMP/files"
SHA=$(make_shard "$E2E_TMP/files/a.bin" 3000)
H=$(hash_for a)
OBJ="$INSTANCE/$H.tar"
start_server "$E2E_TMP/files"
run cache fetch "$H" --url "$SERVER_URL/a.bin" --sha256 "$SHA"
[ "$RC" = 0 ] || die "cache fetch" "$ERR"

counts() {
  json "[[r[k] for k in ('objects', 'verified_by_service', 'verified_by_download', 'metadata_only', 'bad', 'removed')]
         for r in j['objects'] if r['tier'] == 'bucket'][0]" <<<"$OUT"
}

# --- 1. metadata only -------------------------------------------------------------------------------------------------

proxy_reset "$G_URL"
run --json cache verify
expect_eq "verify: exit 0" 0 "$RC"
expect_eq "verify: the object is metadata only (objects, service, download, metadata only, bad, removed)" \
  "[1, 0, 0, 1, 0, 0]" "$(counts)"
expect_eq "verify: the report counts it" 1 "$(json "j['metadata_only']" <<<"$OUT")"
expect_eq "verify: the bucket is not in not_verified" "[]" "$(json "j['not_verified']" <<<"$OUT")"
expect_eq "verify: no GET of the object" 0 "$(proxy_op "$G_URL" GetObject)"
expect_eq "verify: one HEAD" 1 "$(proxy_op "$G_URL" HeadObject)"
run cache verify
expect_contains "verify (text): says --full downloads it" \
  "1 cloud objects were checked by their metadata only (the service keeps no SHA-256 of them); \`datavo cache verify --full\` downloads and hashes them" \
  "$OUT"

# --- 2. --full --------------------------------------------------------------------------------------------------------

proxy_reset "$G_URL"
run --json cache verify --full
expect_eq "verify --full: exit 0, verified by download" "0 [1, 0, 1, 0, 0, 0]" "$RC $(counts)"
expect_eq "verify --full: one GET" 1 "$(proxy_op "$G_URL" GetObject)"

# --- 3. changed bytes under consistent metadata -------------------------------------------------------------------------

gcstool corrupt "$BUCKET" "$OBJ" >/dev/null ||
  die "overwrite the object" "gcs_tool.js put failed"
run --json cache verify
expect_eq "verify, bytes changed: still metadata only, exit 0" "0 [1, 0, 0, 1, 0, 0]" "$RC $(counts)"
run --json cache verify --full
expect_eq "verify --full, bytes changed: exit 1, bad" "1 [1, 0, 0, 0, 1, 0]" "$RC $(counts)"
expect_eq "verify --full: names the object" "$OBJ" \
  "$(json "[b['object'] for r in j['objects'] for b in r['bad_objects']][0]" <<<"$OUT")"
run --json cache verify --full --repair
expect_eq "verify --full --repair: exit 0, removed" "0 [1, 0, 0, 0, 1, 1]" "$RC $(counts)"
expect_eq "verify --full --repair: the bucket is empty" 0 "$(gcstool list "$BUCKET" "" | grep -c . || true)"

finish
