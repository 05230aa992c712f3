#!/usr/bin/env bash
# The `datavo` command line: exit codes (0 ok, 1 failed, 2 usage/config), error messages, the content-hash test
# vectors, the shape of `cache info --json`, the config-resolution explanation, and failed fetches installing
# nothing (a --sha256 mismatch, a 404).
. "$(dirname "$0")/lib.sh"

# --- usage errors: exit 2 ---------------------------------------------------------------------------------------

tier="$E2E_TMP/tier"
write_config <<EOF
tiers:
  - name: only
    path: $tier
EOF

# Byte offset 16 is 'A': uppercase is not allowed in a content hash.
run cache fetch 0123456789abcdefABCDEF0123456789abcdef0123456789abcdef0123456789 --url "file:///dev/null"
expect_eq "bad hash (uppercase): exit 2" 2 "$RC"
expect_contains "bad hash (uppercase): the message names the byte offset" "byte offset 16" "$ERR"
run cache fetch "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg" --url "file:///dev/null"
expect_eq "bad hash (non-hex last char): exit 2" 2 "$RC"
expect_contains "bad hash (non-hex last char): the message names byte offset 63" "byte offset 63" "$ERR"
run cache rm "../../etc/passwd0123456789abcdef0123456789abcdef0123456789abcdef"
expect_eq "bad hash in cache rm: exit 2" 2 "$RC"
expect_contains "bad hash in cache rm: the message names the byte offset" "byte offset 0" "$ERR"
run cache fetch abc --url "file:///dev/null"
expect_eq "short hash: exit 2" 2 "$RC"
expect_empty_dir "bad hashes created nothing in the tier" "$tier"

run cache frobnicate
expect_eq "unknown cache subcommand: exit 2" 2 "$RC"
expect_contains "unknown cache subcommand: named, with the cache commands" \
  "datavo: ERROR: unknown command 'frobnicate' of 'datavo cache'; the commands are " "$ERR"
expect_contains "unknown cache subcommand: points to cache --help" "(run datavo cache --help" "$ERR"
run frobnicate
expect_eq "unknown top-level command: exit 2" 2 "$RC"
expect_contains "unknown top-level command: named, with the commands" \
  "datavo: ERROR: unknown command 'frobnicate'; the commands are cache, " "$ERR"
expect_contains "unknown top-level command: points to --help" "(run datavo --help for more information)" "$ERR"
run cache fetch "$(hash_for x)"
expect_eq "cache fetch without --url: exit 2" 2 "$RC"
run cache
expect_eq "cache without a subcommand: exit 2" 2 "$RC"
run cache fetch "$(hash_for x)" --url "file:///dev/null" --size notanumber
expect_eq "cache fetch --size notanumber: exit 2" 2 "$RC"
run cache fetch "$(hash_for x)" --url "file:///dev/null" --sha256 xyz
expect_eq "cache fetch --sha256 xyz (not 64 hex): exit 2" 2 "$RC"
run --instance "bad/instance" cache ls
expect_eq "--instance with a '/': exit 2" 2 "$RC"
expect_contains "--instance with a '/': the message names the byte offset" "byte offset 3" "$ERR"

# --version: the project's version (CMakeLists.txt) and the features of this build (the tier types it provides).
version=$(sed -n 's/^project(datavo VERSION \([0-9.]*\).*/\1/p' "$DATAVO_SOURCE_DIR/CMakeLists.txt")
run --version
expect_eq "--version: exit 0" 0 "$RC"
expect_eq "--version: first line is 'datavo <CMake project version>'" "datavo $version" "$(head -1 <<<"$OUT")"
expect_match "--version: a features line naming the folder tier" "Features: .*folder-tier" "$OUT"
run --json --version
expect_eq "--json --version" "[\"$version\", true]" "$(json "[j['version'], 'folder-tier' in j['features']]" <<<"$OUT")"

