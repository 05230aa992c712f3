#!/usr/bin/env bash
# F6 of the fault suite: two hosts on one shared tier, simulated. This machine's kernel has no NFS client
# (CONFIG_NFS_FS is off, /proc/filesystems lists no nfs), so a loopback NFS export cannot be mounted; instead each
# "host" is a set of namespaces made with unshare(1):
#   - its own UTS namespace with its own hostname (hosta, hostb): the host part of staging names and lock owners;
#   - its own PID namespace (--pid --fork --mount-proc): both hosts' processes get the same small pids, as two
#     machines would, so a name built from the pid alone would collide;
#   - its own mount namespace, in which the shared directory is bind-mounted at the tier path and a boot id of its
#     own is bind-mounted over /proc/sys/kernel/random/boot_id.
# Both hosts then fetch overlapping shards at once (8 each, 4 shared; 4 processes per host, each in its own order),
# once with flock and once without (DATAVO_FAULT_FLOCK=ENOLCK: O_EXCL lock files holding host, pid and boot id):
#   - every fetch succeeds and every entry has the right bytes (0 corrupt entries);
#   - each shard is downloaded once in all (single flight across the hosts, through the shared tier's locks);
#   - the staging names seen during the run carry both hosts' names, the same pids appear on both hosts, and no
#     name is used twice; nothing is left in .staging/ or .locks/.
# Then: while hosta downloads a shard slowly, hostb runs gc and fetches the same shard: hosta's live staging file
# is neither swept nor adopted by hostb, and hostb waits and is served hosta's download.
# Needs new mount, UTS and PID namespaces and bind mounts in them (root with CAP_SYS_ADMIN, and a kernel that grants
# them), which an unprivileged container, a chroot or some CI runners refuse. A refusal is told apart from a failure
# of the product: before anything else, one simulated host is set up exactly as the cases set them up, running
# `true`; when the machine refuses that, the suite is skipped with the reason (exit 77, reported by ctest as
# skipped), or fails under DATAVO_REQUIRE_NAMESPACES=1, which .ci/run sets so that CI never skips it. Once the
# namespaces work, every failure is a failure. tests/e2e/test_namespaces_refused.sh checks both outcomes.
. "$(dirname "$0")/lib.sh"

shared="$E2E_TMP/shared" # the "export"
mnt="$E2E_TMP/mnt"       # where each host mounts it: the tier path
mkdir -p "$shared" "$mnt"
declare -A boot=([hosta]=aaaaaaaa-0000-4000-8000-000000000001 [hostb]=bbbbbbbb-0000-4000-8000-000000000002)

# on_host HOST COMMAND: runs COMMAND (bash) as HOST, with the shared directory mounted at $mnt.
on_host() {
  local host=$1 command=$2
  echo "${boot[$host]}" >"$E2E_TMP/boot.$host"
  unshare --mount --uts --pid --fork --mount-proc --propagation private bash -c "
    hostname $host &&
    mount --bind '$E2E_TMP/boot.$host' /proc/sys/kernel/random/boot_id &&
    mount --bind '$shared' '$mnt' || exit 99
    $command"
}

if ! refusal=$(on_host hosta true 2>&1); then
  refused_privilege "namespaces" "this machine refuses the namespaces of a simulated host (unshare --mount --uts --pid \
--fork --mount-proc, hostname, mount --bind; uid $(id -u)): $(e2e_abbrev "$refusal")" DATAVO_REQUIRE_NAMESPACES
fi
pass "a simulated host can be set up here (mount, UTS and PID namespaces, bind mounts)"

[ -n "${DATAVO_FAULT_LIB:-}" ] && [ -f "$DATAVO_FAULT_LIB" ] || die "fault library" "DATAVO_FAULT_LIB is not set or missing"
www="$E2E_TMP/www"
mkdir -p "$www"
start_server "$www" --delay-ms 200
write_config <<EOF
tiers:
  - name: shared
    path: $mnt
EOF

