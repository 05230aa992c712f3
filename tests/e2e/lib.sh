# Shared helpers of the end-to-end suites (tests/e2e/test_*.sh). Source it first thing:
#
#     . "$(dirname "$0")/lib.sh"
#
# What it gives a suite:
#   - $E2E_TMP, a fresh temporary directory removed on exit; HOME points inside it, and every DATAVO_* variable
#     that could reach outside the suite is unset, so nothing outside $E2E_TMP is read or written;
#   - an EXIT trap that stops every process the suite registered (by PID: TERM, then KILL after a deadline, then
#     wait), runs the suite's cleanup hooks (umount, ...) and removes $E2E_TMP;
#   - the loopback fault server (tests/support/http_fault_server.py): start_server / stop_server / server_requests;
#   - the reference origin: start_origin (`datavo serve` on an ephemeral port), origin_requests, make_samples;
#   - pass / fail counters ("ok - <what>" / "FAIL - <what>: <details>") and `finish`, which prints exactly
#     "N passed, M failed" and exits non-zero when anything failed (or when nothing was asserted at all);
#   - expect_stat TIER FIELD VALUE against `datavo cache stats --json`;
#   - poll loops with deadlines (wait_until) instead of sleeps;
#   - skip_suite, and need_root / refused_privilege for what the machine may refuse (root, mounts, namespaces,
#     ptrace): the suite is reported as skipped with its reason (exit $E2E_SKIP_CODE, ctest's SKIP_RETURN_CODE),
#     or fails when the variable that requires the privilege is 1 (.ci/run sets them, so CI never skips).
#
# Needs: bash >= 5, python3, coreutils. Env: DATAVO_BIN (the datavo binary) and DATAVO_SOURCE_DIR (the repo root),
# set by ctest (tests/CMakeLists.txt); DATAVO_SOURCE_DIR defaults to the repo this file is in.

set -u
set -o pipefail

E2E_NAME=$(basename "$0" .sh)
E2E_PASSED=0
E2E_FAILED=0
E2E_PIDS=()           # processes to stop on exit
declare -gA E2E_PID_STARTS=() # their start times (see track_pid)
. "$(dirname "${BASH_SOURCE[0]}")/../support/pids.sh"
E2E_HOOKS=()          # commands to run on exit, before $E2E_TMP is removed (e.g. umount)
E2E_FIRST_HOOKS=()    # commands to run on exit before the processes are stopped (e.g. release a debugger)
E2E_FINISHED=0

# "${WITH_SIGINT[@]}" CMD...: execs CMD with SIGINT at its default disposition. A background job of a
# non-interactive shell starts with SIGINT ignored (so that a Ctrl-C on the terminal spares it), and datavo keeps an
# ignored SIGINT ignored, as programs should; a user's Ctrl-C reaches a foreground datavo, which this stands in for.
# (An array, not a function: a function run with & is a subshell, and $! would be the subshell's pid.)
WITH_SIGINT=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])')

# --- assertions -------------------------------------------------------------------------------------------------

pass() {
  E2E_PASSED=$((E2E_PASSED + 1))
  echo "ok - $1"
}

# fail WHAT DETAILS
fail() {
  E2E_FAILED=$((E2E_FAILED + 1))
  echo "FAIL - $1: ${2:-}"
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
  if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi
}

# expect_ne WHAT UNEXPECTED ACTUAL
expect_ne() {
  if [[ "$2" != "$3" ]]; then pass "$1"; else fail "$1" "got '$3'"; fi
}

# expect_cmp WHAT ACTUAL OP EXPECTED  (numeric; OP is one of -eq -ne -lt -le -gt -ge)
expect_cmp() {
  local what=$1 actual=$2 op=$3 expected=$4
  if [[ "$actual" =~ ^-?[0-9]+$ ]] && [ "$actual" "$op" "$expected" ]; then
    pass "$what"
  else
    fail "$what" "expected $op $expected, got '$actual'"
  fi
}

# expect_contains WHAT NEEDLE HAYSTACK  (fixed string)
expect_contains() {
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1" "'$2' not found in: $(e2e_abbrev "$3")"; fi
}

# expect_match WHAT ERE HAYSTACK  (extended regular expression, bash =~)
expect_match() {
  if [[ "$3" =~ $2 ]]; then pass "$1"; else fail "$1" "/$2/ does not match: $(e2e_abbrev "$3")"; fi
}

