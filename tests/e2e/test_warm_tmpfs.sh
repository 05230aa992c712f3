#!/usr/bin/env bash
# `datavo warm` through a tier on a small filesystem of its own (a 2 MiB tmpfs), against the reference origin:
#   - disk space: the entries eviction removes during a warm free their space at once (no descriptor keeps them),
#     so a warm of 3.5 MiB of shards through a tier with max_bytes 1MB on a 2 MiB tmpfs never hits ENOSPC;
#   - the truth: after warming, every shard is located; when the top tier does not hold them all, warm says how
#     many remain cached where and how many nowhere, and exits 1 (a WARNING and exit 0 with --allow-partial);
#   - a shard larger than the disk is reported once.
# Needs root and a machine that lets it mount a tmpfs (CAP_SYS_ADMIN): skipped with the reason where it does not,
# a failure under DATAVO_REQUIRE_PRIVILEGES=1 (.ci/run sets it). The rest of `warm` is in test_warm.sh.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=120

need_root "warm tmpfs suite" "it mounts a tmpfs"
mnt="$E2E_TMP/tmpfs"
mount_tmpfs "$mnt" 2m datavo-e2e-warm

# --- disk space: eviction frees space during the warm ------------------------------------------------------------

make_samples "$E2E_TMP/big" 12 300000
run --json pack "$E2E_TMP/big" --root "$E2E_TMP/store" --dataset big/train --samples-per-shard 1
expect_eq "pack 12 shards of 300 kB: exit 0" 0 "$RC"
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
write_config "$E2E_TMP/tmpfs.yaml" <<EOF
tiers:
  - name: small
    path: $mnt/tier
    max_bytes: 1MB
EOF
run --json warm big/train --key bin --key txt --jobs 1 --allow-partial
expect_eq "2 MiB tmpfs, max_bytes 1MB, 3.5 MiB of shards: no shard failed" "[12, 0]" \
  "$(json "[j['shards'], j['failed']]" <<<"$OUT")"
expect_eq "2 MiB tmpfs: no ENOSPC" "" "$(grep -i 'no space left' <<<"$ERR" | head -3)"
expect_stat small evictions ">=8"
expect_cmp "2 MiB tmpfs: the tier is within max_bytes after the warm" "$(info_of small used_bytes)" -le 1048576

# --- the truth: what remains cached where after the warm ---------------------------------------------------------

# One tier too small for the dataset: warm says how many shards it holds and how many are cached nowhere, exit 1.
run warm big/train --key bin --key txt --jobs 1
expect_eq "a top tier too small for the dataset: exit 1" 1 "$RC"
expect_match "too small: says how many of the shards the top tier holds" "[0-9]+ of 12 shards .*tier 'small'" "$ERR"
expect_match "too small: says how many are cached nowhere" "[0-9]+ (are|is) cached nowhere" "$ERR"
expect_contains "too small: names the flag that accepts it" "--allow-partial" "$ERR"
run --json warm big/train --key bin --key txt --jobs 1
held=$(json "[t['cached'] for t in j['tiers'] if t['tier'] == 'small'][0]" <<<"$OUT")
expect_eq "too small --json: tiers[].cached and not_cached add up to 12, and an error" "[12, \"capacity\"]" \
  "[$((held + $(json "j['not_cached']" <<<"$OUT"))), \"$(json "j['error']['code']" <<<"$OUT")\"]"
expect_cmp "too small: the top tier holds fewer than 12 shards" "$held" -lt 12
held_files=$(find "$mnt/tier" -name '*.tar' -not -path '*/.*/*' | wc -l)
expect_eq "too small: tiers[].cached is what the tier really holds" "$held_files" "$held"
run warm big/train --key bin --key txt --jobs 1 --allow-partial
expect_eq "too small, --allow-partial: exit 0" 0 "$RC"
expect_match "too small, --allow-partial: a WARNING instead" "WARNING: .*[0-9]+ of 12 shards" "$ERR"

# A small top tier over a large one: the rest remain cached in the second tier, and warm says so.
write_config "$E2E_TMP/two.yaml" <<EOF
tiers:
  - name: small
    path: $mnt/tier
    max_bytes: 1MB
  - name: disk
    path: $E2E_TMP/disk
EOF
run --json warm big/train --key bin --key txt --jobs 1
expect_eq "small over disk: exit 1" 1 "$RC"
expect_eq "small over disk: every shard cached somewhere, the rest in tier disk" "[0, 12]" \
  "[$(json "j['not_cached']" <<<"$OUT"), $(json "sum(t['cached'] for t in j['tiers'])" <<<"$OUT")]"
run warm big/train --key bin --key txt --jobs 1
expect_match "small over disk: says how many remain in tier disk" "[0-9]+ remain cached in tier 'disk'" "$ERR"
expect_match "small over disk: and that none is cached nowhere" "0 are cached nowhere" "$ERR"

# A full disk is reported once per shard (it was a WARNING, a FAILED line and an ERROR line).
make_samples "$E2E_TMP/huge" 1 3000000
run pack "$E2E_TMP/huge" --root "$E2E_TMP/store" --dataset huge/train
write_config "$E2E_TMP/tmpfs.yaml" <<EOF
tiers:
  - name: small
    path: $mnt/tier
EOF
run warm huge/train --key bin --key txt
expect_eq "a shard larger than the disk: exit 1" 1 "$RC"
expect_eq "a shard larger than the disk: 'No space left' printed once" 1 "$(grep -c 'No space left' <<<"$ERR")"
expect_eq "a shard larger than the disk: shard 0 reported once" 1 "$(grep -c 'shard 0' <<<"$ERR")"
stop_pid "$ORIGIN_PID"

finish
