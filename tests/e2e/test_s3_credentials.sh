#!/usr/bin/env bash
# The AWS credential chain of the S3 tier against local endpoints, through `datavo cache fetch` / `cache check`:
#   1. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, exchanged at moto's STS (AWS_ENDPOINT_URL_STS);
#   2. ECS container credentials (tests/support/aws_metadata_server.py, with an authorization token) that expire
#      within seconds: during one throttled 20 MiB download and one 20 MiB multipart upload they are refreshed
#      (the requests the proxy saw carry several access key ids), and no transfer starts over (every range and
#      every part is sent once); an ExpiredToken answer mid-download repeats that one range only;
#   3. IMDSv2 (session token, then the role's credentials), expiring within seconds, refreshed mid-download;
#   4. credential_process in a profile of the config file, on moto and on s3rver (which checks the signatures);
#   5. a profile of the shared credentials file named by the tier's `profile` field, with the profile's region;
#      and the chain's order: environment keys win over a profile;
#   6. a credential_process during a warm of 8 shards: run once when its credentials are valid (cached by the one
#      refresh rule, not run per request); when they are already expired, refused with a message that says so (as
#      botocore refuses them), never sent to S3, and the process not run again for every request.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)

s3_up s3rver moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"
make_bucket "$MOTO_S3_ENDPOINT" creds
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"
MIB=$((1024 * 1024))

# Only the chain's source under test may be visible: no keys in the environment from here on.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
export AWS_EC2_METADATA_DISABLED=true

vm_config() { # VM ENDPOINT BUCKET [FIELD...]
  local vm=$1 endpoint=$2 bucket=$3
  shift 3
  write_config "$E2E_TMP/$vm.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/$vm" \
    "$(s3_tier_yaml bucket "$bucket" "$endpoint" 'part_size: 5MiB' 'concurrency: 2' "$@")")
}

# keys_of OP: the distinct access key ids of the proxy's OP requests, comma-separated.
keys_of() { proxy_json "$MOTO_URL" "','.join(sorted(set(r['akid'] or '-' for r in j['log'] if r['op'] == '$1')))"; }
# ranges_of: the Range headers of the GETs, in order.
ranges_of() { proxy_json "$MOTO_URL" "' '.join(r['range'] or 'whole' for r in j['log'] if r['op'] == 'GetObject')"; }

start_metadata_server() { # --lifetime S ...
  local port_file="$E2E_TMP/.metadata.port.$RANDOM"
  python3 "$DATAVO_SOURCE_DIR/tests/support/aws_metadata_server.py" --port-file "$port_file" "$@" \
    >"$E2E_TMP/metadata.log" 2>&1 &
  METADATA_PID=$!
  track_pid "$METADATA_PID"
  wait_until 15 test -s "$port_file" || die "start aws_metadata_server.py" "$(cat "$E2E_TMP/metadata.log")"
  METADATA_URL="http://127.0.0.1:$(cat "$port_file")"
}
metadata_stat() { curl -s --max-time 5 "$METADATA_URL/_stats" | json "$1"; }

# --- 1. web identity through moto's STS ---------------------------------------------------------------------

echo "eyJhbGciOiJub25lIn0.eyJzdWIiOiJkYXRhdm8ifQ." >"$E2E_TMP/web-identity-token"
vm_config wi "$MOTO_URL" creds
SHA_WI=$(make_shard "$E2E_TMP/files/wi.bin" 100000)
proxy_reset "$MOTO_URL"
AWS_WEB_IDENTITY_TOKEN_FILE="$E2E_TMP/web-identity-token" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/datavo \
  AWS_ROLE_SESSION_NAME=e2e AWS_ENDPOINT_URL_STS="$MOTO_URL" AWS_REGION=us-east-1 \
  run --json cache fetch "$(hash_for wi)" --url "$SERVER_URL/wi.bin" --sha256 "$SHA_WI"
expect_eq "web identity: fetch and upload" '[0, 1]' "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT" 2>/dev/null || echo -1)]"
expect_eq "web identity: one AssumeRoleWithWebIdentity at moto's STS" 1 \
  "$(proxy_op "$MOTO_URL" STS:AssumeRoleWithWebIdentity)"
expect_match "web identity: the S3 requests are signed with STS's temporary key (ASIA...)" '^ASIA[A-Z0-9]+$' "$(keys_of PutObject)"
AWS_WEB_IDENTITY_TOKEN_FILE="$E2E_TMP/web-identity-token" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/datavo \
  AWS_ENDPOINT_URL_STS="$MOTO_URL" run cache check
