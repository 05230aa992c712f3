#!/usr/bin/env bash
# A region's share during a bucket outage (docs/hierarchy.md, "During an outage"), on the region simulation's
# setting (tests/e2e/region_lib.sh: `datavo warm` processes with folder tiers of their own, one moto bucket behind
# tests/support/cloud_proxy.py, `datavo serve` as the origin):
#   1. 4 VMs warm with --share i/4 while the bucket answers 503 to everything: each fetches only its share from the
#      origin; once every VM has said that it waits for the region, the bucket comes back, and each VM uploads its
#      share and reads the others' from the bucket: exactly one origin fetch per shard for the region, every VM exits
#      0, the bucket holds every shard, no lease is left;
#   2. a VM alone with --share 0/2 and the bucket down for its whole warm waits --share-wait (2 s), then fetches the
#      other member's shards itself, and exits 1 because the bucket misses them (the outage is reported, not hidden).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=300
SUITE_STARTED=$(date +%s)
VMS=4
SHARD_BYTES=400000
SHARDS_WANTED=8
PER_SHARD=4

. "$(dirname "$0")/region_lib.sh"
make_bucket "$MOTO_S3_ENDPOINT" outage

# --- 1. four VMs, the bucket down until every shard was fetched once ------------------------------------------

fetched_once() { [ "$(($(origin_requests shard) - shards0))" -ge "$SHARDS" ]; }
# Each VM says when its workers are done and it starts waiting for the region: from then on it decides nothing
# more on its own. The bucket comes back only once all of them are there, else a VM still walking would read a
# shard of another member from the bucket instead of deferring it (correct, but not what this case shows).
all_waiting() {
  local i
  for i in $(seq 1 "$VMS"); do
    grep -q "warm: $((SHARDS - SHARDS / VMS)) shard(s) of the region's other members deferred; waiting up to" \
      "$E2E_TMP/vms/out-$i.err" || return 1
  done
}
shards0=$(origin_requests shard)
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" status503
REGION_SHARE_WAIT=120 region_start out outage "$VMS"
region_go
wait_until 120 fetched_once || fail "the VMs fetched their shares" "only $(($(origin_requests shard) - shards0)) of $SHARDS"
wait_until 120 all_waiting || fail "every VM deferred the others' shards and waits for the region" \
  "$(for i in $(seq 1 "$VMS"); do grep -h "deferred; waiting" "$E2E_TMP/vms/out-$i.err" || echo "VM $i: none"; done)"
echo "# every VM waits for the region $((($(date +%s%N) - REGION_STARTED) / 1000000)) ms after the start; the bucket comes back"
proxy_mode "$MOTO_URL" ok
region_wait
for i in $(seq 1 "$VMS"); do
  [ -s "$E2E_TMP/vms/out-$i.err" ] && echo "# VM $i stderr: $(head -c 600 "$E2E_TMP/vms/out-$i.err" | tr '\n' '|')"
done
expect_eq "every VM warmed every shard and exited 0" "0 0" "$REGION_FAILED $(sum_of out "$VMS" "j['failed']")"
expect_eq "exactly one origin fetch per shard for the region (/v1/metrics)" "$SHARDS" \
  "$(($(origin_requests shard) - shards0))"
expect_eq "the VMs agree (origin shards in their reports)" "$SHARDS" "$(sum_of out "$VMS" "j['origin']['shards']")"
expect_eq "each VM left the $((SHARDS - SHARDS / VMS)) shards of the others to them" \
  "$((VMS * (SHARDS - SHARDS / VMS)))" "$(sum_of out "$VMS" "j['share']['deferred']")"
expect_eq "and read them from the bucket once uploaded" "$(sum_of out "$VMS" "j['share']['deferred']")" \
  "$(sum_of out "$VMS" "j['share']['from_region']")"
expect_eq "nothing fetched after waiting" 0 "$(sum_of out "$VMS" "j['share']['fetched_after_wait']")"
expect_eq "every VM holds every shard" "$((VMS * SHARDS))" "$(sum_of out "$VMS" "j['tiers'][0]['held']")"
expect_eq "the bucket holds each shard once" "$SHARDS" "$(entries_in outage)"
expect_eq "each shard uploaded exactly once (PutObject + CompleteMultipartUpload, at the proxy)" "$SHARDS" \
  "$(($(proxy_op "$MOTO_URL" PutObject) + $(proxy_op "$MOTO_URL" CompleteMultipartUpload)))"
for i in $(seq 1 "$VMS"); do
  echo "# VM $i uploads: $(json "j['uploads']" <"$E2E_TMP/vms/out-$i.json"); share: $(json "j['share']" <"$E2E_TMP/vms/out-$i.json")"
done
expect_eq "each VM uploaded its own share, and only it" "$(for i in $(seq 1 "$VMS"); do printf '%d ' $((SHARDS / VMS)); done)" \
  "$(for i in $(seq 1 "$VMS"); do printf '%d ' "$(json "j['uploads']['uploaded']" <"$E2E_TMP/vms/out-$i.json")"; done)"
expect_eq "no lease left behind" 0 \
  "$(s3tool "$MOTO_S3_ENDPOINT" ls outage | json "len([o for o in j if '/.leases/' in o['key']])")"
expect_eq "no multipart upload left open" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads outage)"
grep -q "cannot be reached.*leaving the shards of the region's other members to them (share 0/$VMS)" \
  "$E2E_TMP/vms/out-1.err" || fail "the deferral is said at the default level" "$(head -c 800 "$E2E_TMP/vms/out-1.err")"

# --- 2. one VM of two, the bucket down for its whole warm -----------------------------------------------------

make_bucket "$MOTO_S3_ENDPOINT" outage-long
proxy_mode "$MOTO_URL" status503
shards0=$(origin_requests shard)
mkdir -p "$E2E_TMP/vms"
vm_config alone outage-long
started=$(date +%s%N)
run --config "$E2E_TMP/vms/alone.yaml" --json warm "$DS" --key bin --jobs 4 --share 0/2 --share-wait 2
took=$((($(date +%s%N) - started) / 1000000))
proxy_mode "$MOTO_URL" ok
expect_eq "alone: exits 1, the bucket missing every shard" 1 "$RC"
expect_eq "alone: every shard is cached locally" "$SHARDS" "$(json "j['tiers'][0]['held']" <<<"$OUT")"
expect_eq "alone: its own share, then the other's after the wait, from the origin" "$SHARDS" \
  "$(($(origin_requests shard) - shards0))"
expect_eq "alone: the other member's shards were deferred, then fetched after the wait" \
  "$((SHARDS / 2)) $((SHARDS / 2)) 0" \
  "$(json "'%d %d %d' % (j['share']['deferred'], j['share']['fetched_after_wait'], j['share']['from_region'])" <<<"$OUT")"
expect_cmp "alone: it waited the 2 s (took $took ms)" "$took" -ge 2000
grep -q "fetching them from the origin" <<<"$ERR" || fail "alone: the fallback is said" "$(head -c 800 <<<"$ERR")"
grep -q "warm: $((SHARDS / 2)) shard(s) of the region's other members deferred; waiting up to [0-9]* s for their uploads" \
  <<<"$ERR" || fail "alone: the wait is said" "$(head -c 800 <<<"$ERR")"

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
