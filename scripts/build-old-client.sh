#!/usr/bin/env bash
# Builds the `datavo` CLI as it was before chunk digests, for the old-client half of tests/e2e/test_chunk_digests.sh
# (docs/protocol.md, "Compatibility": an old client and a new server). The source is this clone's own history
# (commit f906600, the parent of c2c73ee, which added the ticket's chunk digests): nothing is downloaded.
#
# Usage: scripts/build-old-client.sh BUILD_DIR
# Prints the binary's path on stdout. Exit 3, saying why on stderr, when this clone cannot give that commit (a
# shallow clone, or a tree that is not a git clone); exit 1 when its build fails. A binary already built in
# BUILD_DIR is reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: scripts/build-old-client.sh BUILD_DIR}
commit=f906600
binary="$build/build/cli/datavo"
if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "build-old-client.sh: this clone has no commit $commit (shallow, or not a git clone): the old client is not built" >&2
  exit 3
fi
rm -rf "$build/src"
mkdir -p "$build/src"
git -C "$root" archive --format=tar "$commit" | tar -x -C "$build/src"
if ! DATAVO_TARGET=datavo DATAVO_JOBS="${DATAVO_JOBS:-2}" "$build/src/scripts/build.sh" "$build/build" \
  -DDATAVO_PYTHON=OFF >"$build/build.log" 2>&1; then
  tail -n 40 "$build/build.log" >&2
  echo "build-old-client.sh: the build of $commit failed (log: $build/build.log)" >&2
  exit 1
fi
echo "$binary"
