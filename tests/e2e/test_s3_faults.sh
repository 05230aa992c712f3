#!/usr/bin/env bash
# Faults of an S3 tier, through `datavo cache fetch` and `datavo warm`. In every case the tier degrades (a
# WARNING, never a failed read), nothing bad is installed locally (the bytes served are checked, `cache verify`
# passes, no staging file is left) or remotely (the bucket never holds wrong bytes), no multipart upload is left
# open (ListMultipartUploads on moto), and reads keep working from the other tiers and the origin:
#   1. the S3 server (a dedicated moto) killed with SIGKILL mid-download: a slower folder tier serves the shard;
#   2. the S3 server killed mid-upload: the read succeeds, the upload is reported failed;
#   3. the parts of a multipart upload refused (the server going away for UploadPart only): aborted, none open;
#   4. a 503 storm with Retry-After: a short one is ridden out (Retry-After honoured); a long one opens the
#      breaker after 3 failed lookups, with one WARNING, and the origin serves every shard;
#   5. a wrong ETag between ranges (412 to If-Match): the object is read again once; twice, the origin serves;
#   6. an object whose bytes do not match its metadata: never installed, deleted, replaced by good bytes;
#   7. a bucket that does not exist; 8. a wrong secret (s3rver: permission_denied), never shown.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
SUITE_STARTED=$(date +%s)
MIB=$((1024 * 1024))

s3_up s3rver moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"
make_bucket "$MOTO_S3_ENDPOINT" faults
mkdir -p "$E2E_TMP/files"
start_server "$E2E_TMP/files"

# vm NAME ENDPOINT BUCKET [FIELD...]: writes $E2E_TMP/NAME.yaml (local folder, the S3 tier, a slower folder tier
# "slow") and makes it the config.
vm() {
  local name=$1 endpoint=$2 bucket=$3
  shift 3
  write_config "$E2E_TMP/$name.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n  - name: slow\n    path: %s\n' \
    "$E2E_TMP/$name" "$(s3_tier_yaml bucket "$bucket" "$endpoint" 'part_size: 5MiB' 'concurrency: 2' "$@")" \
    "$E2E_TMP/$name-slow")
}

# fetch NAME SHA [ARGS...]: `cache fetch` of the file NAME from the origin, expecting SHA; sets RC OUT ERR.
fetch() {
  local name=$1 sha=$2
  shift 2
  run --json cache fetch "$(hash_for "$name")" --url "$SERVER_URL/$name" --sha256 "$sha" "$@"
}

# served_ok WHAT SHA SOURCE: the fetch succeeded from SOURCE with the right bytes, nothing left in staging.
served_ok() {
  local what=$1 sha=$2 source=$3 path
  expect_eq "$what: exit 0, served from $source" "[0, \"$source\"]" "[$RC, \"$(json "j['source']" <<<"$OUT" 2>/dev/null)\"]"
  path=$(json "j['path']" <<<"$OUT" 2>/dev/null)
  expect_eq "$what: the bytes served are the shard's" "$sha" "$( [ -n "$path" ] && sha256_of "$path")"
  expect_eq "$what: no staging file left" "" "$(staging_files "$(dirname "$(dirname "$path")")" 2>/dev/null)"
}

# verify_local: `cache verify` finds every local entry intact.
verify_local() {
  local out
  out=$(dv --json cache verify 2>&1)
  expect_eq "$1: cache verify: nothing bad installed locally" 0 "$(json "sum(t['bad'] for t in j['tiers'])" <<<"$out")"
}

# mid_transfer OP: a request of OP is under way and has moved bytes (response bytes for GETs, request bytes else).
mid_transfer() {
  [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and not r['done'] and (r['bytes_out'] + r['bytes_in']) > 0])")" -gt 0 ]
}

# A moto of its own, to be killed: its endpoint and PID (through its own proxy, which counts and slows it).
doomed_moto() {
  local run="$E2E_TMP/emulators-doomed" lines
  DATAVO_EMULATOR_RUN_DIR="$run" emulators_down >/dev/null 2>&1  # the one killed before, if any: forget it
  lines=$(DATAVO_EMULATOR_RUN_DIR="$run" emu_up_print moto 2>"$E2E_TMP/doomed.err") ||
    die "a dedicated moto" "$(cat "$E2E_TMP/doomed.err")"
  on_exit_first "DATAVO_EMULATOR_RUN_DIR='$run' emulators_down >/dev/null 2>&1"
  DOOMED_ENDPOINT=$(sed -n 's/^export MOTO_S3_ENDPOINT=//p' <<<"$lines")
  DOOMED_MOTO_PID=$(cat "$run/moto.pid")
  make_bucket "$DOOMED_ENDPOINT" doomed
  start_proxy DOOMED "$DOOMED_ENDPOINT"
}

SIZE=$((12 * MIB + 5))
section() { echo "# $(($(date +%s) - SUITE_STARTED)) s: $1"; }

# --- 1. the server killed mid-download ----------------------------------------------------------------------

section "1. the server killed mid-download"

