#!/usr/bin/env bash
# A folder tier shared by a Unix group, set up as docs/layout.md says (chgrp GROUP; chmod 2775), used by two real
# users of that group whose umask is 077:
#   - the first user installs an entry (`cache put`);
#   - the second user installs another, lists both (`cache ls`), hits the first user's entry (its mtime, the LRU
#     clock, is bumped) and runs `cache gc`;
#   - the first user lists both again and hits the second user's entry;
# with no "Permission denied" anywhere, and the group bits docs/layout.md promises on every directory and file.
# The users run a copy of the binary in the suite's temp dir (0711), executable by all, not the build's: the
# checkout may lie where they cannot reach it (root's 0700 home). Before running datavo as them, the suite checks
# that each user can reach what it gave them (the binary, the config, the inputs, the tier's directory, a home) and
# that the copy runs as them (it needs no file of the build tree), and says which user cannot reach which path:
# that is the suite's set-up failing, not the product. From there on, a denial is the product's.
# Needs root (useradd, groupadd, runuser); the users and the group are removed on exit. CI runs as root.
. "$(dirname "$0")/lib.sh"

need_root "shared-tier suite" "it adds two users and a group and runs datavo as them"
for tool in useradd userdel groupadd groupdel runuser; do
  command -v "$tool" >/dev/null || die "setup" "$tool is required"
done

group="dvshare$$"
user1="dvshare$$a"
user2="dvshare$$b"
# The hooks run in order: the users go before their group (groupdel refuses a group that is someone's primary one).
on_exit "userdel '$user1' 2>/dev/null; userdel '$user2' 2>/dev/null; groupdel '$group' 2>/dev/null; true"
err=$(groupadd "$group" 2>&1) || refused_privilege "groupadd $group" "the machine refuses to add a group: $err"
for user in "$user1" "$user2"; do
  err=$(useradd --no-create-home --no-user-group --gid "$group" --shell /usr/sbin/nologin "$user" 2>&1) ||
    refused_privilege "useradd $user" "the machine refuses to add a user: $err"
done
pass "created users $user1 and $user2 in group $group"

# Everything the users need is reachable by them: $E2E_TMP is 0700 by mktemp. They run from / (ctest's working
# directory, in the build tree, may be out of their reach).
cd / || die "setup" "cd /"
chmod 0711 "$E2E_TMP"
bin="$E2E_TMP/bin/datavo"
mkdir -p "$E2E_TMP/bin"
cp "$DATAVO_BIN" "$bin"
chmod 0755 "$E2E_TMP/bin" "$bin"
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

# unreachable USER MODES:PATH...: as USER, what it cannot do of what it is given, one line per problem, naming the
# path: MODES are test(1)'s r, w and x; every directory above PATH must be searchable (the first that is not is
# named, with its mode and owner).
unreachable() {
  local user=$1
  shift
  runuser -u "$user" -- bash -c '
    declare -A verb=([r]=read [w]=write [x]="execute (or search)")
    for spec in "$@"; do
      modes=${spec%%:*} path=${spec#*:} above=""
      IFS=/ read -ra parts <<<"${path#/}"
      for part in "${parts[@]:0:${#parts[@]}-1}"; do
        above+="/$part"
        if [ ! -x "$above" ]; then
          echo "cannot reach $path: no search permission on $above ($(stat -c "%A %U:%G" "$above" 2>&1))"
          continue 2
        fi
      done
      for ((i = 0; i < ${#modes}; i++)); do
        m=${modes:i:1}
        [ -"$m" "$path" ] || echo "cannot ${verb[$m]} $path ($(stat -c "%A %U:%G" "$path" 2>&1))"
      done
    done' bash "$@" 2>&1
}
for user in "$user1" "$user2"; do
  problems=$(unreachable "$user" "x:$bin" "r:$E2E_TMP/shared.yaml" "rx:$E2E_TMP/in" "r:$E2E_TMP/in/one.bin" \
    "r:$E2E_TMP/in/two.bin" "rwx:$shared" "rwx:$E2E_TMP/home-$user")
  [ -z "$problems" ] || die "setup: user $user can reach the paths the suite gave it" "$(e2e_abbrev "$problems")"
  version=$(runuser -u "$user" -- env -i PATH="$PATH" HOME="$E2E_TMP/home-$user" timeout 60 "$bin" --version 2>&1) ||
    die "setup: user $user can run the copy of datavo at $bin" "$(e2e_abbrev "$version"); ldd: $(e2e_abbrev \
      "$(ldd "$bin" 2>&1 | grep -i 'not found')")"
done
pass "users $user1 and $user2 reach the binary ($bin), the config, the inputs, the tier and their homes, and run datavo"
h1=$(hash_for one)
h2=$(hash_for two)

# as USER CMD...: runs datavo CMD as USER with umask 077 and a home of its own; sets RC, OUT, ERR.
as() {
  local user=$1
  shift
  RC=0
  runuser -u "$user" -- env -i PATH="$PATH" HOME="$E2E_TMP/home-$user" LANG=C \
    bash -c 'umask 077; exec "$@"' bash timeout 60 "$bin" --config "$E2E_TMP/shared.yaml" "$@" \
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
