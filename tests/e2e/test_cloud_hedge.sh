#!/usr/bin/env bash
# Hedged reads of a cloud tier (issue 19; docs/config.md, "Hedged reads"): a 40 MiB shard (8 ranged GETs of 5 MiB)
# stored in moto is read by fresh VMs through tests/support/cloud_proxy.py, which delays some GetObject requests
# (held before they are forwarded; "ifmatch=1 after=1 count=2": the second and third ranges pinned to the object's
# version, which leave at once with the others, so that the hedges, sent later, are never among them):
#   1. hedge_after: 200ms, two ranges delayed 4 s: both are hedged, the hedges win, the
#      shard is served from the bucket with the right bytes; hedges_sent / hedges_won in `cache stats` and in the
#      Prometheus metrics; the proxy saw one range asked twice for each hedge;
#   2. the budget: every GET delayed 1 s, hedge_max_fraction 5%: 8 GETs earn 0.4 of a hedge on top of the one the
#      budget starts with, so exactly one hedge (9 GETs at the proxy);
#   3. hedge: false: one GET per range (8), however slow, and no hedge counted;
#   4. hedge: true and nothing else (p95, 5%: 1 s until 16 GETs were seen): the delayed range is hedged;
#   5. no hedge field: on (the default, as in 4): the delayed range is hedged;
#   6. slow but flowing: every GET throttled to 2 MB/s (a 5 MiB range takes about 2.6 s), hedge_after: 1s,
#      hedge_max_fraction: 100%: the deadline is on silence (no byte for that long), not on the whole GET, so no
#      range is hedged (8 GETs). test_s3_credentials.sh shows the same with the defaults (1.5 MB/s downloads).
# The bytes are checked by the shard's SHA-256 in every case; that the sink never mixes two answers is shown by the
# unit tests (tests/unit/tier/cloud/test_hedge.cpp), which script the order.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
STARTED=$(date +%s)
MIB=$((1024 * 1024))
section() { echo "# $(($(date +%s) - STARTED)) s: $1"; }

s3_up moto
make_bucket "$MOTO_S3_ENDPOINT" hedged
start_proxy P "$MOTO_S3_ENDPOINT"
mkdir -p "$E2E_TMP/files"
SHA=$(make_shard "$E2E_TMP/files/big.bin" $((40 * MIB)))
H=$(hash_for big)
start_server "$E2E_TMP/files"

# vm NAME [FIELD...]: a fresh VM (an empty folder tier) above the bucket, through the proxy.
vm() {
  local name=$1
  shift
  write_config "$E2E_TMP/$name.yaml" <<YAML
tiers:
  - name: local
    path: $E2E_TMP/$name
$(s3_tier_yaml bucket hedged "$P_URL" 'upload: sync' 'part_size: 5MiB' 'concurrency: 4' "$@")
YAML
}

# read_back WHAT: `cache fetch` of the shard on the current VM: a hit in the bucket (promoted), with the shard's bytes.
read_back() {
  run --json cache fetch "$H" --url "$SERVER_URL/big.bin" --sha256 "$SHA"
  expect_eq "$1: exit 0, a hit in the bucket promoted" "[0, \"promoted\"]" "[$RC, \"$(json "j['source']" <<<"$OUT" 2>/dev/null)\"]"
  expect_eq "$1: the bytes are the shard's" "$SHA" "$(sha256_of "$(json "j['path']" <<<"$OUT")")"
}
gets() { proxy_op "$P_URL" GetObject; }
# The ranges the proxy saw asked more than once.
asked_twice() {
  proxy_json "$P_URL" "len([r for r, n in __import__('collections').Counter(x['range'] for x in j['log'] if x['op'] == 'GetObject').items() if n > 1])"
}

section "the shard stored in the bucket"
vm writer 'hedge: false'
run --json cache fetch "$H" --url "$SERVER_URL/big.bin" --sha256 "$SHA"
expect_eq "writer: fetched from the origin and uploaded" "[0, \"fetched\"]" "[$RC, \"$(json "j['source']" <<<"$OUT" 2>/dev/null)\"]"