# expect_file WHAT PATH / expect_no_file WHAT PATH
expect_file() {
  if [ -e "$2" ]; then pass "$1"; else fail "$1" "$2 does not exist"; fi
}
expect_no_file() {
  if [ ! -e "$2" ]; then pass "$1"; else fail "$1" "$2 exists ($(stat -c '%s bytes' "$2" 2>/dev/null))"; fi
}

# expect_empty_dir WHAT DIR: DIR is missing or has no entries (dot-files included).
expect_empty_dir() {
  local left
  left=$(e2e_list_dir "$2")
  if [ -z "$left" ]; then pass "$1"; else fail "$1" "$2 holds: $(echo $left)"; fi
}

e2e_list_dir() { [ -d "$1" ] && find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort; return 0; }

e2e_abbrev() {
  local s=${1//$'\n'/ | }
  if [ ${#s} -gt 600 ]; then s="${s:0:600}..."; fi
  printf '%s' "$s"
}

# finish: prints the summary line and exits with the suite's status. Call it last.
finish() {
  E2E_FINISHED=1
  if [ $((E2E_PASSED + E2E_FAILED)) -eq 0 ]; then
    fail "$E2E_NAME" "no assertion ran"
  fi
  echo "$E2E_PASSED passed, $E2E_FAILED failed"
  [ "$E2E_FAILED" -eq 0 ] && exit 0
  exit 1
}

# die WHAT DETAILS: a fatal setup failure; counts it and ends the suite (the summary line is still printed).
die() {
  fail "$1" "${2:-}"
  finish
}

# The exit code that ctest reports as "skipped" (SKIP_RETURN_CODE of the e2e tests in tests/CMakeLists.txt, which
# also passes it here).
E2E_SKIP_CODE=${E2E_SKIP_CODE:-77}

# skip_suite REASON: the suite cannot run here (never because of the product): prints "SKIP - <suite>: REASON"
# and the summary, and exits with $E2E_SKIP_CODE. A suite that already failed an assertion fails instead.
skip_suite() {
  E2E_FINISHED=1
  echo "SKIP - $E2E_NAME: $1"
  echo "$E2E_PASSED passed, $E2E_FAILED failed, skipped"
  [ "$E2E_FAILED" -eq 0 ] || exit 1
  exit "$E2E_SKIP_CODE"
}

# refused_privilege WHAT WHY [VARIABLE]: the machine refuses something the suite needs (WHY says what and why, with
# the tool's own message). The suite is skipped with that reason, or fails when VARIABLE (default
# DATAVO_REQUIRE_PRIVILEGES) is 1: .ci/run sets it, so that CI can never skip the suite.
refused_privilege() {
  local what=$1 why=$2 variable=${3:-DATAVO_REQUIRE_PRIVILEGES}
  if [ "${!variable:-0}" = 1 ]; then
    die "$what" "$why ($variable=1: the suite must run here)"
  fi
  skip_suite "$what: $why (with $variable=1 this is a failure)"
}

# --- processes and cleanup --------------------------------------------------------------------------------------

# A tracked PID is only signalled while it still names the process that was tracked (tests/support/pids.sh): a
# later kill of a PID that had died and been handed to another suite's emulator killed that emulator.
track_pid() {
  local start=
  pid_start_time "$1" start || true
  E2E_PIDS+=("$1")
  E2E_PID_STARTS[$1]=$start
}
# on_exit CMD: run CMD on exit after every tracked process is stopped; on_exit_first CMD: before that.
on_exit() { E2E_HOOKS+=("$1"); }
on_exit_first() { E2E_FIRST_HOOKS+=("$1"); }

# stop_pid PID [SIGNAL]: signals PID (default TERM), waits for it up to 5 s, then KILLs it; always reaps it. A
# tracked PID that now names another process (or none) is only reaped, never signalled.
stop_pid() {
  local pid=$1 sig=${2:-TERM} deadline
  [ -n "$pid" ] || return 0
  if [ -n "${E2E_PID_STARTS[$pid]+set}" ] && ! same_process "$pid" "${E2E_PID_STARTS[$pid]}"; then
    wait "$pid" 2>/dev/null
    return 0
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null
    deadline=$(($(date +%s) + 5))
    while kill -0 "$pid" 2>/dev/null && ! e2e_is_zombie "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null && ! e2e_is_zombie "$pid"; then kill -KILL "$pid" 2>/dev/null; fi
  fi
  wait "$pid" 2>/dev/null
  return 0
}

e2e_is_zombie() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

e2e_cleanup() {
  local status=$? pid hook
  trap - EXIT INT TERM
  for hook in "${E2E_FIRST_HOOKS[@]}"; do eval "$hook" || echo "# cleanup: '$hook' failed" >&2; done
  for pid in "${E2E_PIDS[@]}"; do stop_pid "$pid"; done
  for hook in "${E2E_HOOKS[@]}"; do eval "$hook" || echo "# cleanup: '$hook' failed" >&2; done
  if [ -n "${E2E_TMP:-}" ] && [ -d "$E2E_TMP" ]; then
    rm -rf "$E2E_TMP" 2>/dev/null || { chmod -R u+rwx "$E2E_TMP" 2>/dev/null; rm -rf "$E2E_TMP"; }
  fi
  if [ "$E2E_FINISHED" -eq 0 ]; then
    # Ended early (set -e in a subshell, a signal, a bug in the suite): never report success.
    echo "FAIL - $E2E_NAME: the suite ended before finish (status $status)"
    echo "$E2E_PASSED passed, $((E2E_FAILED + 1)) failed"
    [ "$status" -ne 0 ] && exit "$status"
    exit 1
  fi
  exit "$status"
}

trap e2e_cleanup EXIT
trap 'echo "# interrupted" >&2; exit 130' INT TERM

# --- environment ------------------------------------------------------------------------------------------------

: "${DATAVO_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${DATAVO_BIN:=$DATAVO_SOURCE_DIR/build/cli/datavo}"
export DATAVO_SOURCE_DIR DATAVO_BIN
E2E_SERVER_SCRIPT="$DATAVO_SOURCE_DIR/tests/support/http_fault_server.py"

E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/datavo-e2e.$E2E_NAME.XXXXXX") || { echo "cannot create a temp dir" >&2; exit 1; }
export HOME="$E2E_TMP/home"
mkdir -p "$HOME"
unset DATAVO_SHARD_CACHE_CONFIG DATAVO_SHARD_CACHE_DIR DATAVO_SERVER DATAVO_TOKEN DATAVO_LOG_LEVEL
umask 022

if [ ! -x "$DATAVO_BIN" ]; then die "setup" "DATAVO_BIN=$DATAVO_BIN is not an executable"; fi
if ! command -v python3 >/dev/null; then die "setup" "python3 is required"; fi

# --- running datavo ---------------------------------------------------------------------------------------------

# The per-command deadline: a hung datavo fails its assertion instead of hanging the suite.
E2E_CMD_TIMEOUT=${E2E_CMD_TIMEOUT:-60}

# dv ARGS...: runs datavo (with --config $E2E_CONFIG when write_config was called), bounded in time.
dv() {
  if [ -n "${E2E_CONFIG:-}" ]; then
    timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" --config "$E2E_CONFIG" "$@"
  else
    timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" "$@"
  fi
}

# run ARGS...: runs `dv ARGS...`, capturing OUT, ERR and RC (never fails the shell).
run() {
  local out_file="$E2E_TMP/.run.out" err_file="$E2E_TMP/.run.err"
  RC=0
  dv "$@" >"$out_file" 2>"$err_file" || RC=$?
  OUT=$(cat "$out_file")
  ERR=$(cat "$err_file")
}

# write_config [FILE] < YAML: writes a shards.yaml (default $E2E_TMP/shards.yaml) and makes dv use it. Also exports
# DATAVO_SHARD_CACHE_CONFIG, for processes that call $DATAVO_BIN directly.
write_config() {
  E2E_CONFIG=${1:-$E2E_TMP/shards.yaml}
  cat >"$E2E_CONFIG"
  export DATAVO_SHARD_CACHE_CONFIG="$E2E_CONFIG"
}

# --- data -------------------------------------------------------------------------------------------------------

# make_shard FILE BYTES: random bytes; prints their SHA-256.
make_shard() {
  head -c "$2" /dev/urandom >"$1"
  sha256_of "$1"
}

sha256_of() { sha256sum "$1" | cut -c1-64; }

# hash_for NAME: a valid content hash (64 lowercase hex), distinct per NAME and per suite run.
hash_for() { printf '%s/%s' "$E2E_TMP" "$1" | sha256sum | cut -c1-64; }

file_size() { stat -c %s "$1"; }

# json EXPR: evaluates the Python expression EXPR with j = the JSON document on stdin; prints a scalar as is,
# anything else as JSON. Exit 1 (and prints nothing) when stdin is not JSON or EXPR fails.
json() {
  python3 -c '
import json, sys
try:
    j = json.load(sys.stdin)
    v = eval(sys.argv[1], {"j": j, "len": len, "sorted": sorted, "any": any, "all": all})
except Exception as e:
    sys.stderr.write("json: %s\n" % e)
    sys.exit(1)
print(v if isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool)) else json.dumps(v))
' "$1"
}

# json_vocabulary < JSON: the field names that break docs/cli.md's vocabulary, one a line (nothing when none):
# "name", "hash", "size", "bytes", "index", "used_after" and friends have one spelling each (tier, content_hash,
# size_bytes, shard_index, used_bytes), every byte count ends in "_bytes" (the counters under "stats" keep the names
# of include/datavo/tier.hpp), and "shards", "entries" and "samples" are always counts.
json_vocabulary() {
  python3 -c '
import json, sys
renamed = {"name": "tier or setting", "hash": "content_hash", "size": "size_bytes", "bytes": "size_bytes or field_bytes",
           "index": "shard_index", "used_after": "used_bytes", "bytes_freed": "freed_bytes", "bytes_added": "added_bytes"}
problems = []
def walk(value, path, in_stats):
    if isinstance(value, dict):
        for key, item in value.items():
            where = path + "." + key
            if key in renamed and renamed[key]:
                problems.append("%s (say %s)" % (where, renamed[key]))
            if "bytes" in key and not key.endswith("_bytes") and not in_stats and key not in renamed:
                problems.append("%s (a byte count ends in _bytes)" % where)
            if key in ("shards", "entries", "samples") and (not isinstance(item, int) or isinstance(item, bool)):
                problems.append("%s is a %s, not a count" % (where, type(item).__name__))
            walk(item, where, in_stats or key == "stats")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            walk(item, "%s[%d]" % (path, i), in_stats)
try:
    doc = json.load(sys.stdin)
except Exception as e:
    print("not JSON: %s" % e)
    sys.exit(0)
if not isinstance(doc, dict):
    problems.append("the document is a %s, not an object" % type(doc).__name__)
walk(doc, "", False)
print("\n".join(problems))
'
}

# --- polling ----------------------------------------------------------------------------------------------------

# wait_until SECONDS CMD...: polls CMD every 50 ms until it succeeds (0) or the deadline passes (1).
wait_until() {
  local limit=$1
  shift
  local deadline=$(($(date +%s%N) + limit * 1000000000))
  while ! "$@"; do
    [ "$(date +%s%N)" -ge "$deadline" ] && return 1
    sleep 0.05
  done
  return 0
}

# --- the fault server -------------------------------------------------------------------------------------------

# How long a server started here may take to come up: only a bound (the wait ends as soon as it is up), generous
# because on a loaded machine a Python server can take 15 s to import its modules.
E2E_START_TIMEOUT=${E2E_START_TIMEOUT:-60}

# start_server ROOT [SERVER OPTIONS...]: starts tests/support/http_fault_server.py on loopback; sets SERVER_PID,
# SERVER_PORT and SERVER_URL (http://127.0.0.1:PORT). Dies when it does not come up within $E2E_START_TIMEOUT s.
start_server() {
  local root=$1
  shift
  local port_file="$E2E_TMP/.server.port.$RANDOM"
  [ -f "$E2E_SERVER_SCRIPT" ] || die "start the fault server" "$E2E_SERVER_SCRIPT is missing"
  python3 "$E2E_SERVER_SCRIPT" --root "$root" --port-file "$port_file" "$@" \
    >"$E2E_TMP/.server.log" 2>&1 &
  SERVER_PID=$!
  track_pid "$SERVER_PID"
  if ! wait_until "$E2E_START_TIMEOUT" e2e_server_up "$port_file"; then
    die "start the fault server" \
      "no port file after $E2E_START_TIMEOUT s; log: $(e2e_abbrev "$(cat "$E2E_TMP/.server.log")")"
  fi
  SERVER_PORT=$(cat "$port_file")
  SERVER_URL="http://127.0.0.1:$SERVER_PORT"
}

e2e_server_up() { [ -s "$1" ] || { kill -0 "$SERVER_PID" 2>/dev/null || return 2; return 1; }; }

stop_server() {
  [ -n "${SERVER_PID:-}" ] && stop_pid "$SERVER_PID" TERM
  SERVER_PID=
}

# server_stats: the server's /_stats JSON.
server_stats() {
  python3 -c '
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1] + "/_stats", timeout=10).read().decode())
' "$SERVER_URL"
}

