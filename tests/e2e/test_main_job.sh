#!/usr/bin/env bash
# The main job through real processes: `datavo pack`, `datavo serve` (--port 0 --port-file), then `datavo warm` and
# `datavo read` twice. The second pass makes 0 shard and 0 ticket requests, counted on the server's /v1/metrics;
# a pinned revision and DATAVO_OFFLINE=1 make no request at all; dry runs, key groups, errors, an origin that answers
# 202 "preparing", DATAVO_STALL_TIMEOUT and the bearer token.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=30
# A guard against a hang that names where the suite was, well inside ctest's 900 s; not a timing (a CI run beside
# other builds took 232 s for checks that all passed).
SUITE_DEADLINE=$(($(date +%s) + 600))

DS=voice_demo_v1/train
SAMPLES=120
PER_SHARD=15
SHARDS=$((SAMPLES / PER_SHARD))

# make_source DIR N: N samples as <id>.audio.wav (a small valid WAV) and <id>.transcript.txt files.
make_source() {
  python3 - "$1" "$2" <<'PY'
import math, os, struct, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
for i in range(n):
    frames = 800 + 40 * i
    pcm = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * (200 + i) * t / 16000))) for t in range(frames))
    wav = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) \
        + b"data" + struct.pack("<I", len(pcm)) + pcm
    with open(os.path.join(root, "utt_%04d.audio.wav" % i), "wb") as f:
        f.write(wav)
    with open(os.path.join(root, "utt_%04d.transcript.txt" % i), "w") as f:
        f.write("utterance %d\n" % i)
PY
}

# requests ROUTE [STATUS]: the origin's datavo_requests_total for ROUTE (lib.sh).
requests() { origin_requests "$@"; }
# snapshot: "manifest ticket shard" request counts, for deltas.
snapshot() { echo "$(requests manifest) $(requests ticket) $(requests shard)"; }
# delta BEFORE: "manifest ticket shard" requests since BEFORE.
delta() {
  local now
  now=$(snapshot)
  python3 -c 'import sys; a=sys.argv[1].split(); b=sys.argv[2].split(); print(" ".join(str(int(y)-int(x)) for x, y in zip(a, b)))' "$1" "$now"
}

check_deadline() { [ "$(date +%s)" -lt "$SUITE_DEADLINE" ] || die "suite deadline" "over 600 s"; }

# --- pack and serve ---------------------------------------------------------------------------------------------

make_source "$E2E_TMP/src" "$SAMPLES"
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$PER_SHARD"
expect_eq "pack: exit 0" 0 "$RC"
[ "$RC" -eq 0 ] || die "pack" "$ERR"
REVISION=$(json "j['revision']" <<<"$OUT")
expect_eq "pack --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
expect_eq "pack: $SHARDS shards" "$SHARDS" "$(json "j['total_shards']" <<<"$OUT")"
# A tar whose members of one sample are apart (bsdtar and unsorted GNU tar write a.wav b.wav a.txt b.txt).
mkdir -p "$E2E_TMP/apart"
for i in 1 2 3; do printf 'wav %d' "$i" >"$E2E_TMP/apart/s$i.wav"; printf 'text %d' "$i" >"$E2E_TMP/apart/s$i.txt"; done
(cd "$E2E_TMP/apart" && tar cf "$E2E_TMP/apart-explicit.tar" ./s1.wav ./s2.wav ./s3.wav ./s1.txt ./s2.txt ./s3.txt)
expect_eq "the test tar lists the members of each sample apart" "./s1.wav ./s2.wav ./s3.wav ./s1.txt ./s2.txt ./s3.txt" \
  "$(tar tf "$E2E_TMP/apart-explicit.tar" | tr '\n' ' ' | sed 's/ $//')"
