#!/usr/bin/env bash
# `datavo cache info`, `cache check`, `cache fetch` and `warm` with a config that holds an S3 tier, on moto (through
# tests/support/cloud_proxy.py, which counts the requests) and on s3rver (which checks every signature):
#   1. `cache info` lists the S3 tier without touching the network: with the endpoint at a closed port and no
#      credentials it is quick and succeeds, and through the proxy it makes 0 requests;
#   2. `cache check`: moto passes every probe and leaves nothing behind; s3rver ignores conditional writes, which
#      fails the tier with single_flight: true and is a WARNING with single_flight: false; a missing bucket fails;
#   3. `cache fetch` on a miss fetches, installs locally and uploads (reported: "1 uploaded"), multipart above
#      part_size; a second VM (another folder tier) gets the shard from the bucket without asking the origin;
#   4. `warm` of a dataset from `datavo serve`: every shard fetched once and uploaded once (reported), and a second
#      VM warms from the bucket with 0 shard requests to the origin; the same on s3rver (single_flight: false).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)

s3_up s3rver moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"
make_bucket "$MOTO_S3_ENDPOINT" cli-bucket
S3RVER_ENV=(AWS_ACCESS_KEY_ID="$S3RVER_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$S3RVER_SECRET_ACCESS_KEY")
s3rver_tool() { AWS_ACCESS_KEY_ID=$S3RVER_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$S3RVER_SECRET_ACCESS_KEY s3tool "$S3RVER_ENDPOINT" "$@"; }

# config FILE VM_DIR TIER_YAML...: a folder tier for this "VM", then the given tier lines.
config() {
  local file=$1 vm=$2
  shift 2
  {
    printf 'tiers:\n  - name: local\n    path: %s\n' "$vm"
    printf '%s\n' "$@"
  } >"$file"
}

# --- 1. cache info does no network I/O -----------------------------------------------------------------------

closed_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
config "$E2E_TMP/closed.yaml" "$E2E_TMP/vm0" "$(s3_tier_yaml bucket cli-bucket "http://127.0.0.1:$closed_port" \
  'prefix: /team-a/')"
started=$(date +%s%N)
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/closed.yaml" \
  --json cache info 2>"$E2E_TMP/info.err") && rc=0 || rc=$?
took=$((($(date +%s%N) - started) / 1000000))
expect_eq "cache info, endpoint at a closed port, no credentials: exit 0" 0 "$rc"
expect_cmp "cache info, endpoint at a closed port: quick (ms)" "$took" -lt 2000
expect_eq "cache info lists the S3 tier (type, location with the normalised prefix, usage unknown)" \
  '["s3", "s3://cli-bucket/team-a", null]' \
  "$(json "[[t['type'], t['path'], t['used_bytes']] for t in j['tiers'] if t['tier'] == 'bucket'][0]" <<<"$out")"
