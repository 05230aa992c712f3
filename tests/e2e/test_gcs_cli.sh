#!/usr/bin/env bash
# `datavo cache info`, `cache check`, `cache fetch` and `warm` with a config that holds a GCS tier, on the
# firebase-tools Storage emulator (STORAGE_EMULATOR_HOST: no credentials):
#   1. `cache info` lists the tier without touching the network (the endpoint at a closed port);
#   2. `cache check` reports what the emulator cannot do: it ignores ifGenerationMatch=0, so the second create
#      overwrites; that fails the tier with single_flight: true and is a WARNING with single_flight: false; the
#      probe object is removed either way;
#   3. `cache fetch` on a miss fetches, installs locally and uploads with the metadata datavo-sha256 / datavo-size
#      (uploadType=multipart; a 40 MiB shard, with part_size 64MiB, as a resumable session and its one PUT, since
#      the emulator cannot take resumable uploads in chunks); a second VM reads it from the bucket in ranges, without
#      asking the origin;
#   4. `warm` from `datavo serve` (single_flight: false: no leases on a server without preconditions): each shard
#      fetched once and uploaded once; a second VM warms with 0 shard requests to the origin.
# What the emulator cannot show (preconditions, chunked resumable uploads, userProject, a missing bucket, tokens)
# is covered by tests/unit/tier/gcs/test_gcs_tier.cpp against a fake GCS server.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

cloud_up gcs
BUCKET=datavo-e2e-cli

# The emulator's own request log is not available: count what it stores instead.
objects() { gcstool list "$1" "${2:-}" | grep -c -E "${3:-.}"; }

# --- 1. cache info: no network ------------------------------------------------------------------------------------

vm_config "$E2E_TMP/closed.yaml" "$E2E_TMP/vm0" "$(gcs_tier_yaml region $BUCKET \
  "endpoint_url: http://127.0.0.1:$AGLIB_CLOSED_PORT" "project: datavo-prod" "prefix: team-a")"
