#!/usr/bin/env bash
# `datavo cache verify` on an S3 tier (issue 16, "Cloud tiers in every cache command", the verify row): a folder tier
# above an S3 tier on moto, every request to moto counted by tests/support/cloud_proxy.py, objects changed out of
# band with boto3 (GCS, which keeps no SHA-256: tests/e2e/test_gcs_verify.sh):
#   1. shards warmed into the bucket (single PUTs with x-amz-checksum-sha256) are verified by the service's SHA-256:
#      a HEAD each, not one GET; exit 0, and the bucket is no longer in not_verified;
#   2. --full downloads every object (one GET each) and hashes it;
#   3. an object overwritten with other bytes and their own SHA-256 under the old metadata: bad by the service's
#      checksum without --full; one overwritten with other bytes of the same size and no SHA-256: metadata only
#      (the text says --full downloads it), bad with --full; a truncated one (size != datavo-size): bad without
#      --full; exit 1 and the JSON names each bad object with why; nothing deleted;
#   4. on a read-only tier --repair only reports; on the writable tier it deletes exactly the bad objects, and the
#      next verify passes;
#   4b. an object whose datavo-chunks decodes but lies (its bytes match datavo-sha256): metadata only to HEADs, bad
#      with --full (naming chunk 0), deleted by --repair;
#   5. a bucket that cannot be reached: exit 1, a row naming the tier with its error, the folder tier verified.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120

s3_up moto
make_bucket "$MOTO_S3_ENDPOINT" verify-bucket
start_proxy P "$MOTO_S3_ENDPOINT"
config_with() {
  write_config <<YAML
tiers:
  - name: local
    path: $E2E_TMP/vm
$(s3_tier_yaml bucket verify-bucket "$P_URL" 'upload: sync' "$@")
YAML
}
config_with
INSTANCE=$(dv --json cache info | json "j['instance']")

mkdir -p "$E2E_TMP/files"
declare -A H SHA OBJ
for name in lying changed truncated good; do
  SHA[$name]=$(make_shard "$E2E_TMP/files/$name.bin" 3000)
  H[$name]=$(hash_for "$name")
  OBJ[$name]=$(entry_key "$INSTANCE" "${H[$name]}")
done
start_server "$E2E_TMP/files"
for name in lying changed truncated good; do
  run cache fetch "${H[$name]}" --url "$SERVER_URL/$name.bin" --sha256 "${SHA[$name]}"
  [ "$RC" = 0 ] || die "cache fetch $name" "$ERR"
done

# overwrite NAME FILE [sha256|none] [SIZE]: replaces NAME's object with FILE's bytes under NAME's metadata (datavo-size
# SIZE, default 3000), with the SHA-256 of the new bytes as the service's checksum or without one.
overwrite() {
  "$IMAGE_PY" - "$MOTO_S3_ENDPOINT" "${OBJ[$1]}" "$2" "${SHA[$1]}" "${4:-3000}" "${3:-none}" <<'PY' ||
import sys, boto3
from botocore.config import Config
endpoint, key, path, sha, size, checksum = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required"))
extra = {"ChecksumAlgorithm": "SHA256"} if checksum == "sha256" else {}
with open(path, "rb") as f:
    s3.put_object(Bucket="verify-bucket", Key=key, Body=f.read(),
                  Metadata={"datavo-sha256": sha, "datavo-size": size}, **extra)
PY
    die "overwrite $1" "boto3 put_object failed"
}
objects() { s3tool "$MOTO_S3_ENDPOINT" ls verify-bucket | json "' '.join(sorted(o['key'] for o in j))"; }
ALL=$(objects)
# row EXPR: EXPR over the bucket's row of the last --json verify (as r).
row() { json "[r for r in j['objects'] if r['tier'] == 'bucket'][0]" <<<"$OUT" | json "$1"; }
counts() { row "[j[k] for k in ('objects', 'verified_by_service', 'verified_by_download', 'metadata_only', 'bad', 'removed')]"; }

# --- 1. the service's checksum, no GET ----------------------------------------------------------------------------