# DATAVO_LOG_LEVEL: case-insensitive; an unknown value is a usage error naming the variable.
RC=0
ERR=$(DATAVO_LOG_LEVEL=Info "$DATAVO_BIN" --config "$E2E_CONFIG" cache ls 2>&1 >/dev/null) || RC=$?
expect_eq "DATAVO_LOG_LEVEL=Info: exit 0" 0 "$RC"
RC=0
ERR=$(DATAVO_LOG_LEVEL=loud "$DATAVO_BIN" --config "$E2E_CONFIG" cache ls 2>&1 >/dev/null) || RC=$?
expect_eq "DATAVO_LOG_LEVEL=loud: exit 2" 2 "$RC"
expect_contains "DATAVO_LOG_LEVEL=loud: names the variable and its value" "DATAVO_LOG_LEVEL=loud" "$ERR"
RC=0
OUT=$(DATAVO_LOG_LEVEL=loud "$DATAVO_BIN" --json --config "$E2E_CONFIG" cache ls 2>/dev/null) || RC=$?
expect_eq "DATAVO_LOG_LEVEL=loud --json: an error object" invalid_argument "$(json "j['error']['code']" <<<"$OUT")"

# --help names the environment variables, DATAVO_TOKEN among them.
run --help
expect_contains "--help names DATAVO_TOKEN" "DATAVO_TOKEN" "$OUT"
expect_contains "--help names DATAVO_SERVER" "DATAVO_SERVER" "$OUT"

# --- config errors: exit 2 --------------------------------------------------------------------------------------

printf 'tiers:\n  - name: a\n    path: %s/a\n    max_bytes: 12XB\n' "$E2E_TMP" >"$E2E_TMP/bad_size.yaml"
RC=0
ERR=$("$DATAVO_BIN" --config "$E2E_TMP/bad_size.yaml" cache info 2>&1 >/dev/null) || RC=$?
expect_eq "config with a bad max_bytes: exit 2" 2 "$RC"
expect_contains "config error names file:line and the field" "bad_size.yaml:4: tiers[0].max_bytes" "$ERR"
printf 'tiers:\n  - name: a\n    path: %s/a\n    colour: red\n' "$E2E_TMP" >"$E2E_TMP/bad_key.yaml"
RC=0
ERR=$("$DATAVO_BIN" --config "$E2E_TMP/bad_key.yaml" cache info 2>&1 >/dev/null) || RC=$?
expect_eq "config with an unknown key: exit 2" 2 "$RC"
expect_contains "unknown key error names file:line and the field" "bad_key.yaml:4: tiers[0].colour" "$ERR"
RC=0
ERR=$("$DATAVO_BIN" --config "$E2E_TMP/missing.yaml" cache info 2>&1 >/dev/null) || RC=$?
expect_eq "--config naming a missing file: exit 2" 2 "$RC"
expect_contains "missing --config file is named" "$E2E_TMP/missing.yaml" "$ERR"
RC=0
ERR=$(env DATAVO_SHARD_CACHE_CONFIG="$E2E_TMP/missing.yaml" "$DATAVO_BIN" cache info 2>&1 >/dev/null) || RC=$?
expect_eq "\$DATAVO_SHARD_CACHE_CONFIG naming a missing file: exit 2 (never skipped)" 2 "$RC"
expect_contains "missing \$DATAVO_SHARD_CACHE_CONFIG file is named" "$E2E_TMP/missing.yaml" "$ERR"

# --- content-hash test vectors ----------------------------------------------------------------------------------

ids=(--sample-id utt_0001 --sample-id utt_0002 --sample-id utt_0003)
run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 \
  --key transcript.txt --key audio.wav "${ids[@]}"
expect_eq "content-hash: exit 0" 0 "$RC"
expect_eq "content-hash vector: keys transcript.txt audio.wav" \
  61f3427f3e6c250ad3d54035eb97cb636a5301e48e1d56d6c681ee6def32afd5 "$OUT"
run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 --key audio.wav "${ids[@]}"
expect_eq "content-hash vector: key audio.wav only" \
  1d8dd7d43d1a547d426d0bdb41c0d851d027688e32889961ca28130a389d21c3 "$OUT"
run --json content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 \
  --key audio.wav --key transcript.txt --key audio.wav "${ids[@]}"
expect_eq "content-hash --json, keys in another order and duplicated: same hash" \
  61f3427f3e6c250ad3d54035eb97cb636a5301e48e1d56d6c681ee6def32afd5 "$(json "j['content_hash']" <<<"$OUT")"
run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 --key audio.wav \
  --sample-id utt_0002 --sample-id utt_0001 --sample-id utt_0003
