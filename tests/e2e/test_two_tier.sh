#!/usr/bin/env bash
# A two-folder-tier hierarchy driven through the CLI: populate, hit, promote, capacity skips, no tier accepting,
# cache ls / rm / verify (--repair) / put, instances, a read-only tier, max_age, and the on-disk layout.
. "$(dirname "$0")/lib.sh"

www="$E2E_TMP/www"
mkdir -p "$www"
sha_a=$(make_shard "$www/a.bin" 300000)
sha_b=$(make_shard "$www/b.bin" 102400)
sha_c=$(make_shard "$www/c.bin" 50000)
start_server "$www"

fast="$E2E_TMP/fast"
slow="$E2E_TMP/slow"
write_config <<EOF
tiers:
  - name: fast
    path: $fast
  - name: slow
    path: $slow
EOF

# digest_of_entry PATH: the digest recorded for an entry (user xattr, else the .sha256 sidecar).
digest_of_entry() {
  python3 - "$1" <<'PY'
import os, sys
path = sys.argv[1]
try:
    print(os.getxattr(path, "user.datavo.sha256").decode().strip())
except OSError:
    sidecar = path[:-len(".tar")] + ".sha256"
    print(open(sidecar).read().strip() if os.path.exists(sidecar) else "none")
PY
}

# --- populate ---------------------------------------------------------------------------------------------------

ha=$(hash_for a)
run --json cache fetch "$ha" --url "$SERVER_URL/a.bin"
expect_eq "populate: exit 0" 0 "$RC"
expect_eq "populate: source fetched, served from fast, size" \
  "[\"fetched\", \"fast\", \"$fast/local/$ha.tar\", 300000]" \
  "$(json "[j['source'], j['tier'], j['path'], j['size_bytes']]" <<<"$OUT")"
expect_file "populate: entry in tier fast" "$fast/local/$ha.tar"
expect_file "populate: entry in tier slow" "$slow/local/$ha.tar"
expect_eq "populate: tier fast holds the right bytes" "$sha_a" "$(sha256_of "$fast/local/$ha.tar")"
expect_eq "populate: tier slow holds the right bytes" "$sha_a" "$(sha256_of "$slow/local/$ha.tar")"
expect_eq "populate: one request to the server" 1 "$(server_requests /a.bin)"
expect_eq "populate: the digest is recorded with the entry (fast)" "$sha_a" "$(digest_of_entry "$fast/local/$ha.tar")"
expect_eq "populate: the digest is recorded with the entry (slow)" "$sha_a" "$(digest_of_entry "$slow/local/$ha.tar")"
expect_empty_dir "populate: nothing left in fast/.staging" "$fast/.staging"
expect_empty_dir "populate: nothing left in slow/.staging" "$slow/.staging"
expect_eq "populate: no per-shard lock left" "" "$(shard_locks "$fast")"
expect_stat fast installs 1
expect_stat slow installs 1
expect_stat fast misses 1
expect_stat slow misses 1
expect_stat fast bytes_installed 300000

# Layout (include/datavo/folder_tier.hpp): entries 0664 and directories 02775; the umask (022 here) applies to the
# others' bits only, never to the group's. The setgid bit and the group bits are what make a tier shared by a Unix
# group work (docs/layout.md, "Sharing"); mkdir(2) on Linux ignores S_ISGID in its mode argument, so it takes an
# explicit chmod. tests/e2e/test_shared_tier.sh checks the same with umask 077 and two real users.
expect_eq "layout: entry mode is 0664 under umask 022" 664 "$(stat -c %a "$fast/local/$ha.tar")"
modes=$(cd "$E2E_TMP" && stat -c '%n=%a' fast fast/local fast/.staging fast/.locks slow slow/local | tr '\n' ' ')
expect_eq "layout: tier directories are setgid 02775 under umask 022" \
  "fast=2775 fast/local=2775 fast/.staging=2775 fast/.locks=2775 slow=2775 slow/local=2775 " "$modes"

# --- hit --------------------------------------------------------------------------------------------------------