expect_eq "web identity: cache check passes" 0 "$RC"
expect_match "web identity: check names the source" "credentials: web identity" "$OUT"

# --- 2. ECS container credentials that expire within seconds ------------------------------------------------

start_metadata_server --lifetime 3 --ecs-token "ecs-secret-token"
ECS_ENV=(AWS_CONTAINER_CREDENTIALS_FULL_URI="$METADATA_URL/ecs/credentials"
  AWS_CONTAINER_AUTHORIZATION_TOKEN="ecs-secret-token")
SIZE=$((20 * MIB + 9))
SHA_BIG=$(make_shard "$E2E_TMP/files/big.bin" "$SIZE")
H_BIG=$(hash_for big)
# Each request at 1.5 MB/s, two at a time: about 7 s per 20 MiB, so 3-second credentials expire mid-transfer.
vm_config ecs-up "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "throttle rate=1500000 op=UploadPart"
env "${ECS_ENV[@]}" timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/ecs-up.yaml" --json cache fetch "$H_BIG" \
  --url "$SERVER_URL/big.bin" --sha256 "$SHA_BIG" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
expect_eq "ECS: a 20 MiB fetch and multipart upload" '[1, 0]' \
  "$(json "[j['uploads']['uploaded'], j['uploads']['failed']]" <"$E2E_TMP/out" 2>/dev/null || cat "$E2E_TMP/err")"
expect_eq "ECS upload: one CreateMultipartUpload, each of the 5 parts sent once, one Complete" "1 5 1" \
  "$(proxy_json "$MOTO_URL" "' '.join(str(j['ops'].get(o, 0)) for o in ['CreateMultipartUpload', 'UploadPart', 'CompleteMultipartUpload'])")"
expect_eq "ECS upload: the part numbers" "1 2 3 4 5" \
  "$(proxy_json "$MOTO_URL" "' '.join(sorted((q.split('partNumber=')[1].split('&')[0] for q in [r['query'] for r in j['log'] if r['op'] == 'UploadPart']), key=int))")"
keys=$(keys_of UploadPart)
expect_cmp "ECS upload: the credentials were refreshed during the upload (keys: $keys)" \
  "$(tr ',' '\n' <<<"$keys" | grep -c '^ASIAECS')" -ge 2
expect_cmp "ECS: credentials fetched more than once" "$(metadata_stat "j['ecs']")" -ge 2
expect_eq "ECS: the authorization token was always sent" 0 "$(metadata_stat "j['refused']")"
expect_eq "ECS: no secret in the output" "" "$(grep -l -e ecs-secret-token -e test-secret "$E2E_TMP/out" "$E2E_TMP/err")"

vm_config ecs-down "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "throttle rate=1500000 op=GetObject"
env "${ECS_ENV[@]}" timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/ecs-down.yaml" --json cache fetch "$H_BIG" \
  --url "$SERVER_URL/big.bin" --sha256 "$SHA_BIG" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
expect_eq "ECS download: from the bucket" promoted "$(json "j['source']" <"$E2E_TMP/out" 2>/dev/null || cat "$E2E_TMP/err")"
expect_eq "ECS download: the bytes" "$SHA_BIG" "$(sha256_of "$(json "j['path']" <"$E2E_TMP/out" 2>/dev/null || echo /none)" 2>/dev/null)"
expect_eq "ECS download: each range once, none from byte 0 again" \
  "bytes=0-5242879 bytes=5242880-10485759 bytes=10485760-15728639 bytes=15728640-20971519 bytes=20971520-20971528" \
  "$(proxy_json "$MOTO_URL" "' '.join(sorted((r['range'] for r in j['log'] if r['op'] == 'GetObject'), key=lambda x: int(x[6:].split('-')[0])))")"
keys=$(keys_of GetObject)
expect_cmp "ECS download: the credentials were refreshed mid-download (keys: $keys)" \
  "$(tr ',' '\n' <<<"$keys" | grep -c '^ASIAECS')" -ge 2

# An ExpiredToken answer in the middle: that one range is signed afresh and repeated, nothing else.
vm_config ecs-expired "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "expiredtoken op=GetObject after=2 count=1"
ecs_before=$(metadata_stat "j['ecs']")
env "${ECS_ENV[@]}" timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/ecs-expired.yaml" --json cache fetch "$H_BIG" \
  --url "$SERVER_URL/big.bin" --sha256 "$SHA_BIG" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
