#!/usr/bin/env bash
# The streamed read mode from a remote tier (`datavo read --stream`, issue 19; docs/hierarchy.md "Streamed reads"):
# a shard that the region's bucket (moto) holds and no folder tier does is read from the bucket through the chunk
# digests recorded in its object's metadata (datavo-chunks; docs/protocol.md "Where a cloud tier's chunk list
# lives"), else those of the origin's ticket, and no local copy is written. Against a real `datavo serve`
# (--chunk-size 256 KiB), with tests/support/fault_proxy.py in front of it for the old-server case:
#   1. a VM warms the dataset into its folder tier and the bucket; its cached read is the reference; every object
#      carries datavo-chunks (chunks of 64 KiB for these shards of about 1.4 MiB);
#   2. a fresh VM's streamed read yields the same samples, counts a hit of the bucket per shard, makes no ticket and
#      no shard request to the origin, and writes no .tar and no staging file;
#   3. an object in the bucket with a flipped byte in its chunk 13 (inside the origin's chunk 3): the read stops
#      taking the bucket's bytes at chunk 13, deletes the object (as a cached read does with a corrupt object)
#      saying so, and goes on with the origin's download from the origin's last chunk boundary before it (one
#      ranged shard request from byte 3 * 256 KiB; the bytes already verified are not handed out twice); the
#      samples are still the reference's and nothing is written;
#   4. a bucket that resets every GET mid-body (tests/support/cloud_proxy.py): after the transport's bounded
#      attempts the read from the bucket fails, the tier is degraded (a WARNING; after 3 failures its breaker opens
#      and it is asked no more), and the origin's download goes on from the last verified chunk; the samples are the
#      reference's and nothing is written;
#      and with the bucket down (every request dropped), its lookups fail 3 times and then it is not asked;
#   5. offline (DATAVO_OFFLINE=1, the manifest from the client's cache): the VM of case 2 streams every shard from
#      the bucket with no request to the origin at all;
#   6. objects without datavo-chunks (as an older Datavo wrote them): streamed through the origin's ticket's
#      digests, a ticket per shard; and with an origin whose tickets carry no chunk digests (an old server) the
#      bucket's bytes cannot be checked chunk by chunk, so the shards are read in the cached mode (promoted into
#      the folder tier), with a WARNING that says why.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120
CHUNK=262144
WINDOW=1MiB
KEYS=(--key bin --key txt)

s3_up moto
make_bucket "$MOTO_S3_ENDPOINT" region
pack_dataset 96 24 60000 # 4 shards of about 1.4 MiB: 6 chunks each, more than the window
start_origin "$E2E_TMP/store" --chunk-size "$CHUNK"
. "$(dirname "$0")/fault_proxy_lib.sh"
start_fault_proxy

# vm NAME: a VM's config (its own folder tier, the region's bucket with synchronous uploads), made the config.
vm() {
  write_config "$E2E_TMP/$1.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/$1" \
    "$(s3_tier_yaml region region "$MOTO_S3_ENDPOINT" 'upload: sync')")
}
# written_files NAME: every shard or staging file under the VM's folder tier, with its size.
written_files() {
  [ -d "$E2E_TMP/$1" ] && find "$E2E_TMP/$1" -type f \( -name '*.tar' -o -path '*/.staging/*' \) -printf '%P %s\n' | sort
  return 0
}
read_stream() { run --json read "$DS" "${KEYS[@]}" --digest --stream --stream-window "$WINDOW" "$@"; }
report() { json "$1" <<<"$OUT" 2>/dev/null; }
region_hits() { report '[t["hits"] for t in j["tiers"] if t["tier"] == "region"][0]'; }

# --- 1. one VM warms the dataset into the bucket ------------------------------------------------------------------

vm vm1
run --json warm "$DS" "${KEYS[@]}"
[ "$RC" -eq 0 ] || die "warm" "rc $RC: $(e2e_abbrev "$ERR")"
objects=$(s3tool "$MOTO_S3_ENDPOINT" ls region | json "sorted(o['key'] for o in j if o['key'].endswith('.tar'))")
expect_eq "warm: the bucket holds every shard" "$SHARDS" "$(json 'len(j)' <<<"$objects")"
expect_eq "warm: every object carries its chunk digests, in chunks of 64 KiB" "$SHARDS" \
  "$(for o in $(json '" ".join(j)' <<<"$objects"); do s3tool "$MOTO_S3_ENDPOINT" head region "$o"; done |
    grep -c '"datavo-chunks": "65536 ')"
run --json read "$DS" "${KEYS[@]}" --digest
expect_eq "reference: the cached read exits 0, from the folder tier" "0 $SHARDS" "$RC $(report 'j["tiers"][0]["hits"]')"
REF_SUM=$(report 'j["samples_sha256"]')
SAMPLES=$(report 'j["samples"]')

# --- 2. a fresh VM streams from the bucket ----------------------------------------------------------------------------

