#!/usr/bin/env bash
# The region simulation: the spec's cloud topology (one bucket per region between each VM's disk and the origin)
# with real processes. Each "VM" is a `datavo warm` process with a folder tier of its own and the region's bucket
# on moto, behind tests/support/cloud_proxy.py, which counts the bucket's requests by S3 operation; the origin is
# `datavo serve`, whose /v1/metrics counts shard requests and bytes.
#   1. 8 VMs of region A warm the same dataset at the same moment: every shard is fetched from the origin exactly
#      once and uploaded to the bucket exactly once (PutObject + CompleteMultipartUpload, leases counted apart);
#   2. a 9th VM afterwards makes 0 shard (and 0 ticket) requests to the origin;
#   3. region B (another bucket, 4 VMs at once) adds exactly one origin fetch per shard;
#   4. with single_flight: false (region C, 8 VMs at once) the VMs behave as peers: the origin fetches and upload
#      attempts are printed beside the single-flight figures, and the bucket still holds each shard once.
# Knobs (for bench/s3/run_benchmarks.sh): REGION_VMS (default 8), REGION_SHARD_BYTES (default about 1 MB; the first
# shard is always above part_size, so that one upload per region is multipart).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=300
SUITE_STARTED=$(date +%s)
VMS=${REGION_VMS:-8}
SHARD_BYTES=${REGION_SHARD_BYTES:-1000000}
SHARDS_WANTED=8
PER_SHARD=10

. "$(dirname "$0")/region_lib.sh"
for bucket in region-a region-b region-c; do make_bucket "$MOTO_S3_ENDPOINT" "$bucket"; done

# --- 1. region A, single flight -----------------------------------------------------------------------------

shards0=$(origin_requests shard)
bytes0=$(origin_bytes)
proxy_reset "$MOTO_URL"
started=$(date +%s%N)
region a region-a "$VMS"
took_a=$((($(date +%s%N) - started) / 1000000))
expect_eq "region A: $VMS VMs warmed every shard" "0 0" "$REGION_FAILED $(sum_of a "$VMS" "j['failed']")"
SF_FETCHES=$(($(origin_requests shard) - shards0))
SF_BYTES=$(($(origin_bytes) - bytes0))
SF_PUTS=$(proxy_op "$MOTO_URL" PutObject)
SF_COMPLETES=$(proxy_op "$MOTO_URL" CompleteMultipartUpload)
SF_LEASE_REQUESTS=$(proxy_json "$MOTO_URL" "sum(n for o, n in j['ops'].items() if o.startswith('Lease:'))")
SF_GETS=$(proxy_op "$MOTO_URL" GetObject)
expect_eq "region A: each shard fetched from the origin exactly once (/v1/metrics)" "$SHARDS" "$SF_FETCHES"
expect_eq "region A: the VMs agree (origin shards in their reports)" "$SHARDS" "$(sum_of a "$VMS" "j['origin']['shards']")"
expect_eq "region A: each shard uploaded exactly once (PutObject + CompleteMultipartUpload)" "$SHARDS" \
  "$((SF_PUTS + SF_COMPLETES))"
expect_eq "region A: the 6 MiB shard went up as multipart" 1 "$SF_COMPLETES"
expect_eq "region A: the uploads reported by the VMs" "$SHARDS" "$(sum_of a "$VMS" "j['uploads']['uploaded']")"
expect_eq "region A: the bucket holds each shard once" "$SHARDS" "$(entries_in region-a)"
expect_eq "region A: no lease left behind" 0 \
  "$(s3tool "$MOTO_S3_ENDPOINT" ls region-a | json "len([o for o in j if '/.leases/' in o['key']])")"
expect_eq "region A: no multipart upload left open" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads region-a)"

# --- 2. a 9th VM afterwards ---------------------------------------------------------------------------------

