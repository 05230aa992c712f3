#!/usr/bin/env bash
# The security cases of the origin protocol (docs/protocol.md) against the real `datavo serve`: bearer token,
# names that try to leave the store, forged and expired tickets, malformed input, unknown names; plus the listening
# line, the port file, request logging with redacted tickets, Range, metrics and a clean stop on SIGTERM.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || die "setup" "curl is required"

STORE=$E2E_TMP/store
SRC=$E2E_TMP/src
mkdir -p "$SRC"
for i in 0 1 2; do
  printf 'audio %s\n' "$i" >"$SRC/utt_000$i.audio.wav"
  printf 'text %s\n' "$i" >"$SRC/utt_000$i.transcript.txt"
done
run pack "$SRC" --root "$STORE" --dataset voice/train --samples-per-shard 2
expect_eq "pack exits 0" 0 "$RC"
run --json pack "$SRC" --root "$STORE" --dataset voice/train
expect_eq "pack of nothing new keeps revision 1" 1 "$(echo "$OUT" | json "j['revision']")"

TOKEN=e2e-token-$RANDOM$RANDOM
printf '%s\n' "$TOKEN" >"$E2E_TMP/token"
PORT_FILE=$E2E_TMP/port
"$DATAVO_BIN" serve "$STORE" --port 0 --port-file "$PORT_FILE" --token-file "$E2E_TMP/token" \
  >"$E2E_TMP/serve.out" 2>"$E2E_TMP/serve.err" &
SERVE_PID=$!
track_pid "$SERVE_PID"
serve_up() { [ -s "$PORT_FILE" ] || { kill -0 "$SERVE_PID" 2>/dev/null || return 2; return 1; }; }
wait_until 15 serve_up || die "start datavo serve" "no port file; stderr: $(e2e_abbrev "$(cat "$E2E_TMP/serve.err")")"
PORT=$(cat "$PORT_FILE")
BASE="http://127.0.0.1:$PORT"
wait_until 5 test -s "$E2E_TMP/serve.out"
expect_eq "first stdout line is the listening URL" "listening on $BASE" "$(head -n1 "$E2E_TMP/serve.out")"

AUTH="Authorization: Bearer $TOKEN"

# status METHOD PATH [curl args...]: prints the HTTP status; the body goes to $E2E_TMP/body.
status() {
  local method=$1 path=$2
  shift 2
  curl -s --path-as-is -o "$E2E_TMP/body" -w '%{http_code}' -X "$method" --max-time 20 "$@" "$BASE$path"
}
error_code() { json "j['error']['code']" <"$E2E_TMP/body" 2>/dev/null; }

# expect_status WHAT EXPECTED_STATUS [EXPECTED_ERROR_CODE] -- METHOD PATH [curl args...]
expect_status() {
  local what=$1 want=$2 want_code=${3:-}
  shift 3
  local got
  got=$(status "$@")
  expect_eq "$what: HTTP $want" "$want" "$got"
  if [ -n "$want_code" ]; then expect_eq "$what: JSON error $want_code" "$want_code" "$(error_code)"; fi
}

ticket_body() { # DATASET SPLIT REVISION SHARD KEYS_JSON
  printf '{"dataset":"%s","split":"%s","revision":%s,"shard_index":%s,"keys":%s}' "$@"
}

# --- authentication -----------------------------------------------------------------------------------------------
expect_status "manifest with the token" 200 "" GET /v1/datasets/voice/train/manifest -H "$AUTH"
expect_status "manifest without a token" 401 unauthorized GET /v1/datasets/voice/train/manifest
expect_status "manifest with a wrong token" 401 unauthorized GET /v1/datasets/voice/train/manifest \
  -H "Authorization: Bearer wrong"
expect_status "instance without a token" 401 unauthorized GET /v1/instance
expect_status "ticket without a token" 401 unauthorized POST /v1/stream-tickets \
  --data "$(ticket_body voice train 1 0 '["audio.wav"]')"
expect_status "metrics need no token" 200 "" GET /v1/metrics

