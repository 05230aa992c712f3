#!/usr/bin/env bash
# `datavo warm` at scale and under limits, against the reference origin (`datavo serve`):
#   - descriptors: warm holds at most --jobs plus a small constant of file descriptors whatever the dataset size,
#     so 200 shards warm under `ulimit -n 64`;
#   - fail fast: once the origin refused every attempt of one shard, the other pending shards fail at once with the
#     same cause, and each failure is printed once.
# The cases that need a small filesystem of their own (a tmpfs, so root) are in test_warm_tmpfs.sh.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=120

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

# --- fail fast: an origin that refuses connections -----------------------------------------------------------------

# The manifest is cached (the dry run) and pinned, so every request of the warm is a shard's; the origin is gone.
make_samples "$E2E_TMP/big" 12 20000
run --json pack "$E2E_TMP/big" --root "$E2E_TMP/store" --dataset big/train --samples-per-shard 1
expect_eq "pack 12 shards: exit 0" 0 "$RC"
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
