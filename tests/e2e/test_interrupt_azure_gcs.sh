#!/usr/bin/env bash
# An interrupt releases what the process holds in an Azure Blob container and a GCS bucket (issue 16, item 1; the S3
# half is tests/e2e/test_interrupt_cloud.sh). A `datavo warm` that uploads to a tier on Azurite or on the
# firebase-tools Storage emulator, behind tests/support/cloud_proxy.py (--flavour: the operations under their S3
# names, UploadPart = PutBlock / UploadChunk, CreateMultipartUpload = UploadResumable, ...), is sent SIGINT (once
# SIGTERM) while it holds the lease of every shard (lease_duration 300s: no renewal within the run, so that each
# Lease:PutObject is a lease taken) and its uploads are in flight (the proxy throttles them). For each:
#   - it exits 130 (143) within 8 s, says once that it was interrupted, and no release or abort failed;
#   - one lease DELETE per lease taken, and no `.leases/` object left;
#   - no entry object of a half upload exists.
# GCS:
#   1. resumable uploads (shards of 6 MiB over part_size 5MiB: a session, then chunks of 5 MiB): the signal lands
#      while the first chunk of each upload is throttled. Every session begun is cancelled: one DELETE of its URI
#      per UploadResumable, within the exit bound. The emulator does not implement that DELETE (it answers 501 Not
#      Implemented and keeps the session): a second proxy in front of it answers each one 499, as GCS does, so what
#      is shown is that datavo sends the cancellation and takes GCS's answer without a WARNING, not that a session
#      ends on the emulator (tests/unit/tier/gcs/test_gcs_tier.cpp, AFailedResumableUploadCancelsItsSessionAnd-
#      StoresNothing, shows that against the fake store). The emulator cannot take a resumable upload in chunks
#      either (see test_gcs_faults.sh): the path shown ends before any chunk completes, which it does support; a
#      session whose earlier chunks were stored is not shown against the emulator.
#   2. single-request uploads (part_size 8MiB: uploadType=multipart, the path of every shard up to 8 MiB): there is
#      no session to cancel; the throttled requests are abandoned and nothing of them is stored.
#   3. SIGTERM on the resumable path: 143, and the same cleanup.
#   3b. SIGINT while the lookups (GETs) are in flight: no "download failed" WARNING and no breaker line.
# Azure:
#   4. block uploads (shards of 6 MiB over part_size 5MiB: a Put Block of 5 MiB and one of 1 MiB in parallel, then
#      Put Block List): the signal lands once the small blocks are stored and the large ones are throttled. Datavo
#      does not (and cannot: Azure has no call that deletes uncommitted blocks) remove the blocks already stored.
#      What this shows is why they do not matter: a blob with only uncommitted blocks does not exist for any reader
#      (no Get Blob, no List Blobs entry; only Get Block List and List Blobs include=uncommittedblobs see it, and
#      datavo uses neither), Azure discards them after a week, and the next upload of the shard, which puts every
#      block again and commits its own list, discards them at once: after a second `warm`, each blob has its
#      committed blocks only, reads back whole, and no blob with only uncommitted blocks is left.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=120
SHARDS_WANTED=6

cloud_up azurite gcs
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING" # SharedKey for the Azure tier
start_proxy AZ "${AZURITE_BLOB_ENDPOINT%/"$AZURITE_ACCOUNT_NAME"}" --flavour azure
# The emulator does not implement the cancellation of a resumable session (it answers the DELETE 501 Not
# Implemented, and takes chunks for the session afterwards). GCS answers 499: a second proxy between the first one
# and the emulator answers every cancellation so, and forwards the rest.
start_proxy GCS499 "$GCS_EMULATOR_ENDPOINT" --flavour gcs
proxy_mode "$GCS499_URL" "status499 op=AbortMultipartUpload"
start_proxy GCSP "$GCS499_URL" --flavour gcs

