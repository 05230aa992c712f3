#!/usr/bin/env bash
# The region simulation on Azure Blob (Azurite, which honours If-None-Match: * and checks SharedKey): the spec's cloud
# topology with real processes, as tests/e2e/test_s3_region.sh does on moto. Each "VM" is a `datavo warm` process
# with a folder tier of its own and the region's container; the origin is `datavo serve`, whose /v1/metrics counts
# shard requests; uploads are counted server-side from Azurite's access log (leases, <instance>/.leases/, apart).
#   1. 8 VMs of region A warm the same dataset at the same moment: every shard is fetched from the origin exactly
#      once and uploaded exactly once (Put Blob 201, or Put Block List 201 above part_size), no create refused;
#   2. a 9th VM afterwards makes 0 shard (and 0 ticket) requests to the origin;
#   3. region B (another container, 4 VMs at once) adds exactly one origin fetch per shard;
#   4. with single_flight: false (region C, 8 VMs at once) the VMs behave as peers: the origin fetches and upload
#      attempts are printed beside the single-flight figures, the container still holds each shard once and every
#      attempt but the first per shard is refused (409/412) and reported as already present;
#   5. region D, 4 VMs at once, each behind a cloud_proxy.py of its own that holds every entry upload 2.5 s: a VM
#      that waits on another's lease makes at most 2 + 3 lease requests per shard (its lease attempt, then 3 polls,
#      plus one per renewal period: lease_duration / 3 = 3 s here) and no more than 2 entry GETs that miss, and its warm
#      JSON counts every shard it got from the container as a hit of the container (issue 16: about 600 polling
#      requests from 3 waiting VMs, and 0 hits on the bucket).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
SUITE_STARTED=$(date +%s)
VMS=${REGION_VMS:-8}
SHARDS_WANTED=8
PER_SHARD=10

cloud_up azurite
for container in region-a region-b region-c; do aztool create $container || die "create container $container" ""; done

# The dataset: shard 0 of 6 MiB (Put Block x 2 + Put Block List with part_size 5MiB), the others of about 1 MB.
python3 - "$E2E_TMP/src" "$SHARDS_WANTED" "$PER_SHARD" <<'PY'
import os, random, sys
root, shards, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root, exist_ok=True)
rng = random.Random(10)
for i in range(shards * per):
    n = (6 * 1024 * 1024 if i < per else 1000000) // per
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(n))
PY
DS=azure_region/train
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$PER_SHARD"
[ "$RC" -eq 0 ] || die "pack" "$ERR"
SHARDS=$(json "j['total_shards']" <<<"$OUT")
expect_eq "the dataset has $SHARDS_WANTED shards" "$SHARDS_WANTED" "$SHARDS"
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"

# region NAME CONTAINER COUNT [FIELD...]: COUNT VMs warm at the same moment; their JSON in $E2E_TMP/vms/NAME-<i>.json.
# VM i reaches Azurite at ${REGION_ENDPOINTS[i]} when set (a proxy of its own), else at $AZURITE_BLOB_ENDPOINT.
REGION_ENDPOINTS=()
region() {
  local name=$1 container=$2 count=$3 i pids=()
  shift 3
  mkdir -p "$E2E_TMP/vms"
  rm -f "$E2E_TMP/vms/go"
  for i in $(seq 1 "$count"); do
    vm_config "$E2E_TMP/vms/$name-$i.yaml" "$E2E_TMP/vms/$name-$i" \
      "$(AZURITE_BLOB_ENDPOINT="${REGION_ENDPOINTS[$i]:-$AZURITE_BLOB_ENDPOINT}" \
        azure_tier_yaml region "$container" 'part_size: 5MiB' "$@")"
    (
      while [ ! -e "$E2E_TMP/vms/go" ]; do sleep 0.01; done
      AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING" \
        DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/vms/$name-$i.manifests" exec timeout -k 5 100 "$DATAVO_BIN" \
        --config "$E2E_TMP/vms/$name-$i.yaml" --json warm "$DS" --key bin --jobs 4
    ) >"$E2E_TMP/vms/$name-$i.json" 2>"$E2E_TMP/vms/$name-$i.err" &
    pids+=($!)
  done
  touch "$E2E_TMP/vms/go"
  REGION_FAILED=0
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || REGION_FAILED=$((REGION_FAILED + 1)); done
}
# sum_of NAME COUNT EXPR...: the sums of each EXPR over the VMs' warm JSON, space-separated (one python for all).
sum_of() {
  local name=$1 count=$2
  shift 2
  python3 - "$E2E_TMP/vms" "$name" "$count" "$@" <<'PY'
import json, sys
root, name, count, exprs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
docs = []
for i in range(1, count + 1):
    try:
        docs.append(json.load(open("%s/%s-%d.json" % (root, name, i))))
    except Exception:
        docs.append(None)  # makes every sum unreadable
def total(expr):
    # A VM without a report, or a report without the field, makes the sum unreadable (never a silent 0).
    try:
        return str(sum(int(eval(expr, {"j": d})) for d in docs))
    except Exception:
        return "unreadable(%s)" % expr
print(" ".join(total(e) for e in exprs))
PY
}
ENTRY='[^/ ]+/[0-9a-f]{64}\.tar'
LEASE='[^/ ]+/\.leases/[0-9a-f]{64}(\?[^ ]*)?'
# puts CONTAINER STATUS_ERE: entry creates (Put Blob + Put Block List) in CONTAINER answered STATUS_ERE.
puts() { echo $(($(azurite_count PUT "$1/$ENTRY" "$2") + $(azurite_count PUT "$1/$ENTRY\?comp=blocklist[^ ]*" "$2"))); }
entries_in() { aztool list "$1" | grep -c -E "^$ENTRY\$"; }
leases_left() { aztool list "$1" | grep -c '/\.leases/'; }