expect_ne "content-hash: sample ids keep their order (swapped ids give another hash)" \
  1d8dd7d43d1a547d426d0bdb41c0d851d027688e32889961ca28130a389d21c3 "$OUT"
expect_match "content-hash output is 64 lowercase hex" '^[0-9a-f]{64}$' "$OUT"
run content-hash --revision 42 --shard-index 3 --key audio.wav
expect_eq "content-hash without --manifest-ref: exit 2" 2 "$RC"

# Revisions as the server emits them (positive decimal, no leading zero, at most 18 digits) and sample ids as its
# store accepts them; anything else could never match a server's hash.
for bad in abc "" 0 042 -1 +5 1.0 " 42" 1234567890123456789; do
  run content-hash --manifest-ref voice_demo_v1/train@m1 --revision "$bad" --shard-index 3 --key audio.wav \
    --sample-id utt_0001
  expect_eq "content-hash --revision '$bad': exit 2" 2 "$RC"
  expect_contains "content-hash --revision '$bad': the message names --revision" "--revision" "$ERR"
  expect_eq "content-hash --revision '$bad': nothing on stdout" "" "$OUT"
done
for bad in ../x /abs a/../b "" a.b a//b .hidden "x y" "a/./b" trailing/; do
  run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 --key audio.wav \
    --sample-id utt_0001 --sample-id "$bad"
  expect_eq "content-hash --sample-id '$bad': exit 2" 2 "$RC"
  expect_contains "content-hash --sample-id '$bad': the message names --sample-id and the id" "--sample-id '$bad'" "$ERR"
done
for bad in ../k "" .wav "a/b"; do
  run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 42 --shard-index 3 --key "$bad"
  expect_eq "content-hash --key '$bad': exit 2" 2 "$RC"
  expect_contains "content-hash --key '$bad': the message names --key" "--key '$bad'" "$ERR"
done
run content-hash --manifest-ref "" --revision 42 --shard-index 3 --key audio.wav
expect_eq "content-hash --manifest-ref '': exit 2" 2 "$RC"
run content-hash --manifest-ref voice_demo_v1/train@m1 --revision 18 --shard-index 0 --key audio.wav \
  --sample-id train/utt_0001 --sample-id v1.2/utt_7 --sample-id a-b_c
expect_eq "content-hash: ids with directories, dots in directories, - and _ are accepted" 0 "$RC"

# --- cache info --json: the documented shape --------------------------------------------------------------------

write_config <<EOF
tiers:
  - name: fast
    path: $E2E_TMP/fast
    max_bytes: 1MiB
  - name: slow
    type: folder
    path: $E2E_TMP/slow