vm vm2
shards0=$(origin_requests shard)
read_stream
expect_eq "streamed from the bucket: exits 0, the reference's $SAMPLES samples and checksum" "0 $SAMPLES $REF_SUM" \
  "$RC $(report '"%d %s" % (j["samples"], j["samples_sha256"])')"
[ "$RC" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$ERR")"
expect_eq "streamed from the bucket: every shard streamed, a hit of the bucket, none fetched from the origin" \
  "$SHARDS $SHARDS 0" "$(report '"%d" % j["streamed"]["shards"]') $(region_hits) $(report 'j["origin"]["shards"]')"
expect_eq "streamed from the bucket: no ticket (the objects' own chunk digests) and no shard request to the origin" \
  "0 0" "$(report 'j["requests"]["ticket"]') $(($(origin_requests shard) - shards0))"
expect_eq "streamed from the bucket: no .tar and no staging file in the folder tier" "" "$(written_files vm2)"
expect_cmp "streamed from the bucket: the window held at most $WINDOW" \
  "$(report 'j["streamed"]["max_buffered_bytes"]')" -le $((1 << 20))
expect_cmp "streamed from the bucket: a shard is larger than the window" \
  "$(s3tool "$MOTO_S3_ENDPOINT" ls region | json "max(o['size'] for o in j)")" -gt $((1 << 20))

# --- 3. a flipped byte in chunk 13 of one object: the origin takes over from its chunk 3 -------------------------------

bad=$(json 'j[0]' <<<"$objects")
s3tool "$MOTO_S3_ENDPOINT" get region "$bad" "$E2E_TMP/bad.tar" || die "get $bad" "s3_tool.py get failed"
cp "$E2E_TMP/bad.tar" "$E2E_TMP/good.tar"
# One k=v argument per metadata field (datavo-chunks holds a space).
mapfile -t meta < <(s3tool "$MOTO_S3_ENDPOINT" head region "$bad" | json '"\n".join("%s=%s" % kv for kv in j["metadata"].items())')
python3 - "$E2E_TMP/bad.tar" $((3 * CHUNK + 70000)) <<'PY'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(offset)
    byte = f.read(1)
    f.seek(offset)
    f.write(bytes([byte[0] ^ 0x01]))
PY
s3tool "$MOTO_S3_ENDPOINT" put region "$bad" "$E2E_TMP/bad.tar" "${meta[@]}" || die "put $bad" "s3_tool.py put failed"
bad_size=$(file_size "$E2E_TMP/bad.tar")

vm vm3
shards0=$(origin_requests shard)
bytes0=$(origin_bytes)
read_stream
expect_eq "flipped byte in the bucket: exits 0, still the reference's samples and checksum" "0 $SAMPLES $REF_SUM" \
  "$RC $(report '"%d %s" % (j["samples"], j["samples_sha256"])')"
expect_match "flipped byte in the bucket: the WARNING names the tier, the object's chunk 13, and the object is deleted" \
  "WARNING: tier 'region' \\(s3\\): .*chunk 13 \\(byte offset $((13 * 65536)).* but the object's chunk list gives .*; deleted the object, reading from the next tier" \
  "$ERR"
expect_eq "flipped byte in the bucket: the object is gone from the bucket (as a cached read would delete it)" 3 \
  "$(s3tool "$MOTO_S3_ENDPOINT" head region "$bad" >/dev/null 2>&1; echo $?)"
expect_eq "flipped byte in the bucket: one shard request to the origin, the other shards hits of the bucket" \
  "1 $((SHARDS - 1))" "$(($(origin_requests shard) - shards0)) $(region_hits)"
bytes1=$(origin_bytes)
expect_eq "flipped byte in the bucket: the origin sent the shard from its chunk 3 on (a ranged GET)" \
  $((bad_size - 3 * CHUNK)) $((bytes1 - bytes0))
expect_eq "flipped byte in the bucket: no .tar and no staging file in the folder tier" "" "$(written_files vm3)"

s3tool "$MOTO_S3_ENDPOINT" put region "$bad" "$E2E_TMP/good.tar" "${meta[@]}" || die "put $bad" "s3_tool.py put failed"

# --- 4. a bucket that resets every GET mid-body: the origin takes over --------------------------------------------------

start_proxy MOTO "$MOTO_S3_ENDPOINT"
write_config "$E2E_TMP/vm5.yaml" < <(printf 'tiers:\n  - name: local\n    path: %s\n%s\n' "$E2E_TMP/vm5" \
  "$(s3_tier_yaml region region "$MOTO_URL")")
proxy_mode "$MOTO_URL" "reset op=GetObject"
shards0=$(origin_requests shard)
started=$(date +%s)
read_stream
expect_eq "bucket resets every GET: exits 0, still the reference's samples and checksum" "0 $SAMPLES $REF_SUM" \
  "$RC $(report '"%d %s" % (j["samples"], j["samples_sha256"])')"
[ "$RC" -eq 0 ] || echo "# stderr: $(grep -v WARNING <<<"$ERR" | tail -c 1500)"
expect_eq "bucket resets every GET: the tier degraded 3 times, then its breaker opened (the 4th shard asked it nothing)" \
  "3 1" "$(grep -c "WARNING: tier 'region' (s3): streamed read failed, skipping it: " <<<"$ERR") $(grep -c "WARNING: tier 'region' (s3).*failed 3 times in a row" <<<"$ERR")"
expect_eq "bucket resets every GET: the bucket's GETs were reset, each shard came from the origin, no hit of the bucket" \
  "true $SHARDS 0" "$(proxy_json "$MOTO_URL" "j['faults'] > 0") $(($(origin_requests shard) - shards0)) $(region_hits)"
expect_eq "bucket resets every GET: no .tar and no staging file in the folder tier" "" "$(written_files vm5)"
echo "# a streamed read through a bucket that resets every GET: $(($(date +%s) - started)) s"

# 4b. the bucket down (every request dropped): its lookups fail 3 times, then its breaker opens and it is not asked
rm -rf "$E2E_TMP/vm5"
proxy_mode "$MOTO_URL" drop
proxy_reset "$MOTO_URL"
shards0=$(origin_requests shard)
read_stream
expect_eq "bucket down: exits 0, still the reference's samples and checksum" "0 $SAMPLES $REF_SUM" \
  "$RC $(report '"%d %s" % (j["samples"], j["samples_sha256"])')"
expect_eq "bucket down: 3 lookups degrade the tier, then its breaker opens; every shard streamed from the origin" \
  "3 1 $SHARDS $SHARDS" "$(grep -c "WARNING: tier 'region' (s3): lookup failed, skipping it: " <<<"$ERR") $(grep -c "WARNING: tier 'region' (s3).*failed 3 times in a row" <<<"$ERR") $(report 'j["streamed"]["shards"]') $(($(origin_requests shard) - shards0))"
expect_eq "bucket down: no .tar and no staging file in the folder tier" "" "$(written_files vm5)"
proxy_mode "$MOTO_URL" ok

# --- 5. offline: the objects' chunk digests need no origin ---------------------------------------------------------

requests0=$(origin_requests api)
E2E_CONFIG=$E2E_TMP/vm2.yaml DATAVO_OFFLINE=1 read_stream
expect_eq "offline: exits 0, the reference's checksum, every shard streamed from the bucket" "0 $REF_SUM $SHARDS $SHARDS" \
  "$RC $(report 'j["samples_sha256"]') $(report 'j["streamed"]["shards"]') $(region_hits)"
[ "$RC" -eq 0 ] || echo "# stderr: $(grep -v WARNING <<<"$ERR" | tail -c 1500)"
expect_eq "offline: no request to the origin at all, nothing written" "0 " \
  "$(($(origin_requests api) - requests0)) $(written_files vm2)"

# --- 6. objects without chunk digests: the origin's ticket's; an old server: the cached mode ----------------------------

for o in $(json '" ".join(j)' <<<"$objects"); do
  s3tool "$MOTO_S3_ENDPOINT" get region "$o" "$E2E_TMP/plain.tar" || die "get $o" "s3_tool.py get failed"
  plain_meta=$(s3tool "$MOTO_S3_ENDPOINT" head region "$o" |
    json '" ".join("%s=%s" % kv for kv in j["metadata"].items() if kv[0] != "datavo-chunks")')
  # shellcheck disable=SC2086  # one argument per metadata field
  s3tool "$MOTO_S3_ENDPOINT" put region "$o" "$E2E_TMP/plain.tar" $plain_meta || die "put $o" "s3_tool.py put failed"
done
vm vm6
tickets0=$(origin_requests ticket)
shards0=$(origin_requests shard)
read_stream
expect_eq "objects without chunk digests: exits 0, the reference's checksum, every shard streamed from the bucket" \
  "0 $REF_SUM $SHARDS $SHARDS" \
  "$RC $(report 'j["samples_sha256"]') $(report 'j["streamed"]["shards"]') $(region_hits)"
expect_eq "objects without chunk digests: a ticket per shard (for its digests), no shard request to the origin" \
  "$SHARDS 0" "$(($(origin_requests ticket) - tickets0)) $(($(origin_requests shard) - shards0))"

set_mode "ok ticket=strip"
vm vm4
DATAVO_SERVER=$PROXY_URL read_stream
expect_eq "old server: exits 0, the reference's checksum" "0 $REF_SUM" "$RC $(report 'j["samples_sha256"]')"
[ "$RC" -eq 0 ] || echo "# stderr: $(grep -v WARNING <<<"$ERR" | tail -c 1500)"
expect_match "old server: a WARNING says why the bucket's shards are not streamed" \
  "tier 'region' holds it, but without chunk digests to check its bytes by \\(the origin's ticket carries no chunk digests\\) it cannot be streamed: reading it in the cached mode, through a local copy" \
  "$ERR"
expect_eq "old server: no shard streamed, every one promoted into the folder tier" "0 $SHARDS" \
  "$(report 'j["streamed"]["shards"]') $(written_files vm4 | grep -c '\.tar ')"

finish
