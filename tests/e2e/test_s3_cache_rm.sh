#!/usr/bin/env bash
# `datavo cache rm` with a local folder tier above an S3 tier (moto), issue 16's "safe rm":
#   1. by default only the local tier is touched: the object stays in the bucket, and the text and JSON name the
#      bucket as left alone (shared); an entry only the bucket holds is "not cached" with a hint (exit 1);
#   2. --tier bucket without a terminal and without --yes: exit 2, the message names --yes, nothing removed;
#   3. --tier bucket --yes removes from the bucket only; --all-tiers --yes from both;
#   4. on a terminal (script): the prompt is on stderr; "n" removes nothing (exit 1), "y" removes (exit 0);
#   5. --tier with an unknown name: exit 2, naming it and the tiers there are.
: "${DATAVO_EMULATOR_DIR:=${HOME:-/root}/.cache/datavo/emulators}"
: "${PYENV_ROOT:=${HOME:-/root}/.pyenv}"
export DATAVO_EMULATOR_DIR PYENV_ROOT
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"
E2E_CMD_TIMEOUT=120

s3_up moto
make_bucket "$MOTO_S3_ENDPOINT" rm-bucket
write_config <<YAML
tiers:
  - name: local
    path: $E2E_TMP/vm
$(s3_tier_yaml bucket rm-bucket "$MOTO_S3_ENDPOINT" 'upload: sync')
YAML
INSTANCE=$(dv --json cache info | json "j['instance']")