started=$(date +%s%N)
out=$(env -u STORAGE_EMULATOR_HOST timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/closed.yaml" --json cache info \
  2>"$E2E_TMP/info.err") && rc=0 || rc=$?
took=$((($(date +%s%N) - started) / 1000000))
expect_eq "cache info, endpoint at a closed port, no credentials anywhere: exit 0" 0 "$rc"
expect_cmp "cache info: quick, no connection tried (ms)" "$took" -lt 3000
expect_eq "cache info lists the GCS tier (type, location with the prefix)" "[\"gcs\", \"gs://$BUCKET/team-a\"]" \
  "$(json "[[t['type'], t['path']] for t in j['tiers'] if t['tier'] == 'region'][0]" <<<"$out")"
expect_eq "cache info: nothing on stderr" "" "$(cat "$E2E_TMP/info.err")"

# --- 2. cache check -----------------------------------------------------------------------------------------------

vm_config "$E2E_TMP/check.yaml" "$E2E_TMP/vm0" "$(gcs_tier_yaml region $BUCKET)"
out=$(timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check.yaml" --json cache check 2>/dev/null) && rc=0 || rc=$?
expect_eq "check (single_flight: true): exit 1" 1 "$rc"
expect_eq "check: credentials, put, get and delete work; the conditional put does not" \
  '[["credentials", true], ["put", true], ["get", true], ["conditional put", false], ["delete", true]]' \
  "$(json "[[s['step'], s['ok']] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps']]" <<<"$out")"
expect_contains "check: it says why" "ignores conditional writes" \
  "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps'] if not s['ok']][0]" <<<"$out")"
expect_contains "check: no credentials, because of STORAGE_EMULATOR_HOST" "STORAGE_EMULATOR_HOST" \
  "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps'] if s['step'] == 'credentials'][0]" <<<"$out")"
expect_eq "check: the probe object is removed" 0 "$(objects $BUCKET)"

vm_config "$E2E_TMP/check-nosf.yaml" "$E2E_TMP/vm0" "$(gcs_tier_yaml region $BUCKET "single_flight: false" \
  "endpoint_url: $GCS_EMULATOR_ENDPOINT")"
out=$(timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check-nosf.yaml" --json cache check 2>/dev/null) && rc=0 || rc=$?
expect_eq "check (single_flight: false, endpoint_url): exit 0" 0 "$rc"
expect_contains "check (single_flight: false): a WARNING that says so" "ignores conditional writes" \
  "$(json "[t['warnings'] for t in j['tiers'] if t['tier'] == 'region'][0]" <<<"$out")"
text=$(timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check-nosf.yaml" cache check 2>/dev/null)
expect_contains "check (text): the tier is usable, with the warning" "WARNING: the server ignores conditional writes" "$text"
expect_eq "check: the probe object is removed" 0 "$(objects $BUCKET)"

# --- 3. cache fetch: populate, upload, read from the bucket -------------------------------------------------------

www="$E2E_TMP/www"
mkdir -p "$www"
sha_small=$(make_shard "$www/small.bin" 300000)
big_size=$((40 * 1024 * 1024 + 4321))
sha_big=$(make_shard "$www/big.bin" $big_size)
start_server "$www"
tier=$(gcs_tier_yaml region $BUCKET "single_flight: false" "part_size: 64MiB")
vm_config "$E2E_TMP/vm1.yaml" "$E2E_TMP/vm1" "$tier"
vm_config "$E2E_TMP/vm2.yaml" "$E2E_TMP/vm2" "$(gcs_tier_yaml region $BUCKET "single_flight: false" "part_size: 8MiB")"
h_small=$(hash_for small)
h_big=$(hash_for big)
E2E_CONFIG=$E2E_TMP/vm1.yaml
run --json cache fetch "$h_small" --url "$SERVER_URL/small.bin" --sha256 "$sha_small"
expect_eq "fetch: exit 0, fetched from the origin" "[0, \"fetched\"]" "[$RC, \"$(json "j['source']" <<<"$OUT")\"]"
run --json cache fetch "$h_big" --url "$SERVER_URL/big.bin" --sha256 "$sha_big"
expect_eq "fetch of 40 MiB: exit 0" 0 "$RC"
expect_eq "fetch: no WARNING" "" "$(grep WARNING <<<"$ERR")"
meta=$(gcstool head $BUCKET "$(entry_name local "$h_small")")
expect_eq "fetch: uploaded with datavo-sha256 and datavo-size" "[\"$sha_small\", \"300000\"]" \
  "$(json "[j['metadata'].get('datavo-sha256'), j['metadata'].get('datavo-size')]" <<<"$meta")"
meta=$(gcstool head $BUCKET "$(entry_name local "$h_big")")
expect_eq "fetch of 40 MiB: uploaded (a resumable upload in one PUT under part_size 64MiB), with its metadata" \
  "[$big_size, \"$sha_big\"]" "$(json "[j['size'], j['metadata'].get('datavo-sha256')]" <<<"$meta")"

E2E_CONFIG=$E2E_TMP/vm2.yaml
before=$(server_requests /big.bin)
run --json cache fetch "$h_big" --url "$SERVER_URL/big.bin" --sha256 "$sha_big"
expect_eq "a second VM (part_size 8MiB: 6 ranges): exit 0, promoted from the bucket into its folder tier" \
  "[0, \"promoted\", \"local\"]" "[$RC, \"$(json "j['source']" <<<"$OUT")\", \"$(json "j['tier']" <<<"$OUT")\"]"
expect_eq "a second VM: the right bytes" "$sha_big" "$(sha256_of "$E2E_TMP/vm2/local/$h_big.tar")"
expect_eq "a second VM: no request to the origin" "$before" "$(server_requests /big.bin)"
E2E_CONFIG=

# --- 4. warm from datavo serve ------------------------------------------------------------------------------------

pack_dataset gcswarm 24 3 20000
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
for vm in 1 2; do
  vm_config "$E2E_TMP/warm$vm.yaml" "$E2E_TMP/warm$vm" "$(gcs_tier_yaml region datavo-e2e-warm "single_flight: false")"
  before=$(origin_requests shard)
  out=$(timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/warm$vm.yaml" --json warm "$DS" --key bin --key txt \
    2>"$E2E_TMP/warm$vm.err") && rc=0 || rc=$?
  expect_eq "warm, VM $vm: exit 0, every shard" "[0, $SHARDS, 0]" \
    "[$rc, $(json "j['shards']" <<<"$out"), $(json "j['failed']" <<<"$out")]"
  fetched=$(($(origin_requests shard) - before))
  if [ $vm = 1 ]; then
    expect_eq "warm, VM 1: each shard fetched from the origin once" "$SHARDS" "$fetched"
    generations=$(gcstool list datavo-e2e-warm "" --long)
  else
    expect_eq "warm, VM 2: 0 shard requests to the origin" 0 "$fetched"
    expect_eq "warm, VM 2: every shard from the bucket" "$SHARDS" \
      "$(json "[t['promoted_into'] for t in j['tiers'] if t['tier'] == 'local'][0]" <<<"$out")"
  fi
done
expect_eq "warm: one object per shard in the bucket" "$SHARDS" "$(objects datavo-e2e-warm '' '^[^/]+/[0-9a-f]{64}\.tar$')"
expect_eq "warm: each shard uploaded once (VM 2 wrote nothing: every generation is still VM 1's)" "$generations" \
  "$(gcstool list datavo-e2e-warm "" --long)"

finish