# 6 shards of 6 MiB (two samples of 3 MiB each).
serve_shards_of_6mib "$SHARDS_WANTED"
export DATAVO_SERVER="$ORIGIN_URL"

# pid_running (tests/support/pids.sh): a killed process is a zombie of PID 1 here for a few seconds.
ready_at() { [ "$(proxy_json "$1" "int(bool($2))")" = 1 ]; }
# ready_or_gone PID URL EXPR: the proxy's counters satisfy EXPR, or PID ended (the caller tells which).
ready_or_gone() { ! pid_running "$1" || ready_at "$2" "$3"; }
# The entry objects (not leases) of a listing on stdin.
entries() { grep -c -v -e '/\.leases/' -e '^$' || true; }
leases() { grep -c '/\.leases/' || true; }
LEASED="j['ops'].get('Lease:PutObject', 0) >= $SHARDS_WANTED"

# interrupt NAME PROXY_URL TIER_YAML READY_EXPR [SIGNAL]: a warm into the tier of TIER_YAML (a fresh cache) through
# PROXY_URL, sent SIGNAL (default INT) once the proxy's counters satisfy READY_EXPR; sets RC, ERR and MS_TO_EXIT.
interrupt() {
  local name=$1 url=$2 tier=$3 ready_expr=$4 signal=${5:-INT} pid start deadline
  vm_config "$E2E_TMP/$name.yaml" "$E2E_TMP/$name.cache" "$tier"
  "${WITH_SIGINT[@]}" "$DATAVO_BIN" --config "$E2E_TMP/$name.yaml" warm "$DS" --key bin --jobs 4 \
    >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" &
  pid=$!
  track_pid "$pid"
  if ! wait_until 60 ready_or_gone "$pid" "$url" "$ready_expr" || ! pid_running "$pid"; then
    fail "$name: the leases were held and the uploads under way" \
      "$(proxy_json "$url" "j['ops']"); stderr: $(e2e_abbrev "$(cat "$E2E_TMP/$name.err")")"
  fi
  start=$(date +%s%N)
  kill -"$signal" "$pid"
  deadline=$(($(date +%s) + 30))
  while pid_running "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
  pid_running "$pid" && kill -KILL "$pid"
  wait "$pid"
  RC=$?
  MS_TO_EXIT=$((($(date +%s%N) - start) / 1000000))
  ERR=$(cat "$E2E_TMP/$name.err")
}

# snap URL: the proxy's stats, once (SNAP); sj EXPR: EXPR over them (as j). One request and one Python per value.
snap() { SNAP=$(curl -s --max-time 10 "$1/_proxy/stats"); }
sj() { json "$1" <<<"$SNAP"; }
op_count() { sj "j['ops'].get('$1', 0)"; }

# checks NAME URL CODE SIGNAL: what every interrupt shows (the proxy's mode is ok again); leaves the stats in SNAP.
checks() {
  local name=$1 url=$2 code=$3 signal=$4 taken
  snap "$url"
  taken=$(op_count Lease:PutObject)
  expect_eq "$name: exit $code" "$code" "$RC"
  expect_cmp "$name: exits within 8 s of SIG$signal (${MS_TO_EXIT} ms)" "$MS_TO_EXIT" -le 8000
  expect_eq "$name: one line says it was interrupted" 1 "$(grep -c "datavo: interrupted by SIG$signal" <<<"$ERR")"
  expect_eq "$name: the uploads it stopped are not reported as failures" "" "$(grep 'WARNING.*failed' <<<"$ERR")"
  expect_eq "$name: no lease release and no abort failed" 0 "$(grep -c -E 'cannot release lease|cannot abort' <<<"$ERR")"
  expect_eq "$name: one lease DELETE per lease taken ($taken taken), each answered 2xx" "$taken $taken" \
    "$(sj "'%d %d' % (j['ops'].get('Lease:DeleteObject', 0), len([r for r in j['log'] if r['op'] == 'Lease:DeleteObject' and 200 <= (r['status'] or 0) < 300]))")"
}