run --json cache fetch "$ha" --url "$SERVER_URL/a.bin"
expect_eq "hit: source hit from fast" '["hit", "fast"]' "$(json "[j['source'], j['tier']]" <<<"$OUT")"
expect_eq "hit: no new request to the server" 1 "$(server_requests /a.bin)"
expect_stat fast hits 1

# --- promote ----------------------------------------------------------------------------------------------------

rm "$fast/local/$ha.tar"
run --json cache fetch "$ha" --url "$SERVER_URL/a.bin"
expect_eq "promote: exit 0" 0 "$RC"
expect_eq "promote: source promoted, served from fast" \
  "[\"promoted\", \"fast\", \"$fast/local/$ha.tar\"]" "$(json "[j['source'], j['tier'], j['path']]" <<<"$OUT")"
expect_eq "promote: the entry is back in fast with the right bytes" "$sha_a" "$(sha256_of "$fast/local/$ha.tar" 2>&1)"
expect_eq "promote: no new request to the server" 1 "$(server_requests /a.bin)"
expect_stat fast promotions 1
expect_stat slow hits 1
expect_empty_dir "promote: nothing left in fast/.staging" "$fast/.staging"

# --- cache ls ---------------------------------------------------------------------------------------------------

hc=$(hash_for c)
run cache fetch "$hc" --url "$SERVER_URL/c.bin"
expect_eq "second shard: exit 0" 0 "$RC"
run --json cache ls
expect_eq "cache ls --json: exit 0" 0 "$RC"
expected=$(json "sorted(j)" <<<"[[\"fast\", \"$ha\", 300000], [\"fast\", \"$hc\", 50000], [\"slow\", \"$ha\", 300000], [\"slow\", \"$hc\", 50000]]")
expect_eq "cache ls --json: both shards in both tiers" "$expected" \
  "$(json "sorted([r['tier'], r['content_hash'], r['size_bytes']] for r in j['entry_list'])" <<<"$OUT")"
expect_eq "cache ls --json: instance local, last_access ISO-8601" "true" \
  "$(json "all(r['instance'] == 'local' and len(r['last_access']) == 20 and r['last_access'].endswith('Z') for r in j['entry_list'])" <<<"$OUT")"
run cache ls
expect_eq "cache ls (text): a line per entry" 4 "$(grep -cE "$ha|$hc" <<<"$OUT")"
expect_match "cache ls (text): tier, hash, human size, age" "fast +$ha +293\\.0 KiB +[0-9]+ s ago" "$OUT"
expect_contains "cache ls (text): the total of tier fast" "tier fast: 2 entries, 341.8 KiB" "$OUT"
expect_contains "cache ls (text): the total of tier slow" "tier slow: 2 entries, 341.8 KiB" "$OUT"
expect_contains "cache ls (text): all copies, labelled so" \
  "all tiers: 4 copies, 683.6 KiB (a copy per tier that holds an entry; instance local)" "$OUT"
run --json cache ls
expect_eq "cache ls --json: a total per tier" '[["fast", 2, 350000, true], ["slow", 2, 350000, true]]' \
  "$(json "[[t['tier'], t['entries'], t['size_bytes'], t['listed']] for t in j['tiers']]" <<<"$OUT")"

# --- cache rm ---------------------------------------------------------------------------------------------------

run --json cache rm "$hc"
expect_eq "cache rm: exit 0" 0 "$RC"
expect_eq "cache rm --json: removed from both tiers" '["fast", "slow"]' "$(json "sorted(j['entry_list'][0]['removed_from'])" <<<"$OUT")"
expect_no_file "cache rm: gone from fast" "$fast/local/$hc.tar"
expect_no_file "cache rm: gone from slow" "$slow/local/$hc.tar"
run cache rm "$hc"
expect_eq "cache rm of an uncached hash: exit 1" 1 "$RC"
expect_contains "cache rm of an uncached hash: says so" "is not cached" "$ERR"
expect_stat fast evictions 1
before=$(server_requests /c.bin)
run --json cache fetch "$hc" --url "$SERVER_URL/c.bin"
expect_eq "fetch after rm: source fetched" fetched "$(json "j['source']" <<<"$OUT")"
expect_eq "fetch after rm: one more request" $((before + 1)) "$(server_requests /c.bin)"

