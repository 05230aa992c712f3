#!/usr/bin/env bash
# A faulty origin. The real server (`datavo serve`) holds a small packed dataset; a fault proxy
# (tests/support/fault_proxy.py) sits between it and the real client (`datavo warm`, `datavo read`) and, per case,
# truncates, resets, stalls, answers 500 or 404, or serves wrong bytes for the shard downloads (ticket URLs).
#
#   - transient faults (a short body, a reset, a stall past the client's stall timeout, 5xx) are retried, and a cut
#     body is resumed with a Range request that starts exactly where the bytes stopped; the run succeeds and the
#     installed shards are the origin's bytes (their SHA-256 is the ticket's, and `datavo cache verify` agrees);
#   - a permanent fault (404 on the shard) fails at once with a clear error: one request per shard, no retry;
#   - a 5xx on every attempt ends, after the transport's attempt limit, with a clear error;
#   - bytes whose size or SHA-256 does not match the ticket are never installed: no .tar in the cache, .staging empty.
#
# The cache (DATAVO_SHARD_CACHE_DIR) and the manifest cache (DATAVO_MANIFEST_CACHE_DIR) are wiped before every
# case. The stall case costs the client's stall timeout (TransportOptions::stall_timeout, 30 s, with no env or flag
# to shorten it), so it runs in the background from the start, through a second proxy with its own mode file, cache
# and manifest cache, while the other cases run; the suite takes 40-80 s depending on the machine's load.
. "$(dirname "$0")/lib.sh"

PROXY_SCRIPT="$DATAVO_SOURCE_DIR/tests/support/fault_proxy.py"
DATASET=faulty_v1/train
KEYS=(--key audio.wav --key transcript.txt)
SHARDS=4
STALL_TIMEOUT=30  # TransportOptions::stall_timeout (include/datavo/url_fetcher.hpp)

# --- the dataset and the origin ---------------------------------------------------------------------------------

src="$E2E_TMP/src"
store="$E2E_TMP/store"
mkdir -p "$src"
# 40 samples x {audio.wav (6-14 KiB of random bytes), transcript.txt}: 4 shards of 10 samples, ~100 KiB each.
python3 - "$src" <<'EOF'
import os, random, sys
rng = random.Random(20241129)
for i in range(40):
    sid = "utt_%04d" % i
    with open(os.path.join(sys.argv[1], sid + ".audio.wav"), "wb") as f:
        f.write(os.urandom(rng.randint(6 * 1024, 14 * 1024)))
    with open(os.path.join(sys.argv[1], sid + ".transcript.txt"), "w") as f:
        f.write("utterance %d: the quick brown fox %s\n" % (i, "jumps " * rng.randint(1, 20)))
EOF

run --json pack "$src" --root "$store" --dataset "$DATASET" --samples-per-shard 10
[ "$RC" -eq 0 ] || die "datavo pack" "rc $RC: $(e2e_abbrev "$ERR")"
expect_eq "pack: $SHARDS shards" "$SHARDS" "$(echo "$OUT" | json "j['total_shards']")"

# The origin wants a bearer token on every call, shard downloads included: the proxy must pass Authorization on,
# and the client must send it again on every retry and resume.
TOKEN="faulty-origin-$RANDOM$RANDOM"
printf '%s\n' "$TOKEN" >"$E2E_TMP/token"
export DATAVO_TOKEN="$TOKEN"
port_file="$E2E_TMP/origin.port"
"$DATAVO_BIN" serve "$store" --port 0 --port-file "$port_file" --token-file "$E2E_TMP/token" >"$E2E_TMP/origin.log" 2>&1 &
ORIGIN_PID=$!
track_pid "$ORIGIN_PID"
up() { [ -s "$1" ] || { kill -0 "$2" 2>/dev/null || return 2; return 1; }; }
wait_until 15 up "$port_file" "$ORIGIN_PID" ||
  die "start datavo serve" "no port file after 15 s; log: $(e2e_abbrev "$(cat "$E2E_TMP/origin.log")")"
ORIGIN_URL="http://127.0.0.1:$(cat "$port_file")"

