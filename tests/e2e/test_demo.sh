#!/usr/bin/env bash
# `datavo demo`, the README's main job: a synthetic dataset packed, served on an ephemeral loopback port and read
# twice through a fresh cache. The cold pass fetches every shard from the origin once; the warm pass makes no ticket
# and no shard request; every utterance is a valid WAV in both passes; the default run finishes within a minute;
# the temporary directory is removed; the text report shows the two passes side by side.
. "$(dirname "$0")/lib.sh"
unset DATAVO_SERVER DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR DATAVO_SHARD_CACHE_CONFIG
E2E_CMD_TIMEOUT=60
export TMPDIR="$E2E_TMP/tmp"
mkdir -p "$TMPDIR"

# The default demo (2000 utterances): the README's command. The 60 s timeout is the issue's "within a minute".
start=$(date +%s)
run --json demo
expect_eq "demo: exit 0 within 60 s" 0 "$RC"
[ "$RC" -eq 0 ] || die "demo" "$ERR"
shards=$(json "j['shards']" <<<"$OUT")
expect_eq "demo --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
expect_eq "demo: 2000 samples in each pass, every WAV valid" "[2000, 2000, 2000, 2000]" \
  "$(json "[j['cold']['samples'], j['cold']['valid_wavs'], j['warm']['samples'], j['warm']['valid_wavs']]" <<<"$OUT")"
expect_cmp "demo: several shards" "$shards" -gt 1
expect_eq "demo cold pass: every shard from the origin, one ticket and one download each" \
  "[$shards, $shards, $shards]" \
  "$(json "[j['cold']['origin_shards'], j['cold']['requests']['ticket'], j['cold']['requests']['shard']]" <<<"$OUT")"
expect_eq "demo warm pass: 0 shards from the origin, 0 tickets, 0 shard requests" "[0, 0, 0]" \
  "$(json "[j['warm']['origin_shards'], j['warm']['requests']['ticket'], j['warm']['requests']['shard']]" <<<"$OUT")"
expect_eq "demo warm pass: one conditional manifest request, answered 304" "[1, 1]" \
  "$(json "[j['warm']['requests']['manifest'], j['warm']['requests']['not_modified']]" <<<"$OUT")"
expect_cmp "demo: finished within a minute" "$(($(date +%s) - start))" -le 60
expect_empty_dir "demo: its temporary directory is removed" "$TMPDIR"

# The text report, on a smaller dataset.
run demo --samples 60 --samples-per-shard 20
expect_eq "demo (text): exit 0" 0 "$RC"
expect_match "demo (text): the two passes side by side" "cold pass +warm pass" "$OUT"
expect_match "demo (text): shard requests, 3 cold and 0 warm" "shard requests +3 +0" "$OUT"
expect_match "demo (text): ticket requests, 3 cold and 0 warm" "ticket requests +3 +0" "$OUT"
expect_empty_dir "demo (text): its temporary directory is removed" "$TMPDIR"

run demo --samples 0
expect_eq "demo --samples 0: a usage error" 2 "$RC"

finish
