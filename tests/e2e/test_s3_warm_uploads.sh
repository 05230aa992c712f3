#!/usr/bin/env bash
# `datavo warm` against a region bucket that fails (issue 16: upload failures that are reported, backfill), on moto
# behind tests/support/cloud_proxy.py:
#   1. the bucket down for the whole warm (every request dropped): warm exits 1, the bucket's row counts every shard
#      as failed or skipped with the reasons, in the JSON and the text; --allow-partial makes it a WARNING, exit 0;
#   2. the bucket back: one warm on the same VM uploads every missing shard from the local copy, with 0 origin
#      shard requests, and the bucket then holds every shard;
#   3. the bucket dying while a warm runs (the proxy drops every request after the first few): what reached the
#      bucket is counted as uploaded, the rest as failed or skipped; every shard is accounted for; exit 1;
#   4. `cache put` of a hash cached locally (the bucket added since) uploads it.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=180
SUITE_STARTED=$(date +%s)

s3_up moto
start_proxy MOTO "$MOTO_S3_ENDPOINT"
for bucket in down midway put; do make_bucket "$MOTO_S3_ENDPOINT" "$bucket"; done
pack_dataset 48 6 20000
start_origin "$E2E_TMP/store"

# vm NAME BUCKET: a VM's config (its folder tier, the bucket through the proxy), made the config.
vm() {
  write_config "$E2E_TMP/$1.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/$1" \
    "$(s3_tier_yaml region "$2" "$MOTO_URL")")
}
entries_in() { s3tool "$MOTO_S3_ENDPOINT" ls "$1" | json "len([o for o in j if o['key'].endswith('.tar')])"; }
# region_row EXPR: EXPR of the bucket's row of the warm's JSON (t: the row, u: its uploads).
region_row() { json "[(lambda t, u: $1)(t, t['uploads']) for t in j['tiers'] if t['tier'] == 'region'][0]" <<<"$OUT"; }

# --- 1. the bucket down for the whole warm ----------------------------------------------------------------------

vm vm1 down
proxy_mode "$MOTO_URL" drop
run --json warm "$DS" --key bin --key txt --jobs 3
expect_eq "bucket down: warm exits 1" 1 "$RC"
expect_eq "bucket down: every shard warmed locally, from the origin" "[0, $SHARDS, $SHARDS]" \
  "[$(json "j['failed']" <<<"$OUT"), $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['tiers'][0]['held']" <<<"$OUT")]"
expect_eq "bucket down: the error is remote" remote "$(json "j['error']['code']" <<<"$OUT")"
expect_eq "bucket down: the bucket holds none, and says so" "[0, 0]" "$(region_row "[t['held'], u['uploaded'] + u['already_present']]")"
expect_eq "bucket down: every shard is failed or skipped" "$SHARDS" "$(region_row "u['failed'] + u['skipped']")"
expect_cmp "bucket down: skipped once the tier is down" "$(region_row "u['skipped']")" -gt 0
expect_contains "bucket down: the reason of the skips" "tier down: " "$(region_row "u['skipped_reason']")"
expect_eq "bucket down: the uploads object is truthful" "$SHARDS" "$(json "j['uploads']['failed'] + j['uploads']['skipped']" <<<"$OUT")"
expect_contains "bucket down: the error names the tier" "datavo: ERROR: tier 'region' holds 0 of the $SHARDS shards:" "$ERR"

run warm "$DS" --key bin --key txt
expect_eq "bucket down, text: exit 1" 1 "$RC"
expect_contains "bucket down, text: the bucket's line" "tier region: 0 hits, 0 promoted into it; holds 0 of the $SHARDS shards now" "$OUT"
expect_match "bucket down, text: its uploads" "uploads: 0 uploaded, 0 already there, [0-9]+ failed, [0-9]+ skipped" "$OUT"
expect_contains "bucket down, text: the reason" "skipped: tier down: " "$OUT"

