#!/usr/bin/env bash
# `datavo cache info`, `cache check`, `cache fetch` and `warm` with a config that holds an Azure Blob tier, on Azurite
# (which checks SharedKey and SAS signatures), once with SharedKey (AZURE_STORAGE_CONNECTION_STRING) and once with a
# container SAS made here with @azure/storage-blob (the tier's sas_token):
#   1. `cache info` lists the tier without touching the network (container URL at a closed port, no credentials);
#      the sas_token never appears in its output;
#   2. `cache check`: every probe passes (Azurite honours If-None-Match: *, so the second create is refused with
#      409) and nothing is left in the container; a container that does not exist fails, naming it; without any
#      credential it fails at its credentials step and sends nothing;
#   3. `cache fetch` on a miss fetches, installs locally and uploads with the metadata datavo_sha256 / datavo_size
#      (one Put Blob; Put Block + Put Block List above part_size); a second VM reads it from the container without
#      asking the origin;
#   4. `warm` from `datavo serve`: each shard fetched from the origin once and uploaded once; a second VM warms
#      from the container with 0 shard requests to the origin; `cache ls` shows the blobs' Last-Modified and a
#      total per tier.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR

cloud_up azurite

# --- 1. cache info: no network ------------------------------------------------------------------------------------

closed="http://127.0.0.1:$AGLIB_CLOSED_PORT/devstoreaccount1/shards"
secret_sig="c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"
vm_config "$E2E_TMP/closed.yaml" "$E2E_TMP/vm0" "  - name: region
    type: azure_blob
    container_url: $closed
    sas_token: \"?sv=2022-11-02&sr=c&sp=racwdl&se=2030-01-01T00%3A00%3A00Z&sig=$secret_sig\"
    prefix: team-a"
