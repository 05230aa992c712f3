#!/usr/bin/env bash
# F3 of the fault suite: every call of open, write, fdatasync, rename, utimensat/futimens, flock, readdir and read
# that the real `datavo` binary makes on the tier's paths is made to fail, one at a time, for every N over three
# scenarios:
#   install  `cache fetch` of a 192 KiB shard (given its SHA-256) into a one-tier cache that holds another entry
#   hit      `cache fetch` of an installed entry, with `verify: full` (so the hit reads the bytes too)
#   evict    `cache gc` of a tier holding 4 entries over its max_bytes (2 must go, the 2 newest must stay)
# First each scenario runs once with the LD_PRELOAD injector (tests/support/fault_inject.cpp) in counting mode
# (DATAVO_FAULT_PATH = the tier, DATAVO_FAULT_COUNT), then once per call and per N with DATAVO_FAULT_NTH=CALL:N:ERR.
# After every injected run:
#   - the exit code is 0, or 1 with an ERROR line on stderr: never a crash, an abort, a signal or a hang;
#   - every entry under a final name has the right bytes (its SHA-256), or is absent: never corrupt;
#   - nothing is left in .staging/ and no per-shard lock file is left: the error paths clean up;
#   - the eviction pass never removes one of the 2 newest entries: no shard lost; a failed directory listing makes
#     gc fail (exit 1), never pass for a shorter listing;
#   - a clean run of the same command afterwards succeeds with the right bytes: nothing is stuck.
# The suite prints every injection tried, and the figure: injections, how many fired, wrong bytes, lost, crashes.
. "$(dirname "$0")/lib.sh"

[ -n "${DATAVO_FAULT_LIB:-}" ] && [ -f "$DATAVO_FAULT_LIB" ] || die "fault library" "DATAVO_FAULT_LIB is not set or missing"

www="$E2E_TMP/www"
mkdir -p "$www"
shard_bytes=$((192 * 1024))
declare -A sha_of # content hash -> SHA-256 of its bytes
for name in s0 s1 s2 s3 s4; do
  sha=$(make_shard "$www/$name.bin" "$shard_bytes")
  h=$(hash_for "$name")
  sha_of[$h]=$sha
  eval "h_$name=$h sha_$name=$sha"
done
start_server "$www"

tier="$E2E_TMP/tier"
templates="$E2E_TMP/templates"
mkdir -p "$templates"
plain_config="$E2E_TMP/plain.yaml"
full_config="$E2E_TMP/full.yaml"
evict_config="$E2E_TMP/evict.yaml"
cat >"$plain_config" <<EOF
tiers:
  - name: t
    path: $tier
EOF
cat >"$full_config" <<EOF
tiers:
  - name: t
    path: $tier
    verify: full
EOF
# 4 entries of 192 KiB = 768 KiB over a max_bytes of 600 KiB: gc evicts to 540 KiB, i.e. the 2 oldest.
cat >"$evict_config" <<EOF
tiers:
  - name: t
    path: $tier
    max_bytes: $((600 * 1024))
EOF

clean_dv() { timeout -k 5 60 "$DATAVO_BIN" --config "$1" "${@:2}" >/dev/null 2>"$E2E_TMP/.clean.err"; }
fetch_args() { echo "cache fetch $1 --url $SERVER_URL/$2.bin --sha256 ${sha_of[$1]}"; }

# --- the starting states, made once without faults and copied (with their xattrs) before every run --------------
rm -rf "$tier"
clean_dv "$plain_config" $(fetch_args "$h_s0" s0) || die "template install" "$(cat "$E2E_TMP/.clean.err")"
cp -a "$tier" "$templates/install"
clean_dv "$plain_config" $(fetch_args "$h_s1" s1) || die "template hit" "$(cat "$E2E_TMP/.clean.err")"
cp -a "$tier" "$templates/hit"
for name in s2 s3 s4; do
  eval "h=\$h_$name"
  clean_dv "$plain_config" $(fetch_args "$h" "$name") || die "template evict" "$(cat "$E2E_TMP/.clean.err")"
