# The fault scenarios of a cloud tier, written once and run for each cloud flavour by test_s3_faults.sh,
# test_azure_faults.sh and test_gcs_faults.sh, through `datavo cache fetch` and `datavo warm` with
# tests/support/cloud_proxy.py between datavo and the server (named with --flavour, so that every flavour's
# operations carry their S3 names: GetObject, UploadPart, PutObject, CompleteMultipartUpload, ...). In every
# scenario the read succeeds (from a slower folder tier or the origin), the tier degrades with a WARNING, nothing bad
# is installed locally (the bytes served are checked, `cache verify` finds nothing bad, no staging file is left) or
# remotely (the objects are read back with the flavour's reference client):
#   cf_kill_mid_upload        the server (a dedicated one) killed with SIGKILL while an upload is under way;
#   cf_kill_mid_download      that server killed mid-download: the slower folder tier serves, the origin is not asked;
#   cf_storm                  a 503 storm with Retry-After: a short one is ridden out (Retry-After honoured); a long
#                             one opens the breaker with one WARNING, and the origin serves every shard (warm exits
#                             1: the tier, skipped while down, missed shards);
#   cf_rewrite_between_ranges another writer puts the object again while its pinned ranges are held: the read
#                             restarts once and succeeds;
#   cf_one_412 / cf_every_412 a 412 to one pinned range: the object is read once more; to every pinned range: the
#                             origin serves;
#   cf_lying_metadata         an object whose bytes do not match its metadata: never installed, left alone by a
#                             read-only tier, deleted from a writable one and replaced by good bytes;
#   cf_missing_container      a bucket or container that does not exist: the WARNING names it.
#
# Source it after lib.sh and the flavour's lib (s3_lib.sh or azure_gcs_lib.sh). The suite sets, before the
# scenarios run:
#   FLAVOUR            s3, azure or gcs (cloud_proxy.py's --flavour)
#   CF_TIER CF_TYPE    the cloud tier's name in the configs and its type, as WARNING lines show them
#   CF_URL CF_BUCKET   the proxy in front of the shared server, and the bucket or container the scenarios use
#   CF_PART            the part_size of the configs (GCS: above the objects, as its emulator takes no chunks)
# and defines the flavour's adapter:
#   cf_tier_yaml URL BUCKET PART [FIELD...]   the YAML of the cloud tier (named $CF_TIER) through the proxy at URL
#   cf_doomed_up       a dedicated server to be killed, behind a proxy of its own: DOOMED_URL (the proxy),
#                      DOOMED_BUCKET, and cf_doomed_server RUN_DIR EMULATOR for the server's process
#   cf_put BUCKET NAME FILE SHA SIZE          store FILE with Datavo's metadata claiming SHA and SIZE
#   cf_get BUCKET NAME FILE                   read an object back into FILE
#   cf_version BUCKET NAME                    what a pinned range names: the ETag, or "generation=N"
# Every datavo stdout and stderr is also appended to $CF_ALL_OUTPUT, which suites search for secrets.

MIB=$((1024 * 1024))
CF_ALL_OUTPUT="$E2E_TMP/all-output"
CF_STARTED=$(date +%s)

# start_cloud_proxy NAME UPSTREAM: cloud_proxy.py in front of UPSTREAM with this flavour's names (<NAME>_URL).
start_cloud_proxy() { start_proxy "$1" "$2" --flavour "$FLAVOUR"; }

section() { echo "# $(($(date +%s) - CF_STARTED)) s: $1"; }