section "1. two ranges delayed 4 s, hedge_after: 200ms"
vm hedged 'hedge: true' 'hedge_after: 200ms' 'hedge_max_fraction: 100%'
proxy_reset "$P_URL"
proxy_mode "$P_URL" "delay seconds=4 op=GetObject ifmatch=1 after=1 count=2"
read_back "hedged"
proxy_mode "$P_URL" ok
SENT=$(stat_of bucket hedges_sent)
WON=$(stat_of bucket hedges_won)
expect_cmp "hedged: hedges were sent" "$SENT" -ge 2
expect_cmp "hedged: hedges won" "$WON" -ge 2
expect_cmp "hedged: no more hedges won than sent" "$WON" -le "$SENT"
# A hedge counts as sent when it starts; one whose first request answers before the hedge's request leaves is
# stopped before it reaches the proxy (a loaded machine: ranges over 200 ms). One that won surely got there.
TWICE=$(asked_twice)
expect_cmp "hedged: no range asked twice but by a hedge (proxy)" "$TWICE" -le "$SENT"
expect_cmp "hedged: every hedge that won asked its range a second time (proxy)" "$TWICE" -ge "$WON"
expect_eq "hedged: GETs at the proxy = 8 ranges + the ranges asked twice" $((8 + TWICE)) "$(gets)"
METRICS=$(dv cache stats --format prometheus)
expect_match "hedged: the metric of hedges sent" "datavo_tier_hedges_sent_total[{][^}]*\"bucket\"[^}]*[}] $SENT" "$METRICS"
expect_match "hedged: the metric of hedges won" "datavo_tier_hedges_won_total[{][^}]*\"bucket\"[^}]*[}] $WON" "$METRICS"

section "2. the budget: every GET delayed 1 s, hedge_max_fraction: 5%"
vm budget 'hedge: true' 'hedge_after: 200ms' 'hedge_max_fraction: 5%'
proxy_reset "$P_URL"
proxy_mode "$P_URL" "delay seconds=1 op=GetObject"
read_back "budget"
proxy_mode "$P_URL" ok
expect_stat bucket hedges_sent 1
expect_eq "budget: 8 ranges and one hedge at the proxy" 9 "$(gets)"

section "3. hedge: false"
vm off 'hedge: false' 'hedge_after: 200ms'
proxy_reset "$P_URL"
proxy_mode "$P_URL" "delay seconds=1 op=GetObject every=2"
read_back "off"
proxy_mode "$P_URL" ok
expect_stat bucket hedges_sent 0
expect_eq "off: one GET per range" 8 "$(gets)"
expect_eq "off: no range asked twice" 0 "$(asked_twice)"

section "4. hedge: true alone (p95, 5%: 1 s before 16 GETs were seen)"
vm defaults 'hedge: true'
proxy_reset "$P_URL"
proxy_mode "$P_URL" "delay seconds=4 op=GetObject ifmatch=1 count=1"
read_back "defaults"
proxy_mode "$P_URL" ok
expect_stat bucket hedges_sent ">=1"
expect_stat bucket hedges_won ">=1"

section "5. no hedge field: on"
vm unset
proxy_reset "$P_URL"
proxy_mode "$P_URL" "delay seconds=4 op=GetObject ifmatch=1 count=1"
read_back "unset"
proxy_mode "$P_URL" ok
expect_stat bucket hedges_sent ">=1"
expect_stat bucket hedges_won ">=1"
expect_eq "unset: GETs at the proxy = 8 ranges + the ranges asked twice" $((8 + $(asked_twice))) "$(gets)"

section "6. slow but flowing: 2 MB/s per GET, hedge_after: 1s"
vm flowing 'hedge_after: 1s' 'hedge_max_fraction: 100%'
proxy_reset "$P_URL"
proxy_mode "$P_URL" "throttle rate=2000000 op=GetObject"
read_back "flowing"
proxy_mode "$P_URL" ok
expect_stat bucket hedges_sent 0
expect_eq "flowing: one GET per range" 8 "$(gets)"
expect_eq "flowing: no range asked twice" 0 "$(asked_twice)"

echo "# suite took $(($(date +%s) - STARTED)) s"
finish
