#!/usr/bin/env bash
# The local cloud-storage emulators of the cloud-tier tests: install (pinned, cached), start on free loopback
# ports, wait until ready, print the endpoints, stop by PID.
#
#   tests/support/emulators.sh up NAME...     start NAME... (default: all), print `export` lines on stdout
#   tests/support/emulators.sh env [NAME...]  print the `export` lines of the running emulators again
#   tests/support/emulators.sh down [NAME...] stop them (default: every one this run dir recorded)
#   tests/support/emulators.sh install        only install the npm packages into the cache
#   tests/support/emulators.sh clients        install the reference clients (npm @azure/storage-blob,
#                                             @google-cloud/storage) into $DATAVO_EMULATOR_DIR/clients unless
#                                             present; prints that directory's node_modules (for NODE_PATH)
#
# or, sourced (`. tests/support/emulators.sh`), the functions emulators_up / emulators_env / emulators_down /
# emulators_install, where emulators_up also exports the variables into the calling shell. Typical use:
#
#   eval "$(tests/support/emulators.sh up azurite gcs)" && trap 'tests/support/emulators.sh down' EXIT
#
# NAMEs and what `up` exports for each (all on 127.0.0.1, each on a free port picked at start):
#   azurite  Azure Blob, Azurite 3.35.0 (SharedKey and SAS are checked)
#            AZURITE_BLOB_ENDPOINT=http://127.0.0.1:P/devstoreaccount1 (path-style), AZURITE_ACCOUNT_NAME,
#            AZURITE_ACCOUNT_KEY, AZURITE_CONNECTION_STRING
#   s3rver   S3, @20minutes/s3rver 4.0.4 (SigV4 is checked; bucket S3RVER_BUCKET exists)
#            S3RVER_ENDPOINT, S3RVER_ACCESS_KEY_ID, S3RVER_SECRET_ACCESS_KEY, S3RVER_REGION, S3RVER_BUCKET
#   moto     S3 semantics (conditional writes, abort multipart, suffix ranges), moto_server from the image's
#            python (any credentials are accepted)          MOTO_S3_ENDPOINT
#   gcs      GCS JSON API, the firebase-tools 15.34.2 Storage emulator without its Java rules runtime (no auth)
#            GCS_EMULATOR_ENDPOINT, STORAGE_EMULATOR_HOST (the client convention: auth off), GCS_EMULATOR_PROJECT
# Only the AZURITE_*/S3RVER_*/MOTO_*/GCS_EMULATOR_* names and STORAGE_EMULATOR_HOST are exported: the standard
# credential variables (AZURE_STORAGE_KEY, AWS_ACCESS_KEY_ID, ...) are left to the tests that want them.
#
# Environment:
#   DATAVO_EMULATOR_DIR      the install cache, kept between runs (default $HOME/.cache/datavo/emulators); the npm
#                            install is skipped when it already holds the pinned versions
#   DATAVO_EMULATOR_RUN_DIR  PIDs, ports, logs and data of one set of running emulators (default
#                            $DATAVO_EMULATOR_DIR/run); give concurrent users their own
#   DATAVO_NODE              node (default /usr/bin/node or /usr/local/bin/node); npm is the one beside it
#   DATAVO_MOTO_PYTHON       a python3 that can `import moto.server` (default: the first such of
#                            ${PYENV_ROOT:-$HOME/.pyenv}/versions/*/bin/python3, python3 on PATH, /usr/bin/python3;
#                            CI runs under env -i without pyenv on PATH, hence the explicit search)
#   DATAVO_EMULATOR_TIMEOUT  seconds each emulator may take to become ready (default 60)
# Needs: bash >= 4.4, curl, python3 (any: it only picks free ports), flock, and node + npm for all but moto.
# Exit status: 0 when every requested emulator is up (or down); otherwise non-zero, with the reason on stderr
# (e.g. "moto is missing: ...").