# start_proxy NAME MODE: starts a fault proxy in front of the origin with its own mode file; sets PROXY_URL_<NAME>.
start_proxy() {
  local name=$1 pid
  printf '%s\n' "$2" >"$E2E_TMP/proxy.$name.mode"
  python3 "$PROXY_SCRIPT" --upstream "$ORIGIN_URL" --mode-file "$E2E_TMP/proxy.$name.mode" \
    --port-file "$E2E_TMP/proxy.$name.port" >"$E2E_TMP/proxy.$name.log" 2>&1 &
  pid=$!
  track_pid "$pid"
  wait_until 15 up "$E2E_TMP/proxy.$name.port" "$pid" ||
    die "start the fault proxy $name" "no port file after 15 s; log: $(e2e_abbrev "$(cat "$E2E_TMP/proxy.$name.log")")"
  printf -v "PROXY_URL_$name" 'http://127.0.0.1:%s' "$(cat "$E2E_TMP/proxy.$name.port")"
}
start_proxy main ok
start_proxy stall "stall count=1 seconds=$((STALL_TIMEOUT + 25))"

# use_client NAME: the client (and the helpers below) talk to proxy NAME, with that proxy's own cache and manifest
# cache. Sets PROXY_URL, mode_file and CACHE; exports DATAVO_SERVER, DATAVO_SHARD_CACHE_DIR, DATAVO_MANIFEST_CACHE_DIR.
use_client() {
  local url_var="PROXY_URL_$1"
  PROXY_URL=${!url_var}
  mode_file="$E2E_TMP/proxy.$1.mode"
  CACHE="$E2E_TMP/cache.$1"
  export DATAVO_SERVER="$PROXY_URL"
  export DATAVO_SHARD_CACHE_DIR="$CACHE"
  export DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/manifests.$1"
}

# --- helpers ----------------------------------------------------------------------------------------------------

# snap: reads the proxy's /_proxy_stats once, after a run, into the associative array P (one python3 for all the
# figures a case asserts on: python3 start-up is slow on a loaded CI machine):
#   P[requests] P[range_requests] P[faults]   shard GETs, those with a Range header, those that got a fault
#   P[tickets]                                 ticket POSTs forwarded
#   P[statuses]                                the shard statuses, sorted, e.g. [200, 200, 206]
#   P[per_path]                                requests per shard URL, sorted, e.g. [1, 1, 1, 2]
#   P[resume]   "ok" when every body cut by a fault (truncate, reset, stall) was followed by a Range request for the
#               same shard starting exactly at the first byte the client had not received (the cut request's own
#               start plus the bytes the proxy sent), answered 206; else what went wrong
#   P[retried]  "ok" when every 5xx was followed by a successful request of the same shard; else what went wrong
#   P[auth]     "ok" when every request the proxy forwarded (or faulted) carried an Authorization header
#   P[resume_gap] the longest time (whole seconds) from a cut request's arrival to the next request of its shard
declare -A P
snap() {
  local key value
  P=()
  while IFS=$'\t' read -r key value; do P[$key]=$value; done < <(python3 -c '
import json, re, sys, urllib.request
j = json.load(urllib.request.urlopen(sys.argv[1] + "/_proxy_stats", timeout=10))
shard = j["shard"]
log = [r for r in j["log"] if r["route"] == "shard"]
start_of = lambda r: int(re.match(r"bytes=(\d+)-", r["range"]).group(1)) if r["range"] else 0
resume, retried, gaps = [], [], []
for i, r in enumerate(log):
    later = [x for x in log[i + 1:] if x["path"] == r["path"]]
    if r["fault"] in ("truncate", "reset", "stall") and r["body_bytes"] > 0:
        want = "bytes=%d-" % (start_of(r) + r["body_bytes"])
        if later:
            gaps.append(later[0]["at"] - r["at"])
        if not later:
            resume.append("%s after %d bytes: never asked again" % (r["fault"], r["body_bytes"]))
        elif (later[0]["range"], later[0]["status"]) != (want, 206):
            resume.append("%s after %d bytes: next request had Range %r (want %r), status %r"
                          % (r["fault"], r["body_bytes"], later[0]["range"], want, later[0]["status"]))
    if (r["status"] or 0) >= 500 and not any(x["status"] in (200, 206) for x in later):
        retried.append("HTTP %d on %s never followed by a success" % (r["status"], r["path"][-20:]))
figures = {
    "requests": shard["requests"], "range_requests": shard["range_requests"], "faults": shard["faults"],
    "tickets": j["routes"].get("ticket", {}).get("requests", 0),
    "statuses": json.dumps(sorted(shard["statuses"])),
    "per_path": json.dumps(sorted(p["requests"] for p in shard["paths"].values())),
    "resume": "; ".join(resume) or "ok", "retried": "; ".join(retried) or "ok",
    "resume_gap": int(max(gaps)) if gaps else "none",
    "auth": "ok" if all(r["authorization"] for r in j["log"]) else
            "%d of %d requests without Authorization" % (sum(not r["authorization"] for r in j["log"]), len(j["log"])),
}
for k, v in figures.items():
    print("%s\t%s" % (k, v))
' "$PROXY_URL")
  if [ -z "${P[requests]:-}" ]; then
    fail "read the proxy stats" "GET $PROXY_URL/_proxy_stats failed"
    for key in requests range_requests faults tickets statuses per_path resume retried resume_gap auth; do P[$key]="?"; done
  fi
}

# set_mode LINE: rewrites the mode file atomically, then zeroes the proxy's counters (which also re-arms the mode).
set_mode() {
  printf '%s\n' "$1" >"$mode_file.tmp"
  mv -f "$mode_file.tmp" "$mode_file"
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], b"", method="POST"), timeout=10)' \
    "$PROXY_URL/_proxy_reset" || die "reset the proxy" "POST /_proxy_reset failed"
}