# server_requests URL_PATH: how many requests the server got for URL_PATH (e.g. /a.bin); 0 when none.
server_requests() {
  server_stats | json "j['paths'].get('$1', {}).get('requests', 0)"
}

# --- the reference origin (`datavo serve`) ---------------------------------------------------------------------

# start_origin STORE [SERVE OPTIONS...]: `datavo serve` on an ephemeral loopback port; sets ORIGIN_PID, ORIGIN_URL.
start_origin() {
  local store=$1
  shift
  local port_file="$E2E_TMP/.origin.port.$RANDOM"
  "$DATAVO_BIN" serve "$store" --port 0 --port-file "$port_file" --quiet "$@" >"$E2E_TMP/.origin.log" 2>&1 &
  ORIGIN_PID=$!
  track_pid "$ORIGIN_PID"
  if ! wait_until "$E2E_START_TIMEOUT" origin_up "$port_file"; then
    die "start datavo serve" "no port file after $E2E_START_TIMEOUT s; log: $(e2e_abbrev "$(cat "$E2E_TMP/.origin.log")")"
  fi
  ORIGIN_URL="http://127.0.0.1:$(cat "$port_file")"
}
origin_up() { [ -s "$1" ] || { kill -0 "$ORIGIN_PID" 2>/dev/null || return 2; return 1; }; }

