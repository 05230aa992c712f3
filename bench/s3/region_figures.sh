#!/usr/bin/env bash
# Issue 16's region figures (docs/BENCHMARKS-s3.md, "Interrupts and outages"), on the region simulation's setting
# (tests/e2e/region_lib.sh: VMs that are `datavo warm` processes with folder tiers of their own, one moto bucket
# behind tests/support/cloud_proxy.py, `datavo serve` as the origin):
#   R1  REGION_VMS VMs warm at once; one of them is sent SIGINT halfway (once the origin has served half the shards),
#       then restarted at once. Printed: origin shard fetches per shard, the time the other VMs take to finish against
#       a run of the same VMs with no interrupt (same bucket state: empty), and the leases and multipart uploads left
#       in the bucket.
#   R2  REGION_VMS VMs warm at once while the bucket answers 503 to everything (the proxy), until every VM holds
#       half of the shards; then it is back; and again with the bucket down for the whole warm. Printed: the shards missing from the bucket
#       after that warm and after one backfilling `warm` on one VM, and the origin shard fetches per shard of each.
#       Then both again with each VM given its share of the region (`--share i/VMS`, docs/hierarchy.md "During an
#       outage"): half_share with the bucket down for the first half of the round's calm warm time (R1), then back,
#       and --share-wait 120; whole_share down for the whole warm, with --share-wait 20. Printed as well: the time
#       until the last VM finished.
# Each figure is the median of REPS rounds (fresh buckets each round).
# usage: DATAVO_BIN=build/cli/datavo bench/s3/region_figures.sh [REPS]   (REGION_VMS, REGION_SHARD_BYTES as for
# tests/e2e/test_s3_region.sh; bench/s3/run_benchmarks.sh runs it with shards of about 4 MB).
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
e2e=$(cd "$(dirname "$0")/../../tests/e2e" && pwd)
. "$e2e/lib.sh"
. "$e2e/s3_lib.sh"
E2E_CMD_TIMEOUT=300
REPS=${1:-3}
VMS=${REGION_VMS:-8}
SHARD_BYTES=${REGION_SHARD_BYTES:-4000000}
SHARDS_WANTED=8
PER_SHARD=10
. "$e2e/region_lib.sh"

median() { python3 -c 'import statistics, sys; print(statistics.median(float(a) for a in sys.argv[1:]))' "$@"; }
ratio() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$1" "$2"; }
leases_in() { s3tool "$MOTO_S3_ENDPOINT" ls "$1" | json "len([o for o in j if '/.leases/' in o['key']])"; }
# origin_at_least N: the origin has served N shard requests since ORIGIN_BASE.
origin_at_least() { [ $(($(origin_requests shard) - ORIGIN_BASE)) -ge "$1" ]; }
# every_vm_holds NAME N: each of the VMs NAME-1..VMS holds N shards in its folder tier.
every_vm_holds() {
  local i
  for i in $(seq 1 "$VMS"); do
    [ "$(find "$E2E_TMP/vms/$1-$i" -name '*.tar' 2>/dev/null | wc -l)" -ge "$2" ] || return 1
  done
}
# victim VM BUCKET: one more VM of the region, started with the others (the go file), with SIGINT at its default.
victim() {
  vm_config "$1" "$2"
  (
    while [ ! -e "$E2E_TMP/vms/go" ]; do sleep 0.01; done
    DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/vms/$1.manifests" exec "${WITH_SIGINT[@]}" "$DATAVO_BIN" \
      --config "$E2E_TMP/vms/$1.yaml" --json warm "$DS" --key bin --jobs 4
  ) >"$E2E_TMP/vms/$1.json" 2>"$E2E_TMP/vms/$1.err" &
  VICTIM_PID=$!
}