# cf_prestart EMULATOR RUN_DIR: starts EMULATOR (tests/support/emulators.sh) in RUN_DIR in the background, so that
# the dedicated servers of the kill scenarios start while the suite does other work; stopped on exit.
# cf_started RUN_DIR waits for it and sets CF_LINES to its export lines (dies naming it when it did not start).
cf_prestart() {
  mkdir -p "$2"
  on_exit_first "DATAVO_EMULATOR_RUN_DIR='$2' emulators_down >/dev/null 2>&1"
  (DATAVO_EMULATOR_RUN_DIR="$2" emu_up_print "$1" >"$2/up.lines" 2>"$2/up.err"; echo $? >"$2/up.rc") &
}
# cf_doomed_server RUN_DIR EMULATOR: the dedicated server that cf_kill_doomed kills is EMULATOR of RUN_DIR (its PID,
# start time and log, recorded by tests/support/emulators.sh).
cf_doomed_server() {
  DOOMED_SERVER_PID=$(cat "$1/$2.pid") DOOMED_SERVER_START=$(cat "$1/$2.start") DOOMED_SERVER_LOG="$1/$2.log"
}
cf_doomed_alive() { [ -n "${DOOMED_SERVER_PID:-}" ] && running_process "$DOOMED_SERVER_PID" "$DOOMED_SERVER_START"; }
# cf_kill_doomed WHAT: SIGKILLs the dedicated server and forgets it (so that the next scenario starts another, even
# while this one is still a zombie); a failure of WHAT, with the end of its log, if it had died before.
cf_kill_doomed() {
  if cf_doomed_alive; then
    kill -KILL "$DOOMED_SERVER_PID"
    DOOMED_SERVER_PID=
  else
    fail "$1: the dedicated server runs until it is killed" "pid $DOOMED_SERVER_PID is gone; its log ends:
$(tail -n 20 "$DOOMED_SERVER_LOG" 2>&1)"
  fi
}
cf_started() {
  wait_until 300 test -s "$1/up.rc" || die "start a dedicated server in $1" "not up after 300 s"
  [ "$(cat "$1/up.rc")" = 0 ] || die "start a dedicated server in $1" "$(cat "$1/up.err")"
  CF_LINES=$(cat "$1/up.lines")
}

# cf_vm NAME URL BUCKET PART [FIELD...]: $E2E_TMP/NAME.yaml (a local folder tier, the cloud tier through the proxy
# at URL, a slower folder tier "slow"), made the config.
cf_vm() {
  local name=$1 url=$2 bucket=$3 part=$4
  shift 4
  write_config "$E2E_TMP/$name.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n  - name: slow\n    path: %s\n' \
    "$E2E_TMP/$name" "$(cf_tier_yaml "$url" "$bucket" "$part" 'concurrency: 2' "$@")" "$E2E_TMP/$name-slow")
}

# fetch NAME SHA [ARGS...]: `cache fetch` of the file NAME from the origin, expecting SHA; sets RC OUT ERR.
fetch() {
  local name=$1 sha=$2
  shift 2
  run --json cache fetch "$(hash_for "$name")" --url "$SERVER_URL/$name" --sha256 "$sha" "$@"
  printf '%s\n%s\n' "$OUT" "$ERR" >>"$CF_ALL_OUTPUT"
}

# fetch_unchecked NAME: the same without --sha256 (only the object's metadata knows what the bytes should be).
fetch_unchecked() {
  run --json cache fetch "$(hash_for "$1")" --url "$SERVER_URL/$1"
  printf '%s\n%s\n' "$OUT" "$ERR" >>"$CF_ALL_OUTPUT"
}

# served_ok WHAT SHA SOURCE: the fetch succeeded from SOURCE with the right bytes, nothing left in staging.
served_ok() {
  local what=$1 sha=$2 source=$3 path
  expect_eq "$what: exit 0, served from $source" "[0, \"$source\"]" "[$RC, \"$(json "j['source']" <<<"$OUT" 2>/dev/null)\"]"
  path=$(json "j['path']" <<<"$OUT" 2>/dev/null)
  expect_eq "$what: the bytes served are the shard's" "$sha" "$( [ -n "$path" ] && sha256_of "$path")"
  expect_eq "$what: no staging file left" "" "$(staging_files "$(dirname "$(dirname "$path")")" 2>/dev/null)"
}

# verify_local WHAT: `cache verify` finds every local entry intact. (It checks the cloud tier's objects too, and
# fails while the tier is down or holds a bad object: its JSON says both, only the folder tiers' rows are read here.)
verify_local() {
  local out
  out=$(dv --json cache verify 2>/dev/null)
  expect_eq "$1: cache verify: nothing bad installed locally" 0 "$(json "sum(t['bad'] for t in j['tiers'])" <<<"$out")"
}

# mid_transfer URL OP: a request of OP is under way and has moved bytes.
mid_transfer() {
  [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == '$2' and not r['done'] and (r['bytes_out'] + r['bytes_in']) > 0])")" -gt 0 ]
}
# pinned_arrived URL N: N GETs pinned to a version (If-Match, ifGenerationMatch) have arrived.
pinned_arrived() { [ "$(proxy_json "$1" "len([r for r in j['log'] if r['op'] == 'GetObject' and r['if_match']])")" -ge "$2" ]; }