expect_eq "ExpiredToken mid-download: still served from the bucket" "promoted" "$(json "j['source']" <"$E2E_TMP/out" 2>/dev/null)"
expect_eq "ExpiredToken mid-download: 5 ranges + the refused one repeated once" 6 "$(proxy_op "$MOTO_URL" GetObject)"
expect_eq "ExpiredToken mid-download: the first range was not read again" 1 \
  "$(proxy_json "$MOTO_URL" "len([r for r in j['log'] if r['op'] == 'GetObject' and r['range'] == 'bytes=0-5242879'])")"
expect_eq "ExpiredToken mid-download: the refused request was answered 400 once" 1 \
  "$(proxy_json "$MOTO_URL" "j['statuses']['GetObject'].get('400', 0)")"
expect_cmp "ExpiredToken mid-download: new credentials were fetched" "$(metadata_stat "j['ecs']")" -gt "$ecs_before"
proxy_mode "$MOTO_URL" ok
stop_pid "$METADATA_PID"

# --- 3. IMDSv2 ----------------------------------------------------------------------------------------------

start_metadata_server --lifetime 3 --role datavo-vm-role
IMDS_ENV=(AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="$METADATA_URL")
vm_config imds "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "throttle rate=1500000 op=GetObject"
env "${IMDS_ENV[@]}" timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/imds.yaml" --json cache fetch "$H_BIG" \
  --url "$SERVER_URL/big.bin" --sha256 "$SHA_BIG" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
expect_eq "IMDSv2 download: from the bucket" "promoted" "$(json "j['source']" <"$E2E_TMP/out" 2>/dev/null || cat "$E2E_TMP/err")"
expect_eq "IMDSv2 download: five ranges, each once" 5 "$(proxy_op "$MOTO_URL" GetObject)"
keys=$(keys_of GetObject)
expect_cmp "IMDSv2 download: the credentials were refreshed mid-download (keys: $keys)" \
  "$(tr ',' '\n' <<<"$keys" | grep -c '^ASIAIMDS')" -ge 2
expect_cmp "IMDSv2: a session token was asked for" "$(metadata_stat "j['tokens']")" -ge 1
expect_eq "IMDSv2: never asked without a session token (IMDSv1)" 0 "$(metadata_stat "j['refused']")"
proxy_mode "$MOTO_URL" ok
stop_pid "$METADATA_PID"

# --- 4. credential_process ----------------------------------------------------------------------------------

cat >"$E2E_TMP/creds-process.py" <<'EOF'
import json, sys
print(json.dumps({"Version": 1, "AccessKeyId": sys.argv[1], "SecretAccessKey": sys.argv[2]}))
EOF
cat >"$E2E_TMP/aws-config" <<EOF
[profile proc]
credential_process = python3 $E2E_TMP/creds-process.py AKIDFROMPROCESS process-secret
[profile rverproc]
credential_process = python3 "$E2E_TMP/creds-process.py" $S3RVER_ACCESS_KEY_ID $S3RVER_SECRET_ACCESS_KEY
EOF
SHA_P=$(make_shard "$E2E_TMP/files/proc.bin" 100000)
vm_config proc "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
AWS_CONFIG_FILE="$E2E_TMP/aws-config" AWS_PROFILE=proc AWS_REGION=us-east-1 \
  run --json cache fetch "$(hash_for proc)" --url "$SERVER_URL/proc.bin" --sha256 "$SHA_P"
expect_eq "credential_process (moto): fetch and upload" '[0, 1]' "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT" 2>/dev/null || echo -1)]"
expect_eq "credential_process (moto): the requests carry its key" AKIDFROMPROCESS "$(keys_of PutObject)"
vm_config rverproc "$S3RVER_ENDPOINT" "$S3RVER_BUCKET" 'single_flight: false' 'profile: rverproc'
AWS_CONFIG_FILE="$E2E_TMP/aws-config" run --json cache fetch "$(hash_for proc)" --url "$SERVER_URL/proc.bin" \
  --sha256 "$SHA_P"
expect_eq "credential_process (s3rver, profile field): every signature accepted" '[0, 1, 0]' \
  "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT" 2>/dev/null || echo -1), $(grep -c WARNING <<<"$ERR")]"

# --- 5. a profile of the shared credentials file, and the chain's order -------------------------------------

