#!/usr/bin/env bash
# The spec's three cloud YAML examples (spec 000 "Cloud topology"; tests/fixtures/config/spec_*.yaml, verbatim,
# shared with the config unit tests), with only the endpoint added (Azure: container_url replaced by Azurite's
# path-style URL of the container `shards`; S3: `endpoint_url:` of moto; GCS: STORAGE_EMULATOR_HOST, the YAML
# untouched) and the nvme path moved into the suite's temp dir (a diff proves nothing else changed), against the
# emulators:
#   - `datavo cache check` passes on Azurite (SharedKey) and moto, and on the GCS emulator fails as documented:
#     it ignores ifGenerationMatch=0 and the spec's tier keeps single_flight: true (exit 1, the conditional put
#     step fails saying so, every other step passes);
#   - `datavo warm` of a small dataset from `datavo serve` fetches each shard once and fills the bucket with one
#     object per shard, no lease left.
# test_cloud_spec_offline.sh checks the same files as written (they load, and make no network connection).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
. "$(dirname "$0")/s3_lib.sh"   # after azure_gcs_lib.sh: its pack_dataset, start_origin and origin_requests are used
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
SUITE_STARTED=$(date +%s)
FIXTURES="$DATAVO_SOURCE_DIR/tests/fixtures/config"
CLOUDS=(azure aws gcp)
declare -A FIXTURE=([azure]=spec_azure.yaml [aws]=spec_aws.yaml [gcp]=spec_gcp.yaml)
declare -A TIER=([azure]=region-eastus [aws]=region-us-east-1 [gcp]=region-us-central1)
for cloud in "${CLOUDS[@]}"; do
  [ -f "$FIXTURES/${FIXTURE[$cloud]}" ] || die "fixture ${FIXTURE[$cloud]}" "missing from $FIXTURES"
done

# --- 2. with the endpoints of the emulators -------------------------------------------------------------------------

cloud_up azurite gcs
s3_up moto
aztool create shards || die "create container shards" ""
make_bucket "$MOTO_S3_ENDPOINT" datavo-cache-us-east-1
pack_dataset 12 3 20000
start_origin "$E2E_TMP/store"   # exports DATAVO_SERVER

# emulated CLOUD: the fixture with the nvme path moved into $E2E_TMP/CLOUD and the endpoint of the emulator.
emulated() {
  python3 - "$FIXTURES/${FIXTURE[$1]}" "$1" "$E2E_TMP/$1/nvme" "${AZURITE_BLOB_ENDPOINT}/shards" "$MOTO_S3_ENDPOINT" \
    >"$E2E_TMP/$1.yaml" <<'PY'
import sys
src, cloud, nvme, container_url, s3_endpoint = sys.argv[1:]
out = []
for line in open(src).read().splitlines():
    if line.strip() == "path: /mnt/cache/datavo/shards":
        line = line.replace("/mnt/cache/datavo/shards", nvme)
    elif cloud == "azure" and line.strip().startswith("container_url:"):
        line = line[: line.index("container_url:")] + "container_url: " + container_url
    out.append(line)
    if cloud == "aws" and line.strip() == "region: us-east-1":
        out.append(line[: line.index("region:")] + "endpoint_url: " + s3_endpoint)
print("\n".join(out))
PY
}
# dvc CLOUD ARGS...: datavo with the emulated config and that cloud's credentials (none for GCS: the emulator host).
dvc() {
  local cloud=$1
  shift
  case $cloud in
    azure) with_key timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/$cloud.yaml" "$@" ;;
    *) timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/$cloud.yaml" "$@" ;;
  esac
}
# objects CLOUD: the entry objects in the cloud's bucket, one a line; leases CLOUD: the lease objects.
objects() {
  case $1 in
    azure) aztool list shards ;;
    aws) s3tool "$MOTO_S3_ENDPOINT" ls datavo-cache-us-east-1 | json "'\n'.join(o['key'] for o in j)" ;;
    gcp) gcstool list datavo-cache-us-central1 ;;
  esac
}