EOF
run --json cache info
expect_eq "cache info --json: exit 0" 0 "$RC"
shape=$(python3 -c '
import json, sys
j = json.loads(sys.argv[1])
problems = []
def need(obj, key, types, where):
    if not isinstance(obj, dict) or key not in obj:
        problems.append("%s.%s missing" % (where, key)); return None
    if not isinstance(obj[key], types):
        problems.append("%s.%s has type %s" % (where, key, type(obj[key]).__name__))
    return obj[key]
config = need(j, "config", dict, "")
if isinstance(config, dict):
    need(config, "path", (str, type(None)), "config")
    need(config, "source", str, "config")
tiers = need(j, "tiers", list, "")
for i, t in enumerate(tiers or []):
    for key, types in (("tier", str), ("type", str), ("path", str), ("max_bytes", (int, type(None))),
                       ("used_bytes", (int, type(None))), ("entries", (int, type(None)))):
        need(t, key, types, "tiers[%d]" % i)
print("; ".join(problems) if problems else "ok")
' "$OUT" 2>&1)
expect_eq "cache info --json has {config: {path, source}, tiers: [{tier, type, path, max_bytes, used_bytes, entries}]}" \
  ok "$shape"
expect_eq "cache info --json: config.path is the --config file" "$E2E_CONFIG" "$(json "j['config']['path']" <<<"$OUT")"
expect_eq "cache info --json: config.source is argument" argument "$(json "j['config']['source']" <<<"$OUT")"
expect_eq "cache info --json: tiers fastest first" '["fast", "slow"]' "$(json "[t['tier'] for t in j['tiers']]" <<<"$OUT")"
expect_eq "cache info --json: tier type" '["folder", "folder"]' "$(json "[t['type'] for t in j['tiers']]" <<<"$OUT")"
expect_eq "cache info --json: tier paths" "[\"$E2E_TMP/fast\", \"$E2E_TMP/slow\"]" \
  "$(json "[t['path'] for t in j['tiers']]" <<<"$OUT")"
expect_eq "cache info --json: max_bytes 1MiB and unbounded (null)" '[1048576, null]' \
  "$(json "[t['max_bytes'] for t in j['tiers']]" <<<"$OUT")"
expect_eq "cache info --json: empty tiers have used_bytes 0 and 0 entries" '[[0, 0], [0, 0]]' \
  "$(json "[[t['used_bytes'], t['entries']] for t in j['tiers']]" <<<"$OUT")"

# Every effective setting of each tier and where it came from (like ccache -p), and the lock mechanism.
write_config <<EOF
tiers:
  - name: fast
    path: $E2E_TMP/fast
    max_bytes: 1MiB
    durability: none
  - name: slow
    type: folder
    path: $E2E_TMP/slow
EOF
run --json cache info
settings_of() { json "{s['setting']: [s['value'], s['origin']] for s in [t for t in j['tiers'] if t['tier'] == '$1'][0]['settings']}" <<<"$OUT"; }
expect_eq "cache info --json: fast's durability and where it came from" "[\"none\", \"$E2E_CONFIG:5\"]" \
  "$(settings_of fast | json "j['durability']")"
expect_eq "cache info --json: fast's max_bytes from line 4" "[\"1 MiB\", \"$E2E_CONFIG:4\"]" \
  "$(settings_of fast | json "j['max_bytes']")"
expect_eq "cache info --json: slow's max_age, durability and verify are defaults" \
  '[["none", "default"], ["fsync", "default"], ["size", "default"]]' \
  "$(settings_of slow | json "[j['max_age'], j['durability'], j['verify']]")"
expect_eq "cache info --json: no lock mechanism before the tier exists" "null" \
  "$(json "j['tiers'][0]['lock_mechanism']" <<<"$OUT")"
run cache put "$(hash_for info-lock)" "$E2E_TMP/bad_size.yaml"
run --json cache info
expect_eq "cache info --json: the folder tiers' lock mechanism once they exist" '["flock", "flock"]' \
  "$(json "[t['lock_mechanism'] for t in j['tiers']]" <<<"$OUT")"
run cache info
expect_match "cache info: durability, its value and its origin" "durability += none +\($E2E_CONFIG:5\)" "$OUT"
expect_match "cache info: max_age is shown with its default" "max_age += none +\(default\)" "$OUT"
expect_contains "cache info: the lock mechanism" "lock mechanism: flock" "$OUT"
run cache rm "$(hash_for info-lock)"
rm -rf "$E2E_TMP/fast" "$E2E_TMP/slow"

# --- config resolution: the explanation lists the candidates skipped --------------------------------------------

unset DATAVO_SHARD_CACHE_CONFIG
# No argument, no environment, no /etc file, no user file: the built-in default.
if [ -e /etc/datavo/shards.yaml ]; then
  fail "config resolution" "/etc/datavo/shards.yaml exists on this machine; these assertions need it absent"
else
  RC=0
  OUT=$(timeout 60 "$DATAVO_BIN" cache info 2>&1) || RC=$?
  expect_eq "built-in default: exit 0" 0 "$RC"
  expect_contains "built-in default: says so" "config: built-in default" "$OUT"
  expect_contains "built-in default: lists /etc/datavo/shards.yaml as skipped" \
    "skipped /etc/datavo/shards.yaml: does not exist" "$OUT"
  expect_contains "built-in default: lists ~/.config/datavo/shards.yaml as skipped" \
    "skipped $HOME/.config/datavo/shards.yaml: does not exist" "$OUT"
  expect_contains "built-in default: the folder tier is under ~/.cache/altavo/datavo/shards" \
    "$HOME/.cache/altavo/datavo/shards" "$OUT"
  OUT=$(timeout 60 "$DATAVO_BIN" --json cache info)
  expect_eq "built-in default --json: source builtin_default, path null" '["builtin_default", null]' \
    "$(json "[j['config']['source'], j['config']['path']]" <<<"$OUT")"
  expect_eq "built-in default --json: skipped lists both candidates with the reason" \
    "[[\"/etc/datavo/shards.yaml\", \"does not exist\"], [\"$HOME/.config/datavo/shards.yaml\", \"does not exist\"]]" \
    "$(json "[[c['path'], c['reason']] for c in j['config']['skipped']]" <<<"$OUT")"
  OUT=$(DATAVO_SHARD_CACHE_DIR="$E2E_TMP/envdir" timeout 60 "$DATAVO_BIN" --json cache info)
  expect_eq "built-in default honours \$DATAVO_SHARD_CACHE_DIR" "$E2E_TMP/envdir" "$(json "j['tiers'][0]['path']" <<<"$OUT")"
  expect_eq "built-in default: every setting shown, the path from \$DATAVO_SHARD_CACHE_DIR" \
    '[["$DATAVO_SHARD_CACHE_DIR"], ["none", "built-in default"], ["fsync", "built-in default"], ["size", "built-in default"]]' \
    "$(json "[[s['origin'] for s in j['tiers'][0]['settings'] if s['setting'] == 'path']] + [[s['value'], s['origin']] for n in ('max_age', 'durability', 'verify') for s in j['tiers'][0]['settings'] if s['setting'] == n]" <<<"$OUT")"

  # A user file: used, with /etc listed as skipped.
  mkdir -p "$HOME/.config/datavo"
  printf 'tiers:\n  - name: user_tier\n    path: %s/user_tier\n' "$E2E_TMP" >"$HOME/.config/datavo/shards.yaml"
  RC=0
  OUT=$(timeout 60 "$DATAVO_BIN" cache info 2>&1) || RC=$?
  expect_eq "user config: exit 0" 0 "$RC"
  expect_contains "user config: names the file and the source" "config: $HOME/.config/datavo/shards.yaml (user)" "$OUT"
  expect_contains "user config: lists /etc/datavo/shards.yaml as skipped" \
    "skipped /etc/datavo/shards.yaml: does not exist" "$OUT"
  expect_contains "user config: its tier is used" "user_tier" "$OUT"
  OUT=$(timeout 60 "$DATAVO_BIN" --json cache info)
  expect_eq "user config --json: skipped = [/etc/datavo/shards.yaml]" '["/etc/datavo/shards.yaml"]' \
    "$(json "[c['path'] for c in j['config']['skipped']]" <<<"$OUT")"

  # The environment beats the user file; --config beats the environment.
  OUT=$(DATAVO_SHARD_CACHE_CONFIG="$E2E_CONFIG" timeout 60 "$DATAVO_BIN" --json cache info)
  expect_eq "\$DATAVO_SHARD_CACHE_CONFIG beats the user file" "[\"environment\", \"$E2E_CONFIG\"]" \
    "$(json "[j['config']['source'], j['config']['path']]" <<<"$OUT")"
  OUT=$(DATAVO_SHARD_CACHE_CONFIG="$HOME/.config/datavo/shards.yaml" timeout 60 "$DATAVO_BIN" --config "$E2E_CONFIG" \
    --json cache info)
  expect_eq "--config beats \$DATAVO_SHARD_CACHE_CONFIG" "[\"argument\", \"$E2E_CONFIG\"]" \
    "$(json "[j['config']['source'], j['config']['path']]" <<<"$OUT")"

  # A user file that exists but does not parse is an error, never skipped.
  printf 'tiers: [\n' >"$HOME/.config/datavo/shards.yaml"
  RC=0
  ERR=$(timeout 60 "$DATAVO_BIN" cache info 2>&1 >/dev/null) || RC=$?
  expect_eq "unparsable user config: exit 2 (not skipped)" 2 "$RC"
  expect_contains "unparsable user config: the file is named" "$HOME/.config/datavo/shards.yaml" "$ERR"
  rm -rf "$HOME/.config/datavo" "$HOME/.cache"
fi
export DATAVO_SHARD_CACHE_CONFIG="$E2E_CONFIG"

# --- failed fetches install nothing: exit 1 ---------------------------------------------------------------------

mkdir -p "$E2E_TMP/www"
sha=$(make_shard "$E2E_TMP/www/shard.bin" 200000)
start_server "$E2E_TMP/www"

RC=0
ERR=$(DATAVO_LOG_LEVEL=DEBUG "$DATAVO_BIN" --config "$E2E_CONFIG" cache fetch "$(hash_for debug)" \
  --url "$SERVER_URL/shard.bin" 2>&1 >/dev/null) || RC=$?
expect_eq "DATAVO_LOG_LEVEL=DEBUG (upper case): exit 0" 0 "$RC"
expect_contains "DATAVO_LOG_LEVEL=DEBUG (upper case): debug lines are logged" "DEBUG:" "$ERR"
run cache rm "$(hash_for debug)"

h=$(hash_for mismatch)
wrong=$(printf 'not the shard' | sha256sum | cut -c1-64)
run cache fetch "$h" --url "$SERVER_URL/shard.bin" --sha256 "$wrong"
expect_eq "--sha256 mismatch: exit 1" 1 "$RC"
expect_contains "--sha256 mismatch: the error gives the expected digest" "$wrong" "$ERR"
expect_eq "--sha256 mismatch: nothing on stdout" "" "$OUT"
expect_no_file "--sha256 mismatch: no entry in tier fast" "$E2E_TMP/fast/local/$h.tar"
expect_no_file "--sha256 mismatch: no entry in tier slow" "$E2E_TMP/slow/local/$h.tar"
expect_empty_dir "--sha256 mismatch: nothing left in fast/.staging" "$E2E_TMP/fast/.staging"
expect_empty_dir "--sha256 mismatch: nothing left in slow/.staging" "$E2E_TMP/slow/.staging"
expect_eq "--sha256 mismatch: no per-shard lock left" "" "$(shard_locks "$E2E_TMP/fast")"
run --json cache ls
expect_eq "--sha256 mismatch: cache ls is empty" "[0, []]" "$(json "[j['entries'], j['entry_list']]" <<<"$OUT")"

run cache fetch "$h" --url "$SERVER_URL/shard.bin" --size 1234
expect_eq "--size mismatch: exit 1" 1 "$RC"
expect_no_file "--size mismatch: no entry in tier fast" "$E2E_TMP/fast/local/$h.tar"
expect_no_file "--size mismatch: no entry in tier slow" "$E2E_TMP/slow/local/$h.tar"

run cache fetch "$h" --url "$SERVER_URL/faults/wrongbytes/shard.bin" --sha256 "$sha"
expect_eq "corrupted bytes from the server (wrongbytes) with --sha256: exit 1" 1 "$RC"
expect_no_file "corrupted bytes: no entry in tier fast" "$E2E_TMP/fast/local/$h.tar"

h404=$(hash_for notfound)
run cache fetch "$h404" --url "$SERVER_URL/no-such-shard.bin"
expect_eq "404 URL: exit 1" 1 "$RC"
expect_contains "404 URL: the error gives the status" "404" "$ERR"
expect_eq "404 URL: asked the server once (a 404 is not retried)" 1 "$(server_requests /no-such-shard.bin)"
run cache fetch "$h404" --url "$SERVER_URL/faults/403/shard.bin"
expect_eq "403 URL: exit 1" 1 "$RC"
expect_no_file "404/403: no entry in tier fast" "$E2E_TMP/fast/local/$h404.tar"
expect_empty_dir "404/403: nothing left in fast/.staging" "$E2E_TMP/fast/.staging"
run cache fetch "$h404" --url "file://$E2E_TMP/www/absent.bin"
expect_eq "missing file:// URL: exit 1" 1 "$RC"
run cache fetch "$h404" --url "gopher://127.0.0.1/x"
expect_ne "unsupported URL scheme: not exit 0" 0 "$RC"
expect_empty_dir "failed fetches: nothing left in fast/.staging" "$E2E_TMP/fast/.staging"

# The right digest works, and prints the path of the entry.
run cache fetch "$h" --url "$SERVER_URL/shard.bin" --sha256 "$sha" --size 200000
expect_eq "matching --sha256 and --size: exit 0" 0 "$RC"
expect_eq "matching fetch prints the entry path in the fastest tier" "$E2E_TMP/fast/local/$h.tar" "$OUT"
run --json cache fetch "$h" --url "$SERVER_URL/shard.bin"
expect_eq "second fetch --json" "[\"$E2E_TMP/fast/local/$h.tar\", \"fast\", \"hit\", 200000]" \
  "$(json "[j['path'], j['tier'], j['source'], j['size_bytes']]" <<<"$OUT")"

# --- one output contract (docs/cli.md) ---------------------------------------------------------------------------

# With --json every failure prints {"error": {"code", "message"}} on stdout, and the message on stderr.
run --json cache fetch abc --url "file:///dev/null"
expect_eq "--json, bad hash: exit 2" 2 "$RC"
expect_eq "--json, bad hash: {error: {code: invalid_argument, message}} on stdout" '["invalid_argument", true]' \
  "$(json "[j['error']['code'], 'content hash' in j['error']['message']]" <<<"$OUT")"
expect_contains "--json, bad hash: the message on stderr too" "content hash must be 64" "$ERR"
run --json frobnicate
expect_eq "--json, unknown command: exit 2" 2 "$RC"
expect_eq "--json, unknown command: an error object on stdout" invalid_argument "$(json "j['error']['code']" <<<"$OUT")"
expect_contains "--json, unknown command: the message names it" "unknown command 'frobnicate'" \
  "$(json "j['error']['message']" <<<"$OUT")"
run --json cache fetch "$h404" --url "$SERVER_URL/no-such-shard.bin"
expect_eq "--json, 404: exit 1" 1 "$RC"
expect_eq "--json, 404: error code not_found" not_found "$(json "j['error']['code']" <<<"$OUT")"
expect_contains "--json, 404: the message names the status" "404" "$(json "j['error']['message']" <<<"$OUT")"
RC=0
OUT=$("$DATAVO_BIN" --json --config "$E2E_TMP/bad_key.yaml" cache info 2>/dev/null) || RC=$?
expect_eq "--json, config error: exit 2, error code config" "[2, \"config\"]" "[$RC, \"$(json "j['error']['code']" <<<"$OUT")\"]"

# cache rm: several hashes at once; an absent entry is exit 1 and said so.
hx=$(hash_for rm-x)
hy=$(hash_for rm-y)
run cache put "$hx" "$E2E_TMP/www/shard.bin"
run cache put "$hy" "$E2E_TMP/www/shard.bin"
run --json cache rm "$hx" "$hy"
expect_eq "cache rm of two cached hashes: exit 0" 0 "$RC"
expect_eq "cache rm of two cached hashes: both removed from both tiers" \
  "[[\"$hx\", [\"fast\", \"slow\"]], [\"$hy\", [\"fast\", \"slow\"]]]" \
  "$(json "[[e['content_hash'], sorted(e['removed_from'])] for e in j['entry_list']]" <<<"$OUT")"
expect_no_file "cache rm: the entry is gone" "$E2E_TMP/fast/local/$hx.tar"
run cache rm "$hx"
expect_eq "cache rm of an absent entry: exit 1" 1 "$RC"
expect_contains "cache rm of an absent entry: says it is not cached" "$hx is not cached" "$ERR"
run --json cache rm "$hx"
expect_eq "cache rm --json of an absent entry: the report and an error" '[1, 0, "not_found"]' \
  "[$RC, $(json "j['removed']" <<<"$OUT"), \"$(json "j['error']['code']" <<<"$OUT")\"]"

# cache ls on a tier whose path is a file: exit 1.
echo "not a directory" >"$E2E_TMP/tier_file"
printf 'tiers:\n  - name: f\n    path: %s\n' "$E2E_TMP/tier_file" >"$E2E_TMP/file_tier.yaml"
RC=0
ERR=$("$DATAVO_BIN" --config "$E2E_TMP/file_tier.yaml" cache ls 2>&1 >/dev/null) || RC=$?
expect_eq "cache ls on a tier path that is a file: exit 1" 1 "$RC"
expect_contains "cache ls on a tier path that is a file: names the tier" "tier 'f'" "$ERR"

# One vocabulary of field names across commands.
hv=$(hash_for vocabulary)
for cmd in "cache info" "cache put $hv $E2E_TMP/www/shard.bin" "cache fetch $hv --url $SERVER_URL/shard.bin" \
  "cache ls" "cache ls --all-instances" "cache stats" "cache gc --dry-run" "cache gc" "cache verify" "cache rm $hv" \
  "content-hash --manifest-ref m --revision 1 --shard-index 0 --key a"; do
  # shellcheck disable=SC2086
  run --json $cmd
  expect_eq "--json $cmd: exit 0" 0 "$RC"
  expect_eq "--json $cmd: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
done

stop_server
finish