# --- 1. region A, single flight -----------------------------------------------------------------------------------

shards0=$(origin_requests shard)
started=$(date +%s%N)
region a region-a "$VMS"
took_a=$((($(date +%s%N) - started) / 1000000))
expect_eq "region A: $VMS VMs warmed every shard" "0 0" "$REGION_FAILED $(sum_of a "$VMS" "j['failed']")"
SF_FETCHES=$(($(origin_requests shard) - shards0))
SF_BLOBS=$(azurite_count PUT "region-a/$ENTRY" 201)
SF_LISTS=$(azurite_count PUT "region-a/$ENTRY\?comp=blocklist[^ ]*" 201)
SF_REFUSED=$(puts region-a '(409|412)')
SF_LEASE_REQUESTS=$(azurite_count '[A-Z]+' "region-a/$LEASE")
SF_LEASES_TAKEN=$(azurite_count PUT "region-a/$LEASE" 201)
SF_GETS=$(azurite_count GET "region-a/$ENTRY(\?[^ ]*)?")
expect_eq "region A: each shard fetched from the origin exactly once (/v1/metrics)" "$SHARDS" "$SF_FETCHES"
expect_eq "region A: the VMs agree (origin shards in their reports)" "$SHARDS" "$(sum_of a "$VMS" "j['origin']['shards']")"
expect_eq "region A: each shard uploaded exactly once (Put Blob 201 + Put Block List 201)" "$SHARDS" \
  "$((SF_BLOBS + SF_LISTS))"
expect_eq "region A: the 6 MiB shard went up as blocks (one Put Block List)" 1 "$SF_LISTS"
expect_eq "region A: no entry create was refused (the other VMs waited instead of uploading)" 0 "$SF_REFUSED"
# A VM that finds a lease released after the upload may take it and let it go at once on finding the blob: every
# shard needs a lease taken (each origin fetch is under one), a few may be taken twice.
expect_eq "region A: a lease taken for every shard" "$SHARDS" \
  "$(grep -a -o -E "\"PUT /$AZURITE_ACCOUNT_NAME/region-a/[^/ ]+/\.leases/[0-9a-f]{64}(\?[^ ]*)? HTTP/1.1\" 201 " \
    "$DATAVO_EMULATOR_RUN_DIR/azurite.log" | grep -o -E '[0-9a-f]{64}' | sort -u | wc -l)"
expect_eq "region A: the uploads reported by the VMs" "$SHARDS 0 0" \
  "$(sum_of a "$VMS" "j['uploads']['uploaded']" "j['uploads']['already_present']" "j['uploads']['failed']")"
expect_eq "region A: the other VMs got every shard from the container" "$((SHARDS * (VMS - 1)))" \
  "$(sum_of a "$VMS" "j['tiers'][0]['promoted_into']")"
expect_eq "region A: ... and counted each as a hit of the container" "$((SHARDS * (VMS - 1)))" \
  "$(sum_of a "$VMS" "j['tiers'][1]['hits']")"
