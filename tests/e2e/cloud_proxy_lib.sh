# tests/support/cloud_proxy.py in front of a cloud storage server (moto, s3rver, Azurite, the GCS emulator), for the
# cloud e2e suites; sourced by s3_lib.sh and azure_gcs_lib.sh (after lib.sh):
#   - start_proxy NAME UPSTREAM [--mode-file FILE]: the proxy in front of UPSTREAM (http://HOST:PORT); sets
#     <NAME>_URL and <NAME>_PID (stopped on exit).
#   - proxy_mode URL LINE, proxy_reset URL, proxy_json URL EXPR (EXPR over the /_proxy/stats JSON as j),
#     proxy_op URL OP (how many OP requests it forwarded).

CLOUD_PROXY="$DATAVO_SOURCE_DIR/tests/support/cloud_proxy.py"

start_proxy() {
  local name=$1 upstream=$2
  shift 2
  local port_file="$E2E_TMP/.proxy.$name.$RANDOM.port"
  python3 "$CLOUD_PROXY" --upstream "$upstream" --port-file "$port_file" "$@" >"$E2E_TMP/proxy.$name.log" 2>&1 &
  local pid=$!
  track_pid "$pid"
  wait_until 20 test -s "$port_file" || die "start cloud_proxy.py ($name)" "$(cat "$E2E_TMP/proxy.$name.log")"
  printf -v "${name}_URL" 'http://127.0.0.1:%s' "$(cat "$port_file")"
  printf -v "${name}_PID" '%s' "$pid"
}

proxy_mode() { curl -s -f --max-time 10 -X POST --data-binary "$2" "$1/_proxy/mode" >/dev/null || fail "proxy mode '$2'" "refused"; }
proxy_reset() { curl -s -f --max-time 10 -X POST "$1/_proxy/reset" >/dev/null; }
proxy_json() { curl -s --max-time 10 "$1/_proxy/stats" | json "$2"; }
proxy_op() { proxy_json "$1" "j['ops'].get('$2', 0)"; }