# --- names that try to leave the store ----------------------------------------------------------------------------
for path in "/v1/datasets/../../secret/manifest" "/v1/datasets/%2e%2e/train/manifest" \
  "/v1/datasets/voice/%2e%2e/manifest" "/v1/datasets/voice/..%2f..%2fsecret/manifest" \
  "/v1/datasets//etc/manifest" "/v1/datasets/%2fetc/passwd/manifest" "/v1/datasets/voice/tr%00ain/manifest" \
  "/v1/shards/../../secret" "/v1/shards/%2e%2e%2fsecret.tar"; do
  expect_status "traversal $path" 400 bad_request GET "$path" -H "$AUTH"
  if grep -qF "$(cat "$STORE/secret")" "$E2E_TMP/body"; then fail "traversal $path" "the secret leaked"; fi
done
for body in "$(ticket_body .. train 1 0 '["audio.wav"]')" "$(ticket_body /etc train 1 0 '["audio.wav"]')" \
  "$(ticket_body voice train 1 0 '["../../secret"]')" "$(ticket_body voice train 1 0 '["/etc/passwd"]')" \
  "$(ticket_body voice 'tr\u0000ain' 1 0 '["audio.wav"]')" "$(ticket_body voice train 1 0 '["audio.wav\u0000"]')"; do
  expect_status "ticket refused: $body" 400 bad_request POST /v1/stream-tickets -H "$AUTH" --data "$body"
done

# --- malformed input and unknown names ----------------------------------------------------------------------------
expect_status "malformed JSON" 400 bad_request POST /v1/stream-tickets -H "$AUTH" --data '{"dataset":'
expect_status "revision not a positive integer" 400 bad_request GET "/v1/datasets/voice/train/manifest?revision=0" \
  -H "$AUTH"
expect_status "unknown dataset" 404 not_found GET /v1/datasets/nope/train/manifest -H "$AUTH"
expect_status "unknown revision" 404 not_found GET "/v1/datasets/voice/train/manifest?revision=9" -H "$AUTH"
expect_status "unknown key" 404 not_found POST /v1/stream-tickets -H "$AUTH" \
  --data "$(ticket_body voice train 1 0 '["nope.bin"]')"
expect_status "unknown shard" 404 not_found POST /v1/stream-tickets -H "$AUTH" \
  --data "$(ticket_body voice train 1 9 '["audio.wav"]')"

# --- tickets ------------------------------------------------------------------------------------------------------
expect_status "ticket" 200 "" POST /v1/stream-tickets -H "$AUTH" \
  --data "$(ticket_body voice train 1 0 '["transcript.txt","audio.wav"]')"
TICKET=$(cat "$E2E_TMP/body")
URL=$(echo "$TICKET" | json "j['url']")
SIZE=$(echo "$TICKET" | json "j['size']")
SHA=$(echo "$TICKET" | json "j['sha256']")
HASH=$(echo "$TICKET" | json "j['content_hash']")
REF=$(curl -s -H "$AUTH" "$BASE/v1/datasets/voice/train/manifest" | json "j['manifest_ref']")
run --json content-hash --manifest-ref "$REF" --revision 1 --shard-index 0 --key audio.wav --key transcript.txt \
  --sample-id utt_0000 --sample-id utt_0001
expect_eq "content_hash is the documented hash of the manifest" "$HASH" "$(echo "$OUT" | json "j['content_hash']")"

expect_status "download" 200 "" GET "$URL" -H "$AUTH"
expect_eq "downloaded size" "$SIZE" "$(file_size "$E2E_TMP/body")"
expect_eq "downloaded sha256" "$SHA" "$(sha256_of "$E2E_TMP/body")"
expect_match "tar members in order" "^utt_0000.audio.wav utt_0000.transcript.txt utt_0001.audio.wav utt_0001.transcript.txt$" \
  "$(tar -tf "$E2E_TMP/body" | tr '\n' ' ' | sed 's/ $//')"
expect_status "download without the token" 401 unauthorized GET "$URL"
expect_status "range" 206 "" GET "$URL" -H "$AUTH" -H "Range: bytes=0-99"
expect_eq "range length" 100 "$(file_size "$E2E_TMP/body")"
expect_status "range outside" 416 range_not_satisfiable GET "$URL" -H "$AUTH" -H "Range: bytes=$SIZE-"

