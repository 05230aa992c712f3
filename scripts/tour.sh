#!/usr/bin/env bash
# A short tour of the cache alone (no origin protocol): `datavo cache info`, then it fetches
# one URL twice through a fresh cache from a loopback HTTP server: a miss (fetched from the origin), then a hit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
DATAVO_TARGET=datavo "$root/scripts/build.sh" "${DATAVO_BUILD_DIR:-$root/build}" >/dev/null
datavo="${DATAVO_BUILD_DIR:-$root/build}/cli/datavo"

work=$(mktemp -d "${TMPDIR:-/tmp}/datavo-demo.XXXXXX")
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

mkdir -p "$work/origin"
head -c $((64 << 20)) /dev/urandom >"$work/origin/shard-0003.tar"
sha=$(sha256sum "$work/origin/shard-0003.tar" | cut -d' ' -f1)
python3 "$root/tests/support/http_fault_server.py" --root "$work/origin" --port-file "$work/port" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
export DATAVO_SHARD_CACHE_DIR="$work/cache" DATAVO_SERVER="http://127.0.0.1:$port"
unset DATAVO_SHARD_CACHE_CONFIG

echo "\$ datavo cache info"
"$datavo" cache info
hash=$("$datavo" content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 \
  --key audio.wav --key transcript.txt --sample-id utt_0001 --sample-id utt_0002 --sample-id utt_0003)
url="http://127.0.0.1:$port/shard-0003.tar"
for pass in 1 2; do
  echo
  echo "\$ datavo cache fetch $hash --url $url --sha256 ${sha:0:12}... --json   # pass $pass"
  start=$(date +%s.%N)
  "$datavo" cache fetch "$hash" --url "$url" --sha256 "$sha" --json
  end=$(date +%s.%N)
  python3 -c "print(f'   {($end - $start) * 1000:.0f} ms')"
done
echo
echo "origin requests for the shard: $(python3 -c "import json,urllib.request; print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/_stats'))['paths'].get('/shard-0003.tar', {}).get('requests', 0))")"
echo "\$ datavo cache stats"
"$datavo" cache stats