shards=12
shard_bytes=$((512 * 1024))
for round in flock excl; do
  declare -A sha=()
  for i in $(seq 0 $((shards - 1))); do sha[$i]=$(make_shard "$www/$round-$i.bin" "$shard_bytes"); done
  # hosta fetches shards 0-7, hostb 4-11: 4-7 are wanted by both.
  declare -A wanted=([hosta]="0 1 2 3 4 5 6 7" [hostb]="4 5 6 7 8 9 10 11")
  faults=""
  [ "$round" = excl ] && faults="LD_PRELOAD=$DATAVO_FAULT_LIB DATAVO_FAULT_FLOCK=ENOLCK"
  rm -f "$E2E_TMP/go" "$E2E_TMP/done" "$E2E_TMP"/rc.* "$E2E_TMP/names"
  host_pids=()
  for host in hosta hostb; do
    cmds=""
    for p in 1 2 3 4; do
      order=$(shuf -e ${wanted[$host]} | tr '\n' ' ')
      fetches=""
      for i in $order; do
        fetches+="env $faults timeout -k 5 60 '$DATAVO_BIN' --config '$E2E_CONFIG' --json cache fetch $(hash_for "$round-$i") --url '$SERVER_URL/$round-$i.bin' --sha256 ${sha[$i]} >>'$E2E_TMP/out.$round.$host.$p' 2>>'$E2E_TMP/err.$round.$host.$p' || rc=1; "
      done
      cmds+="( rc=0; $fetches echo \$rc >'$E2E_TMP/rc.$host.$p' ) & "
    done
    on_host "$host" "while [ ! -e '$E2E_TMP/go' ]; do sleep 0.01; done; $cmds wait" &
    host_pids+=($!)
    track_pid $!
  done
  # Watch the staging directory from outside both hosts while they run.
  (while [ ! -e "$E2E_TMP/done" ]; do ls "$shared/.staging" 2>/dev/null; sleep 0.005; done >"$E2E_TMP/names") &
  watcher=$!
  track_pid $watcher
  sleep 0.3
  touch "$E2E_TMP/go"
  for pid in "${host_pids[@]}"; do wait "$pid"; done
  touch "$E2E_TMP/done"
  wait "$watcher"

  failed=0
  for host in hosta hostb; do
    for p in 1 2 3 4; do [ "$(cat "$E2E_TMP/rc.$host.$p" 2>/dev/null)" = 0 ] || failed=$((failed + 1)); done
  done
  expect_eq "$round: all 8 processes of the two hosts fetch every shard they want" 0 "$failed"
  [ "$failed" -eq 0 ] || echo "# stderr: $(e2e_abbrev "$(cat "$E2E_TMP"/err.$round.* 2>/dev/null)")"
  corrupt=0 downloads=0 extra=0
  for i in $(seq 0 $((shards - 1))); do
    got=$(sha256_of "$shared/local/$(hash_for "$round-$i").tar" 2>/dev/null)
    [ "$got" = "${sha[$i]}" ] || corrupt=$((corrupt + 1))
    n=$(server_requests "/$round-$i.bin")
    downloads=$((downloads + n))
    [ "$n" -le 1 ] || extra=$((extra + n - 1))
  done
  expect_eq "$round: 0 corrupt or missing entries (of $shards)" 0 "$corrupt"
  expect_eq "$round: each shard downloaded once across both hosts ($downloads downloads for $shards shards)" "$shards" "$downloads"
  names=$(sort -u "$E2E_TMP/names" | grep -v '^$')
  hosts_seen=$(cut -d. -f1 <<<"$names" | sort -u | tr '\n' ' ')
  foreign=$(grep -v -e '^hosta\.' -e '^hostb\.' <<<"$names" | head -3)
  expect_eq "$round: every staging name carries the writing host's name" "" "$foreign"
  # The same pid on both hosts (PID namespaces), yet distinct names.
  pids_a=$(grep '^hosta\.' <<<"$names" | cut -d. -f2 | sort -u)
  pids_b=$(grep '^hostb\.' <<<"$names" | cut -d. -f2 | sort -u)
  same_pids=$(comm -12 <(echo "$pids_a") <(echo "$pids_b") | grep -c . || true)
  dup=$(sed 's/^[^.]*\.//' <<<"$names" | sort | uniq -d | grep -c . || true)
  expect_eq "$round: no staging name used by both hosts" 0 "$(comm -12 <(grep '^hosta' <<<"$names" | sort) <(grep '^hostb' <<<"$names" | sort) | grep -c . || true)"
  expect_empty_dir "$round: nothing left in .staging" "$shared/.staging"
  expect_eq "$round: no per-shard lock left" "" "$(shard_locks "$shared")"
  echo "# F6 $round: $shards shards, 2 hosts x 4 processes: $downloads downloads, $corrupt corrupt;" \
    "staging names seen: $(grep -c . <<<"$names") from hosts $hosts_seen; pids used on both hosts: $same_pids" \
    "(names equal but for the host: $dup); 0 collisions"
done

# --- a live download on one host is neither swept nor adopted by the other ------------------------------------------
sha_slow=$(make_shard "$www/slow.bin" $((2 * 1024 * 1024)))
h_slow=$(hash_for slow)
on_host hosta "timeout -k 5 60 '$DATAVO_BIN' --config '$E2E_CONFIG' --json cache fetch $h_slow --url '$SERVER_URL/slow.bin?rate=524288' --sha256 $sha_slow >'$E2E_TMP/slow.a.out' 2>'$E2E_TMP/slow.a.err'" &
slow_a=$!
track_pid $slow_a
has_staging() { [ -n "$(find "$shared/.staging" -name 'hosta.*' -size +0 2>/dev/null)" ]; }
wait_until 20 has_staging || fail "hosta's slow download started" "no staging file"
live=$(find "$shared/.staging" -name 'hosta.*' | head -1)
on_host hostb "timeout -k 5 60 '$DATAVO_BIN' --config '$E2E_CONFIG' --json cache gc >'$E2E_TMP/gc.b.out' 2>&1"
expect_file "hostb's gc keeps hosta's live staging file" "$live"
on_host hostb "timeout -k 5 60 '$DATAVO_BIN' --config '$E2E_CONFIG' --json cache fetch $h_slow --url '$SERVER_URL/slow.bin' --sha256 $sha_slow >'$E2E_TMP/slow.b.out' 2>'$E2E_TMP/slow.b.err'"
rc_b=$?
wait $slow_a
expect_eq "hostb's fetch of the shard hosta is downloading succeeds" 0 "$rc_b"
expect_eq "hostb waits and is served hosta's download" hit "$(json "j['source']" <"$E2E_TMP/slow.b.out" 2>&1)"
expect_eq "hosta's download completes" fetched "$(json "j['source']" <"$E2E_TMP/slow.a.out" 2>&1)"
expect_eq "one download of the shard in all" 1 "$(server_requests /slow.bin)"
expect_eq "the right bytes" "$sha_slow" "$(sha256_of "$shared/local/$h_slow.tar" 2>&1)"

stop_server
finish