# fresh_cache: nothing cached, neither shards nor manifests.
fresh_cache() { rm -rf "$CACHE" "$DATAVO_MANIFEST_CACHE_DIR"; }

# installed_tars: every .tar under the cache (committed, staged or quarantined), one path a line.
installed_tars() { [ -d "$CACHE" ] && find "$CACHE" -name '*.tar' | sort; return 0; }

# The reference: for each shard, the upstream's ticket (content hash, size, SHA-256) and the SHA-256 of the bytes
# the upstream really serves for it, asked directly (not through the proxy). One JSON object by content hash.
REFERENCE=$(python3 - "$ORIGIN_URL" "$DATASET" "$TOKEN" <<'EOF'
import hashlib, json, sys, urllib.parse, urllib.request
base, dataset, token = sys.argv[1], sys.argv[2], sys.argv[3]
auth = {"Authorization": "Bearer " + token}
get = lambda url: urllib.request.urlopen(urllib.request.Request(url, headers=auth), timeout=10).read()
manifest = json.loads(get(base + "/v1/datasets/" + dataset + "/manifest"))
ds, split = dataset.split("/")
out = {}
for shard in manifest["shards"]:
    body = json.dumps({"dataset": ds, "split": split, "revision": manifest["revision"], "shard_index": shard["index"],
                       "keys": ["audio.wav", "transcript.txt"]}).encode()
    req = urllib.request.Request(base + "/v1/stream-tickets", data=body, method="POST",
                                 headers=dict(auth, **{"Content-Type": "application/json"}))
    ticket = json.load(urllib.request.urlopen(req, timeout=10))
    data = get(urllib.parse.urljoin(base + "/", ticket["url"]))
    out[ticket["content_hash"]] = {"index": shard["index"], "size": ticket["size"], "sha256": ticket["sha256"],
                                   "bytes_size": len(data), "bytes_sha256": hashlib.sha256(data).hexdigest()}
print(json.dumps(out))
EOF
) || die "reference" "cannot read the dataset's tickets and bytes from $ORIGIN_URL"
expect_eq "reference: $SHARDS shards, each with a ticket whose size and SHA-256 match the upstream's bytes" \
  "$SHARDS True" \
  "$(echo "$REFERENCE" | json '"%d %s" % (len(j), all(v["size"] == v["bytes_size"] and v["sha256"] == v["bytes_sha256"] for v in j.values()))')"