# serve_shards_of_6mib COUNT: packs interrupt/train (DS), COUNT shards of two 3 MiB samples (above a 5 MiB part_size:
# each goes up in parts), and serves it (start_origin). For the suites that interrupt uploads in flight.
serve_shards_of_6mib() {
  python3 - "$E2E_TMP/src" "$1" <<'PY'
import os, random, sys
root, shards = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
rng = random.Random(16)
for i in range(shards * 2):
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(3 * 1024 * 1024))
PY
  DS=interrupt/train
  run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard 2
  [ "$RC" -eq 0 ] || die "pack" "$ERR"
  expect_eq "the dataset has $1 shards" "$1" "$(json "j['total_shards']" <<<"$OUT")"
  start_origin "$E2E_TMP/store"
}

# origin_requests ROUTE [STATUS]: datavo_requests_total of the origin at $ORIGIN_URL for ROUTE (summed over
# statuses unless given), from its /v1/metrics. ROUTE `api`: every route but /v1/metrics (which the counting asks).
origin_requests() {
  python3 - "$ORIGIN_URL" "$1" "${2:-}" <<'PY'
import re, sys, urllib.request
url, route, status = sys.argv[1], sys.argv[2], sys.argv[3]
text = urllib.request.urlopen(url + "/v1/metrics", timeout=10).read().decode()
total = 0
for line in text.splitlines():
    m = re.match(r'datavo_requests_total\{(.*)\}\s+([0-9.eE+]+)$', line)
    if not m:
        continue
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
    matches = labels.get("route") != "metrics" if route == "api" else labels.get("route") == route
    if matches and (not status or labels.get("status") == status):
        total += int(float(m.group(2)))
print(total)
PY
}
# make_samples DIR N BYTES: N samples s_0000 ... as <id>.bin (BYTES random bytes) and <id>.txt, for `datavo pack`.
make_samples() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root, exist_ok=True)
for i in range(n):
    with open(os.path.join(root, "s_%04d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
    with open(os.path.join(root, "s_%04d.txt" % i), "w") as f:
        f.write("sample %d\n" % i)
PY
}

# --- cache state ------------------------------------------------------------------------------------------------

# stat_of TIER FIELD: one counter of `datavo cache stats --json` (empty when the tier or field is missing).
stat_of() {
  dv --json cache stats 2>/dev/null | json "[r['stats']['$2'] for r in j['tiers'] if r['tier'] == '$1'][0]" 2>/dev/null
}

# expect_stat TIER FIELD VALUE: VALUE is a number (equality) or ">=N", "<=N", ">N", "<N".
expect_stat() {
  local tier=$1 field=$2 want=$3 got op
  got=$(stat_of "$tier" "$field")
  case "$want" in
    ">="*) op=-ge want=${want#>=} ;;
    "<="*) op=-le want=${want#<=} ;;
    ">"*) op=-gt want=${want#>} ;;
    "<"*) op=-lt want=${want#<} ;;
    *) op=-eq ;;
  esac
  expect_cmp "stats: tier $tier $field $op $want" "$got" "$op" "$want"
}