doomed_moto
SHA1=$(make_shard "$E2E_TMP/files/kill-download.bin" "$SIZE")
vm seed "$DOOMED_URL" doomed
fetch kill-download.bin "$SHA1"
expect_eq "kill mid-download: the shard is in the bucket" 1 "$(json "j['uploads']['uploaded']" <<<"$OUT")"
# The second VM has it in its slower folder tier too, and reads through the bucket first.
vm vm1 "$DOOMED_URL" doomed
printf 'tiers:\n  - name: slow\n    path: %s\n' "$E2E_TMP/vm1-slow" >"$E2E_TMP/slow-only.yaml"
timeout 30 "$DATAVO_BIN" --config "$E2E_TMP/slow-only.yaml" cache put "$(hash_for kill-download.bin)" \
  "$E2E_TMP/files/kill-download.bin" >/dev/null || fail "seed the slower folder tier" "cache put failed"
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=GetObject count=3"
proxy_reset "$DOOMED_URL"
origin_before=$(server_requests /kill-download.bin)
( fetch kill-download.bin "$SHA1"; echo "$RC" >"$E2E_TMP/rc"; echo "$OUT" >"$E2E_TMP/out"; echo "$ERR" >"$E2E_TMP/err" ) &
fetcher=$!
wait_until 30 mid_transfer "$DOOMED_URL" GetObject || fail "kill mid-download" "no download under way"
kill -KILL "$DOOMED_MOTO_PID"
wait "$fetcher"
RC=$(cat "$E2E_TMP/rc") OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
served_ok "kill mid-download" "$SHA1" promoted
expect_eq "kill mid-download: the slower folder tier served it, promoted into the local one" local \
  "$(json "j['tier']" <<<"$OUT")"
expect_eq "kill mid-download: the origin was not asked" "$origin_before" "$(server_requests /kill-download.bin)"
expect_contains "kill mid-download: the tier degraded with a WARNING" "WARNING: tier 'bucket' (s3): download failed" "$ERR"
verify_local "kill mid-download"

# --- 2. the server killed mid-upload ------------------------------------------------------------------------

section "2. the server killed mid-upload"

doomed_moto
SHA2=$(make_shard "$E2E_TMP/files/kill-upload.bin" "$SIZE")
vm vm2 "$DOOMED_URL" doomed
proxy_mode "$DOOMED_URL" "throttle rate=1000000 op=UploadPart count=2"
( fetch kill-upload.bin "$SHA2"; echo "$RC" >"$E2E_TMP/rc"; echo "$OUT" >"$E2E_TMP/out"; echo "$ERR" >"$E2E_TMP/err" ) &
fetcher=$!
wait_until 30 mid_transfer "$DOOMED_URL" UploadPart ||
  fail "kill mid-upload" "no upload under way: $(proxy_json "$DOOMED_URL" "[(r['op'], r['done'], r['bytes_in']) for r in j['log']]")"
kill -KILL "$DOOMED_MOTO_PID"
wait "$fetcher"
RC=$(cat "$E2E_TMP/rc") OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
served_ok "kill mid-upload" "$SHA2" fetched
expect_eq "kill mid-upload: the upload is reported failed, the read is not" '[0, 1]' \
  "$(json "[j['uploads']['uploaded'], j['uploads']['failed']]" <<<"$OUT")"
expect_contains "kill mid-upload: a WARNING says the read succeeded" "(the read it served succeeded)" "$ERR"
verify_local "kill mid-upload"
echo "# (the killed moto kept its state in memory: its open uploads died with it; case 3 checks the abort)"

# --- 3. the parts of a multipart upload refused -------------------------------------------------------------

section "3. the parts of a multipart upload refused"

SHA3=$(make_shard "$E2E_TMP/files/parts.bin" "$SIZE")
vm vm3 "$MOTO_URL" faults
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "drop op=UploadPart after=1"
fetch parts.bin "$SHA3"
proxy_mode "$MOTO_URL" ok
served_ok "parts refused" "$SHA3" fetched
expect_eq "parts refused: the upload failed" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
expect_eq "parts refused: the upload was aborted" 1 "$(proxy_op "$MOTO_URL" AbortMultipartUpload)"
expect_eq "parts refused: no multipart upload left open" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads faults)"
s3tool "$MOTO_S3_ENDPOINT" head faults "$(entry_key "$(dv --json cache info | json "j['instance']")" "$(hash_for parts.bin)")" \
  >/dev/null && rc=0 || rc=$?
expect_eq "parts refused: no object in the bucket" 3 "$rc"

# --- 4. a 503 storm with Retry-After ------------------------------------------------------------------------

section "4. a 503 storm with Retry-After"

SHA4=$(make_shard "$E2E_TMP/files/storm.bin" 200000)
vm vm4a "$MOTO_URL" faults
fetch storm.bin "$SHA4"  # into the bucket
vm vm4 "$MOTO_URL" faults
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "status503 retry_after=1 count=2 op=GetObject"
started=$(date +%s%N)
fetch storm.bin "$SHA4"
took=$((($(date +%s%N) - started) / 1000000))
served_ok "a short 503 storm" "$SHA4" promoted
expect_eq "a short 503 storm: two 503s, then the GET" "2 1" \
  "$(proxy_json "$MOTO_URL" "str(j['statuses']['GetObject'].get('503', 0)) + ' ' + str(j['statuses']['GetObject'].get('206', 0))")"