# background_fetch NAME SHA: fetch in the background; collect_fetch waits for it and sets RC OUT ERR.
background_fetch() {
  CF_FETCH_STARTED=$(date +%s%N)
  ( fetch "$1" "$2"; echo "$RC" >"$E2E_TMP/rc"; echo "$OUT" >"$E2E_TMP/out"; echo "$ERR" >"$E2E_TMP/err" ) &
  CF_FETCHER=$!
}
collect_fetch() {
  wait "$CF_FETCHER"
  RC=$(cat "$E2E_TMP/rc") OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
  echo "# (the fetch took $((($(date +%s%N) - CF_FETCH_STARTED) / 1000000)) ms)"
}

# object_of FILE: the object name of the entry of FILE's shard in the tier (under the config's instance).
object_of() { echo "$(dv --json cache info | json "j['instance']")/$(hash_for "$1").tar"; }

# gets_of URL: "<GETs> <GETs of the first range>" (a 5 MiB part_size).
gets_of() {
  proxy_json "$1" "str(j['ops'].get('GetObject', 0)) + ' ' + str(len([r for r in j['log'] if r['op'] == 'GetObject' and r['range'] == 'bytes=0-5242879']))"
}

# --- the server killed ------------------------------------------------------------------------------------------

# cf_kill_mid_upload SIZE OP: a fresh dedicated server killed while the upload of a SIZE-byte shard is under way:
# its requests of OP have brought their bytes to the proxy, which holds them until the server is dead (so that the
# kill lands mid-upload however slow the machine is), then forwards them to the dead server. Leaves KILLED_NAME.
cf_kill_mid_upload() {
  local size=$1 op=$2 sha
  section "the server killed mid-upload"
  cf_doomed_up
  KILLED_NAME=kill-upload.bin
  sha=$(make_shard "$E2E_TMP/files/$KILLED_NAME" "$size")
  cf_vm vm-upload "$DOOMED_URL" "$DOOMED_BUCKET" "$CF_PART"
  proxy_mode "$DOOMED_URL" "delay seconds=60 op=$op"
  background_fetch "$KILLED_NAME" "$sha"
  wait_until 30 mid_transfer "$DOOMED_URL" "$op" ||
    fail "kill mid-upload" "no upload under way: $(proxy_json "$DOOMED_URL" "[(r['op'], r['done'], r['bytes_in']) for r in j['log']]")"
  cf_kill_doomed "kill mid-upload"
  proxy_mode "$DOOMED_URL" ok  # releases the held requests
  collect_fetch
  served_ok "kill mid-upload" "$sha" fetched
  expect_eq "kill mid-upload: the upload is reported failed, the read is not" '[0, 1]' \
    "$(json "[j['uploads']['uploaded'], j['uploads']['failed']]" <<<"$OUT")"
  expect_contains "kill mid-upload: a WARNING says the read succeeded" "(the read it served succeeded)" "$ERR"
  verify_local "kill mid-upload"
}

