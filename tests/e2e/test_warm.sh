#!/usr/bin/env bash
# `datavo warm` at scale and under limits, against the reference origin (`datavo serve`):
#   - descriptors: warm holds at most --jobs plus a small constant of file descriptors whatever the dataset size,
#     so 200 shards warm under `ulimit -n 64`;
#   - disk space: the entries eviction removes during a warm free their space at once (no descriptor keeps them),
#     so a warm of 3.5 MiB of shards through a tier with max_bytes 1MB on a 2 MiB tmpfs never hits ENOSPC;
#   - the truth: after warming, every shard is located; when the top tier does not hold them all, warm says how
#     many remain cached where and how many nowhere, and exits 1 (a WARNING and exit 0 with --allow-partial);
#   - fail fast: once the origin refused every attempt of one shard, the other pending shards fail at once with the
#     same cause, and each failure is printed once.
# Needs root (mount). CI runs as root; run by hand with sudo.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=120

need_root "warm suite"

# --- descriptors: 200 shards under ulimit -n 64 -----------------------------------------------------------------

make_samples "$E2E_TMP/many" 200 2000
run --json pack "$E2E_TMP/many" --root "$E2E_TMP/store" --dataset many/train --samples-per-shard 1
expect_eq "pack 200 one-sample shards: exit 0" "[0, 200]" "[$RC, $(json "j['total_shards']" <<<"$OUT")]"
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
write_config <<EOF
tiers:
  - name: local
    path: $E2E_TMP/cache
EOF

RC=0
(ulimit -n 64 && exec timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" --config "$E2E_CONFIG" --json warm many/train \
  --key bin --key txt --jobs 4) >"$E2E_TMP/out" 2>"$E2E_TMP/err" || RC=$?
OUT=$(cat "$E2E_TMP/out")
ERR=$(cat "$E2E_TMP/err")
expect_eq "ulimit -n 64, 200 shards, --jobs 4: exit 0" 0 "$RC"
expect_eq "ulimit -n 64: every shard warmed, none failed" "[200, 0, 200]" \
  "$(json "[j['shards'], j['failed'], j['origin']['shards']]" <<<"$OUT")"
expect_eq "ulimit -n 64: no 'Too many open files'" "" "$(grep -i 'too many open files' <<<"$ERR" | head -3)"
expect_stat local installs 200

# The peak of descriptors a cold warm holds, sampled from /proc while it runs, with --jobs 8 over 200 shards: a few
# per job (its curl handle's connection and wake-up socket pair, the staging file and its digest reader, the shard
# lock), never one per shard.
python3 - "$DATAVO_BIN" "$E2E_CONFIG" >"$E2E_TMP/peak" <<'PY'
import os, subprocess, sys
warm = subprocess.Popen([sys.argv[1], "--config", sys.argv[2], "--json", "warm", "many/train", "--key", "bin",
                         "--jobs", "8"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = 0
while warm.poll() is None:
    try:
        peak = max(peak, len(os.listdir("/proc/%d/fd" % warm.pid)))
    except OSError:
        pass
print(warm.wait(), peak)
PY
read -r rc peak <"$E2E_TMP/peak"
expect_eq "cold warm, --jobs 8, 200 shards: exit 0" 0 "$rc"
echo "# peak descriptors of a cold warm with --jobs 8 over 200 shards: $peak"
expect_cmp "--jobs 8 over 200 shards: at most 8 per job + 16 descriptors at once ($peak)" "$peak" -le $((8 * 8 + 16))
stop_pid "$ORIGIN_PID"

# --- disk space: eviction frees space during the warm ------------------------------------------------------------

mnt="$E2E_TMP/tmpfs"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=2m,mode=0755 datavo-e2e-warm "$mnt"; then
  die "mount a 2 MiB tmpfs at $mnt" "mount failed (the suite needs CAP_SYS_ADMIN)"
fi
on_exit "! mountpoint -q '$mnt' || umount '$mnt' || umount -l '$mnt'"
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

# --- fail fast: an origin that refuses connections -----------------------------------------------------------------

# The manifest is cached (the dry run) and pinned, so every request of the warm is a shard's; the origin is gone.
write_config "$E2E_TMP/cache.yaml" <<EOF
tiers:
  - name: local
    path: $E2E_TMP/cache-ff
EOF
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
run --json warm big/train --key bin --dry-run
revision=$(json "j['revision']" <<<"$OUT")
stop_pid "$ORIGIN_PID"
started=$(date +%s%N)
run -v warm big/train --key bin --revision "$revision" --jobs 2
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
echo "# a warm of 12 shards against a refusing origin took ${elapsed_ms} ms"
expect_eq "origin refusing connections: exit 1" 1 "$RC"
retries=$(grep -c 'retrying in' <<<"$ERR")
expect_cmp "origin refusing connections: only the shards in flight retry (2 jobs x 4 retries; got $retries)" \
  "$retries" -le 8
for i in 0 5 11; do
  expect_eq "origin refusing connections: shard $i reported once" 1 "$(grep -c "shard $i[: ]" <<<"$ERR")"
done
expect_eq "origin refusing connections: every shard fails with the same cause (connection refused)" 12 \
  "$(grep 'FAILED' <<<"$ERR" | grep -ci 'refused')"
expect_contains "origin refusing connections: one summary" "12 of 12 shards could not be warmed" "$ERR"

finish