expect_eq "cache info: nothing on stderr" "" "$(cat "$E2E_TMP/info.err")"
run_text=$(timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/closed.yaml" cache info 2>&1)
expect_contains "cache info (text): the S3 tier" "bucket [s3] s3://cli-bucket/team-a" "$run_text"

config "$E2E_TMP/proxied.yaml" "$E2E_TMP/vm0" "$(s3_tier_yaml bucket cli-bucket "$MOTO_URL")"
proxy_reset "$MOTO_URL"
timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/proxied.yaml" cache info >/dev/null 2>&1
timeout 20 "$DATAVO_BIN" --config "$E2E_TMP/proxied.yaml" --json cache stats >/dev/null 2>&1
expect_eq "cache info and cache stats through the proxy: 0 requests" 0 "$(proxy_json "$MOTO_URL" "j['total']")"

# --- 2. cache check -----------------------------------------------------------------------------------------

proxy_reset "$MOTO_URL"
write_config <"$E2E_TMP/proxied.yaml"
run --json cache check
expect_eq "check (moto): exit 0" 0 "$RC"
expect_eq "check (moto): every probe of the S3 tier ok" \
  '[["credentials", true], ["put", true], ["get", true], ["conditional put", true], ["delete", true]]' \
  "$(json "[[s['step'], s['ok']] for t in j['tiers'] if t['tier'] == 'bucket' for s in t['steps']]" <<<"$OUT")"
expect_eq "check (moto): one object each, put twice (the second refused), deleted" \
  "1 2 1 1" "$(proxy_json "$MOTO_URL" "' '.join(str(j['ops'].get(o, 0)) for o in ['Probe:GetObject', 'Probe:PutObject', 'Probe:DeleteObject', 'Probe:HeadObject'])")"
expect_eq "check (moto): the second create was a 412" 1 \
  "$(proxy_json "$MOTO_URL" "j['statuses']['Probe:PutObject'].get('412', 0)")"
expect_eq "check (moto): nothing left in the bucket" "[]" "$(s3tool "$MOTO_S3_ENDPOINT" ls cli-bucket)"
run cache check
expect_contains "check (text): the tier and its probes" "bucket [s3] s3://cli-bucket: ok" "$OUT"

config "$E2E_TMP/s3rver-sf.yaml" "$E2E_TMP/vm0" "$(s3_tier_yaml rver "$S3RVER_BUCKET" "$S3RVER_ENDPOINT")"
out=$(env "${S3RVER_ENV[@]}" timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/s3rver-sf.yaml" --json cache check \
  2>"$E2E_TMP/check.err") && rc=0 || rc=$?
expect_eq "check (s3rver, single_flight: true): exit 1" 1 "$rc"
expect_contains "check (s3rver): says the server ignores conditional writes" "it ignores conditional writes (If-None-Match" "$out"
expect_contains "check (s3rver): says what needs them" "which single_flight: true needs" "$out"
expect_eq "check (s3rver): readable, not writable" "[true, false]" \
  "$(json "[[t['readable'], t['writable']] for t in j['tiers'] if t['tier'] == 'rver'][0]" <<<"$out")"
config "$E2E_TMP/s3rver.yaml" "$E2E_TMP/vm0" "$(s3_tier_yaml rver "$S3RVER_BUCKET" "$S3RVER_ENDPOINT" \
  'single_flight: false')"
out=$(env "${S3RVER_ENV[@]}" timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/s3rver.yaml" cache check 2>&1) && rc=0 || rc=$?
expect_eq "check (s3rver, single_flight: false): exit 0" 0 "$rc"
expect_contains "check (s3rver, single_flight: false): a WARNING" "WARNING: the server ignores conditional writes" "$out"
expect_eq "check (s3rver): the probe object was removed" "[]" "$(s3rver_tool ls "$S3RVER_BUCKET" .datavo-check/)"
config "$E2E_TMP/nobucket.yaml" "$E2E_TMP/vm0" "$(s3_tier_yaml gone no-such-bucket "$MOTO_URL")"
out=$(timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/nobucket.yaml" cache check 2>&1) && rc=0 || rc=$?
expect_eq "check (a bucket that does not exist): exit 1" 1 "$rc"
expect_contains "check (a bucket that does not exist): says so" "NoSuchBucket" "$out"

# --- 3. cache fetch -----------------------------------------------------------------------------------------

mkdir -p "$E2E_TMP/files"
SMALL_SHA=$(make_shard "$E2E_TMP/files/small.bin" 300000)
BIG_SHA=$(make_shard "$E2E_TMP/files/big.bin" $((12 * 1024 * 1024 + 7)))
start_server "$E2E_TMP/files"
config "$E2E_TMP/vm1.yaml" "$E2E_TMP/vm1" "$(s3_tier_yaml bucket cli-bucket "$MOTO_URL" 'part_size: 5MiB')"
config "$E2E_TMP/vm2.yaml" "$E2E_TMP/vm2" "$(s3_tier_yaml bucket cli-bucket "$MOTO_URL" 'part_size: 5MiB')"
write_config <"$E2E_TMP/vm1.yaml"
INSTANCE=$(dv --json cache info | json "j['instance']")
H_SMALL=$(hash_for small)
H_BIG=$(hash_for big)
proxy_reset "$MOTO_URL"
run --json cache fetch "$H_SMALL" --url "$SERVER_URL/small.bin" --sha256 "$SMALL_SHA" --size 300000
expect_eq "fetch (miss): exit 0" 0 "$RC"
expect_eq "fetch (miss): fetched into the local tier, uploaded once" '["fetched", "local", 1, 0, 0]' \
  "$(json "[j['source'], j['tier'], j['uploads']['uploaded'], j['uploads']['failed'], j['uploads']['pending']]" <<<"$OUT")"
expect_eq "fetch (miss): the bytes" "$SMALL_SHA" "$(sha256_of "$(json "j['path']" <<<"$OUT")")"
expect_eq "fetch (miss): two GETs (the lookup's 404, the look again once the lease is held), one PUT, the lease created and deleted" "2 1 1 1" \
  "$(proxy_json "$MOTO_URL" "' '.join(str(j['ops'].get(o, 0)) for o in ['GetObject', 'PutObject', 'Lease:PutObject', 'Lease:DeleteObject'])")"
meta=$(s3tool "$MOTO_S3_ENDPOINT" head cli-bucket "$(entry_key "$INSTANCE" "$H_SMALL")")
expect_eq "fetch: the object carries datavo-sha256 and datavo-size" "[\"$SMALL_SHA\", \"300000\", 300000]" \
  "$(json "[j['metadata'].get('datavo-sha256'), j['metadata'].get('datavo-size'), j['size']]" <<<"$meta")"

proxy_reset "$MOTO_URL"
run cache fetch "$H_BIG" --url "$SERVER_URL/big.bin" --sha256 "$BIG_SHA"
expect_eq "fetch (12 MiB): exit 0" 0 "$RC"
expect_contains "fetch (text): reports the upload on stderr" "uploads to remote tiers: 1 uploaded, 0 already there, 0 failed" "$ERR"
expect_eq "fetch (text): stdout is the path only" 1 "$(wc -l <<<"$OUT")"
expect_eq "fetch (12 MiB): multipart, 3 parts, completed once, no single PUT" "1 3 1 0" \
  "$(proxy_json "$MOTO_URL" "' '.join(str(j['ops'].get(o, 0)) for o in ['CreateMultipartUpload', 'UploadPart', 'CompleteMultipartUpload', 'PutObject'])")"

requests_before=$(server_requests /big.bin)
write_config <"$E2E_TMP/vm2.yaml"
proxy_reset "$MOTO_URL"
run --json cache fetch "$H_BIG" --url "$SERVER_URL/big.bin" --sha256 "$BIG_SHA"
expect_eq "fetch on a second VM: from the bucket (promoted), no upload" '["promoted", 0]' \
  "$(json "[j['source'], j['uploads']['uploaded']]" <<<"$OUT")"
expect_eq "fetch on a second VM: the bytes" "$BIG_SHA" "$(sha256_of "$(json "j['path']" <<<"$OUT")")"
expect_eq "fetch on a second VM: no request to the origin" "$requests_before" "$(server_requests /big.bin)"
expect_eq "fetch on a second VM: three ranged GETs, two pinned with If-Match" "3 2" \
  "$(proxy_json "$MOTO_URL" "str(j['ops'].get('GetObject', 0)) + ' ' + str(len([r for r in j['log'] if r['op'] == 'GetObject' and r['if_match']]))")"
expect_eq "no multipart upload left open" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads cli-bucket)"

# The same on s3rver, which checks the signature of every request.
config "$E2E_TMP/rver1.yaml" "$E2E_TMP/rver1" "$(s3_tier_yaml rver "$S3RVER_BUCKET" "$S3RVER_ENDPOINT" \
  'single_flight: false' 'part_size: 5MiB')"
config "$E2E_TMP/rver2.yaml" "$E2E_TMP/rver2" "$(s3_tier_yaml rver "$S3RVER_BUCKET" "$S3RVER_ENDPOINT" \
  'single_flight: false' 'part_size: 5MiB')"
for vm in 1 2; do
  out=$(env "${S3RVER_ENV[@]}" timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/rver$vm.yaml" --json cache fetch "$H_BIG" \
    --url "$SERVER_URL/big.bin" --sha256 "$BIG_SHA" 2>"$E2E_TMP/rver.err") && rc=0 || rc=$?
  expect_eq "fetch on s3rver, VM $vm: exit 0" 0 "$rc"
  want=$([ $vm = 1 ] && echo '["fetched", 1]' || echo '["promoted", 0]')
  expect_eq "fetch on s3rver, VM $vm: source and uploads" "$want" "$(json "[j['source'], j['uploads']['uploaded']]" <<<"$out")"
  expect_eq "fetch on s3rver, VM $vm: no WARNING" "" "$(grep WARNING "$E2E_TMP/rver.err")"
done

# --- 4. warm ------------------------------------------------------------------------------------------------

pack_dataset 60 10 30000
start_origin "$E2E_TMP/store"
make_bucket "$MOTO_S3_ENDPOINT" warm-bucket
config "$E2E_TMP/warm1.yaml" "$E2E_TMP/warm1" "$(s3_tier_yaml bucket warm-bucket "$MOTO_URL")"
config "$E2E_TMP/warm2.yaml" "$E2E_TMP/warm2" "$(s3_tier_yaml bucket warm-bucket "$MOTO_URL")"
proxy_reset "$MOTO_URL"
write_config <"$E2E_TMP/warm1.yaml"
run --json warm "$DS" --key bin --key txt --jobs 3
expect_eq "warm (first VM): exit 0, every shard from the origin" "[0, $SHARDS, 0]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "warm (first VM): every shard uploaded, reported" "[$SHARDS, 0, 0]" \
  "$(json "[j['uploads']['uploaded'], j['uploads']['failed'], j['uploads']['pending']]" <<<"$OUT")"
expect_eq "warm (first VM): one PUT per shard" "$SHARDS" "$(proxy_op "$MOTO_URL" PutObject)"
shard_requests=$(origin_requests shard)
write_config <"$E2E_TMP/warm2.yaml"
run warm "$DS" --key bin --key txt --jobs 3
expect_eq "warm (second VM): exit 0" 0 "$RC"
expect_contains "warm (second VM, text): every shard from the bucket" "origin: 0 shards" "$OUT"
expect_contains "warm (second VM, text): the bucket served them" "tier local: 0 hits, $SHARDS promoted into it" "$OUT"
expect_eq "warm (second VM): 0 shard requests to the origin" "$shard_requests" "$(origin_requests shard)"
run warm "$DS" --key bin --key txt
expect_eq "warm (second VM, again): no upload line when nothing went up" "" "$(grep 'uploads to remote tiers' <<<"$OUT")"

config "$E2E_TMP/rwarm.yaml" "$E2E_TMP/rwarm" "$(s3_tier_yaml rver "$S3RVER_BUCKET" "$S3RVER_ENDPOINT" \
  'prefix: warm' 'single_flight: false')"
out=$(env "${S3RVER_ENV[@]}" timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/rwarm.yaml" --json warm "$DS" --key bin \
  --key txt 2>"$E2E_TMP/rwarm.err") && rc=0 || rc=$?
expect_eq "warm on s3rver: exit 0, every shard uploaded" "[0, $SHARDS, 0]" \
  "[$rc, $(json "j['uploads']['uploaded']" <<<"$out"), $(json "j['uploads']['failed']" <<<"$out")]"
expect_eq "warm on s3rver: no WARNING (every signature accepted)" "" "$(grep WARNING "$E2E_TMP/rwarm.err")"

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