done
# Distinct ages, oldest first: s0, s1, s2, s3, s4 (s0 is not in this template's LRU test: it is evicted anyway).
age=10
for name in s0 s1 s2 s3 s4; do
  eval "h=\$h_$name"
  touch -d "$age minutes ago" "$tier/local/$h.tar"
  age=$((age - 1))
done
rm -f "$tier/local/$h_s0.tar"
rm -f "$tier/.stats.json"
cp -a "$tier" "$templates/evict"
pass "made the starting states (install: 1 entry; hit: 2 entries; evict: 4 entries over max_bytes)"

scenario_config() {
  case "$1" in
    install) echo "$plain_config" ;;
    hit) echo "$full_config" ;;
    evict) echo "$evict_config" ;;
  esac
}
scenario_args() {
  case "$1" in
    install | hit) fetch_args "$h_s1" s1 ;;
    evict) echo "cache gc" ;;
  esac
}

reset_tier() {
  rm -rf "$tier"
  cp -a "$templates/$1" "$tier"
}

# run_injected SCENARIO [VAR=VALUE...]: resets the tier, runs the scenario's command under the injector.
run_injected() {
  local scenario=$1
  shift
  reset_tier "$scenario"
  RC=0
  # shellcheck disable=SC2046
  # The injector goes into datavo alone (env execs it), not into timeout, which would count for itself.
  timeout -k 5 60 env LD_PRELOAD="$DATAVO_FAULT_LIB" DATAVO_FAULT_PATH="$tier" "$@" "$DATAVO_BIN" \
    --config "$(scenario_config "$scenario")" $(scenario_args "$scenario") >"$E2E_TMP/.inj.out" 2>"$E2E_TMP/.inj.err" ||
    RC=$?
  ERR=$(cat "$E2E_TMP/.inj.err")
}

