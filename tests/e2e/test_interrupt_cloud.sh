#!/usr/bin/env bash
# An interrupt releases what the process holds on a bucket (issue 16, item 1). A `datavo warm` that uploads to an S3
# tier on moto, behind tests/support/cloud_proxy.py, is sent SIGINT while its multipart uploads are in flight (the
# proxy throttles UploadPart) and the leases of its queued uploads are held:
#   1. it exits 130 within seconds, having released every lease (one DELETE each) and aborted every multipart
#      upload: the bucket holds no `.leases/` object and no incomplete multipart upload;
#   2. a cleanup the bucket does not answer (the proxy holds the lease DELETEs) is given up after the cleanup budget
#      (util::k_cleanup_budget, 2 s): the process still exits 130 within seconds;
#   3. a SIGKILL releases nothing: a VM killed while it holds the leases of its queued uploads (lease_duration 6s),
#      then a second VM warms. It says once per shard, at the default level, that the killed VM holds the shard's
#      lease and when it expires; takes each lease over once it has expired; fetches each shard from the origin
#      once; and leaves no `.leases/` object and no incomplete multipart upload behind.
#   4. SIGTERM (what a scheduler sends) cleans up as SIGINT does, and exits 143;
#   5. `datavo cache check` interrupted while its probe object is stored (the proxy holds its read-back): it exits
#      130, deletes the probe and begins no other step (it was killed by the signal before, leaving the probe);
#   6. `datavo cache gc` interrupted while the proxy holds its first delete of an expired object: it exits 130 with
#      the one line and no ERROR, begins no other delete, and leaves the objects it did not reach;
#   7. `datavo cache rm --all-tiers --yes` interrupted in the same way: exit 130, the one line, no other delete.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=120
SHARDS_WANTED=6

s3_up moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"

# 6 shards of 6 MiB: each goes up as a multipart upload (part_size 5 MiB).
serve_shards_of_6mib "$SHARDS_WANTED"

alive() { kill -0 "$1" 2>/dev/null && ! e2e_is_zombie "$1"; }
leases_in() { s3tool "$MOTO_S3_ENDPOINT" ls "$1" | json "len([o for o in j if '/.leases/' in o['key']])"; }
# ready EXPR: the proxy's counters satisfy EXPR (over its stats JSON as j).
ready() { [ "$(proxy_json "$MOTO_URL" "int(bool($1))")" = 1 ]; }
ready_at() { [ "$(proxy_json "$1" "int(bool($2))")" = 1 ]; }

# interrupt NAME BUCKET READY_EXPR [SIGNAL]: a warm into BUCKET (a fresh cache), sent SIGNAL (default INT) once the
# proxy's counters satisfy READY_EXPR; sets RC, ERR and MS_TO_EXIT.
interrupt() {
  local name=$1 bucket=$2 ready_expr=$3 signal=${4:-INT} pid start deadline
  make_bucket "$MOTO_S3_ENDPOINT" "$bucket"
  printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/$name.cache" \
    "$(s3_tier_yaml region "$bucket" "$MOTO_URL" 'part_size: 5MiB')" >"$E2E_TMP/$name.yaml"
  "${WITH_SIGINT[@]}" "$DATAVO_BIN" --config "$E2E_TMP/$name.yaml" warm "$DS" --key bin --jobs 4 \
    >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" &
  pid=$!
  track_pid "$pid"
  wait_until 60 ready "$ready_expr" || fail "$name: the uploads were under way" "$(proxy_json "$MOTO_URL" "j['ops']")"
  start=$(date +%s%N)
  kill -"$signal" "$pid"
  deadline=$(($(date +%s) + 30))
  while alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
  alive "$pid" && kill -KILL "$pid"
  wait "$pid"
  RC=$?
  MS_TO_EXIT=$((($(date +%s%N) - start) / 1000000))
  ERR=$(cat "$E2E_TMP/$name.err")
}

# --- 1. uploads in flight, leases held ------------------------------------------------------------------------

proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "throttle rate=131072 op=UploadPart"  # a 5 MiB part takes 40 s
# Every shard's lease is taken (the fetches from the local origin are quick) and both upload workers are sending.
interrupt held interrupt-held "j['ops'].get('Lease:PutObject', 0) >= $SHARDS_WANTED and j['ops'].get('UploadPart', 0) >= 2"
expect_eq "in flight: exit 130" 130 "$RC"
expect_cmp "in flight: exits within 8 s of SIGINT (${MS_TO_EXIT} ms)" "$MS_TO_EXIT" -le 8000
expect_eq "in flight: one line says it was interrupted" 1 "$(grep -c 'datavo: interrupted by SIGINT' <<<"$ERR")"
expect_eq "in flight: and the uploads it stopped are not reported as failures" 0 "$(grep -c 'WARNING.*failed' <<<"$ERR")"
expect_eq "in flight: no lease release failed" 0 "$(grep -c 'cannot release lease' <<<"$ERR")"
expect_eq "in flight: no upload abort failed" 0 "$(grep -c 'cannot abort' <<<"$ERR")"
proxy_mode "$MOTO_URL" ok
expect_eq "in flight: one lease DELETE per lease taken" "$(proxy_op "$MOTO_URL" Lease:PutObject)" \
  "$(proxy_op "$MOTO_URL" Lease:DeleteObject)"
expect_eq "in flight: every multipart upload begun was aborted" "$(proxy_op "$MOTO_URL" CreateMultipartUpload)" \
  "$(proxy_op "$MOTO_URL" AbortMultipartUpload)"
expect_eq "in flight: no .leases/ object left in the bucket" 0 "$(leases_in interrupt-held)"
expect_eq "in flight: no incomplete multipart upload left in the bucket" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads interrupt-held)"

# --- 2. a bucket that does not answer the cleanup -------------------------------------------------------------

proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "delay seconds=120 op=Lease:DeleteObject"  # held until the mode is set again
# An upload is done and its lease's release is held by the proxy.
interrupt silent interrupt-silent "j['ops'].get('Lease:DeleteObject', 0) >= 1"
expect_eq "silent bucket: exit 130" 130 "$RC"
expect_cmp "silent bucket: exits within 8 s of SIGINT, the cleanup given up after 2 s (${MS_TO_EXIT} ms)" \
  "$MS_TO_EXIT" -le 8000
expect_contains "silent bucket: says the lease is left to expire" "it expires on its own" "$ERR"
expect_contains "silent bucket: and why" "ran out of its 2000 ms" "$ERR"
proxy_mode "$MOTO_URL" ok

# --- 3. a SIGKILLed holder: its leases expire and are taken over ------------------------------------------------

# The first VM reaches moto through a proxy of its own that holds its first multipart upload's start; the proxy is
# stopped after the kill, so that the held request never reaches moto.
start_proxy KILLED "$MOTO_S3_ENDPOINT"
proxy_mode "$KILLED_URL" "delay seconds=120 op=CreateMultipartUpload"
make_bucket "$MOTO_S3_ENDPOINT" interrupt-killed
for vm in killed survivor; do
  url=$MOTO_URL
  [ $vm = killed ] && url=$KILLED_URL
  printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/$vm.cache" \
    "$(s3_tier_yaml region interrupt-killed "$url" 'part_size: 5MiB' 'lease_duration: 6s')" >"$E2E_TMP/$vm.yaml"
done
"$DATAVO_BIN" --config "$E2E_TMP/killed.yaml" warm "$DS" --key bin --jobs 4 >"$E2E_TMP/killed.out" 2>"$E2E_TMP/killed.err" &
killed_pid=$!
track_pid "$killed_pid"
# Every shard fetched and leased, the first upload held: the VM holds a lease per shard, renewing each every 2 s.
wait_until 60 ready_at "$KILLED_URL" "len({r['path'] for r in j['log'] if r['op'] == 'Lease:PutObject' and r['if_none_match'] == '*' and r['status'] == 200}) >= $SHARDS_WANTED and j['ops'].get('CreateMultipartUpload', 0) >= 1" ||
  fail "killed: its leases were held" "$(proxy_json "$KILLED_URL" "j['ops']")"
proxy_reset "$MOTO_URL"
shards0=$(origin_requests shard)
kill -KILL "$killed_pid"
wait "$killed_pid" 2>/dev/null
# At once: the killed VM renewed its leases at most 2 s ago, so they run out in 3 to 6 s (whole seconds). One job
# per shard, so that the survivor asks for every lease while it is live.
started=$(date +%s%N)
timeout 120 "$DATAVO_BIN" --config "$E2E_TMP/survivor.yaml" --json warm "$DS" --key bin --jobs "$SHARDS_WANTED" \
  >"$E2E_TMP/survivor.out" 2>"$E2E_TMP/survivor.err" &