# Pinned versions, and why each: azurite 3.36+ and s3rver 5.x need a newer Node than Debian 12's 20; the GCS
# wrapper below reaches into firebase-tools internals, which only this version was checked against.
EMU_AZURITE_VERSION=3.35.0
EMU_S3RVER_VERSION=4.0.4
EMU_FIREBASE_VERSION=15.34.2
EMU_ALL_NAMES=(azurite s3rver moto gcs)
# The reference clients of the interop tests and benchmarks (tests/support/azure_tool.js, gcs_tool.js): the newest
# versions whose engines allow Node 20 (@azure/storage-blob 12.33+ and @google-cloud/storage 8 want Node >= 22).
# A directory of their own, so that neither install prunes the other's packages.
EMU_AZURE_BLOB_VERSION=12.32.0
EMU_GCS_CLIENT_VERSION=7.22.0
EMU_HOST=127.0.0.1
. "$(dirname "${BASH_SOURCE[0]}")/pids.sh"
# Azurite's well-known development account (public, documented by Microsoft; not a secret).
EMU_AZURITE_ACCOUNT=devstoreaccount1
EMU_AZURITE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

emu_log() { echo "emulators: $*" >&2; }

emu_dir() { echo "${DATAVO_EMULATOR_DIR:-$HOME/.cache/datavo/emulators}"; }
emu_run_dir() { echo "${DATAVO_EMULATOR_RUN_DIR:-$(emu_dir)/run}"; }
emu_now_ms() { echo $(($(date +%s%N) / 1000000)); }

emu_node() {
  local candidate
  for candidate in "${DATAVO_NODE:-}" /usr/bin/node /usr/local/bin/node; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  emu_log "node is missing: none of \$DATAVO_NODE, /usr/bin/node, /usr/local/bin/node is executable"
  return 1
}

# A python3 that can import moto.server (and flask, which it serves with); prints its path.
emu_moto_python() {
  local candidate tried=()
  local candidates=("${DATAVO_MOTO_PYTHON:-}" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3
    "$(command -v python3 2>/dev/null)" /usr/bin/python3)
  for candidate in "${candidates[@]}"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    tried+=("$candidate")
    if timeout 30 "$candidate" -c 'import moto.server, flask' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  emu_log "moto is missing: no python3 can 'import moto.server' (tried: ${tried[*]:-none};" \
    "set DATAVO_MOTO_PYTHON to one that can)"
  return 1
}

# --- installation -----------------------------------------------------------------------------------------------

emu_installed_version() { # PACKAGE: the version in the cache's node_modules, empty when absent
  local file
  file="$(emu_dir)/node_modules/$1/package.json"
  [ -f "$file" ] || return 0
  sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$file" | head -n 1
}

emu_install_current() {
  [ "$(emu_installed_version azurite)" = "$EMU_AZURITE_VERSION" ] &&
    [ "$(emu_installed_version @20minutes/s3rver)" = "$EMU_S3RVER_VERSION" ] &&
    [ "$(emu_installed_version firebase-tools)" = "$EMU_FIREBASE_VERSION" ]
}

# Installs the pinned npm packages into $DATAVO_EMULATOR_DIR unless they are there already, and (re)writes the
# two launchers. Serialised with flock, so concurrent runs install once.
emulators_install() {
  local dir node npm started
  dir=$(emu_dir)
  node=$(emu_node) || return 1
  npm="$(dirname "$node")/npm"
  mkdir -p "$dir" || return 1
  (
    flock 9 || exit 1
    if emu_install_current; then
      emu_log "npm packages present in $dir (azurite $EMU_AZURITE_VERSION, s3rver $EMU_S3RVER_VERSION," \
        "firebase-tools $EMU_FIREBASE_VERSION): install skipped"
    else
      [ -x "$npm" ] || { emu_log "npm is missing: expected beside $node"; exit 1; }
      started=$(emu_now_ms)
      emu_log "installing azurite@$EMU_AZURITE_VERSION @20minutes/s3rver@$EMU_S3RVER_VERSION" \
        "firebase-tools@$EMU_FIREBASE_VERSION into $dir (about a minute)"
      cat >"$dir/package.json" <<EOF
{
  "name": "datavo-emulators",
  "private": true,
  "description": "Written by tests/support/emulators.sh; the pinned emulator packages of the Datavo tests",
  "dependencies": {
    "azurite": "$EMU_AZURITE_VERSION",
    "@20minutes/s3rver": "$EMU_S3RVER_VERSION",
    "firebase-tools": "$EMU_FIREBASE_VERSION"
  }
}
EOF
      # --ignore-scripts: firebase-tools' re2 would otherwise compile itself with node-gyp (minutes on 2 cores)
      # after failing to download a prebuilt binary offline; nothing started here uses re2.
      (cd "$dir" && PATH="$(dirname "$node"):$PATH" "$npm" install --no-audit --no-fund --ignore-scripts \
        --loglevel=error --no-save >"$dir/npm-install.log" 2>&1) || {
        emu_log "npm install failed; the end of $dir/npm-install.log:"
        tail -n 20 "$dir/npm-install.log" >&2
        exit 1
      }
      emu_install_current || { emu_log "npm install did not leave the pinned versions in $dir"; exit 1; }
      emu_log "installed in $(($(emu_now_ms) - started)) ms"
    fi
    emu_write_launchers "$dir"
  ) 9>"$dir/.install.lock"
}