# --- 1. GCS, resumable uploads in flight ----------------------------------------------------------------------

gcs_tier() { gcs_tier_yaml region "$1" "endpoint_url: $GCSP_URL" "part_size: $2" 'lease_duration: 300s'; }
# gcs_session_checks NAME: over SNAP.
gcs_session_checks() {
  local name=$1 begun
  begun=$(op_count CreateMultipartUpload)
  expect_cmp "$name: resumable sessions were begun" "$begun" -ge 1
  expect_eq "$name: every session begun was cancelled (one DELETE of its URI each, answered 499 as GCS answers it)" \
    "$begun $begun" "$(sj "'%d %d' % (j['ops'].get('AbortMultipartUpload', 0), len([r for r in j['log'] if r['op'] == 'AbortMultipartUpload' and r['status'] == 499]))")"
}

proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "throttle rate=131072 op=UploadPart" # a 5 MiB chunk takes 40 s
interrupt gcs-resumable "$GCSP_URL" "$(gcs_tier int-gcs-resumable 5MiB)" \
  "$LEASED and j['ops'].get('UploadPart', 0) >= 2"
proxy_mode "$GCSP_URL" ok
checks "GCS resumable" "$GCSP_URL" 130 INT
gcs_session_checks "GCS resumable"
listing=$(gcstool list int-gcs-resumable 2>/dev/null)
expect_eq "GCS resumable: nothing left in the bucket (no .leases/ object, no entry)" "0 0" \
  "$(leases <<<"$listing") $(entries <<<"$listing")"

# --- 2. GCS, single-request uploads in flight -----------------------------------------------------------------

proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "throttle rate=131072 op=PutObject" # a 6 MiB upload takes 48 s (leases are Lease:PutObject)
interrupt gcs-single "$GCSP_URL" "$(gcs_tier int-gcs-single 8MiB)" "$LEASED and j['ops'].get('PutObject', 0) >= 2"
proxy_mode "$GCSP_URL" ok
checks "GCS single request" "$GCSP_URL" 130 INT
expect_eq "GCS single request: no resumable session was begun" 0 "$(op_count CreateMultipartUpload)"
listing=$(gcstool list int-gcs-single 2>/dev/null)
expect_eq "GCS single request: nothing left in the bucket (no .leases/ object, no entry)" "0 0" \
  "$(leases <<<"$listing") $(entries <<<"$listing")"

# --- 3. GCS, SIGTERM --------------------------------------------------------------------------------------------

proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "throttle rate=131072 op=UploadPart"
interrupt gcs-term "$GCSP_URL" "$(gcs_tier int-gcs-term 5MiB)" "$LEASED and j['ops'].get('UploadPart', 0) >= 2" TERM
proxy_mode "$GCSP_URL" ok
checks "GCS SIGTERM" "$GCSP_URL" 143 TERM
gcs_session_checks "GCS SIGTERM"
listing=$(gcstool list int-gcs-term 2>/dev/null)
expect_eq "GCS SIGTERM: nothing left in the bucket (no .leases/ object, no entry)" "0 0" \
  "$(leases <<<"$listing") $(entries <<<"$listing")"

# --- 3b. GCS, lookups in flight ---------------------------------------------------------------------------------
# A SIGINT while the tier's GETs are in flight stops them; a stopped lookup is no failure of the tier (no "download
# failed" WARNING, no breaker opened). The proxy holds every GET until the mode changes.

proxy_reset "$GCSP_URL"
proxy_mode "$GCSP_URL" "delay seconds=60 op=GetObject"
interrupt gcs-lookups "$GCSP_URL" "$(gcs_tier int-gcs-lookups 5MiB)" "j['ops'].get('GetObject', 0) >= 2"
proxy_mode "$GCSP_URL" ok
checks "GCS lookups" "$GCSP_URL" 130 INT
expect_eq "GCS lookups: no lease was taken" 0 "$(op_count Lease:PutObject)"