expect_eq "region A: the container holds each shard once" "$SHARDS" "$(entries_in region-a)"
expect_eq "region A: no lease left behind" 0 "$(leases_left region-a)"
# A VM that waits on another's lease says so at the default level (one WARNING naming the holder); nothing else warns.
expect_eq "region A: no WARNING from any VM but a lease wait" "" \
  "$(cat "$E2E_TMP"/vms/a-*.err | grep WARNING | grep -v -E ' is fetching shard [0-9a-f]{64}; waiting for its upload' | head -3)"

# --- 2. a 9th VM afterwards ---------------------------------------------------------------------------------------

before="$(origin_requests shard) $(origin_requests ticket)"
started=$(date +%s%N)
region late region-a 1
echo "# the 9th VM: $((($(date +%s%N) - started) / 1000000)) ms"
expect_eq "a 9th VM: warmed every shard, from the container" "[0, 0, $SHARDS]" \
  "[$REGION_FAILED, $(json "j['origin']['shards']" <"$E2E_TMP/vms/late-1.json"), $(json "j['tiers'][0]['promoted_into']" <"$E2E_TMP/vms/late-1.json")]"
expect_eq "a 9th VM: 0 shard and 0 ticket requests to the origin (its one manifest request aside)" "$before" \
  "$(origin_requests shard) $(origin_requests ticket)"
expect_eq "a 9th VM: uploaded nothing (entry creates in region A: still one per shard, none refused)" "$SHARDS 0" \
  "$(puts region-a 201) $(puts region-a '(409|412)')"

# --- 3. a second region -------------------------------------------------------------------------------------------

shards_b=$(origin_requests shard)
started=$(date +%s%N)
region b region-b 4
echo "# region B: $((($(date +%s%N) - started) / 1000000)) ms"
expect_eq "region B: 4 VMs warmed every shard" "0 0" "$REGION_FAILED $(sum_of b 4 "j['failed']")"
expect_eq "region B (another container): exactly one more origin fetch per shard" "$SHARDS" \
  "$(($(origin_requests shard) - shards_b))"
expect_eq "region B: each shard uploaded once" "$SHARDS" "$(puts region-b 201)"
expect_eq "region B: the container holds each shard once" "$SHARDS" "$(entries_in region-b)"
expect_eq "region A's container was not touched by region B" "$((SF_BLOBS + SF_LISTS))" "$(puts region-a 201)"

# --- 4. single_flight: false --------------------------------------------------------------------------------------

shards0=$(origin_requests shard)
started=$(date +%s%N)
region c region-c "$VMS" 'single_flight: false'
echo "# region C: $((($(date +%s%N) - started) / 1000000)) ms"
expect_eq "region C (single_flight: false): $VMS VMs warmed every shard" "0 0" \
  "$REGION_FAILED $(sum_of c "$VMS" "j['failed']")"
PEER_FETCHES=$(($(origin_requests shard) - shards0))
PEER_CREATED=$(puts region-c 201)
PEER_REFUSED=$(puts region-c '(409|412)')
PEER_ATTEMPTS=$(puts region-c '[0-9]+')
echo "# region C entry creates by status: 201 $PEER_CREATED, 409 $(puts region-c 409), 412 $(puts region-c 412)," \
  "other $((PEER_ATTEMPTS - PEER_CREATED - PEER_REFUSED))"
expect_cmp "region C: at least one origin fetch per shard" "$PEER_FETCHES" -ge "$SHARDS"
expect_cmp "region C: at most one per shard per VM" "$PEER_FETCHES" -le $((SHARDS * VMS))
expect_eq "region C: the VMs' reports agree with the origin's metrics" "$PEER_FETCHES" \
  "$(sum_of c "$VMS" "j['origin']['shards']")"
expect_eq "region C: no lease requests" 0 "$(azurite_count '[A-Z]+' "region-c/$LEASE")"
expect_eq "region C: each shard created exactly once (the conditional creates)" "$SHARDS" "$PEER_CREATED"
expect_eq "region C: every other attempt refused as already there (409/412), none failed otherwise" \
  "$((PEER_ATTEMPTS - SHARDS))" "$PEER_REFUSED"
expect_eq "region C: the VMs report the refusals as already present, the creates as uploaded" \
  "$PEER_REFUSED $SHARDS 0" \
  "$(sum_of c "$VMS" "j['uploads']['already_present']" "j['uploads']['uploaded']" "j['uploads']['failed']")"
