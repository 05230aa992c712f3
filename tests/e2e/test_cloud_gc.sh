#!/usr/bin/env bash
# `datavo cache gc` with a local folder tier above an S3 tier (moto), issue 16's "gc says what it does with a cloud
# tier: max_age applies, and size limits are left to the bucket's lifecycle rules":
#   1. with `max_age: 20s` on the bucket, two objects uploaded 21 s before the third (20 s of margin for the young
#      one: a loaded machine took over 5 s for the commands that follow): `--dry-run` counts the two old
#      ones and deletes nothing; gc deletes exactly those two from the bucket (seen with boto3), leaves the young one
#      and the local copies (the folder tier has no max_age), and says so per tier in text and JSON;
#   2. the same bucket without max_age: gc does nothing to it and says that its lifecycle rules reclaim it;
#   3. what killed processes left: a lease whose expiry is long past and that nobody has written for a
#      lease_duration is found (--dry-run) and deleted; a live lease, a fresh check probe and another tool's object
#      under a lease-like name stay;
#   4. a bucket that cannot be reached: exit 1, naming the tier; the folder tier is still collected.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120

s3_up moto
make_bucket "$MOTO_S3_ENDPOINT" gc-bucket
config_with() {
  write_config <<YAML
tiers:
  - name: local
    path: $E2E_TMP/vm
$(s3_tier_yaml bucket gc-bucket "$MOTO_S3_ENDPOINT" 'upload: sync' "$@")
YAML
}
config_with 'max_age: 20s'
INSTANCE=$(dv --json cache info | json "j['instance']")

mkdir -p "$E2E_TMP/files"
declare -A H SHA
for name in old1 old2 young; do
  SHA[$name]=$(make_shard "$E2E_TMP/files/$name.bin" 3000)
  H[$name]=$(hash_for "$name")
done
start_server "$E2E_TMP/files"
fetch() {
  run cache fetch "${H[$1]}" --url "$SERVER_URL/$1.bin" --sha256 "${SHA[$1]}"
  [ "$RC" = 0 ] || die "cache fetch $1" "$ERR"
}
fetch old1
fetch old2
sleep 21
fetch young
# The objects in the bucket, by name (no leases: the fetches are done).
objects() { s3tool "$MOTO_S3_ENDPOINT" ls gc-bucket | json "' '.join(sorted(o['key'] for o in j))"; }
ALL=$(printf '%s\n' "$(entry_key "$INSTANCE" "${H[old1]}")" "$(entry_key "$INSTANCE" "${H[old2]}")" \
  "$(entry_key "$INSTANCE" "${H[young]}")" | sort | tr '\n' ' ' | sed 's/ $//')
expect_eq "set-up: the bucket holds the three objects" "$ALL" "$(objects)"

# --- 1. max_age on the bucket ---------------------------------------------------------------------------------

run --json cache gc --dry-run
expect_eq "gc --dry-run: exit 0" 0 "$RC"
expect_eq "gc --dry-run --json: the folder tier evicts, the bucket expires 2 objects (6000 bytes) of max_age 20 s" \
  '[["local", "folder", "evict", null, 0], ["bucket", "s3", "expire", 20, 2, 6000, 3000]]' \
  "$(json "[[j['tiers'][0][k] for k in ('tier', 'type', 'policy', 'max_age_seconds', 'expired')],
            [j['tiers'][1][k] for k in ('tier', 'type', 'policy', 'max_age_seconds', 'expired', 'freed_bytes',
                                        'used_bytes')]]" <<<"$OUT")"
expect_eq "gc --dry-run: nothing deleted" "$ALL" "$(objects)"

run cache gc
expect_eq "gc: exit 0" 0 "$RC"
expect_contains "gc (text): the bucket's line says what was deleted and why" \
  "bucket (s3): deleted 2 objects older than max_age 20s" "$OUT"
expect_contains "gc (text): and that its size is the lifecycle rules'" "left to the bucket's lifecycle rules" "$OUT"
expect_eq "gc: only the young object is left in the bucket" "$(entry_key "$INSTANCE" "${H[young]}")" "$(objects)"
expect_eq "gc: the local tier still holds the three entries (no max_age there)" 3 \
  "$(dv --json cache ls | json "len([e for e in j['entry_list'] if e['tier'] == 'local'])")"