run --json pack "$E2E_TMP/apart-explicit.tar" --root "$E2E_TMP/apart-store" --dataset apart/train
expect_eq "pack of a tar with members apart: exit 0, 3 samples" "[0, 3]" "[$RC, $(json "j['samples_added']" <<<"$OUT")]"
(cd "$E2E_TMP/apart" && tar cf "$E2E_TMP/apart-dot.tar" .)
run --json pack "$E2E_TMP/apart-dot.tar" --root "$E2E_TMP/apart-store2" --dataset apart/train
expect_eq "pack of \`tar cf x.tar .\`: exit 0, 3 samples" "[0, 3]" "[$RC, $(json "j['samples_added']" <<<"$OUT")]"
(cd "$E2E_TMP/apart" && tar --hard-dereference -cf "$E2E_TMP/apart-dup.tar" ./s1.wav ./s2.wav ./s1.wav)
run pack "$E2E_TMP/apart-dup.tar" --root "$E2E_TMP/apart-store3" --dataset apart/train
expect_eq "pack of a tar with one member twice: exit 2" 2 "$RC"
expect_contains "pack of a tar with one member twice: names the sample and the key" "s1" "$ERR"
# A source tar cut short is bad input: exit 2, like every other refused source.
mkdir -p "$E2E_TMP/torn"
(cd "$E2E_TMP/src" && tar cf "$E2E_TMP/whole.tar" utt_0000.audio.wav utt_0000.transcript.txt utt_0001.audio.wav)
head -c 2000 "$E2E_TMP/whole.tar" >"$E2E_TMP/torn/torn.tar"
run pack "$E2E_TMP/torn" --root "$E2E_TMP/torn-store" --dataset "$DS"
expect_eq "pack of a truncated tar: exit 2 (bad input)" 2 "$RC"
expect_contains "pack of a truncated tar: names the tar" "torn.tar" "$ERR"

# serve refuses a directory that is not a store (a typo for it), writing nothing into it, unless --init.
notastore="$E2E_TMP/src"
listing_before=$(cd "$notastore" && find . | sort | sha256sum)
RC=0
timeout 10 "$DATAVO_BIN" serve "$notastore" --port 0 >"$E2E_TMP/out" 2>"$E2E_TMP/err" || RC=$?
expect_eq "serve on a non-empty directory that is not a store: exit 2" 2 "$RC"
expect_contains "serve on a non-store: the message names the directory" "$notastore" "$(cat "$E2E_TMP/err")"
expect_contains "serve on a non-store: the message names --init" "--init" "$(cat "$E2E_TMP/err")"
expect_eq "serve on a non-store: nothing written into it" "$listing_before" "$(cd "$notastore" && find . | sort | sha256sum)"
mkdir -p "$E2E_TMP/other" && echo hello >"$E2E_TMP/other/readme.txt"
start_origin "$E2E_TMP/other" --init
expect_file "serve --init on a non-empty directory: makes it a store" "$E2E_TMP/other/instance.json"
stop_pid "$ORIGIN_PID"
mkdir -p "$E2E_TMP/empty-store"
start_origin "$E2E_TMP/empty-store"
expect_file "serve on an empty directory: makes it a store" "$E2E_TMP/empty-store/instance.json"
stop_pid "$ORIGIN_PID"
start_origin "$E2E_TMP/new-store"
expect_file "serve on a directory that does not exist: creates the store" "$E2E_TMP/new-store/instance.json"
stop_pid "$ORIGIN_PID"
start_origin "$E2E_TMP/store"
pass "serve on a store made by pack: listening"
run pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$PER_SHARD"
expect_eq "pack src after serve refused src: still works (nothing new)" 0 "$RC"

export DATAVO_SERVER="$ORIGIN_URL"
write_config <<EOF
tiers:
  - name: local
    path: $E2E_TMP/cache
EOF

# --- warm, twice ------------------------------------------------------------------------------------------------

before=$(snapshot)
run --json warm "$DS" --key audio.wav --key transcript.txt --jobs 3
expect_eq "warm cold: exit 0" 0 "$RC"
expect_eq "warm cold: summary" "[$SHARDS, 0, $SHARDS]" "$(json "[j['shards'], j['failed'], j['origin']['shards']]" <<<"$OUT")"
expect_cmp "warm cold: bytes from the origin" "$(json "j['origin']['size_bytes']" <<<"$OUT")" -gt 0
expect_eq "warm --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
expect_eq "warm cold: 1 manifest, $SHARDS tickets, $SHARDS shard requests" "1 $SHARDS $SHARDS" "$(delta "$before")"
expect_contains "warm cold: one log line per shard when stderr is not a terminal" "[$SHARDS/$SHARDS]" "$ERR"
expect_stat local installs "$SHARDS"

before=$(snapshot)
run --json warm "$DS" --key transcript.txt --key audio.wav
expect_eq "warm again: exit 0" 0 "$RC"
expect_eq "warm again: nothing from the origin, every shard a hit" "[0, $SHARDS]" \
  "$(json "[j['origin']['shards'], [t['hits'] for t in j['tiers'] if t['tier'] == 'local'][0]]" <<<"$OUT")"
