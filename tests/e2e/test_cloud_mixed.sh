#!/usr/bin/env bash
# A mixed hierarchy, as the spec allows ("you can in principle mix providers in one config"): NVMe (a folder tier),
# then an Azure Blob tier (Azurite), then a GCS tier (the firebase-tools Storage emulator; single_flight: false
# there, since it ignores preconditions, and part_size 64MiB so that every upload is one multipart request, since it
# cannot take chunked resumable uploads). Each "VM" is a process with a folder tier of its own.
#   1. a full miss (`datavo warm` from `datavo serve`) is fetched from the origin once per shard and installed into
#      all three tiers: the folder, one blob per shard in Azure, one object per shard in GCS, with the right bytes;
#   2. a hit only in the slowest tier (GCS: warmed there by a VM whose config has just folder + GCS, or uploaded
#      there with @google-cloud/storage) is materialized, promoted into the folder and uploaded into Azure, with the
#      right bytes and 0 origin requests; GCS is not written again;
#   3. a hit in the Azure tier is promoted into the folder and not re-uploaded to Azure (no create in Azurite's log);
#      GCS is not written;
#   4. offline (DATAVO_OFFLINE=1), a fresh VM's `read --stream` streams every shard from Azure, and one with folder +
#      GCS from GCS, through the objects' own chunk digests: no origin request, nothing written.
# Where a shard was found is read from Azurite's access log (a GET 404 is a miss) and GCS's generations: warm's report
# counts a promoted shard under the tier it was promoted into (docs/cli.md), not under the remote tier that had it.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
export DATAVO_EMULATOR_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/azure_gcs_lib.sh"
E2E_CMD_TIMEOUT=120
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
SUITE_STARTED=$(date +%s)

cloud_up azurite gcs
CONTAINER=mixed
BUCKET=datavo-e2e-mixed
aztool create $CONTAINER || die "create container $CONTAINER" ""
export AZURE_STORAGE_CONNECTION_STRING="$AZURITE_CONNECTION_STRING"  # SharedKey for the Azure tier
ENTRY_ERE='^[^/]+/[0-9a-f]{64}\.tar$'

AZ_TIER=$(azure_tier_yaml az $CONTAINER)
GCS_TIER=$(gcs_tier_yaml gcs $BUCKET "single_flight: false" "part_size: 64MiB")
# mixed VM: folder nvme, then Azure, then GCS; gcs_only VM: folder nvme, then GCS.
mixed() {
  printf 'tiers:\n  - name: nvme\n    path: %s\n%s\n%s\n' "$E2E_TMP/$1/nvme" "$AZ_TIER" "$GCS_TIER" >"$E2E_TMP/$1.yaml"
  E2E_CONFIG=$E2E_TMP/$1.yaml
}
gcs_only() {
  printf 'tiers:\n  - name: nvme\n    path: %s\n%s\n' "$E2E_TMP/$1/nvme" "$GCS_TIER" >"$E2E_TMP/$1.yaml"
  E2E_CONFIG=$E2E_TMP/$1.yaml
}
az_entries() { aztool list $CONTAINER | grep -E "$ENTRY_ERE" | sort; }
# The GCS emulator is read with its JSON API directly (curl: no auth under the emulator, and no Node start-up per
# question); gcs_listing: "name generation datavo-sha256" of every object, one a line.
gcs_listing() {
  curl -s -f --max-time 20 "$STORAGE_EMULATOR_HOST/storage/v1/b/$BUCKET/o" |
    json "'\\n'.join('%s %s %s' % (o['name'], o['generation'], (o.get('metadata') or {}).get('datavo-sha256')) for o in j.get('items', []))" |
    sort
}
gcs_entries() { gcs_listing | cut -d' ' -f1 | grep -E "$ENTRY_ERE"; }
gcs_generations() { gcs_listing | cut -d' ' -f1,2; }
gcs_sha_of() {
  curl -s -f --max-time 20 "$STORAGE_EMULATOR_HOST/storage/v1/b/$BUCKET/o/${1//\//%2F}?alt=media" | sha256sum | cut -c1-64
}
# az_gets STATUS_ERE NAME...: GETs of those entries in Azurite's log answered STATUS_ERE (a lookup is one GET: its
# 404 is the miss; warm's report attributes a promoted shard to the tier it landed in, not the one that had it).
az_gets() {
  local status=$1 name total=0
  shift
  for name in "$@"; do
    total=$((total + $(azurite_count GET "$CONTAINER/${name//./\\.}(\?[^ ]*)?" "$status")))
  done
  echo $total
}
az_creates() { azurite_count PUT "$CONTAINER/[^/ ]+/[0-9a-f]{64}\.tar(\?comp=blocklist[^ ]*)?" "${1:-[0-9]+}"; }
# nvme_entries VM: the entries of the VM's folder tier, "<instance>/<hash>.tar" one a line.
nvme_entries() { (cd "$E2E_TMP/$1/nvme" 2>/dev/null && find . -mindepth 2 -maxdepth 2 -name '*.tar' | sed 's|^\./||' | sort); }
tier_field() { json "[t['$2'] for t in j['tiers'] if t['tier'] == '$1'][0]" <<<"$3"; }
uploads_of() { json "[j['uploads'][k] for k in ('uploaded', 'already_present', 'failed', 'pending')]" <<<"$1"; }
# same_bytes VM NAME...: each entry's folder copy (on VM), Azure blob and GCS object have the SHA-256 that datavo
# recorded in GCS's metadata (prints the problems, nothing when they all agree).
same_bytes() {
  local vm=$1 name want local_sha az_sha gcs_sha listing
  shift
  listing=$(gcs_listing)
  for name in "$@"; do
    want=$(awk -v n="$name" '$1 == n {print $3}' <<<"$listing")
    local_sha=$(sha256_of "$E2E_TMP/$vm/nvme/$name")
    aztool get $CONTAINER "$name" "$E2E_TMP/az.bin" >/dev/null 2>&1 && az_sha=$(sha256_of "$E2E_TMP/az.bin") || az_sha=none
    gcs_sha=$(gcs_sha_of "$name")
    [ -n "$want" ] && [ "$want" = "$local_sha" ] && [ "$want" = "$az_sha" ] && [ "$want" = "$gcs_sha" ] ||
      echo "$name: recorded $want, folder $local_sha, Azure $az_sha, GCS $gcs_sha"
  done
}