run --json cache gc
expect_eq "gc again: nothing more to delete" "0 $(entry_key "$INSTANCE" "${H[young]}")" \
  "$(json "j['tiers'][1]['expired']" <<<"$OUT") $(objects)"

# --- 2. no max_age: the lifecycle rules ----------------------------------------------------------------------------

config_with
run cache gc
expect_eq "gc without max_age: exit 0" 0 "$RC"
expect_contains "gc without max_age (text): says the lifecycle rules reclaim the bucket" \
  "bucket (s3): no entry deleted: no max_age, and its size is left to the bucket's lifecycle rules" "$OUT"
run --json cache gc
expect_eq "gc without max_age (JSON): policy lifecycle, nothing expired" '["lifecycle", null, 0]' \
  "$(json "[j['tiers'][1][k] for k in ('policy', 'max_age_seconds', 'expired')]" <<<"$OUT")"
expect_eq "gc without max_age: the object is still there" "$(entry_key "$INSTANCE" "${H[young]}")" "$(objects)"

# --- 3. what killed processes left: leases and check probes -------------------------------------------------------

# A dead VM's lease (its expiry an hour past), a live VM's (its expiry an hour ahead), a running check's probe, and
# an object of another tool under a lease-like name. lease_duration 3s: a lease not written for 3 s is read.
config_with 'lease_duration: 3s'
now=$(date +%s)
printf 'dead-vm 4242 %s\n' $((now - 3600)) >"$E2E_TMP/dead.lease"
printf 'live-vm 77 %s\n' $((now + 3600)) >"$E2E_TMP/live.lease"
echo "datavo cache check" >"$E2E_TMP/probe"
DEAD_LEASE="$INSTANCE/.leases/${H[old1]}"
LIVE_LEASE="$INSTANCE/.leases/${H[old2]}"
s3tool "$MOTO_S3_ENDPOINT" put gc-bucket "$DEAD_LEASE" "$E2E_TMP/dead.lease" >/dev/null
s3tool "$MOTO_S3_ENDPOINT" put gc-bucket "$LIVE_LEASE" "$E2E_TMP/live.lease" >/dev/null
s3tool "$MOTO_S3_ENDPOINT" put gc-bucket ".datavo-check/other-host.1.abcdef" "$E2E_TMP/probe" >/dev/null
s3tool "$MOTO_S3_ENDPOINT" put gc-bucket "$INSTANCE/.leases/notes.txt" "$E2E_TMP/probe" >/dev/null
BEFORE=$(objects)
sleep 4
run --json cache gc --dry-run
expect_eq "leftovers, dry run: the dead VM's lease is found and nothing removed" "0 1 0 0" \
  "$RC $(json "' '.join(str(j['tiers'][1][k]) for k in ('expired_leases', 'stale_probes', 'leftovers_removed'))" <<<"$OUT")"
expect_eq "leftovers, dry run: the bucket is unchanged" "$BEFORE" "$(objects)"
run cache gc
expect_eq "leftovers: exit 0" 0 "$RC"
expect_contains "leftovers (text): the bucket's line says what was swept" \
  "bucket (s3): no entry deleted: no max_age, and its size is left to the bucket's lifecycle rules (docs/config.md); removed 1 of 1 expired leases and 0 check probes left by killed processes" "$OUT"
expect_eq "leftovers: only the dead VM's lease is gone" \
  "$(tr ' ' '\n' <<<"$BEFORE" | grep -v -x -F "$DEAD_LEASE" | tr '\n' ' ' | sed 's/ $//')" "$(objects)"

# --- 4. a bucket that cannot be reached ---------------------------------------------------------------------------

DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
write_config <<YAML
tiers:
  - name: local
    path: $E2E_TMP/vm
$(s3_tier_yaml bucket gc-bucket "http://127.0.0.1:$DEAD" 'max_age: 5s')
YAML
run cache gc
expect_eq "gc, bucket down: exit 1" 1 "$RC"
expect_contains "gc, bucket down: the error names the tier" "bucket" "$ERR"
expect_contains "gc, bucket down: the folder tier is still collected" "local: evicted 0 entries" "$OUT"

finish