expect_eq "warm again: one conditional manifest request, 0 tickets, 0 shard requests" "1 0 0" "$(delta "$before")"
expect_eq "warm again: the manifest request was a 304" 1 "$(requests manifest 304)"

# --- dry runs ---------------------------------------------------------------------------------------------------

before=$(snapshot)
run --json warm "$DS" --key audio.wav --key transcript.txt --revision "$REVISION" --dry-run
expect_eq "dry run (warm cache): exit 0" 0 "$RC"
expect_eq "dry run (warm cache): every shard in tier local, sizes known" "[$SHARDS, 0, [\"local\"], true]" \
  "$(json "[j['cached_shards'], j['shards_to_fetch'], sorted(set(s['tier'] for s in j['shard_list'])), all(s['size_bytes'] > 0 for s in j['shard_list'])]" <<<"$OUT")"
expect_eq "dry run --json: shards is the count, shard_list the shards" "[$SHARDS, $SHARDS, [0, 1, 2]]" \
  "$(json "[j['shards'], len(j['shard_list']), [s['shard_index'] for s in j['shard_list']][:3]]" <<<"$OUT")"
expect_eq "dry run --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
run --json warm "$DS" --key audio.wav --revision "$REVISION" --dry-run
expect_eq "dry run (other key group): every shard to fetch, size unknown" "[0, $SHARDS, [null], [null]]" \
  "$(json "[j['cached_shards'], j['shards_to_fetch'], sorted(set(s['tier'] for s in j['shard_list'])), sorted(set(s['size_bytes'] for s in j['shard_list']))]" <<<"$OUT")"
run warm "$DS" --key audio.wav --revision "$REVISION" --dry-run
expect_contains "dry run (text): says the size is unknown until fetched" "unknown until fetched" "$OUT"
expect_eq "dry runs: no request at all (pinned revision, nothing fetched)" "0 0 0" "$(delta "$before")"

# --- read, twice ------------------------------------------------------------------------------------------------

before=$(snapshot)
run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "read warm: exit 0" 0 "$RC"
expect_eq "read warm: every sample, every shard a hit" "[$SAMPLES, $SHARDS, 0, $SHARDS, 0]" \
  "$(json "[j['samples'], j['shards'], j['origin']['shards'], j['tiers'][0]['hits'], j['tiers'][0]['misses']]" <<<"$OUT")"
expect_eq "read warm: 1 manifest request (304), 0 tickets, 0 shard requests" "1 0 0" "$(delta "$before")"
expect_cmp "read warm: samples/s reported" "$(json "int(j['samples_per_second'])" <<<"$OUT")" -gt 0
expect_eq "read --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
expect_eq "read warm: the bytes the tier served and the wait for shards are reported" "true true" \
  "$(json "[j['tiers'][0]['served_bytes'] > 0, 0 <= j['shard_wait_seconds'] <= j['seconds']]" <<<"$OUT" | tr -d '[],')"

run read "$DS" --key audio.wav --key transcript.txt --limit 7
expect_eq "read --limit: exit 0" 0 "$RC"
expect_match "read (text): samples, bytes, rates and per-tier hits" \
  "^read 7 samples \(.*\) from 1 shards of $DS revision $REVISION in [0-9.]+ s: [0-9]+ samples/s, [0-9.]+ MB/s" "$OUT"
# The prefetcher may have looked up the next shards already (up to 8 beyond the one read, its default window):
# hits, never misses.
expect_match "read (text): the tier line" "tier local: [1-9] hits, 0 misses, 0 promotions" "$OUT"

before=$(snapshot)
run --json read "$DS" --key audio.wav
expect_eq "read cold key group: exit 0" 0 "$RC"
expect_eq "read cold key group: every shard from the origin" "[$SAMPLES, $SHARDS]" \
  "$(json "[j['samples'], j['origin']['shards']]" <<<"$OUT")"
expect_eq "read cold key group: $SHARDS tickets and shard requests" "1 $SHARDS $SHARDS" "$(delta "$before")"
before=$(snapshot)
run --json read "$DS" --key audio.wav
expect_eq "read key group again: 0 shard requests" "1 0 0" "$(delta "$before")"

