#!/usr/bin/env bash
# F9 of the fault suite: damaged entries in tier k (t1) of a two-tier hierarchy (t1, t2), and how `verify: full`
# and `verify: size` see them on the next hit. Five damages, each to its own entry, done behind Datavo's back:
#   flip       one byte flipped in the middle (same size)
#   truncate   the entry cut to half its size
#   zero       every byte zeroed (same size)
#   swap       two entries of different sizes exchanged with mv (their xattr records travel with them)
# For each mode:
#   - full: every damaged entry is caught on its next hit (100%): a WARNING names the tier and the path, the entry
#     is quarantined (.quarantine/), the read falls through to t2, the good copy is promoted back into t1, and the
#     hit after that is served from t1 with the right bytes. Likewise when t2 does not hold the shard any more:
#     then the good copy comes from the origin.
#   - size: the damages that change the size (truncate) or the recorded key (swap) are caught and repaired as
#     above; the same-size damages (flip, zero) are served as hits with no warning (nothing false is said about
#     them; only `full` or `cache verify` can see them), and `cache verify` then finds exactly those.
# Prints the figure: caught / damaged per mode, repaired, and where each repair came from.
. "$(dirname "$0")/lib.sh"

www="$E2E_TMP/www"
mkdir -p "$www"
declare -A sha_of size_of
names=(flip truncate zero swap_a swap_b from_origin)
declare -A bytes_of=([flip]=300000 [truncate]=300000 [zero]=200000 [swap_a]=250000 [swap_b]=150000
  [from_origin]=120000)
for name in "${names[@]}"; do
  sha_of[$name]=$(make_shard "$www/$name.bin" "${bytes_of[$name]}")
  size_of[$name]=${bytes_of[$name]}
done
start_server "$www"

t1="$E2E_TMP/t1"
t2="$E2E_TMP/t2"
declare -A hash_of
for name in "${names[@]}"; do hash_of[$name]=$(hash_for "$name"); done
entry() { echo "$1/local/${hash_of[$2]}.tar"; }

# fetch NAME: `cache fetch` of NAME's shard; sets RC, OUT (JSON), ERR.
fetch() { run --json cache fetch "${hash_of[$1]}" --url "$SERVER_URL/$1.bin" --sha256 "${sha_of[$1]}"; }

damage() {
  local f
  f=$(entry "$t1" flip)
  printf '\xff' | dd of="$f" bs=1 seek=$((size_of[flip] / 2)) conv=notrunc status=none
  # The flipped byte must differ from the original: xor it with 0xff instead when it was 0xff already.
  if [ "$(sha256_of "$f")" = "${sha_of[flip]}" ]; then
    printf '\x00' | dd of="$f" bs=1 seek=$((size_of[flip] / 2)) conv=notrunc status=none
  fi
  truncate -s $((size_of[truncate] / 2)) "$(entry "$t1" truncate)"
  f=$(entry "$t1" zero)
  dd if=/dev/zero of="$f" bs="${size_of[zero]}" count=1 conv=notrunc status=none
  mv "$(entry "$t1" swap_a)" "$t1/swap.tmp"
  mv "$(entry "$t1" swap_b)" "$(entry "$t1" swap_a)"
  mv "$t1/swap.tmp" "$(entry "$t1" swap_b)"
  # from_origin: truncated in t1 and gone from t2, so that the repair must come from the origin.
  truncate -s 1000 "$(entry "$t1" from_origin)"
  rm -f "$(entry "$t2" from_origin)"
}

declare -A figure
for mode in full size; do
  rm -rf "$t1" "$t2"
  write_config <<EOF
tiers:
  - name: t1
    path: $t1
    verify: $mode
  - name: t2
    path: $t2
