#!/usr/bin/env bash
# F7 of the fault suite: one process whose clock is off by +1 h, -1 h, +1 day or -1 day (libfaketime, Debian
# package `faketime`) installs, hits and runs gc on a tier that processes with the right clock use too.
# libfaketime runs with NO_FAKE_STAT=1: the process sees the timestamps the filesystem stamped, as a host whose
# clock is off does on a filesystem shared with others (NFS stamps with the server's clock). Its UTIME_NOW is
# still rewritten into its own time by libfaketime, as on filesystems where the client stamps times.
# (libfaketime's default, which also shifts the timestamps the process reads, is not used: in 0.9.10 it shifts
# what stat and fstat return but not fstatat or statx, so one file shows two mtimes to one process, a world no
# host is in. A whole host whose kernel clock is off stamps its own files with that clock and is consistent.)
# Cases, for each skew:
#   A. while a process with the right clock downloads a shard slowly, the skewed process runs `cache gc` on a tier
#      with max_age 30m: the live staging file is not swept, no fresh entry is expired, and the download completes
#      with the right bytes. A skewed hit (max_age 30m) is a hit and a skewed install has the right bytes.
#   B. 4 entries of known ages; the skewed process hits the oldest; a gc (right clock, then skewed) over
#      max_bytes evicts one entry: never the one just bumped.
#   C. (-1 h and -1 day) an O_EXCL lock file (no flock, DATAVO_FAULT_FLOCK=ENOLCK) left 60 s ago by a holder on
#      another host: the skewed waiter takes it over (stale after 20 s) instead of waiting for ever.
. "$(dirname "$0")/lib.sh"

faketime_lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
[ -n "$faketime_lib" ] || die "libfaketime" "not installed (Debian package faketime; scripts/install-deps.sh installs it)"
[ -n "${DATAVO_FAULT_LIB:-}" ] && [ -f "$DATAVO_FAULT_LIB" ] || die "fault library" "DATAVO_FAULT_LIB is not set or missing"

www="$E2E_TMP/www"
mkdir -p "$www"
declare -A sha_of
for name in slow fresh e1 e2 e3 e4 takeover; do
  bytes=$((256 * 1024))
  [ "$name" = slow ] && bytes=$((6 * 1024 * 1024))  # 24 s at the rate below
  sha_of[$name]=$(make_shard "$www/$name.bin" "$bytes")
done
start_server "$www"

tier="$E2E_TMP/tier"
skews=(+1h -1h +1d -1d)
declare -A to_libfaketime=([+1h]=+1h [-1h]=-1h [+1d]=+1d [-1d]=-1d)

# skewed SKEW MODE [VAR=VALUE...] -- DATAVO ARGS: runs datavo with its clock off by SKEW; sets RC, OUT, ERR.
skewed() {
  local skew=$1 mode=$2 envs=()
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  [ "$mode" = true-stat ] || die "skewed" "mode $mode: only true-stat (see the top of this file)"
  envs+=(NO_FAKE_STAT=1)
  RC=0
  timeout -k 5 "${SKEW_TIMEOUT:-60}" env LD_PRELOAD="$faketime_lib${PRELOAD_MORE:+:$PRELOAD_MORE}" \
    FAKETIME="${to_libfaketime[$skew]}" "${envs[@]}" "$DATAVO_BIN" --config "$E2E_CONFIG" "$@" \
    >"$E2E_TMP/.sk.out" 2>"$E2E_TMP/.sk.err" || RC=$?
  OUT=$(cat "$E2E_TMP/.sk.out")
  ERR=$(cat "$E2E_TMP/.sk.err")
}
h() { hash_for "$1"; }
url() { echo "$SERVER_URL/$1.bin"; }
entry_of() { echo "$tier/local/$(h "$1").tar"; }

# The skewed process really is skewed.
now=$(date +%s)
faked=$(env LD_PRELOAD="$faketime_lib" FAKETIME=+1d date +%s)
expect_cmp "libfaketime shifts the clock (+1d: $((faked - now)) s)" $((faked - now)) -ge 86000

# --- A. gc by a skewed process during a live download; skewed install and hit ----------------------------------
write_config <<EOF
tiers:
  - name: t
    path: $tier
    max_age: 30m
EOF
run cache fetch "$(h fresh)" --url "$(url fresh)" --sha256 "${sha_of[fresh]}"
expect_eq "A: a fresh entry is installed" 0 "$RC"
dv --json cache fetch "$(h slow)" --url "$(url slow)?rate=262144" --sha256 "${sha_of[slow]}" \
  >"$E2E_TMP/slow.out" 2>"$E2E_TMP/slow.err" &