# Ranks partition the samples.
r0=$(dv --json read "$DS" --key audio.wav --rank 0 --world-size 2 --shuffle --seed 5 | json "j['samples']")
r1=$(dv --json read "$DS" --key audio.wav --rank 1 --world-size 2 --shuffle --seed 5 | json "j['samples']")
expect_eq "read --rank 0/1 of 2: the two halves add up to the dataset" "$SAMPLES" "$((r0 + r1))"

# The sample shuffle buffer: every sample once, the buffer's peak reported, a bad value refused by name.
run --json read "$DS" --key audio.wav --shuffle-buffer 50 --seed 5
expect_eq "read --shuffle-buffer 50: exit 0" 0 "$RC"
expect_eq "read --shuffle-buffer 50: every sample, the buffer's peak" "[$SAMPLES, 50]" \
  "$(json "[j['samples'], j['max_shuffle_buffered']]" <<<"$OUT")"
run read "$DS" --key audio.wav --shuffle-buffer lots
expect_eq "read --shuffle-buffer lots: a usage error" 2 "$RC"
expect_match "read --shuffle-buffer lots: names the option" "shuffle-buffer" "$ERR"
check_deadline

# --- zero requests: pinned revision, offline --------------------------------------------------------------------

before=$(snapshot)
run --json read "$DS" --key audio.wav --key transcript.txt --revision "$REVISION"
expect_eq "read pinned: exit 0, every sample" "[0, $SAMPLES]" "[$RC, $(json "j['samples']" <<<"$OUT")]"
expect_eq "read pinned: zero requests" "0 0 0" "$(delta "$before")"
before=$(snapshot)
DATAVO_OFFLINE=1 run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "read offline: exit 0, every sample" "[0, $SAMPLES]" "[$RC, $(json "j['samples']" <<<"$OUT")]"
expect_eq "read offline: zero requests" "0 0 0" "$(delta "$before")"
DATAVO_OFFLINE=1 DATAVO_MANIFEST_CACHE_DIR="$E2E_TMP/empty-manifests" run read "$DS" --key audio.wav
expect_eq "read offline, nothing cached: exit 1" 1 "$RC"
expect_contains "read offline, nothing cached: says so" "offline (DATAVO_OFFLINE=1) and no cached manifest" "$ERR"

# --- errors -----------------------------------------------------------------------------------------------------

run read "$DS" --key video.mp4
expect_eq "unknown key: exit 2" 2 "$RC"
expect_contains "unknown key: lists the dataset's keys" "audio.wav, transcript.txt" "$ERR"
run read nope/train --key audio.wav
expect_eq "unknown dataset: exit 2 (bad input)" 2 "$RC"
expect_contains "unknown dataset: names it" "nope/train" "$ERR"
run --json warm nope/train --key audio.wav
expect_eq "--json warm, unknown dataset: exit 2 and error code not_found (the SDK's code)" "[2, \"not_found\"]" \
  "[$RC, \"$(json "j['error']['code']" <<<"$OUT")\"]"
run read "$DS" --key audio.wav --revision 999
expect_eq "unknown revision: exit 2 (bad input)" 2 "$RC"
expect_contains "unknown revision: names it" "999" "$ERR"
run --json read "$DS" --key audio.wav --revision 999
expect_eq "--json, unknown revision: exit 2 and error code not_found" "[2, \"not_found\"]" \
  "[$RC, \"$(json "j['error']['code']" <<<"$OUT")\"]"
run --json read no-split --key audio.wav
expect_eq "--json, malformed dataset name: exit 2 and error code invalid_argument" "[2, \"invalid_argument\"]" \
  "[$RC, \"$(json "j['error']['code']" <<<"$OUT")\"]"
run --json read "$DS" --key video.mp4
expect_eq "--json, unknown key: exit 2 and error code not_found" "[2, \"not_found\"]" \
  "[$RC, \"$(json "j['error']['code']" <<<"$OUT")\"]"
run read no-split --key audio.wav
expect_eq "bad dataset name: exit 2" 2 "$RC"
env -u DATAVO_SERVER timeout 30 "$DATAVO_BIN" --config "$E2E_CONFIG" read "$DS" --key audio.wav >/dev/null 2>"$E2E_TMP/err" && rc=0 || rc=$?
expect_eq "no server: exit 2" 2 "$rc"
expect_contains "no server: says how to give one" "DATAVO_SERVER" "$(cat "$E2E_TMP/err")"

# --- the origin down: reads go on from the cached manifest (huggingface_hub's automatic offline fallback) ---------

