# The region simulation's setting, shared by tests/e2e/test_s3_region.sh and bench/s3/region_figures.sh (sourced
# after lib.sh and s3_lib.sh, which has origin_bytes): moto behind tests/support/cloud_proxy.py (MOTO_URL), the
# dataset $DS of SHARDS_WANTED
# shards (the first of 6 MiB, multipart with part_size 5 MiB; the others of SHARD_BYTES) served by `datavo serve`
# (ORIGIN_URL), and:
#   vm_config NAME BUCKET [FIELD...]   $E2E_TMP/vms/NAME.yaml: a folder tier of its own, the bucket through the proxy
#   region NAME BUCKET COUNT [FIELD...] COUNT VMs (`datavo warm` processes) start at the same moment; their JSON in
#                                      $E2E_TMP/vms/NAME-<i>.json; REGION_FAILED counts those that did not exit 0;
#                                      with REGION_SHARE_WAIT=S set, VM i warms with --share i-1/COUNT --share-wait S
#   sum_of NAME COUNT EXPR             the sum of EXPR over those JSON reports
#   entries_in BUCKET                  the entries (.tar objects) in BUCKET
# Sets SHARDS (from the pack).
s3_up moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"

# The dataset: shard 0 of 6 MiB (multipart with part_size 5 MiB), the others of SHARD_BYTES.
python3 - "$E2E_TMP/src" "$SHARDS_WANTED" "$PER_SHARD" "$SHARD_BYTES" <<'PY'
import os, random, sys
root, shards, per, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(root, exist_ok=True)
rng = random.Random(9)
for i in range(shards * per):
    n = (6 * 1024 * 1024 if i < per else size) // per
    with open(os.path.join(root, "s_%05d.bin" % i), "wb") as f:
        f.write(rng.randbytes(n))
PY
DS=region_sim/train
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$PER_SHARD"
[ "$RC" -eq 0 ] || die "pack" "$ERR"
SHARDS=$(json "j['total_shards']" <<<"$OUT")
expect_eq "the dataset has $SHARDS_WANTED shards" "$SHARDS_WANTED" "$SHARDS"
start_origin "$E2E_TMP/store"

# vm_config NAME BUCKET [FIELD...]
vm_config() {
  local name=$1 bucket=$2
  shift 2
  printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/vms/$name" \
    "$(s3_tier_yaml region "$bucket" "$MOTO_URL" 'part_size: 5MiB' "$@")" >"$E2E_TMP/vms/$name.yaml"
}

# region_start NAME BUCKET COUNT [FIELD...]: starts COUNT VMs (REGION_PIDS) that wait for region_go to begin their
# warm at the same moment (REGION_STARTED, in ns). Each VM's JSON goes to $E2E_TMP/vms/NAME-<i>.json and the moment
# it ended to NAME-<i>.end. region_wait waits for them and sets REGION_FAILED; region does all three.
region_start() {
  local name=$1 bucket=$2 count=$3 i
  shift 3
  mkdir -p "$E2E_TMP/vms"
  rm -f "$E2E_TMP/vms/go"
  REGION_PIDS=()
  for i in $(seq 1 "$count"); do
    vm_config "$name-$i" "$bucket" "$@"
    (
      while [ ! -e "$E2E_TMP/vms/go" ]; do sleep 0.01; done
      DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/vms/$name-$i.manifests" timeout -k 5 240 "$DATAVO_BIN" \
        --config "$E2E_TMP/vms/$name-$i.yaml" --json warm "$DS" --key bin --jobs 4 \
        ${REGION_SHARE_WAIT:+--share $((i - 1))/$count --share-wait $REGION_SHARE_WAIT}
      rc=$?
      date +%s%N >"$E2E_TMP/vms/$name-$i.end"
      exit $rc
    ) >"$E2E_TMP/vms/$name-$i.json" 2>"$E2E_TMP/vms/$name-$i.err" &
    REGION_PIDS+=($!)
  done
}
region_go() {
  REGION_STARTED=$(date +%s%N)
  touch "$E2E_TMP/vms/go"
}
region_wait() {
  local pid
  REGION_FAILED=0
  for pid in "${REGION_PIDS[@]}"; do wait "$pid" || REGION_FAILED=$((REGION_FAILED + 1)); done
}
region() {
  region_start "$@"
  region_go
  region_wait
}
# region_ms NAME COUNT: milliseconds from REGION_STARTED until the last of VMs NAME-1..COUNT ended.
region_ms() {
  local last=0 i end
  for i in $(seq 1 "$2"); do
    end=$(cat "$E2E_TMP/vms/$1-$i.end")
    [ "$end" -gt "$last" ] && last=$end
  done
  echo $(((last - REGION_STARTED) / 1000000))
}
# sum_of NAME COUNT EXPR: the sum of EXPR over the VMs' warm JSON.
sum_of() {
  local total=0 i v
  for i in $(seq 1 "$2"); do
    v=$(json "$3" <"$E2E_TMP/vms/$1-$i.json" 2>/dev/null || echo 0)
    total=$((total + v))
  done
  echo "$total"
}
entries_in() { s3tool "$MOTO_S3_ENDPOINT" ls "$1" | json "len([o for o in j if o['key'].endswith('.tar')])"; }