emu_clients_current() {
  local dir
  dir="$(emu_dir)/clients"
  [ "$(DATAVO_EMULATOR_DIR=$dir emu_installed_version @azure/storage-blob)" = "$EMU_AZURE_BLOB_VERSION" ] &&
    [ "$(DATAVO_EMULATOR_DIR=$dir emu_installed_version @google-cloud/storage)" = "$EMU_GCS_CLIENT_VERSION" ]
}

# Installs the pinned reference clients into $DATAVO_EMULATOR_DIR/clients unless they are there, serialised with
# flock as emulators_install is; prints their node_modules directory.
emulators_clients() {
  local dir node npm started
  dir="$(emu_dir)/clients"
  node=$(emu_node) || return 1
  npm="$(dirname "$node")/npm"
  mkdir -p "$dir" || return 1
  (
    flock 9 || exit 1
    if emu_clients_current; then
      emu_log "reference clients present in $dir: install skipped"
    else
      [ -x "$npm" ] || { emu_log "npm is missing: expected beside $node"; exit 1; }
      started=$(emu_now_ms)
      emu_log "installing @azure/storage-blob@$EMU_AZURE_BLOB_VERSION @google-cloud/storage@$EMU_GCS_CLIENT_VERSION" \
        "into $dir"
      cat >"$dir/package.json" <<EOF
{
  "name": "datavo-reference-clients",
  "private": true,
  "description": "Written by tests/support/emulators.sh; the reference clients of the Datavo interop tests",
  "dependencies": {
    "@azure/storage-blob": "$EMU_AZURE_BLOB_VERSION",
    "@google-cloud/storage": "$EMU_GCS_CLIENT_VERSION"
  }
}
EOF
      (cd "$dir" && PATH="$(dirname "$node"):$PATH" "$npm" install --no-audit --no-fund --ignore-scripts \
        --loglevel=error --no-save >"$dir/npm-install.log" 2>&1) || {
        emu_log "npm install of the reference clients failed; the end of $dir/npm-install.log:"
        tail -n 20 "$dir/npm-install.log" >&2
        exit 1
      }
      emu_clients_current || { emu_log "npm install did not leave the pinned clients in $dir"; exit 1; }
      emu_log "installed the reference clients in $(($(emu_now_ms) - started)) ms"
    fi
  ) 9>"$dir/.install.lock" || return 1
  echo "$dir/node_modules"
}

emu_write_file() { # PATH < CONTENT: replaced atomically, so a concurrent run never starts a half-written file
  local tmp="$1.tmp.$$"
  cat >"$tmp" && mv -f "$tmp" "$1"
}