# expect_installed_ok CASE: exactly the $SHARDS reference shards are installed, named by their content hash, each
# with the ticket's size and SHA-256; `datavo cache verify` re-hashes them all and agrees; nothing left in .staging.
expect_installed_ok() {
  local what=$1 listing
  listing=$(installed_tars | while read -r f; do printf '%s %s %s\n' "$f" "$(file_size "$f")" "$(sha256_of "$f")"; done)
  expect_eq "$what: the installed shards are the origin's bytes (name, size, SHA-256 of every ticket)" "ok" \
    "$(printf '%s' "$listing" | python3 -c '
import json, os, sys
ref = json.loads(sys.argv[1])
seen = {}
for line in sys.stdin.read().splitlines():
    path, size, sha = line.split(" ")
    seen[os.path.basename(path)[:-4]] = (path, int(size), sha)
problems = []
for h, r in ref.items():
    if h not in seen:
        problems.append("shard %d (%s) not installed" % (r["index"], h[:12]))
    elif seen[h][1:] != (r["size"], r["sha256"]):
        problems.append("shard %d: %d bytes sha256 %s, ticket: %d bytes sha256 %s"
                        % (r["index"], seen[h][1], seen[h][2][:12], r["size"], r["sha256"][:12]))
for h, (path, _, _) in seen.items():
    if h not in ref or "/." in path:
        problems.append("unexpected " + path)
print("; ".join(problems) or "ok")
' "$REFERENCE")"
  local vrc=0 vout
  vout=$(dv --json cache verify 2>&1) || vrc=$?
  expect_eq "$what: datavo cache verify exits 0, $SHARDS entries checked, $SHARDS ok, none bad" "0 $SHARDS $SHARDS 0" \
    "$vrc $(printf '%s' "$vout" | json '"%d %d %d" % tuple(sum(r[k] for r in j["tiers"]) for k in ("checked", "ok", "bad"))' 2>/dev/null)"
  expect_empty_dir "$what: nothing left in .staging" "$CACHE/.staging"
}

# expect_nothing_installed CASE
expect_nothing_installed() {
  expect_eq "$1: no .tar anywhere under the cache" "" "$(installed_tars)"
  expect_empty_dir "$1: nothing left in .staging" "$CACHE/.staging"
}

# warm [TIMEOUT]: a cold `datavo warm --json` of the whole key group through the proxy; sets RC, OUT, ERR,
# SECONDS_TAKEN and (snap) P.
warm() {
  local started
  fresh_cache
  started=$(date +%s%N)
  E2E_CMD_TIMEOUT=${1:-60} run --json warm "$DATASET" "${KEYS[@]}"
  SECONDS_TAKEN=$((($(date +%s%N) - started) / 1000000000))
  snap
  if [ "$RC" -ne 0 ]; then echo "# warm rc $RC, stderr: $(e2e_abbrev "$ERR")"; fi
}

# expect_warmed CASE: the warm run succeeded and fetched every shard from the origin, and every request of it
# (retries and resumes included) carried the bearer token.
expect_warmed() {
  expect_eq "$1: datavo warm exits 0" 0 "$RC"
  expect_eq "$1: no shard failed, all $SHARDS fetched from the origin" "0 $SHARDS" \
    "$(echo "$OUT" | json '"%d %d" % (j["failed"], j["origin"]["shards"])' 2>/dev/null)"
  expect_eq "$1: every request, retries and resumes included, carried Authorization" ok "${P[auth]}"
}

# --- the stall case starts now, in the background (its checks are at the end) --------------------------------------
# Half a body, then silence longer than the client's stall timeout: only the client's stall detection can end that
# attempt. No env or flag shortens TransportOptions::stall_timeout (30 s), so the one stall (count=1) costs ~30 s.

use_client stall
fresh_cache
timeout -k 5 $((STALL_TIMEOUT + 45)) "$DATAVO_BIN" --json warm "$DATASET" "${KEYS[@]}" \
  >"$E2E_TMP/stall.out" 2>"$E2E_TMP/stall.err" &