# info_of TIER FIELD: a field of the tier in `datavo cache info --json` (used_bytes, entries, ...).
info_of() {
  dv --json cache info 2>/dev/null | json "[t['$2'] for t in j['tiers'] if t['tier'] == '$1'][0]" 2>/dev/null
}

# staging_files TIER_PATH: the names in TIER_PATH/.staging/, one a line.
staging_files() { e2e_list_dir "$1/.staging"; }

# shard_locks TIER_PATH: the per-shard lock files in TIER_PATH/.locks/ (not evict.lock, .stats.lock or the
# shared usage count .usage).
shard_locks() { e2e_list_dir "$1/.locks" | grep -v -e '^evict\.lock$' -e '^\.stats\.lock$' -e '^\.usage$' || true; }

# need_root WHAT WHY: the suite must run as root (WHY: what for); otherwise refused_privilege (skipped, or a failure
# under DATAVO_REQUIRE_PRIVILEGES=1). CI runs as root.
need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    refused_privilege "$1" "this suite must run as root ($2), and runs as uid $(id -u); re-run it with sudo"
  fi
}

# mount_tmpfs DIR SIZE NAME: mounts a tmpfs of SIZE (e.g. 4m) at DIR, unmounted on exit. Where the machine refuses
# the mount (no CAP_SYS_ADMIN: a container, a chroot), refused_privilege with mount's message; any other failure
# of the mount fails the suite.
mount_tmpfs() {
  local dir=$1 size=$2 name=$3 err
  mkdir -p "$dir"
  if ! err=$(mount -t tmpfs -o "size=$size,mode=0755" "$name" "$dir" 2>&1); then
    err=$(e2e_abbrev "$err")
    if grep -qiE 'operation not permitted|permission denied' <<<"$err"; then
      refused_privilege "mount a $size tmpfs at $dir" "the machine refuses the mount (it needs CAP_SYS_ADMIN): $err"
    fi
    die "mount a $size tmpfs at $dir" "$err"
  fi
  on_exit "! mountpoint -q '$dir' || umount '$dir' || umount -l '$dir'"
}

# need_ptrace TOOL: TOOL (gdb or strace) must be installed (a failure otherwise: scripts/install-deps.sh installs
# both) and allowed to trace a child. Where the kernel refuses ptrace (kernel.yama.ptrace_scope=3, a seccomp
# profile of a container), refused_privilege with the tool's message.
need_ptrace() {
  local tool=$1 out
  command -v "$tool" >/dev/null || die "$tool" "$tool is required and is not installed (scripts/install-deps.sh)"
  case $tool in
    gdb) out=$(timeout 60 gdb -q -batch -nx -ex 'set disable-randomization off' -ex run --args /bin/true 2>&1) &&
      grep -q 'exited normally' <<<"$out" && return 0 ;;
    strace) out=$(timeout 60 strace -f -qq -o /dev/null /bin/true 2>&1) && return 0 ;;
    *) die "need_ptrace" "unknown tool $tool" ;;
  esac
  if grep -qiE 'operation not permitted|permission denied' <<<"$out"; then
    refused_privilege "$tool" "the kernel refuses $tool to trace a child process (ptrace): $(e2e_abbrev "$out")"
  fi
  die "$tool" "$tool cannot trace /bin/true: $(e2e_abbrev "$out")"
}