# --- cache verify -----------------------------------------------------------------------------------------------

run cache verify
expect_eq "verify on a healthy cache: exit 0" 0 "$RC"
printf 'CORRUPTED!' | dd of="$fast/local/$ha.tar" bs=1 seek=1000 conv=notrunc status=none
expect_eq "corruption in place kept the size" 300000 "$(file_size "$fast/local/$ha.tar")"
run cache verify
expect_eq "verify with a corrupt entry: exit 1" 1 "$RC"
expect_contains "verify names the corrupt path" "$fast/local/$ha.tar" "$OUT"
run --json cache verify
expect_eq "verify --json: exit 1" 1 "$RC"
expect_eq "verify --json: bad_paths of fast" "[\"$fast/local/$ha.tar\"]" \
  "$(json "[r['bad_paths'] for r in j['tiers'] if r['tier'] == 'fast'][0]" <<<"$OUT")"
expect_eq "verify --json: slow is clean" 0 "$(json "[r['bad'] for r in j['tiers'] if r['tier'] == 'slow'][0]" <<<"$OUT")"
expect_file "verify without --repair leaves the entry" "$fast/local/$ha.tar"
run --json cache verify --repair
expect_eq "verify --repair: exit 0" 0 "$RC"
expect_eq "verify --repair: quarantined 1 in fast" 1 \
  "$(json "[r['quarantined'] for r in j['tiers'] if r['tier'] == 'fast'][0]" <<<"$OUT")"
expect_no_file "verify --repair: entry gone from its final name" "$fast/local/$ha.tar"
expect_eq "verify --repair: entry moved to .quarantine/" 1 \
  "$(find "$fast/.quarantine" -name "local.$ha.*.tar" | wc -l)"
expect_file "verify --repair: the good copy in slow stays" "$slow/local/$ha.tar"
run cache verify
expect_eq "verify after repair: exit 0" 0 "$RC"
run --json cache fetch "$ha" --url "$SERVER_URL/a.bin"
expect_eq "fetch after repair: promoted from slow" promoted "$(json "j['source']" <<<"$OUT")"
expect_eq "fetch after repair: right bytes in fast" "$sha_a" "$(sha256_of "$fast/local/$ha.tar" 2>&1)"
expect_eq "fetch after repair: still one request for a.bin" 1 "$(server_requests /a.bin)"

# --- cache put --------------------------------------------------------------------------------------------------

sha_p=$(make_shard "$E2E_TMP/local_file.bin" 77777)
hp=$(hash_for put)
run --json cache put "$hp" "$E2E_TMP/local_file.bin"
expect_eq "put: exit 0" 0 "$RC"
expect_eq "put: installed in fast" "[\"fast\", \"$fast/local/$hp.tar\", 77777]" \
  "$(json "[j['tier'], j['path'], j['size_bytes']]" <<<"$OUT")"
expect_eq "put: right bytes in fast" "$sha_p" "$(sha256_of "$fast/local/$hp.tar" 2>&1)"
expect_eq "put: right bytes in slow" "$sha_p" "$(sha256_of "$slow/local/$hp.tar" 2>&1)"
expect_eq "put: digest recorded" "$sha_p" "$(digest_of_entry "$fast/local/$hp.tar")"
run --json cache put "$hp" "$E2E_TMP/local_file.bin"
expect_eq "put again: a hit" hit "$(json "j['source']" <<<"$OUT")"
run cache put "$(hash_for put2)" "$E2E_TMP/no_such_file"
expect_ne "put of a missing file: fails" 0 "$RC"

# --- instances --------------------------------------------------------------------------------------------------

hi=$(hash_for inst)
run --instance a --json cache fetch "$hi" --url "$SERVER_URL/b.bin"
expect_eq "instance a: fetched into fast/a/" "[\"fetched\", \"$fast/a/$hi.tar\"]" \
  "$(json "[j['source'], j['path']]" <<<"$OUT")"