# --- 0. cache fetch of an object that is only in GCS (uploaded there by @google-cloud/storage) ------------------
# (before DATAVO_SERVER is set: cache fetch then uses the instance "local")

www="$E2E_TMP/www"
mkdir -p "$www"
sha_one=$(make_shard "$www/one.bin" 300000)
start_server "$www"
h_one=$(hash_for one)
gcstool put $BUCKET "local/$h_one.tar" "$www/one.bin" --meta "datavo-sha256=$sha_one" --meta datavo-size=300000 \
  >/dev/null 2>&1 || die "put an object into GCS with gcs_tool.js" ""
mixed fetch
run --json cache fetch "$h_one" --url "$SERVER_URL/one.bin" --sha256 "$sha_one"
expect_eq "cache fetch, only in GCS: exit 0, promoted into the folder tier" "[0, \"promoted\", \"nvme\"]" \
  "[$RC, \"$(json "j['source']" <<<"$OUT")\", \"$(json "j['tier']" <<<"$OUT")\"]"
expect_eq "cache fetch, only in GCS: no request to the origin URL" 0 "$(server_requests /one.bin)"
expect_eq "cache fetch, only in GCS: the folder copy has the right bytes" "$sha_one" \
  "$(sha256_of "$E2E_TMP/fetch/nvme/local/$h_one.tar")"
expect_eq "cache fetch, only in GCS: uploaded into Azure once (uploaded, already_present, failed, pending)" \
  "[1, 0, 0, 0]" "$(uploads_of "$OUT")"
props=$(aztool get $CONTAINER "local/$h_one.tar" "$E2E_TMP/one.az" 2>/dev/null)
expect_eq "cache fetch, only in GCS: Azure now holds it, with datavo's metadata" "[300000, \"$sha_one\"]" \
  "$(json "[j['size'], j['metadata'].get('datavo_sha256')]" <<<"$props")"
expect_eq "cache fetch, only in GCS: Azure's copy has the right bytes" "$sha_one" "$(sha256_of "$E2E_TMP/one.az")"
expect_eq "cache fetch, only in GCS: the folder tier counts one promotion, no install" "1 0" \
  "$(stat_of nvme promotions) $(stat_of nvme installs)"
aztool delete $CONTAINER "local/$h_one.tar" >/dev/null
curl -s -f --max-time 20 -X DELETE "$STORAGE_EMULATOR_HOST/storage/v1/b/$BUCKET/o/local%2F$h_one.tar" ||
  die "delete local/$h_one.tar from GCS" ""

# --- 1. a full miss: fetched once, installed into all three ----------------------------------------------------