started=$(date +%s%N)
out=$(timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/closed.yaml" --json cache info 2>"$E2E_TMP/info.err") && rc=0 || rc=$?
took=$((($(date +%s%N) - started) / 1000000))
expect_eq "cache info, container URL at a closed port, no credentials: exit 0" 0 "$rc"
expect_cmp "cache info: quick, no connection tried (ms)" "$took" -lt 3000
expect_eq "cache info lists the Azure tier (type, location with the prefix)" "[\"azure_blob\", \"$closed/team-a\"]" \
  "$(json "[[t['type'], t['path']] for t in j['tiers'] if t['tier'] == 'region'][0]" <<<"$out")"
text=$(timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/closed.yaml" cache info 2>&1)
expect_contains "cache info (text) names the tier" "region" "$text"
expect_eq "the SAS signature appears nowhere in cache info" "" \
  "$(grep -o -e "$secret_sig" -e 'c2VjcmV0' <<<"$out$text$(cat "$E2E_TMP/info.err")" | head -1)"

# --- 2. cache check -----------------------------------------------------------------------------------------------

aztool create checks || die "create container checks" ""
SAS=$(aztool sas checks) || die "make a container SAS" ""
for mode in sharedkey sas; do
  if [ $mode = sas ]; then
    vm_config "$E2E_TMP/check-$mode.yaml" "$E2E_TMP/vm0" "$(azure_tier_yaml region checks "sas_token: \"$SAS\"")"
    run_check() { timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check-$mode.yaml" --json cache check; }
  else
    vm_config "$E2E_TMP/check-$mode.yaml" "$E2E_TMP/vm0" "$(azure_tier_yaml region checks)"
    run_check() { with_key timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check-$mode.yaml" --json cache check; }
  fi
  out=$(run_check 2>"$E2E_TMP/check.err") && rc=0 || rc=$?
  expect_eq "check ($mode): exit 0" 0 "$rc"
  expect_eq "check ($mode): every probe of the Azure tier ok" \
    '[["credentials", true], ["put", true], ["get", true], ["conditional put", true], ["delete", true]]' \
    "$(json "[[s['step'], s['ok']] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps']]" <<<"$out")"
  expect_contains "check ($mode): the credentials used" \
    "$([ $mode = sas ] && echo SAS || echo SharedKey)" \
    "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps'] if s['step'] == 'credentials'][0]" <<<"$out")"
  expect_eq "check ($mode): the second create refused (409 BlobAlreadyExists)" 1 \
    "$(azurite_count PUT 'checks/\.datavo-check/[^ ]*' 409)"
  expect_eq "check ($mode): nothing left in the container" "" "$(aztool list checks)"
  expect_eq "check ($mode): no warning" "[]" "$(json "[t['warnings'] for t in j['tiers'] if t['tier'] == 'region'][0]" <<<"$out")"
  expect_eq "check ($mode): no SAS signature in the output" "" \
    "$(grep -o -F "${SAS##*sig=}" <<<"$out$(cat "$E2E_TMP/check.err")" | head -1)"
  : >"$DATAVO_EMULATOR_RUN_DIR/azurite.log"  # the next count starts from zero (Azurite appends)
done

vm_config "$E2E_TMP/check-missing.yaml" "$E2E_TMP/vm0" "$(azure_tier_yaml region no-such-container)"
out=$(with_key timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/check-missing.yaml" --json cache check 2>/dev/null) &&
  rc=0 || rc=$?
expect_eq "check, a container that does not exist: exit 1" 1 "$rc"
expect_contains "... the put fails naming the container" "no-such-container" \
  "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps'] if not s['ok']][0]" <<<"$out")"

# No credentials at all: no key, no SAS, the managed-identity endpoint at a closed port (azure_gcs_lib.sh) and no
# `az` on the PATH. The credentials step must obtain a token, and fail, as S3's and GCS's do (issue 16: it said "ok
# credentials: bearer tokens ... (DefaultAzureCredential)", then "FAIL put: no Azure credentials found").
vm_config "$E2E_TMP/check-nocreds.yaml" "$E2E_TMP/vm0" "$(azure_tier_yaml region checks)"
: >"$DATAVO_EMULATOR_RUN_DIR/azurite.log"
out=$(env PATH=/nonexistent "$(command -v timeout)" 60 "$DATAVO_BIN" --config "$E2E_TMP/check-nocreds.yaml" --json \
  cache check 2>/dev/null) && rc=0 || rc=$?
expect_eq "check, no credentials: exit 1" 1 "$rc"
expect_eq "check, no credentials: it fails at the credentials step and tries nothing after it" '[["credentials", false]]' \
  "$(json "[[s['step'], s['ok']] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps']]" <<<"$out")"
expect_contains "check, no credentials: ... saying so" "no Azure credentials found" \
  "$(json "[s['detail'] for t in j['tiers'] if t['tier'] == 'region' for s in t['steps']][0]" <<<"$out")"
expect_eq "check, no credentials: nothing was sent to the container" 0 "$(azurite_count '[A-Z]+' 'checks/[^ ]*')"

# --- 3. cache fetch: populate, upload, read from the container ----------------------------------------------------

www="$E2E_TMP/www"
mkdir -p "$www"
sha_small=$(make_shard "$www/small.bin" 300000)
sha_big=$(make_shard "$www/big.bin" $((12 * 1024 * 1024 + 12345)))
start_server "$www"
for mode in sharedkey sas; do
  container=fetch-$mode
  aztool create $container || die "create container $container" ""
  if [ $mode = sas ]; then
    tier=$(azure_tier_yaml region $container "sas_token: \"$(aztool sas $container)\"" "part_size: 5MiB")
    dvm() { dv "$@"; }
  else
    tier=$(azure_tier_yaml region $container "part_size: 5MiB")
    dvm() { with_key dv "$@"; }
  fi
  vm_config "$E2E_TMP/vm1-$mode.yaml" "$E2E_TMP/vm1-$mode" "$tier"
  vm_config "$E2E_TMP/vm2-$mode.yaml" "$E2E_TMP/vm2-$mode" "$tier"
  h_small=$(hash_for small-$mode)
  h_big=$(hash_for big-$mode)
  E2E_CONFIG=$E2E_TMP/vm1-$mode.yaml
  out=$(dvm --json cache fetch "$h_small" --url "$SERVER_URL/small.bin" --sha256 "$sha_small" 2>"$E2E_TMP/fetch.err") &&
    rc=0 || rc=$?
  expect_eq "fetch ($mode): exit 0, fetched from the origin" "[0, \"fetched\"]" "[$rc, \"$(json "j['source']" <<<"$out")\"]"
  out=$(dvm --json cache fetch "$h_big" --url "$SERVER_URL/big.bin" --sha256 "$sha_big" 2>>"$E2E_TMP/fetch.err") &&
    rc=0 || rc=$?
  expect_eq "fetch of 12 MiB ($mode): exit 0" 0 "$rc"
  head_small=$(aztool head $container "$(entry_name local "$h_small")")
  expect_eq "fetch ($mode): uploaded with datavo_sha256 and datavo_size" "[\"$sha_small\", \"300000\"]" \
    "$(json "[j['metadata'].get('datavo_sha256'), j['metadata'].get('datavo_size')]" <<<"$head_small")"
  expect_ne "fetch ($mode): Content-MD5 sent with the Put Blob" "null" "$(json "j['contentMD5']" <<<"$head_small" || echo null)"
  head_big=$(aztool head $container "$(entry_name local "$h_big")")
  expect_eq "fetch of 12 MiB ($mode): uploaded, with its metadata" "[$((12 * 1024 * 1024 + 12345)), \"$sha_big\"]" \
    "$(json "[j['size'], j['metadata'].get('datavo_sha256')]" <<<"$head_big")"
  blocks=$(azurite_count PUT "$container/local/$h_big\.tar\?comp=block&blockid=[^ ]*" 201)
  expect_eq "fetch of 12 MiB ($mode): as 3 blocks and one block list" "3 1" \
    "$blocks $(azurite_count PUT "$container/local/$h_big\.tar\?comp=blocklist[^ ]*" 201)"
  expect_eq "fetch ($mode): no lease left" "" "$(aztool list $container local/.leases/)"
  expect_eq "fetch ($mode): no WARNING" "" "$(grep WARNING "$E2E_TMP/fetch.err")"

  E2E_CONFIG=$E2E_TMP/vm2-$mode.yaml
  before=$(server_requests /big.bin)
  out=$(dvm --json cache fetch "$h_big" --url "$SERVER_URL/big.bin" --sha256 "$sha_big" 2>"$E2E_TMP/fetch2.err") &&
    rc=0 || rc=$?
  expect_eq "a second VM ($mode): exit 0, promoted from the container into its folder tier" \
    "[0, \"promoted\", \"local\"]" "[$rc, \"$(json "j['source']" <<<"$out")\", \"$(json "j['tier']" <<<"$out")\"]"
  expect_eq "a second VM ($mode): the right bytes" "$sha_big" "$(sha256_of "$E2E_TMP/vm2-$mode/local/$h_big.tar")"
  expect_eq "a second VM ($mode): no request to the origin" "$before" "$(server_requests /big.bin)"
  expect_eq "a second VM ($mode): read in 3 ranges pinned to the ETag (If-Match)" 3 \
    "$(azurite_count GET "$container/local/$h_big\.tar(\?[^ ]*)?" 206)"
  E2E_CONFIG=
done

# --- 4. warm from datavo serve ------------------------------------------------------------------------------------

pack_dataset azwarm 24 3 20000
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
aztool create warm || die "create container warm" ""
for vm in 1 2; do
  vm_config "$E2E_TMP/warm$vm.yaml" "$E2E_TMP/warm$vm" "$(azure_tier_yaml region warm)"
  before=$(origin_requests shard)
  out=$(with_key timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/warm$vm.yaml" --json warm "$DS" --key bin --key txt \
    2>"$E2E_TMP/warm$vm.err") && rc=0 || rc=$?
  expect_eq "warm, VM $vm: exit 0, every shard" "[0, $SHARDS, 0]" "[$rc, $(json "j['shards']" <<<"$out"), $(json "j['failed']" <<<"$out")]"
  fetched=$(($(origin_requests shard) - before))
  if [ $vm = 1 ]; then
    expect_eq "warm, VM 1: each shard fetched from the origin once" "$SHARDS" "$fetched"
  else
    expect_eq "warm, VM 2: 0 shard requests to the origin" 0 "$fetched"
    expect_eq "warm, VM 2: every shard from the container" "$SHARDS" \
      "$(json "[t['promoted_into'] for t in j['tiers'] if t['tier'] == 'local'][0]" <<<"$out")"
  fi
done
entries=$(aztool list warm | grep -c -E '^[^/]+/[0-9a-f]{64}\.tar$')
expect_eq "warm: one blob per shard in the container" "$SHARDS" "$entries"
expect_eq "warm: each shard uploaded once (Put Blob 201)" "$SHARDS" \
  "$(azurite_count PUT 'warm/[^/ ]+/[0-9a-f]{64}\.tar' 201)"
expect_eq "warm: no lease left" "" "$(aztool list warm | grep '\.leases/')"

# cache ls: the container's entries carry their real Last-Modified (not 1970), and the totals are per tier.
out=$(with_key timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/warm1.yaml" --json cache ls 2>"$E2E_TMP/ls.err") &&
  rc=0 || rc=$?
expect_eq "cache ls (Azurite): exit 0" 0 "$rc"
expect_eq "cache ls (Azurite): every blob listed with a time of this run (age under an hour, not 1970)" \
  "[$SHARDS, true]" \
  "$(json "[len([e for e in j['entry_list'] if e['tier'] == 'region']), all(e['age_seconds'] < 3600 and e['last_access'] >= '$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)' for e in j['entry_list'] if e['tier'] == 'region')]" <<<"$out")"
expect_eq "cache ls (Azurite): a total per tier, the local copies and the blobs apart" \
  "[[\"local\", $SHARDS], [\"region\", $SHARDS]]" "$(json "[[t['tier'], t['entries']] for t in j['tiers']]" <<<"$out")"
expect_eq "cache ls (Azurite): all copies is the sum of the tiers" "true" \
  "$(json "j['size_bytes'] == sum(t['size_bytes'] for t in j['tiers'])" <<<"$out")"
text=$(with_key timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/warm1.yaml" cache ls 2>&1)
expect_contains "cache ls (Azurite, text): the container's total on a line of its own" "tier region: $SHARDS entries" "$text"
expect_contains "cache ls (Azurite, text): the grand total labelled as copies" "all tiers: $((2 * SHARDS)) copies" "$text"

finish