expect_cmp "a short 503 storm: Retry-After: 1 honoured twice (ms)" "$took" -ge 1900

pack_dataset 54 6 20000
start_origin "$E2E_TMP/store"
vm vm4w "$MOTO_URL" faults
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "status503 retry_after=1 op=GetObject"
run --json warm "$DS" --key bin --key txt --jobs 3
proxy_mode "$MOTO_URL" ok
expect_eq "a long 503 storm: warm succeeds, every shard from the origin" "[0, $SHARDS, 0]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "a long 503 storm: the breaker opened once" 1 "$(grep -c 'failed 3 times in a row' <<<"$ERR")"
# Three workers look up at once, so up to 3 + 2 lookups may fail before the third failure opens the breaker.
gets=$(proxy_op "$MOTO_URL" GetObject)
expect_eq "a long 503 storm: each failed lookup made 5 attempts (Retry-After honoured)" 0 "$((gets % 5))"
expect_cmp "a long 503 storm: then the bucket is skipped: failed lookups (of $SHARDS shards)" "$((gets / 5))" -le 5
expect_cmp "a long 503 storm: one WARNING per failed lookup and one for the breaker, none per skipped shard" \
  "$(grep -c 'WARNING: tier .bucket.' <<<"$ERR")" -le 6
verify_local "a long 503 storm"

# --- 5. a wrong ETag between ranges -------------------------------------------------------------------------

section "5. a wrong ETag between ranges"

SHA5=$(make_shard "$E2E_TMP/files/etag.bin" "$SIZE")
vm vm5a "$MOTO_URL" faults
fetch etag.bin "$SHA5"
vm vm5 "$MOTO_URL" faults
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "status412 op=GetObject ifmatch=1 count=1"
DATAVO_LOG_LEVEL=info fetch etag.bin "$SHA5"
served_ok "a 412 between ranges" "$SHA5" promoted
expect_contains "a 412 between ranges: the object is read again" "changed while it was read; reading it again" "$ERR"
expect_eq "a 412 between ranges: 3 GETs, then 3 again (the first range twice)" "6 2" \
  "$(proxy_json "$MOTO_URL" "str(j['ops']['GetObject']) + ' ' + str(len([r for r in j['log'] if r['op'] == 'GetObject' and r['range'] == 'bytes=0-5242879']))")"
vm vm5b "$MOTO_URL" faults
proxy_mode "$MOTO_URL" "status412 op=GetObject ifmatch=1"
fetch etag.bin "$SHA5"
proxy_mode "$MOTO_URL" ok
served_ok "412 on every pinned range" "$SHA5" fetched
expect_contains "412 on every pinned range: the tier degraded" "WARNING: tier 'bucket' (s3): download failed" "$ERR"

# --- 6. an object whose bytes do not match its metadata -----------------------------------------------------

section "6. an object whose bytes do not match its metadata"

SHA6=$(make_shard "$E2E_TMP/files/lying.bin" 300000)
vm vm6 "$MOTO_URL" faults
OBJ6=$(entry_key "$(dv --json cache info | json "j['instance']")" "$(hash_for lying.bin)")
head -c 300000 /dev/urandom >"$E2E_TMP/rotten.bin"
s3tool "$MOTO_S3_ENDPOINT" put faults "$OBJ6" "$E2E_TMP/rotten.bin" "datavo-sha256=$SHA6" datavo-size=300000
run --json cache fetch "$(hash_for lying.bin)" --url "$SERVER_URL/lying.bin"  # no --sha256: only the metadata knows
served_ok "bytes that do not match their metadata" "$SHA6" fetched
expect_contains "mismatching object: deleted with a WARNING" "deleted the object" "$ERR"
s3tool "$MOTO_S3_ENDPOINT" get faults "$OBJ6" "$E2E_TMP/now.bin"
expect_eq "mismatching object: the bucket now holds the good bytes" "$SHA6" "$(sha256_of "$E2E_TMP/now.bin")"
verify_local "mismatching object"

# --- 7. a bucket that does not exist; 8. a wrong secret -----------------------------------------------------

section "7. a bucket that does not exist; 8. a wrong secret"

SHA7=$(make_shard "$E2E_TMP/files/nobucket.bin" 100000)
vm vm7 "$MOTO_URL" no-such-bucket
fetch nobucket.bin "$SHA7"
served_ok "a bucket that does not exist" "$SHA7" fetched
expect_contains "missing bucket: the WARNING says so" "the bucket no-such-bucket does not exist" "$ERR"
expect_eq "missing bucket: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"

SHA8=$(make_shard "$E2E_TMP/files/secret.bin" 100000)
vm vm8 "$S3RVER_ENDPOINT" "$S3RVER_BUCKET" 'single_flight: false'
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

expect_eq "moto: no multipart upload left open at the end" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads faults)"
echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