proxy_reset "$P_URL"
run --json cache verify
expect_eq "verify: exit 0" 0 "$RC"
expect_eq "verify: 4 objects verified by the service's SHA-256 (objects, service, download, metadata only, bad, removed)" \
  "[4, 4, 0, 0, 0, 0]" "$(counts)"
expect_eq "verify: the bucket is not in not_verified" "[]" "$(json "j['not_verified']" <<<"$OUT")"
expect_eq "verify: the folder tier is re-hashed as before" "[4, 4]" \
  "$(json "[j['tiers'][0]['checked'], j['tiers'][0]['ok']]" <<<"$OUT")"
expect_eq "verify: not one GET of an object's bytes" 0 "$(proxy_op "$P_URL" GetObject)"
expect_eq "verify: one HEAD per object" 4 "$(proxy_op "$P_URL" HeadObject)"
expect_eq "verify --json: the vocabulary of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
run cache verify
expect_contains "verify (text): the bucket's line" \
  "bucket (s3): 4 objects, 4 verified by the service's SHA-256, 0 verified by download, 0 metadata only, 0 bad" "$OUT"

# --- 2. --full downloads every object -----------------------------------------------------------------------------

proxy_reset "$P_URL"
run --json cache verify --full
expect_eq "verify --full: exit 0" 0 "$RC"
expect_eq "verify --full: 4 objects verified by download" "[4, 0, 4, 0, 0, 0]" "$(counts)"
expect_eq "verify --full: one GET per object" 4 "$(proxy_op "$P_URL" GetObject)"
expect_eq "verify --full: depth in the JSON" full "$(json "j['depth']" <<<"$OUT")"

# --- 3. objects changed out of band ---------------------------------------------------------------------------------

head -c 3000 /dev/urandom >"$E2E_TMP/other.bin"
overwrite lying "$E2E_TMP/other.bin" sha256
head -c 3000 /dev/urandom >"$E2E_TMP/other2.bin"
overwrite changed "$E2E_TMP/other2.bin" none
head -c 1000 "$E2E_TMP/files/truncated.bin" >"$E2E_TMP/short.bin"
overwrite truncated "$E2E_TMP/short.bin" none
proxy_reset "$P_URL"
run --json cache verify
expect_eq "verify, objects changed: exit 1" 1 "$RC"
expect_eq "verify, objects changed: 1 by the service, 1 metadata only, 2 bad, none removed" "[4, 1, 0, 1, 2, 0]" \
  "$(counts)"
expect_eq "verify, objects changed: the bad objects, by name" \
  "$(printf '%s\n' "${OBJ[lying]}" "${OBJ[truncated]}" | sort | tr '\n' ' ' | sed 's/ $//')" \
  "$(row "' '.join(sorted(b['object'] for b in j['bad_objects']))")"
expect_contains "verify, objects changed: the overwritten object is bad by the service's checksum" \
  "the service's SHA-256" "$(row "[b['why'] for b in j['bad_objects'] if b['object'] == '${OBJ[lying]}'][0]")"
expect_eq "verify, objects changed: the truncated one by its size" "size 1000 but datavo-size 3000" \
  "$(row "[b['why'] for b in j['bad_objects'] if b['object'] == '${OBJ[truncated]}'][0]")"
expect_eq "verify, objects changed: still no GET" 0 "$(proxy_op "$P_URL" GetObject)"
expect_eq "verify, objects changed: the error is an integrity failure" integrity "$(json "j['error']['code']" <<<"$OUT")"
run cache verify
expect_eq "verify (text), objects changed: exit 1" 1 "$RC"
expect_contains "verify (text): names a bad object" "bad: ${OBJ[truncated]}: size 1000 but datavo-size 3000" "$OUT"
expect_contains "verify (text): says --full downloads what the metadata alone cannot prove" \
  "1 cloud objects were checked by their metadata only" "$OUT"
expect_contains "verify (text): the --full advice" "datavo cache verify --full" "$OUT"

proxy_reset "$P_URL"
run --json cache verify --full
expect_eq "verify --full, objects changed: exit 1" 1 "$RC"
expect_eq "verify --full: the changed bytes are found (1 verified by download, 3 bad)" "[4, 0, 1, 0, 3, 0]" "$(counts)"
expect_contains "verify --full: why the changed object is bad" "the bytes hash to" \
  "$(row "[b['why'] for b in j['bad_objects'] if b['object'] == '${OBJ[changed]}'][0]")"
