# Shared helpers of the S3 end-to-end suites (tests/e2e/test_s3_*.sh). Source it right after lib.sh:
#
#     : "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"; : "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
#     export DATAVO_EMULATOR_DIR PYENV_ROOT      # before lib.sh moves HOME
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/s3_lib.sh"
#
# What it gives a suite:
#   - s3_up NAME...: the emulators (tests/support/emulators.sh: s3rver, moto) in the suite's own run dir, stopped by
#     PID on exit; dies naming an emulator that cannot start. IMAGE_PY: the image's python with boto3 and moto
#     (found the way the harness finds moto's); AWS_CLI: its `aws`.
#   - start_proxy NAME UPSTREAM: tests/support/cloud_proxy.py in front of UPSTREAM; sets <NAME>_URL
#     (cloud_proxy_lib.sh). proxy_mode URL LINE, proxy_reset URL, proxy_json URL EXPR, proxy_op URL OP.
#   - s3tool ENDPOINT ARGS...: tests/support/s3_tool.py (boto3) with the image's python.
#   - make_bucket ENDPOINT BUCKET
#   - the origin: make_source DIR N, start_origin STORE (sets ORIGIN_URL), origin_requests ROUTE [STATUS]
#     (datavo_requests_total on /v1/metrics), pack_dataset (DS, SAMPLES, PER_SHARD, SHARDS, REVISION).
#   - s3_tier_yaml NAME BUCKET ENDPOINT [EXTRA...]: the YAML of one S3 tier (EXTRA: more "key: value" fields).
#   - moto credentials in the environment (any key works on moto; the proxy's counters show the key id).

S3LIB_HARNESS="$DATAVO_SOURCE_DIR/tests/support/emulators.sh"
S3LIB_TOOL="$DATAVO_SOURCE_DIR/tests/support/s3_tool.py"
export DATAVO_EMULATOR_RUN_DIR="$E2E_TMP/emulators"
export AWS_ACCESS_KEY_ID=AKIDDATAVOE2E AWS_SECRET_ACCESS_KEY=e2e-secret AWS_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION
export AWS_CONFIG_FILE="$E2E_TMP/no-aws-config" AWS_SHARED_CREDENTIALS_FILE="$E2E_TMP/no-aws-credentials"

# shellcheck source=../support/emulators.sh
. "$S3LIB_HARNESS"
# shellcheck source=cloud_proxy_lib.sh
. "$DATAVO_SOURCE_DIR/tests/e2e/cloud_proxy_lib.sh"
on_exit_first "emulators_down >/dev/null 2>&1"

s3_up() {
  local started lines
  started=$(date +%s%N)
  if ! lines=$(emu_up_print "$@" 2>"$E2E_TMP/emulators-up.err"); then
    die "emulators up: $*" "$(e2e_abbrev "$(cat "$E2E_TMP/emulators-up.err")")"
  fi
  eval "$lines"
  echo "# emulators up ($*): $((($(date +%s%N) - started) / 1000000)) ms"
  IMAGE_PY=$(emu_moto_python 2>"$E2E_TMP/python.err") ||
    die "the image's python" "$(cat "$E2E_TMP/python.err") (boto3 and moto are needed)"
  "$IMAGE_PY" -c 'import boto3' 2>/dev/null || die "the image's python" "$IMAGE_PY cannot import boto3"
  AWS_CLI="$(dirname "$IMAGE_PY")/aws"
}

s3tool() {
  local endpoint=$1
  shift
  "$IMAGE_PY" "$S3LIB_TOOL" --endpoint "$endpoint" "$@"
}

make_bucket() { s3tool "$1" mb "$2" || die "create bucket $2 at $1" "s3_tool.py mb failed"; }

# --- the origin -------------------------------------------------------------------------------------------------

make_source() {
  python3 - "$1" "$2" "${3:-2000}" <<'PY'
import os, random, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root, exist_ok=True)
rng = random.Random(n)
for i in range(n):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(size))
    with open(os.path.join(root, "s_%05d.txt" % i), "w") as f:
        f.write("sample %d\n" % i)
PY
}

# pack_dataset SAMPLES PER_SHARD [SAMPLE_BYTES]: packs a dataset into $E2E_TMP/store; sets DS, SHARDS, REVISION.
pack_dataset() {
  DS=s3_e2e/train
  make_source "$E2E_TMP/src" "$1" "${3:-2000}"
  run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$2"
  [ "$RC" -eq 0 ] || die "pack" "$ERR"
  SHARDS=$(json "j['total_shards']" <<<"$OUT")
  REVISION=$(json "j['revision']" <<<"$OUT")
}

start_origin() {
  local store=$1
  shift
  local port_file="$E2E_TMP/.origin.port.$RANDOM"
  "$DATAVO_BIN" serve "$store" --port 0 --port-file "$port_file" --quiet "$@" >"$E2E_TMP/origin.log" 2>&1 &
  ORIGIN_PID=$!
  track_pid "$ORIGIN_PID"
  wait_until 15 test -s "$port_file" || die "start datavo serve" "$(cat "$E2E_TMP/origin.log")"
  ORIGIN_URL="http://127.0.0.1:$(cat "$port_file")"
  export DATAVO_SERVER="$ORIGIN_URL"
}

# origin_requests ROUTE [STATUS]: datavo_requests_total of the origin for ROUTE.
origin_requests() {
  python3 - "$ORIGIN_URL" "$1" "${2:-}" <<'PY'
import re, sys, urllib.request
url, route, status = sys.argv[1], sys.argv[2], sys.argv[3]
text = urllib.request.urlopen(url + "/v1/metrics", timeout=10).read().decode()
total = 0
for line in text.splitlines():
    m = re.match(r'datavo_requests_total\{(.*)\}\s+([0-9.eE+]+)$', line)
    if m:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("route") == route and (not status or labels.get("status") == status):
            total += int(float(m.group(2)))
print(total)
PY
}

# origin_bytes: the origin's shard bytes served so far (datavo_response_bytes_total of /v1/metrics).
origin_bytes() {
  python3 - "$ORIGIN_URL" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1] + "/v1/metrics", timeout=10).read().decode()
m = re.search(r'datavo_response_bytes_total\{route="shard"\}\s+([0-9.eE+]+)', text)
print(int(float(m.group(1))) if m else 0)
PY
}

# s3_tier_yaml NAME BUCKET ENDPOINT [FIELD: VALUE ...]
s3_tier_yaml() {
  local name=$1 bucket=$2 endpoint=$3 field
  shift 3
  printf '  - name: %s\n    type: s3\n    bucket: %s\n    endpoint_url: %s\n    region: us-east-1\n' \
    "$name" "$bucket" "$endpoint"
  for field in "$@"; do printf '    %s\n' "$field"; done
}

# entry_key INSTANCE HASH [PREFIX]: the object name of an entry.
entry_key() { echo "${3:+$3/}$1/$2.tar"; }