# cf_kill_mid_download SIZE: a shard (above 5 MiB) uploaded through datavo to the dedicated server (started unless
# it runs), then that server killed mid-download by a second VM that also holds the shard in its slower folder
# tier: after the first range, while the ranges pinned to its version are held in the proxy (then forwarded to
# the dead server). Leaves SEED_COUNTS, the proxy's operation counts of the seeding (JSON).
cf_kill_mid_download() {
  local size=$1 sha origin_before uploaded
  section "the server killed mid-download"
  cf_doomed_alive || cf_doomed_up
  sha=$(make_shard "$E2E_TMP/files/kill-download.bin" "$size")
  cf_vm seed "$DOOMED_URL" "$DOOMED_BUCKET" "$CF_PART"
  proxy_reset "$DOOMED_URL"
  fetch kill-download.bin "$sha"
  SEED_COUNTS=$(proxy_json "$DOOMED_URL" "j['ops']")
  uploaded=$(json "j['uploads']['uploaded']" <<<"$OUT")
  expect_eq "kill mid-download: the shard is in the $FLAVOUR server" 1 "$uploaded"
  if [ "$uploaded" != 1 ]; then
    echo "# the seeding's stderr:"; sed 's/^/#   /' <<<"$ERR"
    echo "# its requests: $(proxy_json "$DOOMED_URL" "[(r['op'], r['status']) for r in j['log']]")"
  fi
  cf_vm vm-download "$DOOMED_URL" "$DOOMED_BUCKET" 5MiB
  printf 'tiers:\n  - name: slow\n    path: %s\n' "$E2E_TMP/vm-download-slow" >"$E2E_TMP/slow-only.yaml"
  timeout 30 "$DATAVO_BIN" --config "$E2E_TMP/slow-only.yaml" cache put "$(hash_for kill-download.bin)" \
    "$E2E_TMP/files/kill-download.bin" >/dev/null || fail "seed the slower folder tier" "cache put failed"
  proxy_mode "$DOOMED_URL" "delay seconds=60 op=GetObject ifmatch=1"
  proxy_reset "$DOOMED_URL"
  origin_before=$(server_requests /kill-download.bin)
  background_fetch kill-download.bin "$sha"
  wait_until 30 pinned_arrived "$DOOMED_URL" 1 || fail "kill mid-download" "no download under way"
  cf_kill_doomed "kill mid-download"
  proxy_mode "$DOOMED_URL" ok  # releases the held ranges
  collect_fetch
  served_ok "kill mid-download" "$sha" promoted
  expect_eq "kill mid-download: the slower folder tier served it, promoted into the local one" local \
    "$(json "j['tier']" <<<"$OUT")"
  expect_eq "kill mid-download: the origin was not asked" "$origin_before" "$(server_requests /kill-download.bin)"
  expect_contains "kill mid-download: the tier degraded with a WARNING" \
    "WARNING: tier '$CF_TIER' ($CF_TYPE): download failed" "$ERR"
  verify_local "kill mid-download"
}

# --- a 503 storm ------------------------------------------------------------------------------------------------

cf_short_storm() {
  local sha started took
  sha=$(make_shard "$E2E_TMP/files/storm.bin" 200000)
  cf_vm vm-storm-a "$CF_URL" "$CF_BUCKET" "$CF_PART"
  fetch storm.bin "$sha"  # into the bucket
  expect_eq "a short 503 storm: the shard is in the bucket" 1 "$(json "j['uploads']['uploaded']" <<<"$OUT")"
  cf_vm vm-storm "$CF_URL" "$CF_BUCKET" "$CF_PART"
  proxy_reset "$CF_URL"
  proxy_mode "$CF_URL" "status503 retry_after=1 count=2 op=GetObject"
  started=$(date +%s%N)
  fetch storm.bin "$sha"
  took=$((($(date +%s%N) - started) / 1000000))
  served_ok "a short 503 storm" "$sha" promoted
  expect_eq "a short 503 storm: two 503s, then the GET" "2 1" \
    "$(proxy_json "$CF_URL" "str(j['statuses']['GetObject'].get('503', 0)) + ' ' + str(j['statuses']['GetObject'].get('206', 0) + j['statuses']['GetObject'].get('200', 0))")"
  expect_cmp "a short 503 storm: Retry-After: 1 honoured twice (ms)" "$took" -ge 1900
  expect_eq "a short 503 storm: no WARNING" "" "$(grep WARNING <<<"$ERR")"
}

# cf_long_storm ORIGIN_URL DATASET SHARDS: `datavo warm` of DATASET while the cloud tier answers every GET 503.
cf_long_storm() {
  local origin=$1 dataset=$2 shards=$3 gets
  cf_vm vm-storm-w "$CF_URL" "$CF_BUCKET" "$CF_PART"
  proxy_reset "$CF_URL"
  proxy_mode "$CF_URL" "status503 retry_after=1 op=GetObject"
  DATAVO_SERVER=$origin run --json warm "$dataset" --key bin --key txt --jobs 3
  printf '%s\n%s\n' "$OUT" "$ERR" >>"$CF_ALL_OUTPUT"
  proxy_mode "$CF_URL" ok
  # The shards cached locally while the tier was skipped did not reach it: warm says so, and exits 1.
  expect_eq "a long 503 storm: every shard from the origin; exit 1, the tier missed shards" "[1, $shards, 0]" \
    "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
  expect_contains "a long 503 storm: the tier's row says why it missed them" "tier down: " \
    "$(json "[t['uploads']['skipped_reason'] for t in j['tiers'] if t['tier'] == '$CF_TIER'][0]" <<<"$OUT")"
  expect_eq "a long 503 storm: every shard accounted for in the tier" "$shards" \
    "$(json "[sum(t['uploads'][k] for k in ('uploaded', 'already_present', 'failed', 'skipped')) for t in j['tiers'] if t['tier'] == '$CF_TIER'][0]" <<<"$OUT")"
  expect_eq "a long 503 storm: the breaker opened once" 1 "$(grep -c 'failed 3 times in a row' <<<"$ERR")"
  # Three workers look up at once, so up to 3 + 2 lookups may fail before the third failure opens the breaker.
  gets=$(proxy_op "$CF_URL" GetObject)
  expect_eq "a long 503 storm: each failed lookup made 5 attempts (Retry-After honoured)" 0 "$((gets % 5))"
  expect_cmp "a long 503 storm: then the tier is skipped: failed lookups (of $shards shards)" "$((gets / 5))" -le 5
  expect_cmp "a long 503 storm: one WARNING per failed lookup and one for the breaker, none per skipped shard" \
    "$(grep -c "WARNING: tier '$CF_TIER'" <<<"$ERR")" -le 6
  verify_local "a long 503 storm"
}