mkdir -p "$E2E_TMP/files"
declare -A H
SHA=()
for name in a b c d e; do
  sha=$(make_shard "$E2E_TMP/files/$name.bin" 4000)
  H[$name]=$(hash_for "$name")
  SHA[${#SHA[@]}]=$sha
done
start_server "$E2E_TMP/files"
i=0
for name in a b c d e; do
  run cache fetch "${H[$name]}" --url "$SERVER_URL/$name.bin" --sha256 "${SHA[$i]}"
  [ "$RC" = 0 ] || die "cache fetch $name" "$ERR"
  i=$((i + 1))
done

in_bucket() { s3tool "$MOTO_S3_ENDPOINT" head rm-bucket "$(entry_key "$INSTANCE" "$1")" >/dev/null 2>&1; }
# where HASH: the tiers that hold it, as cache ls sees them ("local bucket", "bucket", ...).
where() {
  dv --json cache ls | json "' '.join(e['tier'] for e in j['entry_list'] if e['content_hash'] == '$1')"
}
expect_eq "set-up: every entry in both tiers" "local bucket" "$(where "${H[a]}")"

# --- 1. the default: the local tiers only --------------------------------------------------------------------

run cache rm "${H[a]}" </dev/null
expect_eq "rm (default): exit 0" 0 "$RC"
expect_contains "rm (default, text): removed from local" "removed ${H[a]} from local" "$OUT"
expect_contains "rm (default, text): the bucket is named as left alone" \
  "left alone: bucket [s3] s3://rm-bucket (shared; --tier bucket or --all-tiers reaches it)" "$OUT"
expect_eq "rm (default): the object is still in the bucket" "bucket" "$(where "${H[a]}")"
run --json cache rm "${H[b]}" </dev/null
expect_eq "rm --json (default): removed from local, the bucket skipped and described" \
  '[["local"], ["bucket"], [["local", "folder", false, true], ["bucket", "s3", true, false]]]' \
  "$(json "[j['entry_list'][0]['removed_from'], j['skipped_tiers'], [[t['tier'], t['type'], t['shared'], t['touched']] for t in j['tiers']]]" <<<"$OUT")"
expect_eq "rm --json (default): the bucket still holds it" "bucket" "$(where "${H[b]}")"
run cache rm "${H[a]}" </dev/null
expect_eq "rm (default) of an entry only the bucket holds: exit 1" 1 "$RC"
expect_contains "rm (default) of an entry only the bucket holds: says where it may be" \
  "shared tiers left alone: bucket; --tier NAME or --all-tiers reaches them" "$ERR"

# --- 2. a shared tier without a terminal needs --yes ------------------------------------------------------------

run cache rm "${H[a]}" --tier bucket </dev/null
expect_eq "rm --tier bucket, no terminal, no --yes: exit 2" 2 "$RC"
expect_contains "rm --tier bucket, no terminal: the message names --yes" "pass --yes" "$ERR"
expect_contains "rm --tier bucket, no terminal: the message names the tier" "bucket (s3://rm-bucket)" "$ERR"
expect_eq "rm --tier bucket, no terminal: nothing removed" "bucket" "$(where "${H[a]}")"
run --json cache rm "${H[c]}" --all-tiers </dev/null
expect_eq "rm --all-tiers --json, no terminal, no --yes: exit 2, error code invalid_argument" \
  "2 invalid_argument" "$RC $(json "j['error']['code']" <<<"$OUT")"
expect_eq "rm --all-tiers, no terminal: nothing removed" "local bucket" "$(where "${H[c]}")"

# --- 3. --yes ---------------------------------------------------------------------------------------------------

run cache rm "${H[a]}" --tier bucket --yes </dev/null
expect_eq "rm --tier bucket --yes: exit 0" 0 "$RC"
expect_contains "rm --tier bucket --yes (text): removed from the bucket" "removed ${H[a]} from bucket" "$OUT"
expect_contains "rm --tier bucket --yes (text): local left alone" "left alone: local [folder]" "$OUT"
in_bucket "${H[a]}" && gone=no || gone=yes
expect_eq "rm --tier bucket --yes: the object is gone from the bucket" yes "$gone"
run --json cache rm "${H[c]}" --all-tiers --yes </dev/null
expect_eq "rm --all-tiers --yes: removed from both, nothing skipped" '[["local", "bucket"], []]' \
  "$(json "[j['entry_list'][0]['removed_from'], j['skipped_tiers']]" <<<"$OUT")"
expect_eq "rm --all-tiers --yes: in no tier" "" "$(where "${H[c]}")"
run cache rm "${H[d]}" --tier bucket --all-tiers --yes </dev/null
expect_eq "rm --tier with --all-tiers: exit 2 (usage)" 2 "$RC"

# --- 4. on a terminal: a prompt on stderr ------------------------------------------------------------------------

on_terminal() {  # on_terminal ANSWER ARGS...: runs datavo on a pseudo-terminal, typing ANSWER; RC, TYPESCRIPT
  local answer=$1
  shift
  RC=0
  printf '%s\n' "$answer" | timeout -k 5 60 script -qec "'$DATAVO_BIN' --config '$E2E_CONFIG' $*" \
    "$E2E_TMP/typescript" >/dev/null 2>&1 || RC=$?
  TYPESCRIPT=$(tr -d '\000\r' <"$E2E_TMP/typescript")
}
on_terminal n cache rm "${H[d]}" --all-tiers
expect_eq "rm --all-tiers on a terminal, answer n: exit 1" 1 "$RC"
expect_contains "rm on a terminal: the prompt names the shared tier" \
  "removes from the shared tier(s) bucket (s3://rm-bucket), which other machines read. Continue? [y/N]" "$TYPESCRIPT"
expect_contains "rm on a terminal, answer n: not confirmed" "not confirmed; nothing removed" "$TYPESCRIPT"
expect_eq "rm on a terminal, answer n: nothing removed" "local bucket" "$(where "${H[d]}")"
on_terminal y cache rm "${H[d]}" --all-tiers
expect_eq "rm --all-tiers on a terminal, answer y: exit 0" 0 "$RC"
expect_eq "rm on a terminal, answer y: in no tier" "" "$(where "${H[d]}")"
on_terminal n cache rm "${H[e]}"
expect_eq "rm (default) on a terminal: no prompt, exit 0" "0" "$RC"
expect_eq "rm (default) on a terminal: no prompt" "" "$(grep -F 'Continue?' <<<"$TYPESCRIPT")"

# --- 5. a tier name that is not there ------------------------------------------------------------------------

run cache rm "${H[e]}" --tier bukcet --yes </dev/null
expect_eq "rm --tier bukcet: exit 2" 2 "$RC"
expect_contains "rm --tier bukcet: names it and the tiers" "no tier named 'bukcet' (the tiers: local, bucket)" "$ERR"
expect_eq "rm --tier bukcet: nothing removed" "bucket" "$(where "${H[e]}")"

finish