survivor_pid=$!
track_pid "$survivor_pid"
kill -TERM "$KILLED_PID"
wait "$KILLED_PID" 2>/dev/null
wait "$survivor_pid" && rc=0 || rc=$?
out=$(cat "$E2E_TMP/survivor.out")
took=$((($(date +%s%N) - started) / 1000000))
expect_eq "survivor: warmed every shard" "[0, 0]" "[$rc, $(json "j['failed']" <<<"$out")]"
waits=$(grep -c "WARNING.* $killed_pid is fetching shard [0-9a-f]\{64\}; waiting for its upload instead of calling the origin (its lease expires at " \
  "$E2E_TMP/survivor.err" || true)
expect_eq "survivor: one WARNING per shard, naming the killed VM, the shard and the lease's expiry" \
  "$SHARDS_WANTED $SHARDS_WANTED" \
  "$waits $(grep -o -E "is fetching shard [0-9a-f]{64}" "$E2E_TMP/survivor.err" | sort -u | wc -l)"
echo "# survivor, first of its WARNINGs: $(grep -m1 'is fetching shard' "$E2E_TMP/survivor.err")"
expect_eq "survivor: no other WARNING" "" "$(grep WARNING "$E2E_TMP/survivor.err" | grep -v 'is fetching shard' | head -3)"
# Per shard: a create refused (412) while the lease was live; once it has expired, a create refused again, the
# expired lease deleted and a create that wins; the release after the upload. Polls are GETs, not creates.
expect_eq "survivor: took every lease over once it had expired (creates refused, creates won, DELETEs)" \
  "$((2 * SHARDS_WANTED)) $SHARDS_WANTED $((2 * SHARDS_WANTED))" \
  "$(proxy_json "$MOTO_URL" "' '.join(str(len([r for r in j['log'] if r['op'] == 'Lease:PutObject' and r['if_none_match'] == '*' and r['status'] == s])) for s in (412, 200))") $(proxy_op "$MOTO_URL" Lease:DeleteObject)"
expect_eq "survivor: each shard fetched from the origin once" "$SHARDS_WANTED $SHARDS_WANTED" \
  "$(($(origin_requests shard) - shards0)) $(json "j['origin']['shards']" <<<"$out")"
expect_eq "survivor: each shard uploaded" "$SHARDS_WANTED" "$(json "j['uploads']['uploaded']" <<<"$out")"
expect_cmp "survivor: done within 90 s, the 6 s leases taken over as they expired, not after the 10 min give-up ($took ms)" "$took" -le 90000
expect_eq "killed and taken over: no .leases/ object left in the bucket" 0 "$(leases_in interrupt-killed)"
expect_eq "killed and taken over: no incomplete multipart upload left in the bucket" 0 \
  "$(s3tool "$MOTO_S3_ENDPOINT" uploads interrupt-killed)"

# --- 4. SIGTERM ---------------------------------------------------------------------------------------------------

proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "throttle rate=131072 op=UploadPart"
interrupt term interrupt-term "j['ops'].get('Lease:PutObject', 0) >= $SHARDS_WANTED and j['ops'].get('UploadPart', 0) >= 2" TERM
expect_eq "SIGTERM: exit 143" 143 "$RC"
expect_cmp "SIGTERM: exits within 8 s (${MS_TO_EXIT} ms)" "$MS_TO_EXIT" -le 8000
expect_eq "SIGTERM: one line says it was interrupted" 1 "$(grep -c 'datavo: interrupted by SIGTERM' <<<"$ERR")"
proxy_mode "$MOTO_URL" ok
expect_eq "SIGTERM: one lease DELETE per lease taken" "$(proxy_op "$MOTO_URL" Lease:PutObject)" \
  "$(proxy_op "$MOTO_URL" Lease:DeleteObject)"
expect_eq "SIGTERM: every multipart upload begun was aborted" "$(proxy_op "$MOTO_URL" CreateMultipartUpload)" \
  "$(proxy_op "$MOTO_URL" AbortMultipartUpload)"
expect_eq "SIGTERM: nothing left in the bucket (no .leases/ object, no incomplete upload)" "0 0" \
  "$(leases_in interrupt-term) $(s3tool "$MOTO_S3_ENDPOINT" uploads interrupt-term)"

