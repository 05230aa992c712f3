#!/usr/bin/env bash
# Single flight for whole datasets: 8 `datavo read` processes start at once on one cold dataset and one shared
# cache. Every process reads every sample, and each shard is fetched from the origin exactly once: the origin's
# /v1/metrics counts as many shard (and ticket) requests as there are shards.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=60

N=8
DS=stampede_v1/train
SAMPLES=96
PER_SHARD=12
SHARDS=$((SAMPLES / PER_SHARD))

# Samples of ~40 KiB, so that a shard download takes long enough for the readers to overlap on it.
python3 - "$E2E_TMP/src" "$SAMPLES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
for i in range(n):
    with open(os.path.join(root, "s%04d.feat.bin" % i), "wb") as f:
        f.write(os.urandom(40 * 1024))
    with open(os.path.join(root, "s%04d.label.txt" % i), "w") as f:
        f.write(str(i % 10))
PY
run --json pack "$E2E_TMP/src" --root "$E2E_TMP/store" --dataset "$DS" --samples-per-shard "$PER_SHARD"
[ "$RC" -eq 0 ] || die "pack" "$ERR"
expect_eq "pack: $SHARDS shards" "$SHARDS" "$(json "j['total_shards']" <<<"$OUT")"

port_file="$E2E_TMP/.origin.port"
"$DATAVO_BIN" serve "$E2E_TMP/store" --port 0 --port-file "$port_file" --quiet >"$E2E_TMP/.origin.log" 2>&1 &
ORIGIN_PID=$!
track_pid "$ORIGIN_PID"
origin_up() { [ -s "$port_file" ] || { kill -0 "$ORIGIN_PID" 2>/dev/null || return 2; return 1; }; }
wait_until 15 origin_up || die "start datavo serve" "$(cat "$E2E_TMP/.origin.log")"
export DATAVO_SERVER="http://127.0.0.1:$(cat "$port_file")"

# requests ROUTE: datavo_requests_total of the origin for ROUTE, summed over statuses.
requests() {
  python3 - "$DATAVO_SERVER" "$1" <<'PY'
import re, sys, urllib.request
url, route = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(url + "/v1/metrics", timeout=10).read().decode()
total = 0
for line in text.splitlines():
    m = re.match(r'datavo_requests_total\{(.*)\}\s+([0-9.eE+]+)$', line)
    if m and dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))).get("route") == route:
        total += int(float(m.group(2)))
print(total)
PY
}

write_config <<EOF
tiers:
  - name: local
    path: $E2E_TMP/cache
EOF

pids=()
for ((i = 0; i < N; i++)); do
  timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" --config "$E2E_CONFIG" --json read "$DS" --key feat.bin --key label.txt \
    >"$E2E_TMP/out.$i" 2>"$E2E_TMP/err.$i" &
  pids+=($!)
  track_pid $!
done
failed=0
for ((i = 0; i < N; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    echo "# reader $i: rc $rc: $(e2e_abbrev "$(cat "$E2E_TMP/err.$i")")"
  fi
done
expect_eq "all $N readers exit 0" 0 "$failed"

samples=$(cat "$E2E_TMP"/out.* | python3 -c 'import json, sys; print(sorted(set(json.loads(l)["samples"] for l in sys.stdin if l.strip())))')
expect_eq "every reader read every sample" "[$SAMPLES]" "$samples"
fetched=$(cat "$E2E_TMP"/out.* | python3 -c 'import json, sys; print(sum(json.loads(l)["origin"]["shards"] for l in sys.stdin if l.strip()))')
expect_eq "the readers fetched $SHARDS shards from the origin between them" "$SHARDS" "$fetched"
expect_eq "origin: exactly one shard request per shard" "$SHARDS" "$(requests shard)"
expect_eq "origin: exactly one ticket per shard" "$SHARDS" "$(requests ticket)"
expect_eq "origin: one manifest request per reader" "$N" "$(requests manifest)"
expect_stat local installs "$SHARDS"
expect_stat local errors 0
expect_empty_dir "nothing left in .staging" "$E2E_TMP/cache/.staging"

# And a warm stampede goes nowhere near the shards.
pids=()
for ((i = 0; i < N; i++)); do
  timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" --config "$E2E_CONFIG" --json read "$DS" --key feat.bin --key label.txt \
    >"$E2E_TMP/warm.$i" 2>&1 &
  pids+=($!)
  track_pid $!
done
failed=0
for ((i = 0; i < N; i++)); do wait "${pids[$i]}" || failed=$((failed + 1)); done
expect_eq "warm stampede: all $N readers exit 0" 0 "$failed"
expect_eq "warm stampede: still one shard request per shard" "$SHARDS" "$(requests shard)"

finish