stop_pid "$ORIGIN_PID"
run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "origin down, manifest cached: read exit 0, every sample, nothing from the origin" "[0, $SAMPLES, 0]" \
  "[$RC, $(json "j['samples']" <<<"$OUT"), $(json "j['origin']['shards']" <<<"$OUT")]"
expect_eq "origin down: exactly one WARNING" 1 "$(grep -c 'WARNING' <<<"$ERR")"
expect_match "origin down: the WARNING says the origin is unreachable and the cached manifest is used" \
  "WARNING: .*(cannot be reached|unreachable).*cached manifest" "$ERR"
run read "$DS" --key audio.wav --key transcript.txt --limit 1
expect_eq "origin down, text output: exit 0" 0 "$RC"
run read "$DS" --key transcript.txt
expect_eq "origin down, a key group not cached: exit 1" 1 "$RC"
expect_contains "origin down, a key group not cached: the error says the origin is unreachable" "refused" "$ERR"
expect_eq "origin down, a key group not cached: one WARNING and one ERROR" "1 1" \
  "$(grep -c WARNING <<<"$ERR") $(grep -c ERROR <<<"$ERR")"
DATAVO_OFFLINE=1 run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "origin down, DATAVO_OFFLINE=1: exit 0, every sample, no WARNING" "[0, $SAMPLES, 0]" \
  "[$RC, $(json "j['samples']" <<<"$OUT"), $(grep -c WARNING <<<"$ERR")]"

# --- an origin still preparing its tars (202 + Retry-After), the stall timeout ------------------------------------

# --ticket-wait-ms 0: every first ticket of a key group is answered 202 while the tar is built in the background.
stop_pid "$ORIGIN_PID"
start_origin "$E2E_TMP/store" --ticket-wait-ms 0
export DATAVO_SERVER="$ORIGIN_URL"
run --json warm "$DS" --key transcript.txt --jobs 4
expect_eq "preparing: warm exit 0, every shard from the origin" "[0, $SHARDS, 0]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT"), $(json "j['failed']" <<<"$OUT")]"
expect_cmp "preparing: at least one 202 per shard" "$(requests ticket 202)" -ge "$SHARDS"
expect_eq "preparing: then one ticket per shard" "$SHARDS" "$(requests ticket 200)"
expect_eq "preparing: one download per shard" "$SHARDS" "$(requests shard)"
DATAVO_STALL_TIMEOUT=soon run read "$DS" --key transcript.txt
expect_eq "bad DATAVO_STALL_TIMEOUT: exit 2" 2 "$RC"
expect_contains "bad DATAVO_STALL_TIMEOUT: names the variable" "DATAVO_STALL_TIMEOUT=soon" "$ERR"
DATAVO_STALL_TIMEOUT=45 run --json read "$DS" --key transcript.txt
expect_eq "DATAVO_STALL_TIMEOUT=45: exit 0, every sample" "[0, $SAMPLES]" "[$RC, $(json "j['samples']" <<<"$OUT")]"
check_deadline

# --- the bearer token -------------------------------------------------------------------------------------------

echo "s3cret-token" >"$E2E_TMP/token"
stop_pid "$ORIGIN_PID"
start_origin "$E2E_TMP/store" --token-file "$E2E_TMP/token"
export DATAVO_SERVER="$ORIGIN_URL"
run read "$DS" --key audio.wav
expect_eq "token server, no DATAVO_TOKEN: exit 1" 1 "$RC"
expect_contains "token server, no DATAVO_TOKEN: HTTP 401" "401" "$ERR"
expect_contains "token server, no DATAVO_TOKEN: says to set DATAVO_TOKEN" "set DATAVO_TOKEN" "$ERR"
DATAVO_TOKEN=wrong-token run read "$DS" --key audio.wav
expect_eq "token server, a wrong DATAVO_TOKEN: exit 1" 1 "$RC"
expect_contains "token server, a wrong DATAVO_TOKEN: says the origin refused DATAVO_TOKEN" "refused DATAVO_TOKEN" "$ERR"
DATAVO_TOKEN=s3cret-token run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "token server, DATAVO_TOKEN: exit 0 (the same store: its instance, every shard cached)" "[0, $SAMPLES, 0]" \
  "[$RC, $(json "j['samples']" <<<"$OUT"), $(json "j['origin']['shards']" <<<"$OUT")]"