# What is wrong with the tier after an injected run (empty when nothing is): wrong bytes, leftovers, lost shards.
WRONG=0 LOST=0 LEFT=0
check_tier() {
  local scenario=$1 problems=() f name h got
  for f in "$tier"/local/*.tar; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .tar)
    got=$(sha256_of "$f")
    if [ "$got" != "${sha_of[$name]:-none}" ]; then
      problems+=("wrong bytes in $name.tar")
      WRONG=$((WRONG + 1))
    fi
  done
  if [ -n "$(staging_files "$tier")" ]; then
    problems+=("left in .staging: $(staging_files "$tier" | tr '\n' ' ')")
    LEFT=$((LEFT + 1))
  fi
  if [ -n "$(shard_locks "$tier")" ]; then
    problems+=("lock files left: $(shard_locks "$tier" | tr '\n' ' ')")
    LEFT=$((LEFT + 1))
  fi
  case "$scenario" in
    install | hit)
      [ -e "$tier/local/$h_s0.tar" ] || { problems+=("the other entry s0 was lost"); LOST=$((LOST + 1)); }
      ;;
    evict)
      for h in "$h_s3" "$h_s4"; do
        [ -e "$tier/local/$h.tar" ] || { problems+=("newest entry $h lost"); LOST=$((LOST + 1)); }
      done
      ;;
  esac
  printf '%s' "${problems[*]:-}"
}

# The clean run after an injected one: must succeed (and, for a fetch, give the right bytes).
check_recovers() {
  local scenario=$1 path
  # shellcheck disable=SC2046
  if ! timeout -k 5 60 "$DATAVO_BIN" --config "$(scenario_config "$scenario")" $(scenario_args "$scenario") \
    >"$E2E_TMP/.rec.out" 2>"$E2E_TMP/.rec.err"; then
    echo "the clean run after it failed: $(e2e_abbrev "$(cat "$E2E_TMP/.rec.err")")"
    return
  fi
  if [ "$scenario" != evict ]; then
    path=$(head -1 "$E2E_TMP/.rec.out")
    [ "$(sha256_of "$path" 2>/dev/null)" = "$sha_s1" ] || echo "the clean run after it served wrong bytes"
  fi
}

declare -A errno_for=([open]=EIO [write]=ENOSPC [fdatasync]=EIO [rename]=EIO [utimens]=EIO [flock]=ENOLCK
  [readdir]=EIO [read]=EIO)
calls=(open write fdatasync rename utimens flock readdir read)
TRIED=0 FIRED=0 CRASHES=0 BAD=0
for scenario in install hit evict; do
  rm -f "$E2E_TMP/counts"
  run_injected "$scenario" DATAVO_FAULT_COUNT="$E2E_TMP/counts"
  expect_eq "$scenario: the counting run exits 0" 0 "$RC"
  counts=$(cat "$E2E_TMP/counts" 2>/dev/null)
  echo "# $scenario: calls on the tier's paths: $counts"
  for call in "${calls[@]}"; do
    total=$(sed -n "s/.*\b$call=\([0-9]*\).*/\1/p" <<<"$counts")
    total=${total:-0}
    fired=0 rc0=0 rc1=0 bad=0
    for ((n = 1; n <= total; n++)); do
      run_injected "$scenario" DATAVO_FAULT_NTH="$call:$n:${errno_for[$call]}"
      TRIED=$((TRIED + 1))
      outcome="rc=$RC"
      if grep -q "^datavo-fault: $call #$n failed" <<<"$ERR"; then
        fired=$((fired + 1))
        FIRED=$((FIRED + 1))
      else
        outcome+=" (not reached)"
      fi
      problems=""
      case "$RC" in
        0) rc0=$((rc0 + 1)) ;;
        1)
          rc1=$((rc1 + 1))
          grep -q 'ERROR' <<<"$ERR" || problems="exit 1 without an ERROR line"
          ;;
        *)
          CRASHES=$((CRASHES + 1))
          problems="exit $RC (crash, signal or hang)"
          ;;
      esac
      # gc must not pass off a listing that failed half-way for a complete one (it would evict out of LRU order).
      if [ "$scenario" = evict ] && [ "$call" = readdir ] && [[ "$outcome" != *"not reached"* ]] && [ "$RC" -eq 0 ]; then
        problems="exit 0 although a directory listing failed"
      fi
      tier_problems=$(check_tier "$scenario")
      [ -n "$tier_problems" ] && problems="$problems${problems:+; }$tier_problems"
      recovery=$(check_recovers "$scenario")
      [ -n "$recovery" ] && problems="$problems${problems:+; }$recovery"
      if [ -n "$problems" ]; then
        bad=$((bad + 1))
        BAD=$((BAD + 1))
        fail "$scenario: $call #$n fails with ${errno_for[$call]}" \
          "$problems; stderr: $(e2e_abbrev "$(grep -v '^datavo-fault' <<<"$ERR")")"
      fi
      msg=$(grep -m1 -E 'ERROR|WARNING' <<<"$ERR" | cut -c1-150)
      echo "#   injected $scenario $call #$n ${errno_for[$call]}: $outcome${msg:+: $msg}"
    done
    if [ "$total" -gt 0 ]; then
      expect_eq "$scenario: every failing $call ($total calls, $fired fired; exit 0: $rc0, exit 1: $rc1) is handled" 0 "$bad"
    fi
  done
done

expect_cmp "injections fired" "$FIRED" -gt 0
expect_eq "no wrong bytes under a final name" 0 "$WRONG"
expect_eq "no shard lost" 0 "$LOST"
expect_eq "no crash" 0 "$CRASHES"
expect_eq "nothing left behind" 0 "$LEFT"
echo "# F3: $TRIED injections tried ($FIRED fired) over install, hit and eviction: $WRONG wrong bytes," \
  "$LOST shards lost, $CRASHES crashes, $LEFT runs left files behind, $BAD runs with a problem"
stop_server
finish