expect_eq "verify --full: a GET for each object whose metadata holds (changed, good)" 2 "$(proxy_op "$P_URL" GetObject)"
expect_eq "verify without --repair: nothing deleted" "$ALL" "$(objects)"

# --- 4. --repair ----------------------------------------------------------------------------------------------------

config_with 'read_only: true'
run --json cache verify --full --repair
expect_eq "verify --repair, read-only tier: exit 1" 1 "$RC"
expect_eq "verify --repair, read-only tier: 3 bad, none removed" "[3, 0]" "$(row "[j['bad'], j['removed']]")"
expect_eq "verify --repair, read-only tier: nothing deleted" "$ALL" "$(objects)"

config_with
run --json cache verify --full --repair
expect_eq "verify --full --repair: exit 0 (every bad object repaired)" 0 "$RC"
expect_eq "verify --full --repair: 3 bad, 3 removed" "[3, 3]" "$(row "[j['bad'], j['removed']]")"
expect_eq "verify --full --repair: only the good object is left" "${OBJ[good]}" "$(objects)"
run --json cache verify
expect_eq "verify after the repair: exit 0, one object verified by the service" "0 [1, 1, 0, 0, 0, 0]" "$RC $(counts)"

# --- 4b. a chunk list that lies about bytes that match their SHA-256 -----------------------------------------------

# The good object's own bytes and datavo-sha256 / datavo-size, with a datavo-chunks that decodes (one chunk of 64 KiB)
# but holds the digest of other bytes: HEADs cannot tell; --full finds it (a streamed read would stop at chunk 0).
"$IMAGE_PY" - "$MOTO_S3_ENDPOINT" "${OBJ[good]}" "$E2E_TMP/files/good.bin" "${SHA[good]}" <<'PY' ||
import base64, hashlib, sys, boto3
from botocore.config import Config
endpoint, key, path, sha = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required"))
lie = "65536 " + base64.b64encode(hashlib.sha256(b"other bytes").digest()).decode()
with open(path, "rb") as f:
    s3.put_object(Bucket="verify-bucket", Key=key, Body=f.read(),
                  Metadata={"datavo-sha256": sha, "datavo-size": "3000", "datavo-chunks": lie})
PY
  die "lying datavo-chunks" "boto3 put_object failed"
run --json cache verify
expect_eq "verify, a lying chunk list: HEADs cannot tell (exit 0, metadata only)" "0 [1, 0, 0, 1, 0, 0]" "$RC $(counts)"
run --json cache verify --full
expect_eq "verify --full, a lying chunk list: exit 1, the object bad" "1 [1, 0, 0, 0, 1, 0]" "$RC $(counts)"
expect_eq "verify --full, a lying chunk list: why" \
  "chunk 0 (byte offset 0) does not match its digest in datavo-chunks (the bytes match datavo-sha256)" \
  "$(row "[b['why'] for b in j['bad_objects'] if b['object'] == '${OBJ[good]}'][0]")"
run --json cache verify --full --repair
expect_eq "verify --full --repair, a lying chunk list: deleted, the bucket empty" "0 [1, 1] " \
  "$RC $(row "[j['bad'], j['removed']]") $(objects)"

# --- 5. a bucket that cannot be reached -----------------------------------------------------------------------------

DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
write_config <<YAML
tiers:
  - name: local
    path: $E2E_TMP/vm
$(s3_tier_yaml bucket verify-bucket "http://127.0.0.1:$DEAD")
YAML
run --json cache verify
expect_eq "verify, bucket down: exit 1" 1 "$RC"
expect_contains "verify, bucket down: the tier's row carries its error" "127.0.0.1:$DEAD" "$(row "j['error']['message']")"
expect_contains "verify, bucket down: the error names the tier" "tier 'bucket'" "$ERR"
expect_eq "verify, bucket down: the folder tier is still verified" 4 "$(json "j['tiers'][0]['checked']" <<<"$OUT")"

finish