SIG=${URL##*sig=}
if [ "${SIG:0:1}" = a ]; then FLIPPED="b${SIG:1}"; else FLIPPED="a${SIG:1}"; fi
expect_status "forged signature" 403 forbidden GET "${URL%sig=*}sig=$FLIPPED" -H "$AUTH"
expect_status "forged revision" 403 forbidden GET "${URL/rev=1/rev=2}" -H "$AUTH"
EXP=$(echo "$TICKET" | json "j['expires_at']")
expect_status "forged expiry" 403 forbidden GET "${URL/exp=$EXP/exp=$((EXP + 86400))}" -H "$AUTH"

# An expired ticket with a valid signature: signed here with the store secret, as docs/protocol.md specifies.
PAST=$(($(date +%s) - 60))
EXPIRED_SIG=$(python3 -c '
import hmac, hashlib, sys
secret = open(sys.argv[1], "rb").read().strip()
msg = "v1\n%s\nvoice\ntrain\n1\n0\naudio.wav,transcript.txt\n%s" % (sys.argv[2], sys.argv[3])
print(hmac.new(secret, msg.encode(), hashlib.sha256).hexdigest())' "$STORE/secret" "$HASH" "$PAST")
EXPIRED_URL="/v1/shards/$HASH.tar?dataset=voice&split=train&rev=1&shard=0&keys=audio.wav,transcript.txt&exp=$PAST&sig=$EXPIRED_SIG"
expect_status "expired ticket" 410 expired GET "$EXPIRED_URL" -H "$AUTH"
FRESH_SIG=$(python3 -c '
import hmac, hashlib, sys
secret = open(sys.argv[1], "rb").read().strip()
msg = "v1\n%s\nvoice\ntrain\n1\n0\naudio.wav,transcript.txt\n%s" % (sys.argv[2], sys.argv[3])
print(hmac.new(secret, msg.encode(), hashlib.sha256).hexdigest())' "$STORE/secret" "$HASH" "$((PAST + 3600))")
expect_status "a ticket signed as documented is accepted" 200 "" GET \
  "/v1/shards/$HASH.tar?dataset=voice&split=train&rev=1&shard=0&keys=audio.wav,transcript.txt&exp=$((PAST + 3600))&sig=$FRESH_SIG" \
  -H "$AUTH"

# --- metrics, logging, stop ---------------------------------------------------------------------------------------
METRICS=$(curl -s "$BASE/v1/metrics")
expect_contains "metrics count 403s" 'datavo_requests_total{route="shard",status="403"} 3' "$METRICS"
expect_contains "metrics count 401s" 'datavo_requests_total{route="manifest",status="401"} 2' "$METRICS"
expect_match "metrics count shard bytes" 'datavo_response_bytes_total\{route="shard"\} [1-9][0-9]*' "$METRICS"
expect_contains "one log line per request" "\"GET /v1/datasets/voice/train/manifest\" 200" "$(cat "$E2E_TMP/serve.err")"
if grep -q "sig=" "$E2E_TMP/serve.err"; then fail "ticket signatures are not logged" "$(grep sig= "$E2E_TMP/serve.err" | head -1)"; else pass "ticket signatures are not logged"; fi

kill -TERM "$SERVE_PID"
SERVE_RC=0
wait_until 10 bash -c "! kill -0 $SERVE_PID 2>/dev/null || [ \"\$(awk '{print \$3}' /proc/$SERVE_PID/stat 2>/dev/null)\" = Z ]" ||
  fail "SIGTERM stops the server" "still running after 10 s"
wait "$SERVE_PID" || SERVE_RC=$?
expect_eq "SIGTERM: exit 0" 0 "$SERVE_RC"

echo "not a directory" >"$E2E_TMP/store-is-a-file"
run serve "$E2E_TMP/store-is-a-file" --port 0
expect_eq "serve of a store path that is a file exits 2" 2 "$RC"
run serve "$STORE" --port 0 --token-file "$E2E_TMP/no-such-token"
expect_eq "serve with a missing token file exits 2" 2 "$RC"

finish