emu_write_launchers() {
  local dir=$1
  # The published @20minutes/s3rver 4.0.4 tarball lacks its bin/ directory; lib/cli exports the commander
  # program that bin/s3rver.js would run.
  emu_write_file "$dir/s3rver-cli.js" <<'EOF'
// Written by tests/support/emulators.sh: the bin/s3rver.js that @20minutes/s3rver 4.0.4 was published without.
require("@20minutes/s3rver/lib/cli")
  .parseAsync(process.argv)
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
EOF
  # firebase-tools' Storage emulator serves the GCS JSON API (/storage/v1, /upload/storage/v1, /b) through its
  # admin storage layer, which never evaluates Security Rules. Its rules runtime is a Java >= 21 jar downloaded
  # at start (neither is available here), so this constructs the emulator directly, with the runtime and the
  # rules manager replaced by no-ops; the Firebase client routes (/v0) then deny everything, the GCS routes work.
  # Bucket data goes under $TMPDIR/firebase/storage. Exits 1 (with the error) when it cannot listen.
  emu_write_file "$dir/gcs-emulator.js" <<'EOF'
// Written by tests/support/emulators.sh: the GCS JSON API of firebase-tools' Storage emulator, without Java.
// usage: node gcs-emulator.js --host H --port P --project ID
const path = require("path");
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const emulatorDir = path.join(__dirname, "node_modules", "firebase-tools", "lib", "emulator");
const { StorageEmulator } = require(path.join(emulatorDir, "storage"));
const { EmulatorRegistry } = require(path.join(emulatorDir, "registry"));

(async () => {
  const host = option("--host", "127.0.0.1");
  const port = parseInt(option("--port", "9199"), 10);
  const emulator = new StorageEmulator({ projectId: option("--project", "demo-test"), host, port, auto_download: false });
  emulator._rulesRuntime.start = async () => {};
  emulator._rulesRuntime.stop = async () => {};
  emulator._rulesManager = { start: async () => ({ errors: [], warnings: [] }), stop: async () => {}, getRuleset: () => undefined };
  emulator.createRulesManager = () => emulator._rulesManager;
  await EmulatorRegistry.start(emulator);
  console.log(`GCS emulator listening on http://${host}:${port}`);
  const stop = async () => {
    try {
      await emulator.stop();
    } finally {
      process.exit(0);
    }
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
EOF
}

# --- ports and processes ----------------------------------------------------------------------------------------

# A loopback TCP port that was free a moment ago (the kernel's pick). Another process may take it before the
# emulator binds it: emu_start_one then sees the emulator fail or the port owned by someone else, and retries.
emu_free_port() {
  local python
  python=$(command -v python3 2>/dev/null || echo /usr/bin/python3)
  "$python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}


# emu_owns_port PID PORT: PID holds the socket listening on 127.0.0.1:PORT (so a ready answer on PORT is from
# our emulator, not from a process that won a bind race).
emu_owns_port() {
  local pid=$1 hex inodes inode
  hex=$(printf '%04X' "$2")
  inodes=$(awk -v port="0100007F:$hex" '$2 == port && $4 == "0A" { print $10 }' /proc/net/tcp 2>/dev/null)
  [ -n "$inodes" ] || return 1
  for inode in $inodes; do
    find "/proc/$pid/fd" -maxdepth 1 -lname "socket:\[$inode\]" 2>/dev/null | grep -q . && return 0
  done
  return 1
}

emu_http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true; }

# Readiness per emulator: the URL to poll and the status that means "up".
emu_ready_url() {
  case $1 in
    azurite) echo "http://$EMU_HOST:$2/$EMU_AZURITE_ACCOUNT?comp=list" ;;  # 403: up, and it checks auth
    s3rver) echo "http://$EMU_HOST:$2/" ;;                                 # 200: anonymous ListAllMyBuckets
    moto) echo "http://$EMU_HOST:$2/moto-api/" ;;                          # 200
    gcs) echo "http://$EMU_HOST:$2/b" ;;                                   # 200: the bucket list
  esac
}
emu_ready_code() { if [ "$1" = azurite ]; then echo 403; else echo 200; fi; }

# emu_launch NAME PORT: starts NAME in the background on PORT; sets EMU_PID.
emu_launch() {
  local name=$1 port=$2 run dir node python
  run=$(emu_run_dir)
  dir=$(emu_dir)
  mkdir -p "$run/$name-data" || return 1
  case $name in
    azurite)
      node=$(emu_node) || return 1
      "$node" "$dir/node_modules/azurite/dist/src/blob/main.js" --location "$run/$name-data" \
        --blobHost "$EMU_HOST" --blobPort "$port" --skipApiVersionCheck --loose --disableTelemetry \
        </dev/null >"$run/$name.log" 2>&1 &
      ;;
    s3rver)
      node=$(emu_node) || return 1
      (cd "$dir" && exec "$node" s3rver-cli.js -d "$run/$name-data" -a "$EMU_HOST" -p "$port" --no-vhost-buckets \
        --configure-bucket test-bucket) </dev/null >"$run/$name.log" 2>&1 &
      ;;
    gcs)
      node=$(emu_node) || return 1
      TMPDIR="$run/$name-data" "$node" "$dir/gcs-emulator.js" --host "$EMU_HOST" --port "$port" \
        --project demo-test </dev/null >"$run/$name.log" 2>&1 &
      ;;
    moto)
      python=${EMU_MOTO_PY:-}
      [ -n "$python" ] || python=$(emu_moto_python) || return 1
      # moto keeps everything in memory; -m moto.server runs werkzeug without its reloader (one process).
      "$python" -m moto.server -H "$EMU_HOST" -p "$port" </dev/null >"$run/$name.log" 2>&1 &
      ;;
    *)
      emu_log "unknown emulator '$name' (known: ${EMU_ALL_NAMES[*]})"
      return 1
      ;;
  esac
  EMU_PID=$!
}