# sigint_when NAME READY_EXPR CMD...: runs the datavo command CMD in the background (SIGINT at its default
# disposition), sends it SIGINT once the proxy's counters satisfy READY_EXPR, and waits up to 30 s for it to exit.
# Sets RC, MS_TO_EXIT and ERR (its stderr).
sigint_when() {
  local name=$1 ready_expr=$2 pid start deadline
  shift 2
  "${WITH_SIGINT[@]}" "$DATAVO_BIN" "$@" >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" &
  pid=$!
  track_pid "$pid"
  wait_until 60 ready "$ready_expr" || fail "$name: the proxy saw what it waits for" "$(proxy_json "$MOTO_URL" "j['ops']")"
  start=$(date +%s%N)
  kill -INT "$pid"
  deadline=$(($(date +%s) + 30))
  while alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.05; done
  alive "$pid" && kill -KILL "$pid"
  wait "$pid" && RC=0 || RC=$?
  MS_TO_EXIT=$((($(date +%s%N) - start) / 1000000))
  ERR=$(cat "$E2E_TMP/$name.err")
}
# expect_interrupted NAME: exit 130 within 8 s of the SIGINT, with the one line that says so and no ERROR line.
expect_interrupted() {
  expect_eq "$1: exit 130" 130 "$RC"
  expect_cmp "$1: exits within 8 s of SIGINT (${MS_TO_EXIT} ms)" "$MS_TO_EXIT" -le 8000
  expect_eq "$1: one line says it was interrupted, and no ERROR line" "1 0" \
    "$(grep -c 'datavo: interrupted by SIGINT' <<<"$ERR") $(grep -c 'ERROR' <<<"$ERR")"
}

# --- 5. `cache check` interrupted with its probe object stored ---------------------------------------------------

proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "delay seconds=120 op=Probe:GetObject"  # the probe is stored; its read-back is held
make_bucket "$MOTO_S3_ENDPOINT" interrupt-check
printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/check.cache" \
  "$(s3_tier_yaml region interrupt-check "$MOTO_URL")" >"$E2E_TMP/check.yaml"
sigint_when check "j['ops'].get('Probe:GetObject', 0) >= 1" --config "$E2E_TMP/check.yaml" cache check
proxy_mode "$MOTO_URL" ok
expect_interrupted check
expect_eq "check: one probe stored, one deleted, no conditional put begun after the signal" "1 1" \
  "$(proxy_op "$MOTO_URL" Probe:PutObject) $(proxy_op "$MOTO_URL" Probe:DeleteObject)"
expect_eq "check: no probe object left in the bucket" 0 \
  "$(s3tool "$MOTO_S3_ENDPOINT" ls interrupt-check | json "len([o for o in j if o['key'].startswith('.datavo-check/')])")"

# --- 6. `cache gc` interrupted while it deletes expired objects -------------------------------------------------

make_bucket "$MOTO_S3_ENDPOINT" interrupt-gc
printf 'x\n' >"$E2E_TMP/object"
for n in 1 2 3; do
  s3tool "$MOTO_S3_ENDPOINT" put interrupt-gc "gc/$(printf '%064d' "$n").tar" "$E2E_TMP/object" >/dev/null
done
sleep 2
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "delay seconds=120 op=DeleteObject"  # the first delete is held
printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/gc.cache" \
  "$(s3_tier_yaml region interrupt-gc "$MOTO_URL" 'max_age: 1s')" >"$E2E_TMP/gc.yaml"
sigint_when gc "j['ops'].get('DeleteObject', 0) >= 1" --config "$E2E_TMP/gc.yaml" cache gc
deletes=$(proxy_op "$MOTO_URL" DeleteObject)
proxy_mode "$MOTO_URL" ok
expect_interrupted gc
expect_eq "gc: no delete begun after the signal" 1 "$deletes"
expect_cmp "gc: the objects it did not reach are still in the bucket" \
  "$(s3tool "$MOTO_S3_ENDPOINT" ls interrupt-gc | json "len([o for o in j if o['key'].startswith('gc/')])")" -ge 2

# --- 7. `cache rm --all-tiers` interrupted while it deletes from the bucket -------------------------------------

proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "delay seconds=120 op=DeleteObject"
hashes=()
for n in 1 2 3; do hashes+=("$(printf '%064d' "$n")"); done
sigint_when rm "j['ops'].get('DeleteObject', 0) >= 1" --config "$E2E_TMP/gc.yaml" --instance gc cache rm --all-tiers \
  --yes "${hashes[@]}"
deletes=$(proxy_op "$MOTO_URL" DeleteObject)
proxy_mode "$MOTO_URL" ok
expect_interrupted rm
expect_eq "rm: no delete begun after the signal" 1 "$deletes"

finish
