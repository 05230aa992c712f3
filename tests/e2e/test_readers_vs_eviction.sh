#!/usr/bin/env bash
# Readers against eviction: one folder tier with max_bytes 1.5 MiB (1536KiB: sizes take no fractions) and six 1 MiB shards, so nearly every install
# evicts the previous entry (the low watermark, 90 %, leaves room for one shard). Four reader processes loop over the
# six hashes, three with `datavo cache fetch` from the loopback server and one with `datavo cache put`, each
# reading and hashing the file the CLI printed.
#
# Two levels of checking:
#   - CLI level: every command exits 0 and reports the right size. After the command exits its descriptor is
#     closed, so the printed path may already be evicted when the reader opens it: that ENOENT is counted as
#     "evicted before open" and is not an error. Once open, the bytes read must be the whole shard with the
#     right SHA-256 (a short read or wrong bytes is a read error).
#   - Held handle: every 5th iteration the reader opens the entry, reads half of it, then forces eviction itself (it
#     fetches two other shards, which leaves no room for its entry), checks that its entry is gone from the path
#     (or replaced by another inode), and reads the rest through the descriptor it held: the bytes must be right.
# Every reader is bounded (200 iterations, and a 70 s deadline after which it stops early and says so).
. "$(dirname "$0")/lib.sh"

READERS_FETCH=3
READERS_PUT=1
ITERATIONS=${E2E_READER_ITERATIONS:-200}
READER_DEADLINE_S=70
shard_size=$((1024 * 1024))

www="$E2E_TMP/www"
mkdir -p "$www" "$E2E_TMP/local"
manifest="$E2E_TMP/manifest.json"
{
  echo "["
  for i in 0 1 2 3 4 5; do
    sha=$(make_shard "$www/s$i.bin" "$shard_size")
    cp "$www/s$i.bin" "$E2E_TMP/local/s$i.bin"
    [ "$i" -gt 0 ] && echo ","
    printf '{"hash": "%s", "name": "s%d.bin", "sha256": "%s", "size": %d}\n' "$(hash_for "shard$i")" "$i" "$sha" \
      "$shard_size"
  done
  echo "]"
} >"$manifest"
start_server "$www"

tier="$E2E_TMP/tier"
write_config <<EOF
tiers:
  - name: churn
    path: $tier
    max_bytes: 1536KiB
EOF
run --json cache info
[ "$RC" -eq 0 ] || die "cache info" "exit $RC: $ERR"
expect_eq "max_bytes 1536KiB (1.5 MiB) is 1572864" 1572864 "$(json "j['tiers'][0]['max_bytes']" <<<"$OUT")"

cat >"$E2E_TMP/reader.py" <<'PY'
import errno, hashlib, json, os, random, subprocess, sys, time

datavo, config, server, manifest_path, mode, iterations, seed, deadline_s, out_path, local_dir = sys.argv[1:11]
iterations, seed, deadline = int(iterations), int(seed), time.monotonic() + float(deadline_s)
shards = json.load(open(manifest_path))
rng = random.Random(seed)
counts = {"iterations": 0, "cli_ok": 0, "cli_failed": 0, "wrong_size": 0, "evicted_before_open": 0, "reads_ok": 0,
          "short_reads": 0, "wrong_bytes": 0, "held_checks": 0, "held_evicted": 0, "held_still_there": 0,
          "held_errors": 0, "stopped_early": False, "sources": {}, "problems": []}

def cache_get(shard):
    if mode == "put":
        args = [datavo, "--config", config, "--json", "cache", "put", shard["hash"], os.path.join(local_dir, shard["name"])]
    else:
        args = [datavo, "--config", config, "--json", "cache", "fetch", shard["hash"], "--url", server + "/" + shard["name"]]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        counts["cli_failed"] += 1
        counts["problems"].append("%s %s: exit %d: %s" % (mode, shard["name"], r.returncode, r.stderr.strip()[-300:]))
        return None
    j = json.loads(r.stdout)
    if j["size_bytes"] != shard["size"]:
        counts["wrong_size"] += 1
        counts["problems"].append("%s %s: size %d" % (mode, shard["name"], j["size_bytes"]))
        return None
    counts["cli_ok"] += 1
    counts["sources"][j["source"]] = counts["sources"].get(j["source"], 0) + 1
    return j

def read_to_end(fd, h, start):
    got, off = 0, start
    while True:
        b = os.pread(fd, 1 << 16, off)
        if not b:
            return got
        h.update(b)
        got += len(b)
        off += len(b)

for i in range(iterations):
    if time.monotonic() > deadline:
        counts["stopped_early"] = True
        break
    counts["iterations"] += 1
    k = rng.randrange(len(shards))
    shard = shards[k]
    j = cache_get(shard)
    if j is None:
        continue
    try:
        fd = os.open(j["path"], os.O_RDONLY)
    except FileNotFoundError:
        counts["evicted_before_open"] += 1
        continue
    try:
        h = hashlib.sha256()
        held = i % 5 == 0
        if held:
            counts["held_checks"] += 1
            half = shard["size"] // 2
            first = os.pread(fd, half, 0)
            h.update(first)
            # Two other shards: with room for one, our entry is evicted by the first or the second install.
            for other in (shards[(k + 1) % len(shards)], shards[(k + 2) % len(shards)]):
                cache_get(other)
            try:
                st = os.stat(j["path"])
                same = st.st_ino == os.fstat(fd).st_ino and st.st_dev == os.fstat(fd).st_dev
            except FileNotFoundError:
                same = False
            counts["held_still_there" if same else "held_evicted"] += 1
            got = len(first) + read_to_end(fd, h, len(first))
        else:
            got = read_to_end(fd, h, 0)
        bad = None
        if got != shard["size"]:
            bad = "short_reads"
        elif h.hexdigest() != shard["sha256"]:
            bad = "wrong_bytes"
        if bad:
            counts[bad] += 1
            if held:
                counts["held_errors"] += 1
            counts["problems"].append("%s %s: %s (%d bytes)" % (mode, shard["name"], bad, got))
        else:
            counts["reads_ok"] += 1
    except OSError as e:
        counts["short_reads"] += 1
        counts["problems"].append("%s %s: read error %s" % (mode, shard["name"], e))
    finally:
        os.close(fd)

