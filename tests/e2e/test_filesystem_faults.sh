#!/usr/bin/env bash
# Filesystem behaviours that a local disk does not show, injected into the real `datavo` binary with the
# LD_PRELOAD library tests/support/fault_inject.cpp ($DATAVO_FAULT_LIB):
#   - flock fails with ENOLCK (Lustre, some NFS), or succeeds without excluding anyone: logged once, the tier falls
#     back to O_EXCL lock files, 8 concurrent processes still download once;
#   - futimens fails with EPERM / EROFS (entry owned by another user, read-only mount): the hit still succeeds;
#   - no user xattrs (ENOTSUP): the digest goes to a sidecar that verify uses and rm removes;
#   - no RENAME_NOREPLACE (EINVAL, as on NFS): the install falls back to rename(2).
. "$(dirname "$0")/lib.sh"

[ -n "${DATAVO_FAULT_LIB:-}" ] && [ -f "$DATAVO_FAULT_LIB" ] || die "fault library" "DATAVO_FAULT_LIB is not set or missing"

www="$E2E_TMP/www"
mkdir -p "$www"
sha=$(make_shard "$www/shard.bin" $((1024 * 1024)))
# Every process must look the hash up while the first download is in flight: a 2 s delay leaves room for 8 spawns on
# CI's loaded 2 cores (with 300 ms, a late one once found the entry installed and needed no lock).
start_server "$www" --delay-ms 2000
tier="$E2E_TMP/t1"
write_config <<EOF
tiers:
  - name: t1
    path: $tier
EOF

faulty() { # faulty VAR=VALUE... -- datavo args: runs datavo with the fault library and the given faults
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  RC=0
  env LD_PRELOAD="$DATAVO_FAULT_LIB" "${envs[@]}" timeout -k 5 60 "$DATAVO_BIN" --config "$E2E_CONFIG" "$@" \
    >"$E2E_TMP/.f.out" 2>"$E2E_TMP/.f.err" || RC=$?
  OUT=$(cat "$E2E_TMP/.f.out")
  ERR=$(cat "$E2E_TMP/.f.err")
}

# --- flock -> ENOLCK, or a flock that excludes nobody: 8 processes at once, still one download -----------------
# The tier probes its lock semantics at first use; without a working flock it falls back to O_EXCL lock files with
# a heartbeat (include/datavo/folder_tier.hpp), so single flight holds.
for mode in ENOLCK NOOP; do
  h=$(hash_for "flock-$mode")
  cp "$www/shard.bin" "$www/shard-$mode.bin"
  pids=()
  for i in $(seq 8); do
    env LD_PRELOAD="$DATAVO_FAULT_LIB" DATAVO_FAULT_FLOCK=$mode timeout -k 5 60 "$DATAVO_BIN" --config "$E2E_CONFIG" \
      --json cache fetch "$h" --url "$SERVER_URL/shard-$mode.bin" --sha256 "$sha" \
      >"$E2E_TMP/flock.out.$mode.$i" 2>"$E2E_TMP/flock.err.$mode.$i" &
    pids+=($!)
    track_pid $!
  done
  bad=0
  for i in $(seq 8); do wait "${pids[$((i - 1))]}" || bad=$((bad + 1)); done
  expect_eq "flock $mode: all 8 fetches succeed" 0 "$bad"
  warned=$(grep -l "per-shard locks use O_EXCL lock files" "$E2E_TMP"/flock.err.$mode.* | wc -l)
  expect_eq "flock $mode: each process says it falls back to O_EXCL lock files" 8 "$warned"
  once=$(grep -c "per-shard locks use O_EXCL" "$E2E_TMP/flock.err.$mode.1")
  expect_eq "flock $mode: the warning is logged once per process" 1 "$once"
  expect_eq "flock $mode: the installed entry has the right bytes" "$sha" "$(sha256sum "$tier/local/$h.tar" | cut -c1-64)"
  expect_empty_dir "flock $mode: nothing left in .staging" "$tier/.staging"
  expect_eq "flock $mode: no lock file left" "" "$(shard_locks "$tier")"
  reqs=$(server_requests "/shard-$mode.bin")
  expect_eq "flock $mode: 8 processes, exactly 1 download" 1 "$reqs"
  echo "# flock $mode: $reqs download(s) for 8 processes"
done

# --- futimens -> EPERM / EROFS: the hit still succeeds, mtime untouched ----------------------------------------
for err in EPERM EROFS; do
  touch -d '3 days ago' "$tier/local/$h.tar"
  before=$(stat -c %Y "$tier/local/$h.tar")
  faulty DATAVO_FAULT_FUTIMENS=$err -- --json cache fetch "$h" --url "$SERVER_URL/missing"
  expect_eq "futimens $err: the hit succeeds" 0 "$RC"
  expect_eq "futimens $err: served as a hit" hit "$(echo "$OUT" | json 'j["source"]')"
  expect_eq "futimens $err: mtime left alone" "$before" "$(stat -c %Y "$tier/local/$h.tar")"
done
run --json cache fetch "$h" --url "$SERVER_URL/missing"
expect_ne "without the fault, a hit bumps mtime" "$before" "$(stat -c %Y "$tier/local/$h.tar")"

# --- no user xattrs: the digest sidecar --------------------------------------------------------------------------
h2=$(hash_for xattr)
faulty DATAVO_FAULT_FSETXATTR=ENOTSUP -- --json cache fetch "$h2" --url "$SERVER_URL/shard.bin"
expect_eq "no xattrs: the fetch succeeds" 0 "$RC"
expect_file "no xattrs: the digest is in a sidecar" "$tier/local/$h2.sha256"
expect_eq "no xattrs: the sidecar holds the SHA-256" "$sha" "$(head -c 64 "$tier/local/$h2.sha256")"
run cache verify
expect_eq "no xattrs: verify passes using the sidecar" 0 "$RC"
printf 'XXXX' | dd of="$tier/local/$h2.tar" bs=1 seek=100 conv=notrunc status=none
run cache verify
expect_eq "no xattrs: verify finds the corrupted entry through its sidecar" 1 "$RC"
expect_contains "no xattrs: verify names the bad entry" "$h2.tar" "$OUT$ERR"
run cache rm "$h2"
expect_no_file "no xattrs: rm removes the sidecar too" "$tier/local/$h2.sha256"

# --- no RENAME_NOREPLACE: fall back to rename(2) -----------------------------------------------------------------
h3=$(hash_for rename)
faulty DATAVO_FAULT_RENAMEAT2=EINVAL -- --json cache fetch "$h3" --url "$SERVER_URL/shard.bin" --sha256 "$sha"
expect_eq "no RENAME_NOREPLACE: the fetch succeeds" 0 "$RC"
expect_eq "no RENAME_NOREPLACE: the entry is installed" "$sha" "$(sha256sum "$tier/local/$h3.tar" | cut -c1-64)"
expect_empty_dir "no RENAME_NOREPLACE: nothing left in .staging" "$tier/.staging"

finish