# --- 4. Azure, blocks in flight, blocks stored ------------------------------------------------------------------

azure_tier() {
  AZURITE_BLOB_ENDPOINT="$AZ_URL/$AZURITE_ACCOUNT_NAME" azure_tier_yaml region "$1" 'part_size: 5MiB' \
    'lease_duration: 300s'
}
aztool create int-azure || die "create container int-azure" ""
proxy_reset "$AZ_URL"
# The 1 MiB blocks take 8 s, the 5 MiB ones 40 s: the signal lands once a small block is stored.
proxy_mode "$AZ_URL" "throttle rate=131072 op=UploadPart"
interrupt azure "$AZ_URL" "$(azure_tier int-azure)" \
  "$LEASED and len([r for r in j['log'] if r['op'] == 'UploadPart' and r['status'] == 201]) >= 1"
proxy_mode "$AZ_URL" ok
checks "Azure" "$AZ_URL" 130 INT
expect_eq "Azure: no block list was committed" 0 "$(op_count CompleteMultipartUpload)"
listing=$(aztool list int-azure)
expect_eq "Azure: nothing a reader sees in the container (no .leases/ object, no blob: List Blobs)" "0 0" \
  "$(leases <<<"$listing") $(entries <<<"$listing")"
stored=$(sj "' '.join(sorted({r['path'].split('/', 3)[3] for r in j['log'] if r['op'] == 'UploadPart' and r['status'] == 201}))")
uncommitted=$(aztool list int-azure --uncommitted)
echo "# Azure: blobs with stored blocks at the signal: $stored"
expect_eq "Azure: the blocks stored before the signal are left uncommitted (List Blobs include=uncommittedblobs)" \
  "$(tr ' ' '\n' <<<"$stored" | sort)" "$(sort <<<"$uncommitted")"
first=${stored%% *}
blocks=$(aztool blocks int-azure "$first")
echo "# Azure: block list of $first: $blocks"
expect_eq "Azure: such a blob has uncommitted blocks only (Get Block List)" "0 1" \
  "$(json "j['committed']" <<<"$blocks") $(json "int(j['uncommitted'] >= 1)" <<<"$blocks")"
expect_eq "Azure: and does not exist for a reader (Get Blob Properties: none)" 3 \
  "$(aztool head int-azure "$first" >/dev/null 2>&1; echo $?)"

# A second warm uploads every shard again; each commit discards the blob's leftover uncommitted blocks.
vm_config "$E2E_TMP/azure-again.yaml" "$E2E_TMP/azure-again.cache" "$(azure_tier int-azure)"
run --config "$E2E_TMP/azure-again.yaml" --json warm "$DS" --key bin --jobs 4
expect_eq "Azure, again: every shard uploaded" "0 $SHARDS_WANTED" "$RC $(json "j['uploads']['uploaded']" <<<"$OUT")"
listing=$(aztool list int-azure)
expect_eq "Azure, again: one blob per shard, no .leases/ object" "0 $SHARDS_WANTED" \
  "$(leases <<<"$listing") $(entries <<<"$listing")"
expect_eq "Azure, again: no blob with only uncommitted blocks is left" "$listing" "$(aztool list int-azure --uncommitted)"
blocks=$(aztool blocks int-azure "$first")
expect_eq "Azure, again: $first has its 2 committed blocks and no uncommitted one" "2 0" \
  "$(json "j['committed']" <<<"$blocks") $(json "j['uncommitted']" <<<"$blocks")"
props=$(aztool get int-azure "$first" "$E2E_TMP/first.tar" 2>/dev/null) || fail "Azure, again: read $first" "failed"
expect_eq "Azure, again: $first reads back whole (the SHA-256 datavo gave it)" \
  "$(json "j['metadata']['datavo_sha256']" <<<"$props")" "$(sha256sum "$E2E_TMP/first.tar" | cut -d' ' -f1)"

finish