counts["problems"] = counts["problems"][:10]
json.dump(counts, open(out_path, "w"))
PY

started=$(date +%s)
pids=()
for ((r = 0; r < READERS_FETCH + READERS_PUT; r++)); do
  mode=fetch
  [ "$r" -ge "$READERS_FETCH" ] && mode=put
  python3 "$E2E_TMP/reader.py" "$DATAVO_BIN" "$E2E_CONFIG" "$SERVER_URL" "$manifest" "$mode" "$ITERATIONS" "$((r + 1))" \
    "$READER_DEADLINE_S" "$E2E_TMP/reader.$r.json" "$E2E_TMP/local" 2>"$E2E_TMP/reader.$r.err" &
  pids+=($!)
  track_pid $!
done
for ((r = 0; r < ${#pids[@]}; r++)); do
  rc=0
  wait "${pids[$r]}" || rc=$?
  expect_eq "reader $r finished cleanly" 0 "$rc"
  [ "$rc" -eq 0 ] || echo "# reader $r stderr: $(e2e_abbrev "$(cat "$E2E_TMP/reader.$r.err")")"
done
elapsed=$(($(date +%s) - started))

totals=$(python3 - "$E2E_TMP" $((READERS_FETCH + READERS_PUT)) <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
total = {}
for r in range(n):
    try:
        c = json.load(open("%s/reader.%d.json" % (tmp, r)))
    except Exception:
        continue
    for k, v in c.items():
        if isinstance(v, bool):
            total[k] = total.get(k, False) or v
        elif isinstance(v, int):
            total[k] = total.get(k, 0) + v
        elif isinstance(v, dict):
            d = total.setdefault(k, {})
            for s, x in v.items():
                d[s] = d.get(s, 0) + x
        elif isinstance(v, list):
            total.setdefault(k, []).extend(v)
print(json.dumps(total))
PY
)
t() { json "j.get('$1', 0)" <<<"$totals"; }
echo "# readers: $((READERS_FETCH + READERS_PUT)) ($READERS_FETCH fetch, $READERS_PUT put), ${elapsed}s;" \
  "iterations $(t iterations), cli ok $(t cli_ok), cli failed $(t cli_failed), wrong size $(t wrong_size)," \
  "evicted before open $(t evicted_before_open), reads ok $(t reads_ok), short reads $(t short_reads)," \
  "wrong bytes $(t wrong_bytes); held-handle checks $(t held_checks): evicted while held $(t held_evicted)," \
  "still there $(t held_still_there), errors $(t held_errors); sources $(t sources)"
problems=$(json "j.get('problems', [])" <<<"$totals")
[ "$problems" = "[]" ] || echo "# first problems: $(e2e_abbrev "$problems")"

if [ "$(t stopped_early)" = true ]; then
  echo "# note: a reader hit its ${READER_DEADLINE_S}s deadline before $ITERATIONS iterations (slow machine)"
fi
expect_cmp "every reader did at least 50 iterations (in all: $(t iterations))" "$(t iterations)" -ge \
  $((50 * (READERS_FETCH + READERS_PUT)))
expect_eq "CLI level: no command failed" 0 "$(t cli_failed)"
expect_eq "CLI level: every command reported the right size" 0 "$(t wrong_size)"
expect_eq "read errors: no short read from an open descriptor" 0 "$(t short_reads)"
expect_eq "read errors: no wrong bytes from an open descriptor" 0 "$(t wrong_bytes)"
expect_eq "held handles: no read error after eviction" 0 "$(t held_errors)"
expect_cmp "held handles: the entry was really evicted while held at least once ($(t held_evicted)x)" \
  "$(t held_evicted)" -ge 1
expect_cmp "eviction really churned: some fetches had to download again" \
  "$(json "j.get('sources', {}).get('fetched', 0)" <<<"$totals")" -ge 10
expect_cmp "reads that succeeded" "$(t reads_ok)" -ge 1

expect_stat churn errors 0
expect_stat churn evictions ">=10"
expect_empty_dir "nothing left in .staging" "$tier/.staging"
expect_eq "no per-shard lock left" "" "$(shard_locks "$tier")"
run --json cache gc
expect_eq "gc after the churn: exit 0" 0 "$RC"
expect_cmp "gc after the churn: usage within max_bytes" "$(json "j['tiers'][0]['used_bytes']" <<<"$OUT")" -le 1572864
run --json cache info
expect_cmp "after the churn: at most one 1 MiB entry fits" "$(json "j['tiers'][0]['entries']" <<<"$OUT")" -le 1
run cache verify
expect_eq "after the churn: verify exits 0" 0 "$RC"

stop_server
finish