EOF
  for name in "${names[@]}"; do
    fetch "$name"
    [ "$RC" -eq 0 ] || die "$mode: install $name" "$ERR"
  done
  damage
  for name in "${names[@]}"; do
    [ "$(sha256_of "$(entry "$t1" "$name")")" != "${sha_of[$name]}" ] || die "$mode: damage $name" "the bytes are unchanged"
  done
  pass "$mode: installed ${#names[@]} shards in t1 and t2, then damaged their t1 copies"

  caught=0 missed=0 repaired=0 from_t2=0 from_origin=0 false_alarms=0
  for name in "${names[@]}"; do
    case "$mode:$name" in
      size:flip | size:zero) must_catch=0 ;;
      *) must_catch=1 ;;
    esac
    q_before=$(find "$t1/.quarantine" -type f 2>/dev/null | wc -l)
    fetch "$name"
    source=$(json "j['source'] + ' ' + j['tier']" <<<"$OUT" 2>/dev/null)
    path=$(json "j['path']" <<<"$OUT" 2>/dev/null)
    q_after=$(find "$t1/.quarantine" -type f 2>/dev/null | wc -l)
    if [ "$RC" -eq 0 ] && grep -q "WARNING: tier 't1': $(entry "$t1" "$name")" <<<"$ERR" && [ "$q_after" -eq $((q_before + 1)) ]; then
      caught=$((caught + 1))
      expect_eq "$mode: $name caught: the right bytes are served" "${sha_of[$name]}" "$(sha256_of "$path")"
      case "$source" in
        "promoted t1") from_t2=$((from_t2 + 1)) ;;
        "fetched t1") from_origin=$((from_origin + 1)) ;;
        *) fail "$mode: $name caught: served from t2 (promoted) or the origin into t1" "got '$source'" ;;
      esac
      fetch "$name"
      if [ "$(json "j['source'] + ' ' + j['tier']" <<<"$OUT")" = "hit t1" ] &&
        [ "$(sha256_of "$(entry "$t1" "$name")")" = "${sha_of[$name]}" ] && [ -z "$ERR" ]; then
        repaired=$((repaired + 1))
        pass "$mode: $name repaired: the next hit is served from t1 with the right bytes"
      else
        fail "$mode: $name repaired: the next hit is served from t1 with the right bytes" "$OUT / $ERR"
      fi
      [ "$must_catch" -eq 1 ] || fail "$mode: $name is not a size change" "yet size mode flagged it"
    else
      missed=$((missed + 1))
      if [ "$must_catch" -eq 1 ]; then
        fail "$mode: $name is caught on its next hit" "rc=$RC source='$source' stderr: $(e2e_abbrev "$ERR")"
      else
        # Same size: a size check cannot see it, and must not claim anything about it.
        [ -z "$ERR" ] || false_alarms=$((false_alarms + 1))
        expect_eq "$mode: $name (same size) is served as a hit from t1, without a warning" "hit t1|" "$source|$ERR"
      fi
    fi
  done
  damaged=${#names[@]}
  case "$mode" in
    full)
      expect_eq "full: catches every damage (of $damaged)" "$damaged" "$caught"
      expect_eq "full: repairs every damage" "$damaged" "$repaired"
      expect_eq "full: the repair of from_origin came from the origin" 1 "$from_origin"
      ;;
    size)
      expect_eq "size: catches the truncations and the swap (4 of $damaged)" 4 "$caught"
      expect_eq "size: repairs what it catches" 4 "$repaired"
      expect_eq "size: no false alarm about the same-size damages" 0 "$false_alarms"
      # What a size check cannot see, `cache verify` does: exactly the flipped and the zeroed entries.
      run --json cache verify
      expect_eq "size: cache verify then finds the 2 same-size damages" 1 "$RC"
      for name in flip zero; do expect_contains "size: cache verify names $name" "$(entry "$t1" "$name")" "$OUT$ERR"; done
      ;;
  esac
  figure[$mode]="caught $caught of $damaged ($((100 * caught / damaged))%), repaired $repaired ($from_t2 from t2, $from_origin from the origin)"
  echo "# F9 verify: $mode: ${figure[$mode]}"
done
echo "# F9: verify: full ${figure[full]}; verify: size ${figure[size]}, the 2 same-size damages served without a word"
stop_server
finish