STALL_PID=$!
track_pid "$STALL_PID"
use_client main

# --- 0. no fault: the baseline ------------------------------------------------------------------------------------

set_mode ok
warm
expect_warmed "no fault"
expect_installed_ok "no fault"
expect_eq "no fault: one shard request per shard, no Range" "$SHARDS 0" \
  "${P[requests]} ${P[range_requests]}"
expect_eq "no fault: the tickets went through the proxy (one per shard)" "$SHARDS" "${P[tickets]}"

# --- 1. truncate: a body shorter than its Content-Length, then FIN ------------------------------------------------

set_mode "truncate count=1"
warm
expect_warmed "truncate"
expect_eq "truncate: one faulted request, cut at half its body" "1" "${P[faults]}"
expect_eq "truncate: exactly one extra shard request (the resume)" "$((SHARDS + 1))" "${P[requests]}"
expect_eq "truncate: the proxy saw one Range request" "1" "${P[range_requests]}"
expect_eq "truncate: resumed with Range from the first byte not received, answered 206" "ok" "${P[resume]}"
expect_installed_ok "truncate"

# --- 2. reset: half the body, then a TCP RST ----------------------------------------------------------------------

set_mode "reset count=2"
warm
expect_warmed "reset"
expect_eq "reset: two faulted requests" "2" "${P[faults]}"
expect_eq "reset: exactly one extra shard request per reset" "$((SHARDS + 2))" "${P[requests]}"
expect_eq "reset: the proxy saw two Range requests (one resume per reset)" 2 "${P[range_requests]}"
expect_eq "reset: resumed with Range from the first byte not received, answered 206" "ok" "${P[resume]}"
expect_installed_ok "reset"

# --- 3. status500 x2: retried with backoff --------------------------------------------------------------------------

set_mode "status500 count=2"
warm
expect_warmed "status500 x2"
expect_eq "status500 x2: statuses seen (two 500s, then every shard 200)" "[200, 200, 200, 200, 500, 500]" \
  "${P[statuses]}"
expect_eq "status500 x2: a 500 costs one retry, nothing more" "$((SHARDS + 2))" "${P[requests]}"
expect_eq "status500 x2: every 500 was followed by a successful retry of the same shard" ok "${P[retried]}"
expect_installed_ok "status500 x2"

# --- 4. reset under `datavo read` (SampleStream, prefetcher): the same recovery on the read path ---------------------

set_mode "reset count=1"
fresh_cache
run --json read "$DATASET" "${KEYS[@]}"
snap
expect_eq "read through a reset: exits 0" 0 "$RC"
[ "$RC" -eq 0 ] || echo "# read stderr: $(e2e_abbrev "$ERR")"
expect_eq "read through a reset: all 40 samples from $SHARDS shards" "40 $SHARDS" \
  "$(echo "$OUT" | json '"%d %d" % (j["samples"], j["shards"])' 2>/dev/null)"
expect_eq "read through a reset: resumed with Range, answered 206" "ok" "${P[resume]}"
expect_eq "read through a reset: every request carried Authorization" ok "${P[auth]}"
expect_eq "read through a reset: the proxy saw one Range request" 1 "${P[range_requests]}"
expect_installed_ok "read through a reset"

# --- 5. wrongbytes: right length, wrong SHA-256 -------------------------------------------------------------------

set_mode wrongbytes
warm
expect_eq "wrongbytes: datavo warm exits 1" 1 "$RC"
expect_eq "wrongbytes: every shard failed" "$SHARDS" "$(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "wrongbytes: the error names the SHA-256 / integrity check" '(SHA-256|sha256|integrity)' "$ERR"
expect_match "wrongbytes: the error names a shard" 'shard [0-9a-f]+' "$ERR"
expect_nothing_installed "wrongbytes"
expect_cmp "wrongbytes: the proxy served the shards (and corrupted them)" "${P[faults]}" -ge "$SHARDS"
vrc=0
dv cache verify >/dev/null 2>&1 || vrc=$?
expect_eq "wrongbytes: datavo cache verify exits 0 (nothing bad in the cache)" 0 "$vrc"
# The bad bytes left no trace: the same cache, with a good origin, warms normally.
set_mode ok
E2E_CMD_TIMEOUT=60 run --json warm "$DATASET" "${KEYS[@]}"
expect_eq "after wrongbytes: a good origin warms the same cache (exit 0)" 0 "$RC"
expect_installed_ok "after wrongbytes"