pack_dataset full 24 4 20000
D_FULL=$DS
SHARDS_FULL=$SHARDS
pack_dataset slow 12 4 20000
D_SLOW=$DS
SHARDS_SLOW=$SHARDS
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
mixed vm1
creates_before=$(az_creates)
before=$(origin_requests shard)
run --json warm "$D_FULL" --key bin --key txt
expect_eq "full miss: warm exit 0, every shard, none failed" "[0, $SHARDS_FULL, 0]" \
  "[$RC, $(json "j['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "full miss: each shard fetched from the origin once (/v1/metrics, warm's report)" \
  "$SHARDS_FULL $SHARDS_FULL" "$(($(origin_requests shard) - before)) $(json "j['origin']['shards']" <<<"$OUT")"
expect_eq "full miss: no hit, no promotion in the folder tier" "[0, 0]" \
  "[$(tier_field nvme hits "$OUT"), $(tier_field nvme promoted_into "$OUT")]"
expect_eq "full miss: two uploads per shard, Azure and GCS (uploaded, already_present, failed, pending)" \
  "[$((2 * SHARDS_FULL)), 0, 0, 0]" "$(uploads_of "$OUT")"
expect_eq "full miss: the folder tier holds every shard" "$SHARDS_FULL" "$(tier_field nvme cached "$OUT")"
expect_eq "full miss: the folder tier counts the installs" "$SHARDS_FULL 0" \
  "$(stat_of nvme installs) $(stat_of nvme promotions)"
full_entries=$(nvme_entries vm1)
expect_eq "full miss: $SHARDS_FULL entries in the folder" "$SHARDS_FULL" "$(grep -c . <<<"$full_entries")"
expect_eq "full miss: Azure holds the same entries" "$full_entries" "$(az_entries)"
expect_eq "full miss: GCS holds the same entries" "$full_entries" "$(gcs_entries)"
# Two lookups per shard: the walk's, and one more once the lease is taken (src/core/hierarchy.cpp: a holder may have
# uploaded between this VM's lookup and its lease).
expect_eq "full miss: Azure was asked for each shard and missed (2 GET 404 each: before and after the lease)" \
  "$((2 * SHARDS_FULL))" "$(az_gets 404 $full_entries)"
expect_eq "full miss: one lease per shard taken in Azure (the first tier with single_flight: true)" "$SHARDS_FULL" \
  "$(azurite_count PUT "$CONTAINER/[^/ ]+/\.leases/[0-9a-f]{64}(\?[^ ]*)?" 201)"
expect_eq "full miss: one Azure create per shard, none refused" "$SHARDS_FULL 0" \
  "$(($(az_creates 201) - creates_before)) $(az_creates '(409|412)')"
expect_eq "full miss: no lease left in Azure (the lease tier), none in GCS (single_flight: false)" "0 0" \
  "$(aztool list $CONTAINER | grep -c '\.leases/') $(gcs_listing | grep -c '\.leases/')"
expect_eq "full miss: the bytes agree in all three tiers (first and last shard)" "" \
  "$(same_bytes vm1 "$(head -1 <<<"$full_entries")" "$(tail -1 <<<"$full_entries")")"

# --- 2. a hit only in the slowest tier (GCS) -------------------------------------------------------------------

gcs_only vmx
run --json warm "$D_SLOW" --key bin --key txt
expect_eq "setup: a folder+GCS VM warmed the second dataset into GCS only" "[0, $SHARDS_SLOW, [$SHARDS_SLOW, 0, 0, 0]]" \
  "[$RC, $(json "j['shards']" <<<"$OUT"), $(uploads_of "$OUT")]"
slow_entries=$(nvme_entries vmx)
az_before=$(az_entries)
expect_eq "setup: Azure does not hold the second dataset" "" "$(comm -12 <(echo "$slow_entries") <(echo "$az_before"))"
generations=$(gcs_generations)
expect_eq "setup: GCS holds both datasets (the generations compared below)" "$((SHARDS_FULL + SHARDS_SLOW))" \
  "$(grep -c . <<<"$generations")"
creates_before=$(az_creates)

