# tests/support/fault_proxy.py in front of the origin (start_origin of lib.sh), for the suites that make the origin
# lie, stall or reset (sourced after lib.sh, once ORIGIN_URL is set):
#   - start_fault_proxy: the proxy in front of ORIGIN_URL in mode "ok"; sets PROXY_PID (stopped on exit) and
#     PROXY_URL. Its mode is read from the file $E2E_TMP/proxy.mode.
#   - set_mode MODE: the proxy's mode (tests/support/fault_proxy.py lists them), with its counters reset.
#   - proxy_shard_requests: the shard GETs the proxy saw since the last set_mode.

PROXY_SCRIPT="$DATAVO_SOURCE_DIR/tests/support/fault_proxy.py"
mode_file="$E2E_TMP/proxy.mode"

fault_proxy_up() { [ -s "$1" ] || { kill -0 "$2" 2>/dev/null || return 2; return 1; }; }

start_fault_proxy() {
  printf 'ok\n' >"$mode_file"
  rm -f "$E2E_TMP/proxy.port"
  python3 "$PROXY_SCRIPT" --upstream "$ORIGIN_URL" --mode-file "$mode_file" --port-file "$E2E_TMP/proxy.port" \
    >"$E2E_TMP/proxy.log" 2>&1 &
  PROXY_PID=$!
  track_pid "$PROXY_PID"
  wait_until 15 fault_proxy_up "$E2E_TMP/proxy.port" "$PROXY_PID" ||
    die "start the fault proxy" "$(cat "$E2E_TMP/proxy.log")"
  PROXY_URL="http://127.0.0.1:$(cat "$E2E_TMP/proxy.port")"
}

set_mode() {
  printf '%s\n' "$1" >"$mode_file.tmp"
  mv -f "$mode_file.tmp" "$mode_file"
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], b"", method="POST"), timeout=10)' \
    "$PROXY_URL/_proxy_reset" || die "reset the proxy" "POST /_proxy_reset failed"
}

proxy_shard_requests() {
  python3 -c 'import json, sys, urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_proxy_stats", timeout=10))["shard"]["requests"])' \
    "$PROXY_URL"
}