before="$(origin_requests shard) $(origin_requests ticket)"
region late region-a 1
expect_eq "a 9th VM: warmed every shard, from the bucket" "[0, 0, $SHARDS]" \
  "[$REGION_FAILED, $(json "j['origin']['shards']" <"$E2E_TMP/vms/late-1.json"), $(json "j['tiers'][0]['promoted_into']" <"$E2E_TMP/vms/late-1.json")]"
expect_eq "a 9th VM: 0 shard and 0 ticket requests to the origin (its one manifest request aside)" "$before" \
  "$(origin_requests shard) $(origin_requests ticket)"

# --- 3. a second region -------------------------------------------------------------------------------------

shards_b=$(origin_requests shard)
region b region-b 4
expect_eq "region B: 4 VMs warmed every shard" "0 0" "$REGION_FAILED $(sum_of b 4 "j['failed']")"
expect_eq "region B (another bucket): exactly one more origin fetch per shard" "$SHARDS" \
  "$(($(origin_requests shard) - shards_b))"
expect_eq "region B: the bucket holds each shard once" "$SHARDS" "$(entries_in region-b)"

# --- 4. single_flight: false --------------------------------------------------------------------------------

shards0=$(origin_requests shard)
bytes0=$(origin_bytes)
proxy_reset "$MOTO_URL"
region c region-c "$VMS" 'single_flight: false'
expect_eq "region C (single_flight: false): $VMS VMs warmed every shard" "0 0" \
  "$REGION_FAILED $(sum_of c "$VMS" "j['failed']")"
PEER_FETCHES=$(($(origin_requests shard) - shards0))
PEER_BYTES=$(($(origin_bytes) - bytes0))
PEER_PUTS=$(proxy_op "$MOTO_URL" PutObject)
PEER_COMPLETES=$(proxy_op "$MOTO_URL" CompleteMultipartUpload)
PEER_412=$(proxy_json "$MOTO_URL" "sum(n for o, s in j['statuses'].items() if o in ('PutObject', 'CompleteMultipartUpload') for c, n in s.items() if c in ('409', '412'))")
echo "# region C upload statuses: $(proxy_json "$MOTO_URL" "{o: s for o, s in j['statuses'].items() if o in ('PutObject', 'CompleteMultipartUpload', 'UploadPart', 'CreateMultipartUpload')}")"
expect_cmp "region C: at least one origin fetch per shard" "$PEER_FETCHES" -ge "$SHARDS"
expect_cmp "region C: at most one per shard per VM" "$PEER_FETCHES" -le $((SHARDS * VMS))
expect_eq "region C: no lease objects" 0 "$(proxy_json "$MOTO_URL" "sum(n for o, n in j['ops'].items() if o.startswith('Lease:'))")"
expect_eq "region C: the bucket still holds each shard once (the conditional creates)" "$SHARDS" "$(entries_in region-c)"
expect_eq "region C: every upload attempt but the first per shard was refused (412/409: already present)" \
  "$((PEER_PUTS + PEER_COMPLETES - SHARDS))" "$PEER_412"
expect_eq "region C: no multipart upload left open" 0 "$(s3tool "$MOTO_S3_ENDPOINT" uploads region-c)"

echo "# region simulation, $VMS VMs, $SHARDS shards (1 of 6 MiB, $((SHARDS - 1)) of ~$SHARD_BYTES bytes), region A in $took_a ms:"
echo "#   single_flight: true : origin shard fetches $SF_FETCHES, origin bytes $SF_BYTES, bucket uploads" \
  "$((SF_PUTS + SF_COMPLETES)) (PUT $SF_PUTS + CompleteMultipartUpload $SF_COMPLETES), lease requests" \
  "$SF_LEASE_REQUESTS, object GETs $SF_GETS"
echo "#   single_flight: false: origin shard fetches $PEER_FETCHES, origin bytes $PEER_BYTES, bucket upload attempts" \
  "$((PEER_PUTS + PEER_COMPLETES)) (PUT $PEER_PUTS + CompleteMultipartUpload $PEER_COMPLETES), refused as already" \
  "present $PEER_412"
echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
