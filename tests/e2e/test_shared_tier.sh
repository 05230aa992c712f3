#!/usr/bin/env bash
# A folder tier shared by a Unix group, set up as docs/layout.md says (chgrp GROUP; chmod 2775), used by two real
# users of that group whose umask is 077:
#   - the first user installs an entry (`cache put`);
#   - the second user installs another, lists both (`cache ls`), hits the first user's entry (its mtime, the LRU
#     clock, is bumped) and runs `cache gc`;
#   - the first user lists both again and hits the second user's entry;
# with no "Permission denied" anywhere, and the group bits docs/layout.md promises on every directory and file.
# Needs root (useradd, groupadd, runuser); the users and the group are removed on exit. CI runs as root.
. "$(dirname "$0")/lib.sh"

need_root "shared-tier suite"
for tool in useradd userdel groupadd groupdel runuser; do
  command -v "$tool" >/dev/null || die "setup" "$tool is required"
done

group="dvshare$$"
user1="dvshare$$a"
user2="dvshare$$b"
# The hooks run in order: the users go before their group (groupdel refuses a group that is someone's primary one).
on_exit "userdel '$user1' 2>/dev/null; userdel '$user2' 2>/dev/null; groupdel '$group' 2>/dev/null; true"
groupadd "$group" || die "groupadd $group" "failed"
for user in "$user1" "$user2"; do
  useradd --no-create-home --no-user-group --gid "$group" --shell /usr/sbin/nologin "$user" ||
    die "useradd $user" "failed"
done
pass "created users $user1 and $user2 in group $group"

# Everything the users need is reachable by them: $E2E_TMP is 0700 by mktemp.
chmod 0711 "$E2E_TMP"
shared="$E2E_TMP/shared"
mkdir -p "$shared" "$E2E_TMP/in"
chgrp "$group" "$shared"
chmod 2775 "$shared"
printf 'tiers:\n  - name: shared\n    path: %s\n' "$shared" >"$E2E_TMP/shared.yaml"
chmod 0644 "$E2E_TMP/shared.yaml"
head -c 100000 /dev/urandom >"$E2E_TMP/in/one.bin"
head -c 120000 /dev/urandom >"$E2E_TMP/in/two.bin"
chmod 0755 "$E2E_TMP/in"
chmod 0644 "$E2E_TMP/in/"*.bin
for user in "$user1" "$user2"; do
  mkdir -p "$E2E_TMP/home-$user"
  chown "$user:$group" "$E2E_TMP/home-$user"
done
h1=$(hash_for one)
h2=$(hash_for two)

# as USER CMD...: runs datavo CMD as USER with umask 077 and a home of its own; sets RC, OUT, ERR.
as() {
  local user=$1
  shift
  RC=0
  runuser -u "$user" -- env -i PATH="$PATH" HOME="$E2E_TMP/home-$user" LANG=C \
    bash -c 'umask 077; exec "$@"' bash timeout 60 "$DATAVO_BIN" --config "$E2E_TMP/shared.yaml" "$@" \
    >"$E2E_TMP/as.out" 2>"$E2E_TMP/as.err" || RC=$?
  OUT=$(cat "$E2E_TMP/as.out")
  ERR=$(cat "$E2E_TMP/as.err")
}
expect_no_denial() {
  expect_eq "$1: no Permission denied" "" "$(grep -i 'permission denied' <<<"$ERR")"
}

as "$user1" --json cache put "$h1" "$E2E_TMP/in/one.bin"
expect_eq "$user1 (umask 077): cache put: exit 0" 0 "$RC"
expect_no_denial "$user1: cache put"
expect_eq "$user1: the entry is in the shared tier" "[\"shared\", \"fetched\"]" "$(json "[j['tier'], j['source']]" <<<"$OUT")"

# What docs/layout.md promises: group rwx and setgid on directories, group rw on entries and lock files.
bad_modes=$(find "$shared" -type d ! -perm -2070 -printf 'dir %p %m\n'; find "$shared" -type f ! -perm -0060 -printf 'file %p %m\n')
expect_eq "after $user1 (umask 077): directories are group rwx + setgid, files group rw" "" "$bad_modes"
expect_eq "after $user1: every directory and file has the tier's group" "" \
  "$(find "$shared" ! -group "$group" -printf '%p %g\n')"

as "$user2" --json cache put "$h2" "$E2E_TMP/in/two.bin"
expect_eq "$user2 (umask 077): cache put of another hash: exit 0" 0 "$RC"
expect_no_denial "$user2: cache put"

as "$user2" --json cache ls
expect_eq "$user2: cache ls: exit 0" 0 "$RC"
expect_eq "$user2: cache ls lists both entries" "$(printf '%s\n' "$h1" "$h2" | sort | tr '\n' ' ')" \
  "$(json "' '.join(sorted(e['content_hash'] for e in j['entry_list'])) + ' '" <<<"$OUT")"
expect_no_denial "$user2: cache ls"

entry1="$shared/local/$h1.tar"
touch -d '2020-01-01 00:00:00' "$entry1"
as "$user2" --json cache fetch "$h1" --url "file://$E2E_TMP/in/does-not-exist"
expect_eq "$user2: a hit on $user1's entry: exit 0, a hit" "[0, \"hit\"]" "[$RC, \"$(json "j['source']" <<<"$OUT")\"]"
expect_no_denial "$user2: the hit"
expect_cmp "$user2: the hit bumped the mtime of $user1's entry (the LRU clock)" "$(stat -c %Y "$entry1")" -gt \
  "$(date -d '2021-01-01' +%s)"

as "$user2" --json cache gc
expect_eq "$user2: cache gc: exit 0" 0 "$RC"
expect_no_denial "$user2: cache gc"
as "$user2" --json cache stats
expect_eq "$user2: cache stats: exit 0" 0 "$RC"
expect_no_denial "$user2: cache stats"

as "$user1" --json cache ls
expect_eq "$user1 again: cache ls lists both entries" 2 "$(json "j['entries']" <<<"$OUT")"
as "$user1" --json cache fetch "$h2" --url "file://$E2E_TMP/in/does-not-exist"
expect_eq "$user1: a hit on $user2's entry" "[0, \"hit\"]" "[$RC, \"$(json "j['source']" <<<"$OUT")\"]"
expect_no_denial "$user1: the hit"
expect_eq "both entries hold the right bytes" "$(sha256_of "$E2E_TMP/in/one.bin") $(sha256_of "$E2E_TMP/in/two.bin")" \
  "$(sha256_of "$entry1") $(sha256_of "$shared/local/$h2.tar")"
bad_modes=$(find "$shared" -type d ! -perm -2070 -printf 'dir %p %m\n'; find "$shared" -type f ! -perm -0060 -printf 'file %p %m\n')
expect_eq "at the end: directories group rwx + setgid, files group rw" "" "$bad_modes"

finish