R1_FETCHES=() R1_RATIO=() R1_LEFT=()
R2_half_FETCHES=() R2_half_MISSING=() R2_half_MISSING_AFTER=() R2_half_BACKFILL=()
R2_whole_FETCHES=() R2_whole_MISSING=() R2_whole_MISSING_AFTER=() R2_whole_BACKFILL=()
R2_half_share_FETCHES=() R2_half_share_MISSING=() R2_half_share_MISSING_AFTER=() R2_half_share_BACKFILL=()
R2_whole_share_FETCHES=() R2_whole_share_MISSING=() R2_whole_share_MISSING_AFTER=() R2_whole_share_BACKFILL=()
R2_half_MS=() R2_whole_MS=() R2_half_share_MS=() R2_whole_share_MS=()
for rep in $(seq 1 "$REPS"); do
  # --- R1: the same VMs with no interrupt, then with one interrupted halfway and restarted ---
  make_bucket "$MOTO_S3_ENDPOINT" "r1-calm-$rep"
  region "calm-$rep" "r1-calm-$rep" "$VMS"
  [ "$REGION_FAILED" = 0 ] || die "R1 round $rep: a calm VM failed" "$(cat "$E2E_TMP"/vms/calm-"$rep"-*.err)"
  calm_ms=$(region_ms "calm-$rep" $((VMS - 1)))

  make_bucket "$MOTO_S3_ENDPOINT" "r1-int-$rep"
  ORIGIN_BASE=$(origin_requests shard)
  region_start "int-$rep" "r1-int-$rep" $((VMS - 1))  # the others
  victim "victim-$rep" "r1-int-$rep"
  region_go
  wait_until 120 origin_at_least $((SHARDS / 2)) || die "R1 round $rep" "the origin never served half the shards"
  kill -INT "$VICTIM_PID"
  wait "$VICTIM_PID"
  victim_rc=$?
  [ "$victim_rc" = 130 ] || die "R1 round $rep: the interrupted VM exited $victim_rc, not 130" \
    "$(cat "$E2E_TMP/vms/victim-$rep.err")"
  DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/vms/victim-$rep.manifests" "$DATAVO_BIN" --config "$E2E_TMP/vms/victim-$rep.yaml" \
    --json warm "$DS" --key bin --jobs 4 >"$E2E_TMP/vms/victim-$rep.again.json" 2>"$E2E_TMP/vms/victim-$rep.again.err" ||
    die "R1 round $rep: the restarted VM failed" "$(cat "$E2E_TMP/vms/victim-$rep.again.err")"
  region_wait
  [ "$REGION_FAILED" = 0 ] || die "R1 round $rep: a VM failed" "$(cat "$E2E_TMP"/vms/int-"$rep"-*.err)"
  int_ms=$(region_ms "int-$rep" $((VMS - 1)))
  fetches=$(($(origin_requests shard) - ORIGIN_BASE))
  left=$(($(leases_in "r1-int-$rep") + $(s3tool "$MOTO_S3_ENDPOINT" uploads "r1-int-$rep")))
  echo "# R1 round $rep: origin fetches $fetches for $SHARDS shards; the other $((VMS - 1)) VMs took $int_ms ms" \
    "(calm: $calm_ms ms); leases + multipart uploads left: $left; the interrupted VM exited 130, restarted: 0"
  R1_FETCHES+=("$(python3 -c "print($fetches / $SHARDS)")") R1_RATIO+=("$(ratio "$int_ms" "$calm_ms")") R1_LEFT+=("$left")

  # --- R2: the bucket down for the first half of the warm (DOWN=half), or the whole of it (DOWN=whole) ---
  for down in half whole half_share whole_share; do
    bucket=r2-${down/_/-}-$rep name=$down-$rep
    make_bucket "$MOTO_S3_ENDPOINT" "$bucket"
    ORIGIN_BASE=$(origin_requests shard)
    proxy_mode "$MOTO_URL" status503
    case $down in
      half_share) REGION_SHARE_WAIT=120 region_start "$name" "$bucket" "$VMS" ;;
      whole_share) REGION_SHARE_WAIT=20 region_start "$name" "$bucket" "$VMS" ;;
      *) region_start "$name" "$bucket" "$VMS" ;;
    esac
    region_go
    case $down in
      half)
        wait_until 120 every_vm_holds "$name" $((SHARDS / 2)) || die "R2 round $rep" "the VMs never got halfway"
        proxy_mode "$MOTO_URL" ok
        ;;
      half_share)
        # A VM with a share holds only its own shards during the outage: down for half the calm warm's time.
        sleep "$(python3 -c "print($calm_ms / 2000)")"
        proxy_mode "$MOTO_URL" ok
        ;;
    esac
    region_wait
    eval "R2_${down}_MS+=($(region_ms "$name" "$VMS"))"
    proxy_mode "$MOTO_URL" ok
    fetches=$(($(origin_requests shard) - ORIGIN_BASE))
    missing=$((SHARDS - $(entries_in "$bucket")))
    uploads=$(for i in $(seq 1 "$VMS"); do
      json "'%d/%d/%d' % (j['uploads']['uploaded'], j['uploads']['failed'], j['uploads']['skipped'])" \
        <"$E2E_TMP/vms/$name-$i.json"
    done | tr '\n' ' ')
    ORIGIN_BASE=$(origin_requests shard)
    DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/vms/$name-1.manifests" "$DATAVO_BIN" --config "$E2E_TMP/vms/$name-1.yaml" \
      --json warm "$DS" --key bin --jobs 4 >"$E2E_TMP/vms/backfill-$name.json" 2>"$E2E_TMP/vms/backfill-$name.err" ||
      die "R2 round $rep: the backfilling warm failed" "$(cat "$E2E_TMP/vms/backfill-$name.err")"
    backfill_fetches=$(($(origin_requests shard) - ORIGIN_BASE))
    missing_after=$((SHARDS - $(entries_in "$bucket")))
    echo "# R2 ($down) round $rep: $REGION_FAILED of $VMS VMs exited non-zero; their uploads (uploaded/failed/skipped):" \
      "$uploads; origin fetches $fetches for $SHARDS shards; missing from the bucket: $missing, after one" \
      "backfilling warm: $missing_after (it fetched $backfill_fetches from the origin, uploaded" \
      "$(json "j['uploads']['uploaded']" <"$E2E_TMP/vms/backfill-$name.json"))"
    case $down in *_share)
      echo "#   shares: deferred $(sum_of "$name" "$VMS" "j['share']['deferred']"), read from the bucket" \
        "$(sum_of "$name" "$VMS" "j['share']['from_region']"), fetched after the wait" \
        "$(sum_of "$name" "$VMS" "j['share']['fetched_after_wait']"); the last VM done after $(region_ms "$name" "$VMS") ms"
    esac
    eval "R2_${down}_FETCHES+=(\"\$(python3 -c \"print(\$fetches / \$SHARDS)\")\") R2_${down}_MISSING+=(\$missing)"
    eval "R2_${down}_MISSING_AFTER+=(\$missing_after) R2_${down}_BACKFILL+=(\$backfill_fetches)"
  done
done

echo "# region figures, $VMS VMs, $SHARDS shards (1 of 6 MiB, $((SHARDS - 1)) of ~$SHARD_BYTES bytes), medians of $REPS:"
echo "#   R1 origin fetches per shard $(median "${R1_FETCHES[@]}") (goal 1); the others' time against no interrupt" \
  "$(median "${R1_RATIO[@]}")x (goal <= 1.2x); leases + multipart uploads left $(median "${R1_LEFT[@]}") (goal 0)"
for down in half whole half_share whole_share; do
  eval 'echo "#   R2 (down for the $down of the warm) origin fetches per shard $(median "${R2_'$down'_FETCHES[@]}");' \
    'the last VM done after $(median "${R2_'$down'_MS[@]}") ms;' \
    'missing from the bucket $(median "${R2_'$down'_MISSING[@]}"), after one backfilling warm' \
    '$(median "${R2_'$down'_MISSING_AFTER[@]}") (goal 0), which fetched $(median "${R2_'$down'_BACKFILL[@]}")' \
    'shards from the origin (goal 0)"'
done
finish