# --- an object changed between ranges ---------------------------------------------------------------------------

# cf_ranged_object: a 12 MiB + 5 shard (RANGED_NAME, RANGED_SHA) stored as RANGED_OBJECT with the reference client
# (at part_size 5MiB: a first range and 2 pinned ones), once for the scenarios below.
RANGED_NAME=ranged.bin
cf_ranged_object() {
  [ -n "${RANGED_OBJECT:-}" ] && return
  RANGED_SHA=$(make_shard "$E2E_TMP/files/$RANGED_NAME" $((12 * MIB + 5)))
  cf_vm vm-ranges-seed "$CF_URL" "$CF_BUCKET" 5MiB
  RANGED_OBJECT=$(object_of "$RANGED_NAME")
  cf_put "$CF_BUCKET" "$RANGED_OBJECT" "$E2E_TMP/files/$RANGED_NAME" "$RANGED_SHA" $((12 * MIB + 5)) ||
    die "put $RANGED_OBJECT" ""
}

# cf_rewrite_between_ranges PINNED_STATUSES: another writer puts the object again (same bytes, a new version) while
# the two pinned ranges are held in the proxy; the server answers them PINNED_STATUSES (e.g. "[412, 412]").
cf_rewrite_between_ranges() {
  local expected=$1 before
  section "the object rewritten between ranges (a new version)"
  cf_ranged_object
  before=$(cf_version "$CF_BUCKET" "$RANGED_OBJECT")
  # hedge: false: the scenario holds the two pinned ranges at the proxy on purpose and counts the GETs exactly; a
  # hedge of a held range (silent past the 1 s starting deadline) would add one. Hedging is not what it tests
  # (test_cloud_hedge.sh is).
  cf_vm vm-rewrite "$CF_URL" "$CF_BUCKET" 5MiB 'hedge: false'
  proxy_reset "$CF_URL"
  # The 2 pinned ranges wait in the proxy while another writer puts the object again; setting the mode again
  # releases them.
  proxy_mode "$CF_URL" "delay seconds=60 op=GetObject ifmatch=1 count=2"
  DATAVO_LOG_LEVEL=info background_fetch "$RANGED_NAME" "$RANGED_SHA"
  wait_until 30 pinned_arrived "$CF_URL" 2 || fail "rewritten between ranges" "no pinned range"
  cf_put "$CF_BUCKET" "$RANGED_OBJECT" "$E2E_TMP/files/$RANGED_NAME" "$RANGED_SHA" $((12 * MIB + 5))
  proxy_mode "$CF_URL" ok  # releases the held ranges
  collect_fetch
  expect_ne "rewritten between ranges: the object has a new version" "$before" "$(cf_version "$CF_BUCKET" "$RANGED_OBJECT")"
  expect_eq "rewritten between ranges: the server answered the 2 ranges pinned to the old version $expected" \
    "$expected" "$(proxy_json "$CF_URL" "[r['status'] for r in j['log'] if r['op'] == 'GetObject' and r['if_match'] == '''$before'''][:2]")"
  served_ok "rewritten between ranges" "$RANGED_SHA" promoted
  expect_contains "rewritten between ranges: the object is read again" "changed while it was read; reading it again" "$ERR"
  expect_eq "rewritten between ranges: 3 GETs, then 3 again (the first range twice)" "6 2" "$(gets_of "$CF_URL")"
  expect_eq "rewritten between ranges: no WARNING (the restart succeeded)" "" "$(grep WARNING <<<"$ERR")"
}