run --json warm "$DS" --key bin --key txt --allow-partial
expect_eq "bucket down, --allow-partial: exit 0, no error" "[0, false]" "[$RC, $(json "'error' in j" <<<"$OUT")]"
expect_eq "bucket down, --allow-partial: still counted" "$SHARDS" "$(region_row "u['failed'] + u['skipped']")"
expect_contains "bucket down, --allow-partial: a WARNING" "WARNING: tier 'region' holds 0 of the $SHARDS shards" "$ERR"
expect_eq "bucket down: nothing reached the bucket" 0 "$(entries_in down)"

# --- 2. the bucket back: one backfilling warm -------------------------------------------------------------------

proxy_mode "$MOTO_URL" ok
proxy_reset "$MOTO_URL"
before="$(origin_requests shard) $(origin_requests ticket)"
run --json warm "$DS" --key bin --key txt
expect_eq "backfill: exit 0" 0 "$RC"
expect_eq "backfill: 0 shard and 0 ticket requests to the origin" "$before" "$(origin_requests shard) $(origin_requests ticket)"
expect_eq "backfill: every shard uploaded from the local copy" "[$SHARDS, 0, 0, 0, $SHARDS]" \
  "$(region_row "[u['uploaded'], u['already_present'], u['failed'], u['skipped'], t['held']]")"
expect_eq "backfill: the bucket holds every shard" "$SHARDS" "$(entries_in down)"
expect_eq "backfill: one PutObject per shard" "$SHARDS" "$(proxy_op "$MOTO_URL" PutObject)"
run --json warm "$DS" --key bin --key txt
expect_eq "after the backfill: every shard already there, nothing uploaded" "[0, 0, $SHARDS]" \
  "[$RC, $(region_row "u['uploaded']"), $(region_row "u['already_present']")]"

# --- 3. the bucket dying during the warm ------------------------------------------------------------------------

vm vm2 midway
proxy_reset "$MOTO_URL"
proxy_mode "$MOTO_URL" "drop after=12"
run --json warm "$DS" --key bin --key txt --jobs 2
proxy_mode "$MOTO_URL" ok
echo "# the bucket dying mid-warm: $(json "[t['uploads'] for t in j['tiers'] if t['tier'] == 'region']" <<<"$OUT")"
expect_eq "bucket dying: warm exits 1" 1 "$RC"
expect_eq "bucket dying: every shard is accounted for" "$SHARDS" \
  "$(region_row "u['uploaded'] + u['already_present'] + u['failed'] + u['skipped']")"
expect_eq "bucket dying: what it holds is what was uploaded" "$(entries_in midway)" "$(region_row "u['uploaded']")"
expect_cmp "bucket dying: some shards missed it" "$(region_row "u['failed'] + u['skipped']")" -gt 0
run --json warm "$DS" --key bin --key txt
expect_eq "bucket dying, then back: a warm fills it" "[0, $SHARDS]" "[$RC, $(entries_in midway)]"

# --- 4. cache put of a locally cached hash ----------------------------------------------------------------------

head -c 50000 /dev/urandom >"$E2E_TMP/put.bin"
printf 'tiers:\n  - name: local\n    path: %s\n' "$E2E_TMP/vm3" >"$E2E_TMP/local-only.yaml"
timeout 30 "$DATAVO_BIN" --config "$E2E_TMP/local-only.yaml" cache put "$(hash_for put.bin)" "$E2E_TMP/put.bin" \
  >/dev/null || fail "cache put, local only" "failed"
vm vm3 put
run --json cache put "$(hash_for put.bin)" "$E2E_TMP/put.bin"
expect_eq "cache put of a cached hash: a hit, uploaded to the bucket" '[0, "hit", 1]' \
  "[$RC, \"$(json "j['source']" <<<"$OUT")\", $(json "j['uploads']['uploaded']" <<<"$OUT")]"
expect_eq "cache put of a cached hash: the bucket holds it" 1 "$(entries_in put)"
run --json cache put "$(hash_for put.bin)" "$E2E_TMP/put.bin"
expect_eq "cache put again: already there" "[0, 0, 1]" \
  "[$RC, $(json "j['uploads']['uploaded']" <<<"$OUT"), $(json "j['uploads']['already_present']" <<<"$OUT")]"

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