run --instance a --json cache ls
expect_eq "instance a: cache ls sees its entry" true "$(json "any(r['content_hash'] == '$hi' for r in j['entry_list'])" <<<"$OUT")"
run --instance b --json cache ls
expect_eq "instance b: cache ls does not see instance a's entry" false \
  "$(json "any(r['content_hash'] == '$hi' for r in j['entry_list'])" <<<"$OUT")"
expect_eq "instance b: cache ls lists only instance b" true "$(json "all(r['instance'] == 'b' for r in j['entry_list'])" <<<"$OUT")"
before=$(server_requests /b.bin)
run --instance b --json cache fetch "$hi" --url "$SERVER_URL/b.bin"
expect_eq "instance b: the same hash is a miss, fetched into fast/b/" "[\"fetched\", \"$fast/b/$hi.tar\"]" \
  "$(json "[j['source'], j['path']]" <<<"$OUT")"
expect_eq "instance b: one more request" $((before + 1)) "$(server_requests /b.bin)"
run --json cache ls --all-instances
expect_eq "cache ls --all-instances: the hash under both instances, both tiers" '["a", "a", "b", "b"]' \
  "$(json "sorted(r['instance'] for r in j['entry_list'] if r['content_hash'] == '$hi')" <<<"$OUT")"
run --instance b --json cache rm "$hi"
expect_file "rm --instance b leaves instance a's entry" "$fast/a/$hi.tar"