# --- 6. status404 on the shard: permanent, not retried -------------------------------------------------------------

set_mode status404
warm
expect_eq "status404: datavo warm exits 1" 1 "$RC"
expect_eq "status404: every shard failed" "$SHARDS" "$(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "status404: a clear error (HTTP 404 / not found)" '(404|[Nn]ot found|not_found)' "$ERR"
expect_match "status404: the error names the shard" 'shard [0-9]+' "$ERR"
expect_eq "status404: not retried: one request per shard" "$SHARDS" "${P[requests]}"
expect_eq "status404: each shard URL asked exactly once" "[1, 1, 1, 1]" \
  "${P[per_path]}"
expect_eq "status404: no Range request" 0 "${P[range_requests]}"
expect_nothing_installed "status404"

# A 403 (a ticket the server does not accept) is permanent too.
set_mode status403
warm
expect_eq "status403: datavo warm exits 1, every shard failed" "1 $SHARDS" "$RC $(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "status403: a clear error (HTTP 403, the server's message)" 'HTTP 403.*injected HTTP 403' "$ERR"
expect_eq "status403: not retried: each shard URL asked exactly once" "[1, 1, 1, 1]" "${P[per_path]}"
expect_nothing_installed "status403"

# --- 7. wrongsize: a complete, well-formed answer one byte shorter than the ticket's size -----------------------------

set_mode wrongsize
warm
expect_eq "wrongsize: datavo warm exits 1" 1 "$RC"
expect_eq "wrongsize: every shard failed" "$SHARDS" "$(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "wrongsize: the error names the size mismatch" '([0-9]+ bytes, expected [0-9]+|size)' "$ERR"
expect_nothing_installed "wrongsize"
expect_cmp "wrongsize: the proxy served every shard short" "${P[faults]}" -ge "$SHARDS"

# --- 8. status500 on every request: retried up to the attempt limit, then a clear error ------------------------------
# TransportOptions::max_attempts is 5 (and `datavo warm` does not change it): 5 requests per shard, then it gives up.

set_mode status500
warm
expect_eq "status500 always: datavo warm exits 1" 1 "$RC"
expect_eq "status500 always: every shard failed" "$SHARDS" "$(echo "$OUT" | json 'j["failed"]' 2>/dev/null)"
expect_match "status500 always: a clear error (HTTP 500, the server's message)" 'HTTP 500' "$ERR"
expect_eq "status500 always: each shard URL tried max_attempts (5) times, no more" "[5, 5, 5, 5]" "${P[per_path]}"
expect_nothing_installed "status500 always"

# --- 9. stall (started in the background at the top) ----------------------------------------------------------------

RC=0
wait "$STALL_PID" || RC=$?
use_client stall
OUT=$(cat "$E2E_TMP/stall.out")
ERR=$(cat "$E2E_TMP/stall.err")
snap
[ "$RC" = 0 ] || echo "# stalled warm rc $RC, stderr: $(e2e_abbrev "$ERR")"
expect_warmed "stall"
expect_eq "stall: one stalled request, one extra shard request (the resume)" "1 $((SHARDS + 1))" \
  "${P[faults]} ${P[requests]}"
expect_eq "stall: resumed with Range from the first byte not received, answered 206" "ok" "${P[resume]}"
# The proxy timed it: from the stalled request's arrival to the resume's.
expect_cmp "stall: the resume came after the client's stall timeout (${P[resume_gap]} s >= $((STALL_TIMEOUT - 1)) s)" \
  "${P[resume_gap]}" -ge $((STALL_TIMEOUT - 1))
expect_cmp "stall: and not much later (${P[resume_gap]} s < $((STALL_TIMEOUT + 15)) s)" \
  "${P[resume_gap]}" -lt $((STALL_TIMEOUT + 15))
expect_installed_ok "stall"

finish