expect_eq "the token never appears in the output" "" "$(grep -l s3cret-token <<<"$OUT$ERR")"
export DATAVO_TOKEN=s3cret-token

# --- one instance per server: its own identity (GET /v1/instance), remembered per URL ----------------------------

port=${ORIGIN_URL##*:}
before=$(snapshot)
DATAVO_SERVER="http://localhost:$port" run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "http://localhost:P and http://127.0.0.1:P share one cache: every shard a hit" "[0, $SAMPLES, 0]" \
  "[$RC, $(json "j['samples']" <<<"$OUT"), $(json "j['origin']['shards']" <<<"$OUT")]"
expect_eq "localhost: no ticket, no shard request" "0 0" "$(delta "$before" | cut -d' ' -f2-)"
expect_eq "one instance directory in the cache for every URL and restart of the store" 1 \
  "$(find "$E2E_TMP/cache" -mindepth 1 -maxdepth 1 -not -name '.*' | wc -l)"
instance=$(basename "$(find "$E2E_TMP/cache" -mindepth 1 -maxdepth 1 -not -name '.*')")
expect_eq "the instance is the store's instance_id" \
  "$(json "j['instance_id']" <"$E2E_TMP/store/instance.json")" "$instance"
before_instance=$(requests instance)
DATAVO_SERVER="http://localhost:$port" run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "remembered: a second run does not ask /v1/instance again" "$before_instance" "$(requests instance)"
DATAVO_OFFLINE=1 DATAVO_SERVER="http://localhost:$port" run --json read "$DS" --key audio.wav --key transcript.txt
expect_eq "offline through the other URL: exit 0, every sample" "[0, $SAMPLES]" "[$RC, $(json "j['samples']" <<<"$OUT")]"
expect_eq "offline: no request, not even /v1/instance" "$before_instance" "$(requests instance)"
run --json --instance elsewhere read "$DS" --key audio.wav
expect_eq "--instance still overrides: a cache of its own (fetched again)" "[0, $SHARDS]" \
  "[$RC, $(json "j['origin']['shards']" <<<"$OUT")]"

# --- cache ls: sizes, ages, a total, and each entry's dataset and shard; cache rm --dataset -----------------------

run cache ls
expect_eq "cache ls: exit 0" 0 "$RC"
expect_match "cache ls: human sizes" "[0-9.]+ (KiB|MiB)" "$OUT"
expect_match "cache ls: an age" "[0-9]+ ?(s|min|h|d) ago" "$OUT"
expect_match "cache ls: the dataset, revision and shard index of an entry" \
  "$DS@$REVISION +shard 0 +audio.wav,transcript.txt" "$OUT"
# Three key groups were read above ({audio.wav, transcript.txt}, {audio.wav}, {transcript.txt}), 8 shards each.
expect_match "cache ls: a total per tier" "tier [^ ]+: $((3 * SHARDS)) entries, [0-9.]+ (KiB|MiB)" "$OUT"
run --json cache ls
expect_eq "cache ls --json: dataset, split, revision, shard_index and keys of every entry" \
  "[[\"voice_demo_v1\", \"train\", $REVISION]]" \
  "$(json "sorted(set((e['dataset'], e['split'], e['revision']) for e in j['entry_list']), key=str)" <<<"$OUT" | tr '()' '[]')"
expect_eq "cache ls --json: shard indices 0..$((SHARDS - 1)) for each key group" \
  "$(python3 -c "print(sorted(list(range($SHARDS)) * 3))")" "$(json "sorted(e['shard_index'] for e in j['entry_list'])" <<<"$OUT")"
expect_cmp "cache ls --json: every entry has an age" "$(json "min(e['age_seconds'] for e in j['entry_list'])" <<<"$OUT")" -ge 0
run --json cache rm --dataset "$DS"
expect_eq "cache rm --dataset: every entry of the dataset removed" "[0, $((3 * SHARDS))]" \
  "[$RC, $(json "j['removed']" <<<"$OUT")]"
run --json cache ls
expect_eq "cache rm --dataset: nothing left" 0 "$(json "j['entries']" <<<"$OUT")"
run cache rm --dataset "$DS"
expect_eq "cache rm --dataset of a dataset with nothing cached: exit 1" 1 "$RC"
run cache rm --dataset "bad name"
expect_eq "cache rm --dataset with a bad name: exit 2" 2 "$RC"

check_deadline
finish