hs=$(hash_for server_instance)
RC=0
OUT=$(DATAVO_SERVER=http://127.0.0.1:8080 dv --json cache fetch "$hs" --url "$SERVER_URL/c.bin") || RC=$?
expect_eq "DATAVO_SERVER=http://127.0.0.1:8080: exit 0" 0 "$RC"
expect_eq "DATAVO_SERVER=http://127.0.0.1:8080: entry under instance 127.0.0.1_8080" \
  "$fast/127.0.0.1_8080/$hs.tar" "$(json "j['path']" <<<"$OUT")"
expect_file "DATAVO_SERVER: directory 127.0.0.1_8080 in slow too" "$slow/127.0.0.1_8080/$hs.tar"
OUT=$(DATAVO_SERVER=http://127.0.0.1:8080 dv --json cache info)
expect_eq "DATAVO_SERVER: cache info reports instance 127.0.0.1_8080" 127.0.0.1_8080 "$(json "j['instance']" <<<"$OUT")"
OUT=$(DATAVO_SERVER=http://127.0.0.1:8080 dv --instance a --json cache info)
expect_eq "--instance beats DATAVO_SERVER" a "$(json "j['instance']" <<<"$OUT")"
run --json cache ls
expect_eq "instance local does not see the 127.0.0.1_8080 entry" false \
  "$(json "any(r['content_hash'] == '$hs' for r in j['entry_list'])" <<<"$OUT")"

# --- a tier too small for a shard -------------------------------------------------------------------------------

small_config="$E2E_TMP/small.yaml"
write_config "$small_config" <<EOF
tiers:
  - name: tiny
    path: $E2E_TMP/tiny
    max_bytes: 1KiB
  - name: roomy
    path: $E2E_TMP/roomy
EOF
hb=$(hash_for small)
run --json cache fetch "$hb" --url "$SERVER_URL/b.bin"
expect_eq "tier too small: exit 0" 0 "$RC"
expect_contains "tier too small: WARNING 'too small'" "too small" "$ERR"
expect_match "tier too small: the warning names the tier" "WARNING: .*tiny.* too small" "$ERR"
expect_eq "tier too small: served from roomy" "[\"roomy\", \"fetched\", \"$E2E_TMP/roomy/local/$hb.tar\"]" \
  "$(json "[j['tier'], j['source'], j['path']]" <<<"$OUT")"
expect_no_file "tier too small: nothing installed in tiny" "$E2E_TMP/tiny/local/$hb.tar"
expect_empty_dir "tier too small: nothing left in tiny/.staging" "$E2E_TMP/tiny/.staging"
expect_eq "tier too small: right bytes in roomy" "$sha_b" "$(sha256_of "$E2E_TMP/roomy/local/$hb.tar" 2>&1)"
expect_stat tiny capacity_skips 1
expect_stat roomy capacity_skips 0
run --json cache fetch "$hb" --url "$SERVER_URL/b.bin"
expect_eq "tier too small, again: a hit on roomy (no promotion into tiny)" '["hit", "roomy"]' \
  "$(json "[j['source'], j['tier']]" <<<"$OUT")"

# --- no tier accepting ------------------------------------------------------------------------------------------

none_config="$E2E_TMP/none.yaml"
write_config "$none_config" <<EOF
tiers:
  - name: tiny1
    path: $E2E_TMP/tiny1
    max_bytes: 1KiB
  - name: tiny2
    path: $E2E_TMP/tiny2
    max_bytes: 1KiB
EOF
hn=$(hash_for none)
run cache fetch "$hn" --url "$SERVER_URL/b.bin"
expect_eq "no tier accepting: exit 1" 1 "$RC"
# The error is "no folder tier accepted shard ..." (hierarchy.cpp); either wording says no tier took it.
expect_match "no tier accepting: the error says no tier took it" "ERROR: .*no (folder )?tier" "$ERR"
expect_eq "no tier accepting: nothing on stdout" "" "$OUT"
for t in tiny1 tiny2; do
  expect_no_file "no tier accepting: no entry in $t" "$E2E_TMP/$t/local/$hn.tar"
  expect_empty_dir "no tier accepting: nothing left in $t/.staging" "$E2E_TMP/$t/.staging"
done
before=$(server_requests /b.bin)
run cache fetch "$hn" --url "$SERVER_URL/b.bin" --size 102400
expect_eq "no tier accepting, --size given: exit 1" 1 "$RC"
expect_contains "no tier accepting, --size given: 'no tier' in the error" "no tier" "$ERR"
expect_eq "no tier accepting, --size given: nothing downloaded" "$before" "$(server_requests /b.bin)"

# --- a read-only tier -------------------------------------------------------------------------------------------

ro="$E2E_TMP/ro"
write_config "$E2E_TMP/ro_writable.yaml" <<EOF
tiers:
  - name: ro_as_writable
    path: $ro
EOF
sha_r=$(make_shard "$E2E_TMP/ro_file.bin" 40000)
hr=$(hash_for readonly)
run cache put "$hr" "$E2E_TMP/ro_file.bin"
expect_eq "read-only tier: pre-populated through a writable config" 0 "$RC"
touch -d '3 hours ago' "$ro/local/$hr.tar"
snapshot_ro() { find "$ro" -printf '%P %y %s %T@ %m\n' | sort; }
ro_before=$(snapshot_ro)

write_config "$E2E_TMP/ro_first.yaml" <<EOF
tiers:
  - name: ro
    path: $ro
    read_only: true
  - name: rw
    path: $E2E_TMP/rw
EOF
run --json cache fetch "$hr" --url "$SERVER_URL/not-there.bin"
expect_eq "read-only tier first: served from it (hit)" \
  "[0, \"hit\", \"ro\", \"$ro/local/$hr.tar\"]" "$(json "[0, j['source'], j['tier'], j['path']]" <<<"$OUT")"
expect_eq "read-only tier first: no request to the origin" 0 "$(server_requests /not-there.bin)"
hw=$(hash_for ro_new)
run --json cache fetch "$hw" --url "$SERVER_URL/c.bin"
expect_eq "read-only tier first: a miss is installed in rw only" "[\"fetched\", \"rw\"]" \
  "$(json "[j['source'], j['tier']]" <<<"$OUT")"
expect_no_file "read-only tier first: nothing written into ro" "$ro/local/$hw.tar"
run --json cache rm "$hr"
expect_eq "read-only tier: cache rm does not touch it (not cached in a writable tier: exit 1)" "[1, []]" \
  "[$RC, $(json "j['entry_list'][0]['removed_from']" <<<"$OUT")]"
run cache gc
expect_eq "read-only tier: cache gc exit 0" 0 "$RC"

write_config "$E2E_TMP/ro_second.yaml" <<EOF
tiers:
  - name: rw2
    path: $E2E_TMP/rw2
  - name: ro
    path: $ro
    read_only: true
EOF
run --json cache fetch "$hr" --url "$SERVER_URL/not-there.bin"
expect_eq "read-only tier second: promoted into rw2" "[\"promoted\", \"rw2\"]" "$(json "[j['source'], j['tier']]" <<<"$OUT")"
expect_eq "read-only tier second: right bytes in rw2" "$sha_r" "$(sha256_of "$E2E_TMP/rw2/local/$hr.tar" 2>&1)"
hw2=$(hash_for ro_new2)
run --json cache fetch "$hw2" --url "$SERVER_URL/c.bin"
expect_eq "read-only tier second: a miss is installed in rw2 only" "[\"fetched\", \"rw2\"]" \
  "$(json "[j['source'], j['tier']]" <<<"$OUT")"
run cache stats
expect_eq "read-only tier: cache stats exit 0" 0 "$RC"
expect_eq "read-only tier: never written (files, sizes, mtimes, modes unchanged)" "$ro_before" "$(snapshot_ro)"

# --- max_age ----------------------------------------------------------------------------------------------------

write_config "$E2E_TMP/age.yaml" <<EOF
tiers:
  - name: age_fast
    path: $E2E_TMP/age_fast
    max_age: 1d
  - name: age_slow
    path: $E2E_TMP/age_slow
    max_age: 1d
EOF
hm=$(hash_for age)
run --json cache fetch "$hm" --url "$SERVER_URL/c.bin"
expect_eq "max_age: first fetch" fetched "$(json "j['source']" <<<"$OUT")"
run --json cache fetch "$hm" --url "$SERVER_URL/c.bin"
expect_eq "max_age: a fresh entry is a hit" hit "$(json "j['source']" <<<"$OUT")"
touch -d '2 days ago' "$E2E_TMP/age_fast/local/$hm.tar"
run --json cache fetch "$hm" --url "$SERVER_URL/c.bin"
expect_eq "max_age: expired in fast only -> promoted from slow" promoted "$(json "j['source']" <<<"$OUT")"
touch -d '2 days ago' "$E2E_TMP/age_fast/local/$hm.tar" "$E2E_TMP/age_slow/local/$hm.tar"
before=$(server_requests /c.bin)
run --json cache fetch "$hm" --url "$SERVER_URL/c.bin"
expect_eq "max_age: expired everywhere -> fetched again" fetched "$(json "j['source']" <<<"$OUT")"
expect_eq "max_age: one more request to the origin" $((before + 1)) "$(server_requests /c.bin)"
expect_eq "max_age: the refetched entry is fresh (mtime within the last minute)" 1 \
  "$(( $(date +%s) - $(stat -c %Y "$E2E_TMP/age_fast/local/$hm.tar") < 60 ? 1 : 0 ))"

hm2=$(hash_for age2)
run cache fetch "$hm2" --url "$SERVER_URL/b.bin"
touch -d '2 days ago' "$E2E_TMP/age_fast/local/$hm2.tar" "$E2E_TMP/age_slow/local/$hm2.tar"
run --json cache gc --dry-run
expect_eq "gc --dry-run: reports 1 expired per tier" '[1, 1]' "$(json "[r['expired'] for r in j['tiers']]" <<<"$OUT")"
expect_file "gc --dry-run: removes nothing" "$E2E_TMP/age_fast/local/$hm2.tar"
run --json cache gc
expect_eq "gc: exit 0" 0 "$RC"
expect_eq "gc: 1 expired per tier" '[["age_fast", 1], ["age_slow", 1]]' "$(json "[[r['tier'], r['expired']] for r in j['tiers']]" <<<"$OUT")"
expect_no_file "gc: the expired entry is gone from age_fast" "$E2E_TMP/age_fast/local/$hm2.tar"
expect_no_file "gc: the expired entry is gone from age_slow" "$E2E_TMP/age_slow/local/$hm2.tar"
expect_file "gc: the fresh entry stays" "$E2E_TMP/age_fast/local/$hm.tar"

stop_server
finish