cat >"$E2E_TMP/aws-credentials" <<EOF
[team]
aws_access_key_id = $S3RVER_ACCESS_KEY_ID
aws_secret_access_key = $S3RVER_SECRET_ACCESS_KEY
EOF
cat >"$E2E_TMP/aws-config-team" <<EOF
[profile team]
region = eu-west-1
EOF
vm_config team "$S3RVER_ENDPOINT" "$S3RVER_BUCKET" 'single_flight: false' 'profile: team'
sed -i '/region: us-east-1/d' "$E2E_TMP/team.yaml"
write_config <"$E2E_TMP/team.yaml"
AWS_SHARED_CREDENTIALS_FILE="$E2E_TMP/aws-credentials" AWS_CONFIG_FILE="$E2E_TMP/aws-config-team" run cache check
expect_eq "profile file (s3rver): check passes" 0 "$RC"
expect_contains "profile file: the credentials come from the profile" "profile team" "$OUT"
expect_contains "profile file: the profile's region is used" "region eu-west-1" "$OUT"
AWS_SHARED_CREDENTIALS_FILE="$E2E_TMP/aws-credentials" AWS_CONFIG_FILE="$E2E_TMP/aws-config-team" AWS_REGION=us-west-2 \
  run cache check
expect_contains "region order: AWS_REGION beats the profile's region" "region us-west-2" "$OUT"
AWS_SHARED_CREDENTIALS_FILE="$E2E_TMP/aws-credentials" AWS_CONFIG_FILE="$E2E_TMP/aws-config-team" \
  AWS_ACCESS_KEY_ID="$S3RVER_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY=wrong-secret run --json cache check
expect_eq "chain order: environment keys come before the profile (a wrong secret there is refused)" 1 "$RC"
expect_contains "chain order: the credentials step names the environment" "environment" "$OUT"
expect_eq "the wrong secret never appears in the output" "" "$(grep -l wrong-secret <<<"$OUT$ERR")"

# --- 6. credential_process during a warm: cached, and refused when expired ------------------------------------

cat >"$E2E_TMP/creds-counted.py" <<'EOF'
import json, sys
with open(sys.argv[1], "a") as runs:
    runs.write("run\n")
print(json.dumps({"Version": 1, "AccessKeyId": sys.argv[2], "SecretAccessKey": "process-secret",
                  "SessionToken": "process-token", "Expiration": sys.argv[3]}))
EOF
in_an_hour=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
cat >"$E2E_TMP/aws-config-counted" <<EOF
[profile valid]
credential_process = python3 $E2E_TMP/creds-counted.py $E2E_TMP/valid-runs AKIDVALIDPROC $in_an_hour
[profile expired]
credential_process = python3 $E2E_TMP/creds-counted.py $E2E_TMP/expired-runs AKIDEXPIREDPROC 2000-01-01T00:00:00Z
EOF
pack_dataset 16 2
start_origin "$E2E_TMP/store"
runs_of() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

vm_config warm-valid "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
AWS_CONFIG_FILE="$E2E_TMP/aws-config-counted" AWS_PROFILE=valid run --json warm "$DS" --key bin --key txt --jobs 4
expect_eq "credential_process, valid: the warm of $SHARDS shards uploads each" "[0, $SHARDS]" \
  "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT" 2>/dev/null || echo -1)]"
expect_eq "credential_process, valid: the requests carry its key" AKIDVALIDPROC "$(keys_of PutObject)"
expect_eq "credential_process, valid: run once for the whole warm" 1 "$(runs_of "$E2E_TMP/valid-runs")"

vm_config warm-expired "$MOTO_URL" creds
proxy_reset "$MOTO_URL"
AWS_CONFIG_FILE="$E2E_TMP/aws-config-counted" AWS_PROFILE=expired run --json warm "$DS" --key bin --key txt --jobs 4
expect_contains "credential_process, expired: the message says the credentials expired" \
  "expired at 2000-01-01T00:00:00Z" "$ERR"
expect_eq "credential_process, expired: no request reached S3 with them" 0 \
  "$(proxy_json "$MOTO_URL" "len([r for r in j['log'] if r['akid'] == 'AKIDEXPIREDPROC'])")"
expect_eq "credential_process, expired: every shard still served by the origin" "$SHARDS" \
  "$(json "j['origin']['shards']" <<<"$OUT" 2>/dev/null || echo -1)"
expired_runs=$(runs_of "$E2E_TMP/expired-runs")
expect_cmp "credential_process, expired: not run again for every request ($expired_runs runs)" "$expired_runs" -le 3
expect_eq "credential_process, expired: no secret in the output" "" \
  "$(grep -e process-secret -e process-token <<<"$OUT$ERR")"

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
