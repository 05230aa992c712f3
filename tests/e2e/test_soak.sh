#!/usr/bin/env bash
# The soak run in CI (bench/soak.py) for 2 minutes: 4 readers (bench/soak_reader.cpp, built with the tests)
# read Zipf-distributed shards over 3x the tier's capacity from a loopback origin, with random SIGKILLs. Fails when
# a bound is broken: wrong bytes, a reader crash, quota overshoot above 1 shard, the tier ending over budget, fd or
# staging-file growth, failed reads, or a hit ratio far below an LRU simulation of the same trace.
# DATAVO_SOAK_MINUTES overrides the length (the default run, outside CI, is bench/soak.py's 30 minutes).
. "$(dirname "$0")/lib.sh"

[ -n "${DATAVO_SOAK_READER:-}" ] && [ -x "$DATAVO_SOAK_READER" ] || die "soak reader" "DATAVO_SOAK_READER is not set or missing"
minutes=${DATAVO_SOAK_MINUTES:-2}
rc=0
timeout -k 10 $((minutes * 60 + 120)) python3 "$DATAVO_SOURCE_DIR/bench/soak.py" --datavo-reader "$DATAVO_SOAK_READER" \
  --minutes "$minutes" --work "$E2E_TMP/soak" --json "$E2E_TMP/soak.json" >"$E2E_TMP/soak.log" 2>&1 || rc=$?
cat "$E2E_TMP/soak.log"
expect_eq "soak ($minutes min): every bound holds (bench/soak.py exit 0)" 0 "$rc"
finish