declare -A CHANGED=(
  [azure]="container_url: $AZURITE_BLOB_ENDPOINT/shards"
  [aws]="endpoint_url: $MOTO_S3_ENDPOINT"
  [gcp]="")
for cloud in "${CLOUDS[@]}"; do
  emulated $cloud
  expect_eq "$cloud, emulated: only the nvme path and the endpoint differ from the spec's text" \
    "$(printf '%s\n' "path: $E2E_TMP/$cloud/nvme" ${CHANGED[$cloud]:+"${CHANGED[$cloud]}"})" \
    "$(diff "$FIXTURES/${FIXTURE[$cloud]}" "$E2E_TMP/$cloud.yaml" | sed -n 's/^> *//p')"

  out=$(dvc $cloud --json cache check 2>"$E2E_TMP/check.$cloud.err") && rc=0 || rc=$?
  steps=$(json "[[s['step'], s['ok']] for t in j['tiers'] if t['tier'] == '${TIER[$cloud]}' for s in t['steps']]" <<<"$out")
  if [ $cloud = gcp ]; then
    expect_eq "$cloud, emulated: cache check exit 1 (the emulator ignores preconditions, single_flight: true)" 1 "$rc"
    expect_eq "$cloud, emulated: every probe passes but the conditional put" \
      '[["credentials", true], ["put", true], ["get", true], ["conditional put", false], ["delete", true]]' "$steps"
    expect_contains "$cloud, emulated: it says why" "ignores conditional writes" \
      "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == '${TIER[$cloud]}' for s in t['steps'] if not s['ok']][0]" <<<"$out")"
  else
    expect_eq "$cloud, emulated: cache check exit 0" 0 "$rc"
    expect_eq "$cloud, emulated: every probe of the cloud tier passes" \
      '[["credentials", true], ["put", true], ["get", true], ["conditional put", true], ["delete", true]]' "$steps"
  fi
  expect_eq "$cloud, emulated: the folder tier checks out" true \
    "$(json "[t['ok'] for t in j['tiers'] if t['tier'] == 'nvme'][0]" <<<"$out")"
  expect_eq "$cloud, emulated: the probe object is removed" "" "$(objects $cloud)"

  before=$(origin_requests shard)
  out=$(dvc $cloud --json warm "$DS" --key bin --key txt 2>"$E2E_TMP/warm.$cloud.err") && rc=0 || rc=$?
  expect_eq "$cloud, emulated: warm exit 0, every shard, none failed" "[0, $SHARDS, 0]" \
    "[$rc, $(json "j['shards']" <<<"$out"), $(json "j['failed']" <<<"$out")]"
  expect_eq "$cloud, emulated: each shard fetched from the origin once" "$SHARDS" "$(($(origin_requests shard) - before))"
  expect_eq "$cloud, emulated: each shard uploaded (uploaded, already_present, failed, pending)" "[$SHARDS, 0, 0, 0]" \
    "$(json "[j['uploads'][k] for k in ('uploaded', 'already_present', 'failed', 'pending')]" <<<"$out")"
  listing=$(objects $cloud)
  expect_eq "$cloud, emulated: the bucket holds one object per shard" "$SHARDS" \
    "$(grep -c -E '^[^/]+/[0-9a-f]{64}\.tar$' <<<"$listing")"
  expect_eq "$cloud, emulated: the bucket holds the folder's entries" \
    "$(cd "$E2E_TMP/$cloud/nvme" && find . -mindepth 2 -maxdepth 2 -name '*.tar' | sed 's|^\./||' | sort)" \
    "$(grep -E '^[^/]+/[0-9a-f]{64}\.tar$' <<<"$listing" | sort)"
  expect_eq "$cloud, emulated: nothing else in the bucket (no lease left)" "$SHARDS" "$(grep -c . <<<"$listing")"
done

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
