#!/usr/bin/env bash
# Sets everything up and runs the main job, `datavo demo`: it generates a synthetic speech dataset (audio.wav +
# transcript.txt), packs it, serves it on an ephemeral loopback port, and reads it twice through a fresh cache,
# printing the cold and the warm pass side by side (time, samples/s, origin requests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
build=${DATAVO_BUILD_DIR:-$root/build}
DATAVO_TARGET=datavo "$root/scripts/build.sh" "$build" >/dev/null
exec "$build/cli/datavo" demo "$@"