expect_eq "region C: the container still holds each shard once" "$SHARDS" "$(entries_in region-c)"

# --- 5. waiting VMs: requests per shard, and hits ------------------------------------------------------------------

aztool create region-d || die "create container region-d" ""
REGION_ENDPOINTS=()
for i in 1 2 3 4; do
  start_proxy PD$i "${AZURITE_BLOB_ENDPOINT%/"$AZURITE_ACCOUNT_NAME"}"
  url_var=PD${i}_URL
  REGION_ENDPOINTS[$i]="${!url_var}/$AZURITE_ACCOUNT_NAME"
  # The holder's upload takes 2.5 s: long enough for the VMs that wait on its lease to poll.
  proxy_mode "${!url_var}" "delay seconds=2.5 op=PutBlob,PutBlockList"
done
shards_d=$(origin_requests shard)
started=$(date +%s%N)
region d region-d 4 'lease_duration: 9s'
took_d=$((($(date +%s%N) - started) / 1000000))
REGION_ENDPOINTS=()
expect_eq "region D: 4 VMs warmed every shard" "0 0" "$REGION_FAILED $(sum_of d 4 "j['failed']")"
expect_eq "region D: exactly one origin fetch per shard" "$SHARDS" "$(($(origin_requests shard) - shards_d))"
expect_eq "region D: the VMs that waited got every other shard from the container, as hits of it" \
  "$((SHARDS * 3)) $((SHARDS * 3))" "$(sum_of d 4 "j['tiers'][1]['hits']" "j['tiers'][0]['promoted_into']")"
for i in 1 2 3 4; do
  url_var=PD${i}_URL
  curl -s --max-time 10 "${!url_var}/_proxy/stats" >"$E2E_TMP/vms/d-$i.proxy.json"
done
# Per VM and shard: lease requests and entry GETs that missed, for the shards the VM did not upload itself.
REQUESTS_D=$(python3 - "$E2E_TMP/vms" <<'PY'
import json, re, sys
leases, misses, total = [], [], 0
for i in range(1, 5):
    log = json.load(open("%s/d-%d.proxy.json" % (sys.argv[1], i)))["log"]
    by_shard = {}
    for r in log:
        m = re.search(r"[0-9a-f]{64}", r["path"])
        if m:
            by_shard.setdefault(m.group(0), []).append(r)
    for shard, rs in by_shard.items():
        if any(r["op"] in ("PutBlob", "PutBlockList") and r["status"] == 201 for r in rs):
            continue  # this VM fetched and uploaded the shard: it did not wait
        total += len(rs)
        leases.append(sum(1 for r in rs if r["op"].startswith("Lease:")))
        misses.append(sum(1 for r in rs if r["op"] == "GetBlob" and r["status"] == 404))
print(len(leases), max(leases), max(misses), total)
PY
)
read -r waits max_lease max_miss total_d <<<"$REQUESTS_D"
periods=$((took_d / 3000))  # lease_duration / 3
echo "# region D ($took_d ms): $waits waits on a lease, $total_d requests on their shards," \
  "at most $max_lease lease requests and $max_miss missing-entry GETs per VM and shard"
expect_eq "region D: 3 VMs got each shard from another (counted)" "$((SHARDS * 3))" "$waits"
expect_cmp "region D: a waiting VM's lease requests per shard (2 + 3 polls + 1 per 3 s)" "$max_lease" \
  -le $((5 + periods))
expect_cmp "region D: a waiting VM's entry GETs that miss per shard (its lookup, and one at a takeover)" "$max_miss" -le 2
expect_eq "region D: no lease left behind" 0 "$(leases_left region-d)"

echo "# Azure region simulation, $VMS VMs, $SHARDS shards (1 of 6 MiB, $((SHARDS - 1)) of ~1 MB), region A in $took_a ms:"
echo "#   single_flight: true : origin shard fetches $SF_FETCHES, container uploads $((SF_BLOBS + SF_LISTS))" \
  "(Put Blob $SF_BLOBS + Put Block List $SF_LISTS), leases taken $SF_LEASES_TAKEN, lease requests $SF_LEASE_REQUESTS," \
  "entry GETs $SF_GETS"
echo "#   single_flight: false: origin shard fetches $PEER_FETCHES, container upload attempts $PEER_ATTEMPTS" \
  "(created $PEER_CREATED, refused as already there $PEER_REFUSED)"
echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