# cf_one_412 [CODE]: the proxy answers one pinned range 412 (with the error code CODE), as the service does to a
# range pinned to a version that was replaced: the object is read once more.
cf_one_412() {
  section "one 412 to a pinned range"
  cf_ranged_object
  cf_vm vm-412 "$CF_URL" "$CF_BUCKET" 5MiB
  proxy_reset "$CF_URL"
  proxy_mode "$CF_URL" "status412 ${1:+code=$1 }op=GetObject ifmatch=1 count=1"
  DATAVO_LOG_LEVEL=info fetch "$RANGED_NAME" "$RANGED_SHA"
  served_ok "one 412 to a pinned range" "$RANGED_SHA" promoted
  expect_contains "one 412: the object is read again" "changed while it was read; reading it again" "$ERR"
  # The other pinned range is sent unless the 412 ended the round first: 2 or 3 GETs, then 3 again.
  expect_match "one 412: 5 or 6 GETs, the first range twice" '^[56] 2$' "$(gets_of "$CF_URL")"
}

# cf_every_412 [CODE]: every pinned range is answered 412: the tier degrades and the origin serves.
cf_every_412() {
  section "a 412 to every pinned range"
  cf_ranged_object
  cf_vm vm-412-all "$CF_URL" "$CF_BUCKET" 5MiB
  proxy_mode "$CF_URL" "status412 ${1:+code=$1 }op=GetObject ifmatch=1"
  fetch "$RANGED_NAME" "$RANGED_SHA"
  proxy_mode "$CF_URL" ok
  served_ok "412 on every pinned range" "$RANGED_SHA" fetched
  expect_contains "412 on every pinned range: the tier degraded" "WARNING: tier '$CF_TIER' ($CF_TYPE): download failed" "$ERR"
  verify_local "412 on every pinned range"
}

# --- lying metadata; a missing bucket ---------------------------------------------------------------------------

cf_lying_metadata() {
  local sha object rotten
  section "an object whose bytes do not match its metadata"
  sha=$(make_shard "$E2E_TMP/files/lying.bin" 300000)
  cf_vm vm-lying-ro "$CF_URL" "$CF_BUCKET" "$CF_PART" 'read_only: true'
  object=$(object_of lying.bin)
  head -c 300000 /dev/urandom >"$E2E_TMP/rotten.bin"
  rotten=$(sha256_of "$E2E_TMP/rotten.bin")
  cf_put "$CF_BUCKET" "$object" "$E2E_TMP/rotten.bin" "$sha" 300000 || die "put $object" ""
  fetch_unchecked lying.bin
  served_ok "lying metadata, a read-only tier" "$sha" fetched
  expect_contains "lying metadata, read-only: a WARNING" "WARNING: tier '$CF_TIER'" "$ERR"
  cf_get "$CF_BUCKET" "$object" "$E2E_TMP/now.bin"
  expect_eq "lying metadata, read-only: the object is left as it was" "$rotten" "$(sha256_of "$E2E_TMP/now.bin")"
  verify_local "lying metadata, read-only"
  cf_vm vm-lying "$CF_URL" "$CF_BUCKET" "$CF_PART"
  fetch_unchecked lying.bin
  served_ok "lying metadata" "$sha" fetched
  expect_contains "lying metadata: deleted with a WARNING" "deleted the object" "$ERR"
  cf_get "$CF_BUCKET" "$object" "$E2E_TMP/now.bin"
  expect_eq "lying metadata: the bucket now holds the good bytes" "$sha" "$(sha256_of "$E2E_TMP/now.bin")"
  verify_local "lying metadata"
}

# cf_missing_container BUCKET WARNING_TEXT: a tier on BUCKET, which does not exist (or which the proxy says does
# not exist): the read is served by the origin, the WARNING says WARNING_TEXT, the upload fails.
cf_missing_container() {
  local bucket=$1 text=$2 sha
  sha=$(make_shard "$E2E_TMP/files/missing-$bucket.bin" 100000)
  cf_vm "vm-missing-$bucket" "$CF_URL" "$bucket" "$CF_PART"
  fetch "missing-$bucket.bin" "$sha"
  served_ok "a bucket that does not exist" "$sha" fetched
  expect_contains "missing bucket: the WARNING says so" "$text" "$ERR"
  expect_eq "missing bucket: the upload failed, the read did not" 1 "$(json "j['uploads']['failed']" <<<"$OUT")"
  verify_local "missing bucket"
}