writer=$!
track_pid "$writer"
staging_has_bytes() { local f; for f in "$tier"/.staging/*.tmp; do [ -s "$f" ] && return 0; done; return 1; }
wait_until 20 staging_has_bytes || fail "A: the slow download started" "no staging bytes in 20 s"
live=$(ls "$tier"/.staging/*.tmp 2>/dev/null | head -1)
swept_total=0 expired_total=0 beside=0
# The staging file is kept, or gone because the download has ended (installed: a loaded machine can take longer than
# the download for the runs below); the runs that started beside it are counted.
live_kept() { [ -e "$live" ] || { [ "$1" = 1 ] && [ -e "$(entry_of slow)" ]; } || [ "$1" = 0 ]; }
for mode in true-stat; do
  for skew in "${skews[@]}"; do
    was_live=0
    [ -e "$live" ] && was_live=1 beside=$((beside + 1))
    skewed "$skew" "$mode" -- --json cache gc
    swept=$(json "j['tiers'][0]['staging_swept']" <<<"$OUT" 2>/dev/null)
    evicted=$(json "j['tiers'][0]['evicted']" <<<"$OUT" 2>/dev/null)
    if [ "$RC" -eq 0 ] && [ "$swept" = 0 ] && [ "$evicted" = 0 ] && live_kept $was_live && [ -e "$(entry_of fresh)" ]; then
      pass "A: $mode $skew: gc sweeps no live staging file and expires no fresh entry"
    else
      fail "A: $mode $skew: gc sweeps no live staging file and expires no fresh entry" \
        "rc=$RC swept=$swept evicted=$evicted live=$([ -e "$live" ] && echo kept || echo GONE) $(e2e_abbrev "$ERR")"
    fi
    swept_total=$((swept_total + ${swept:-0}))
    expired_total=$((expired_total + ${evicted:-0}))
    # A skewed hit on the fresh entry (max_age 30m) is a hit, not an expiry.
    skewed "$skew" "$mode" -- --json cache fetch "$(h fresh)" --url "$(url fresh)"
    expect_eq "A: $mode $skew: a hit on a fresh entry is a hit (not expired by max_age)" hit \
      "$(json "j['source']" <<<"$OUT" 2>/dev/null)"
  done
done
expect_cmp "A: gc ran beside the live download ($beside of ${#skews[@]} runs)" "$beside" -ge 2
rc=0
wait "$writer" || rc=$?
expect_eq "A: the download that gc ran beside completes" 0 "$rc"
expect_eq "A: ... with the right bytes" "${sha_of[slow]}" "$(sha256_of "$(entry_of slow)" 2>&1)"
# A skewed install.
for skew in "${skews[@]}"; do
  run cache rm "$(h e1)"
  skewed "$skew" true-stat -- cache fetch "$(h e1)" --url "$(url e1)" --sha256 "${sha_of[e1]}"
  expect_eq "A: true-stat $skew: an install by the skewed process has the right bytes" "${sha_of[e1]}" \
    "$(sha256_of "$(entry_of e1)" 2>&1)"
done
echo "# F7 A: 4 skewed gc runs beside a live download: $swept_total staging files swept, $expired_total fresh entries expired"

# --- B. LRU: a just-bumped entry is never evicted first ----------------------------------------------------------
rm -rf "$tier"
write_config <<EOF
tiers:
  - name: t
    path: $tier
EOF
for name in e1 e2 e3 e4; do
  run cache fetch "$(h "$name")" --url "$(url "$name")" --sha256 "${sha_of[$name]}"
done
# 4 entries of 256 KiB = 1 MiB over a max_bytes of 900 KiB: gc evicts to 810 KiB, i.e. one entry.
write_config <<EOF
tiers:
  - name: t
    path: $tier
    max_bytes: $((900 * 1024))
EOF
rm -f "$tier/.stats.json"
cp -a "$tier" "$E2E_TMP/lru-template"
bumped_lost=0
for skew in "${skews[@]}"; do
  for gc_clock in right skewed; do
    rm -rf "$tier"
    cp -a "$E2E_TMP/lru-template" "$tier"
    age=4
    for name in e1 e2 e3 e4; do touch -c -d "$age minutes ago" "$(entry_of "$name")"; age=$((age - 1)); done
    skewed "$skew" true-stat -- --json cache fetch "$(h e1)" --url "$(url e1)"
    expect_eq "B: $skew: the skewed hit on the oldest entry is a hit" hit "$(json "j['source']" <<<"$OUT" 2>/dev/null)"
    if [ "$gc_clock" = right ]; then run --json cache gc; else skewed "$skew" true-stat -- --json cache gc; fi
    if [ -e "$(entry_of e1)" ] && [ ! -e "$(entry_of e2)" ]; then
      pass "B: $skew, gc with the $gc_clock clock: the just-bumped entry stays, the next oldest goes"
    else
      bumped_lost=$((bumped_lost + 1))
      fail "B: $skew, gc with the $gc_clock clock: the just-bumped entry stays, the next oldest goes" \
        "e1 $([ -e "$(entry_of e1)" ] && echo kept || echo EVICTED), e2 $([ -e "$(entry_of e2)" ] && echo kept || echo evicted); mtimes: $(stat -c '%Y' "$tier"/local/*.tar 2>/dev/null | tr '\n' ' ')"
    fi
  done
done
echo "# F7 B: 8 gc passes after a skewed hit: $bumped_lost just-bumped entries evicted first"

# --- C. a skewed waiter takes over a dead holder's O_EXCL lock ----------------------------------------------------
write_config <<EOF
tiers:
  - name: t
    path: $tier
EOF
rm -rf "$tier"
for mode in true-stat; do
  for skew in -1h -1d; do
    lock="$tier/.locks/local.$(h takeover).lock"
    mkdir -p "$tier/.locks"
    rm -f "$(entry_of takeover)"
    printf 'otherhost 4242 00000000-0000-0000-0000-000000000000\n' >"$lock"
    touch -d '60 seconds ago' "$lock"
    start=$(date +%s)
    PRELOAD_MORE=$DATAVO_FAULT_LIB SKEW_TIMEOUT=20 skewed "$skew" "$mode" DATAVO_FAULT_FLOCK=ENOLCK -- --json \
      cache fetch "$(h takeover)" --url "$(url takeover)" --sha256 "${sha_of[takeover]}"
    took=$(($(date +%s) - start))
    if [ "$RC" -eq 0 ] && [ "$(sha256_of "$(entry_of takeover)" 2>&1)" = "${sha_of[takeover]}" ]; then
      pass "C: $mode $skew: the skewed waiter takes over the lock of a holder dead for 60 s (in $took s)"
    else
      fail "C: $mode $skew: the skewed waiter takes over the lock of a holder dead for 60 s" \
        "rc=$RC after $took s: $(e2e_abbrev "$ERR")"
    fi
  done
done

stop_server
finish