# emu_start_one NAME: starts NAME on a free port and waits until it is ready; records NAME.pid / .port / .start.
# Retries on another port when the emulator exits before it is ready or the port turns out to be someone else's.
emu_start_one() {
  local name=$1 run try port pid deadline code want url started
  run=$(emu_run_dir)
  want=$(emu_ready_code "$name")
  started=$(emu_now_ms)
  for try in 1 2 3 4 5; do
    port=$(emu_free_port) || { emu_log "cannot pick a free port"; return 1; }
    emu_launch "$name" "$port" || return 1
    pid=$EMU_PID
    echo "$pid" >"$run/$name.pid"
    pid_start_time "$pid" >"$run/$name.start" 2>/dev/null
    url=$(emu_ready_url "$name" "$port")
    deadline=$(($(date +%s) + ${DATAVO_EMULATOR_TIMEOUT:-60}))
    while :; do
      if ! pid_running "$pid"; then
        if grep -q -i -e EADDRINUSE -e 'address already in use' "$run/$name.log" 2>/dev/null; then
          emu_log "$name: port $port was taken before it could bind it (attempt $try); trying another"
          rm -f "$run/$name.pid" "$run/$name.start"
          wait "$pid" 2>/dev/null
          continue 2
        fi
        emu_log "$name exited before it was ready; the end of $run/$name.log:"
        tail -n 20 "$run/$name.log" >&2
        rm -f "$run/$name.pid" "$run/$name.start"
        return 1
      fi
      code=$(emu_http_code "$url")
      if [ "$code" = "$want" ] && emu_owns_port "$pid" "$port"; then
        echo "$port" >"$run/$name.port"
        emu_log "$name ready on port $port (pid $pid) in $(($(emu_now_ms) - started)) ms"
        return 0
      fi
      # An answer from a process that is not ours means it won the bind race: ours exits with EADDRINUSE (above).
      if [ "$(date +%s)" -ge "$deadline" ]; then
        emu_log "$name not ready after ${DATAVO_EMULATOR_TIMEOUT:-60} s ($url answered '$code', want $want);" \
          "the end of $run/$name.log:"
        tail -n 20 "$run/$name.log" >&2
        emu_stop_pid "$name" "$pid"
        rm -f "$run/$name.pid" "$run/$name.start"
        return 1
      fi
      sleep 0.1
    done
  done
  emu_log "$name: no free port after 5 attempts"
  return 1
}

# emu_stop_pid NAME PID: TERM, up to 10 s for a graceful exit (Azurite 1-2 s, moto 1-4 s), then KILL.
emu_stop_pid() {
  local name=$1 pid=$2 i
  pid_running "$pid" || { wait "$pid" 2>/dev/null; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 100); do
    pid_running "$pid" || break
    sleep 0.1
  done
  if pid_running "$pid"; then
    kill -KILL "$pid" 2>/dev/null
    emu_log "$name (pid $pid) did not exit on TERM within 10 s: killed"
    for i in $(seq 1 50); do
      pid_running "$pid" || break
      sleep 0.1
    done
  fi
  wait "$pid" 2>/dev/null  # reaps it when this shell started it (sourced use)
  return 0
}