mixed vm2
before="$(origin_requests shard) $(origin_requests ticket)"
run --json warm "$D_SLOW" --key bin --key txt
expect_eq "GCS-only hit: warm exit 0, every shard, none failed" "[0, $SHARDS_SLOW, 0]" \
  "[$RC, $(json "j['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "GCS-only hit: 0 shard and 0 ticket requests to the origin" "$before" \
  "$(origin_requests shard) $(origin_requests ticket)"
expect_eq "GCS-only hit: Azure missed each shard (one GET 404 each, none served)" "$SHARDS_SLOW 0" \
  "$(az_gets 404 $slow_entries) $(az_gets '20[06]' $slow_entries)"
expect_eq "GCS-only hit: promoted into the folder" "$SHARDS_SLOW" "$(tier_field nvme promoted_into "$OUT")"
expect_eq "GCS-only hit: promoted into Azure, one upload per shard (uploaded, already_present, failed, pending)" \
  "[$SHARDS_SLOW, 0, 0, 0]" "$(uploads_of "$OUT")"
expect_eq "GCS-only hit: the folder tier counts promotions, no install" "$SHARDS_SLOW 0" \
  "$(stat_of nvme promotions) $(stat_of nvme installs)"
expect_eq "GCS-only hit: the folder holds the same entries as the VM that warmed GCS" "$slow_entries" "$(nvme_entries vm2)"
expect_eq "GCS-only hit: Azure now holds them too" "$slow_entries" \
  "$(comm -12 <(echo "$slow_entries") <(az_entries))"
expect_eq "GCS-only hit: Azure got one create per shard" "$SHARDS_SLOW" "$(($(az_creates) - creates_before))"
expect_eq "GCS-only hit: GCS was not written (every generation as before)" "$generations" "$(gcs_generations)"
expect_eq "GCS-only hit: the bytes agree in all three tiers (first and last shard)" "" \
  "$(same_bytes vm2 "$(head -1 <<<"$slow_entries")" "$(tail -1 <<<"$slow_entries")")"

# --- 3. a hit in the Azure tier --------------------------------------------------------------------------------

mixed vm3
creates_before=$(az_creates)
gets_before=$(az_gets '20[06]' $full_entries)
generations=$(gcs_generations)
before="$(origin_requests shard) $(origin_requests ticket)"
run --json warm "$D_FULL" --key bin --key txt
expect_eq "Azure hit: warm exit 0, every shard, none failed" "[0, $SHARDS_FULL, 0]" \
  "[$RC, $(json "j['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_eq "Azure hit: 0 shard and 0 ticket requests to the origin" "$before" \
  "$(origin_requests shard) $(origin_requests ticket)"
expect_eq "Azure hit: Azure served each shard (one more GET 200/206 each, no more 404)" "$SHARDS_FULL $((2 * SHARDS_FULL))" \
  "$(($(az_gets '20[06]' $full_entries) - gets_before)) $(az_gets 404 $full_entries)"
expect_eq "Azure hit: promoted into the folder" "$SHARDS_FULL" "$(tier_field nvme promoted_into "$OUT")"
expect_eq "Azure hit: nothing uploaded (uploaded, already_present, failed, pending)" "[0, 0, 0, 0]" \
  "$(uploads_of "$OUT")"
expect_eq "Azure hit: no create sent to Azure" "$creates_before" "$(az_creates)"
expect_eq "Azure hit: GCS not written" "$generations" "$(gcs_generations)"
expect_eq "Azure hit: the folder tier counts promotions, no install" "$SHARDS_FULL 0" \
  "$(stat_of nvme promotions) $(stat_of nvme installs)"
expect_eq "Azure hit: the folder holds every shard" "$full_entries" "$(nvme_entries vm3)"
expect_eq "Azure hit: the bytes agree (first and last shard)" "" \
  "$(same_bytes vm3 "$(head -1 <<<"$full_entries")" "$(tail -1 <<<"$full_entries")")"

# --- 4. streamed reads from each bucket, offline ------------------------------------------------------------------

# A fresh VM's `read --stream` with DATAVO_OFFLINE=1 (the manifest from the client's cache): each shard is streamed
# from the fastest bucket that holds it through the chunk digests in its object's metadata (datavo-chunks), with no
# request to the origin and no local copy (docs/hierarchy.md, "Streamed reads").
streamed_offline() {  # LABEL TIER: the VM's config is already made
  local before
  before=$(origin_requests api)
  DATAVO_OFFLINE=1 run --json read "$D_FULL" --key bin --key txt --stream
  expect_eq "$1: exit 0, every shard streamed, each a hit of $2" "0 $SHARDS_FULL $SHARDS_FULL" \
    "$RC $(json "j['streamed']['shards']" <<<"$OUT" 2>/dev/null) $(tier_field "$2" hits "$OUT" 2>/dev/null)"
  [ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
  expect_eq "$1: no request to the origin, no shard written" "$before " "$(origin_requests api) $(nvme_entries "$3")"
}
mixed vm4
streamed_offline "streamed from Azure, offline" az vm4
gcs_only vm5
streamed_offline "streamed from GCS, offline" gcs vm5

echo "# suite took $(($(date +%s) - SUITE_STARTED)) s"
finish