emu_names_or_all() { if [ $# -eq 0 ]; then echo "${EMU_ALL_NAMES[@]}"; else echo "$@"; fi; }

# --- the commands -----------------------------------------------------------------------------------------------

emulators_env() {
  local run name port
  run=$(emu_run_dir)
  for name in $(emu_names_or_all "$@"); do
    [ -f "$run/$name.port" ] && [ -f "$run/$name.pid" ] || continue
    port=$(cat "$run/$name.port")
    case $name in
      azurite)
        echo "export AZURITE_BLOB_ENDPOINT=http://$EMU_HOST:$port/$EMU_AZURITE_ACCOUNT"
        echo "export AZURITE_ACCOUNT_NAME=$EMU_AZURITE_ACCOUNT"
        echo "export AZURITE_ACCOUNT_KEY='$EMU_AZURITE_KEY'"
        echo "export AZURITE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=$EMU_AZURITE_ACCOUNT;AccountKey=$EMU_AZURITE_KEY;BlobEndpoint=http://$EMU_HOST:$port/$EMU_AZURITE_ACCOUNT;'"
        ;;
      s3rver)
        echo "export S3RVER_ENDPOINT=http://$EMU_HOST:$port"
        echo "export S3RVER_ACCESS_KEY_ID=S3RVER S3RVER_SECRET_ACCESS_KEY=S3RVER S3RVER_REGION=us-east-1"
        echo "export S3RVER_BUCKET=test-bucket"
        ;;
      moto) echo "export MOTO_S3_ENDPOINT=http://$EMU_HOST:$port" ;;
      gcs)
        echo "export GCS_EMULATOR_ENDPOINT=http://$EMU_HOST:$port"
        echo "export STORAGE_EMULATOR_HOST=http://$EMU_HOST:$port"
        echo "export GCS_EMULATOR_PROJECT=demo-test"
        ;;
    esac
  done
}

# Starts NAME... and prints their `export` lines (see emulators_up).
emu_up_print() {
  local names name run needs_npm=0 started
  names=$(emu_names_or_all "$@")
  run=$(emu_run_dir)
  for name in $names; do
    case " ${EMU_ALL_NAMES[*]} " in
      *" $name "*) ;;
      *) emu_log "unknown emulator '$name' (known: ${EMU_ALL_NAMES[*]})"; return 2 ;;
    esac
    [ "$name" = moto ] || needs_npm=1
    if [ -f "$run/$name.pid" ] && pid_running "$(cat "$run/$name.pid")"; then
      emu_log "$name is already running from $run (pid $(cat "$run/$name.pid")): run 'down' first"
      return 1
    fi
  done
  # moto missing must be said up front, by name, before anything is started.
  if [[ " $names " == *" moto "* ]]; then EMU_MOTO_PY=$(emu_moto_python) || return 1; fi
  started=$(emu_now_ms)
  if [ $needs_npm = 1 ]; then emulators_install || return 1; fi
  mkdir -p "$run" || return 1
  for name in $names; do
    if ! emu_start_one "$name"; then
      emu_log "stopping what this call started"
      emulators_down $names >/dev/null
      return 1
    fi
  done
  emu_log "up: $names in $(($(emu_now_ms) - started)) ms"
  emulators_env $names
}

emulators_down() {
  local run name pid recorded_start
  run=$(emu_run_dir)
  [ -d "$run" ] || return 0
  for name in $(emu_names_or_all "$@"); do
    [ -f "$run/$name.pid" ] || continue
    pid=$(cat "$run/$name.pid")
    recorded_start=$(cat "$run/$name.start" 2>/dev/null)
    if pid_running "$pid" && [ -n "$recorded_start" ] && ! same_process "$pid" "$recorded_start"; then
      emu_log "$name: pid $pid now belongs to another process; not signalling it"
    else
      emu_stop_pid "$name" "$pid"
      emu_log "$name (pid $pid) stopped"
    fi
    rm -f "$run/$name.pid" "$run/$name.port" "$run/$name.start"
  done
  return 0
}

# --- sourced or run ---------------------------------------------------------------------------------------------

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
  # Sourced: emulators_up also exports the endpoints into this shell. (The emulators start inside the command
  # substitution, with their output in log files so that it does not wait for them; emulators_down stops them
  # by PID all the same.)
  emulators_up() {
    local lines
    lines=$(emu_up_print "$@") || return 1
    eval "$lines"
    printf '%s\n' "$lines"
  }
  return 0
fi

set -uo pipefail
command=${1:-}
shift || true
case $command in
  up) emu_up_print "$@" ;;
  down) emulators_down "$@" ;;
  env) emulators_env "$@" ;;
  install) emulators_install ;;
  clients) emulators_clients ;;
  *)
    echo "usage: $0 up|down|env [NAME...] | install | clients   (NAMEs: ${EMU_ALL_NAMES[*]}; default all)" >&2
    exit 2
    ;;
esac
