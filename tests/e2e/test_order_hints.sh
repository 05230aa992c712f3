#!/usr/bin/env bash
# Order hints across processes (docs/hierarchy.md, "Order hints"): two `datavo read` ranks of one shuffled epoch, at
# once, leave the folder tier's LRU order (mtimes, oldest first) equal to the next epoch's order reversed, every mtime
# marked as a hint. How they mix with hint-less readers: the entries of another dataset read without hints keep their
# mtimes, hence their order; a hint-less reader's hits leave the hinted mtimes alone; `cache gc` evicts the shards
# needed furthest away first, before the other job's entries.
. "$(dirname "$0")/lib.sh"
unset DATAVO_OFFLINE DATAVO_MANIFEST_CACHE_DIR
E2E_CMD_TIMEOUT=60

SHARDS=12
make_samples "$E2E_TMP/src_a" $((SHARDS * 2)) 16384
make_samples "$E2E_TMP/src_b" 6 16384
run --json pack "$E2E_TMP/src_a" --root "$E2E_TMP/store" --dataset hinted/train --samples-per-shard 2
[ "$RC" -eq 0 ] || die "pack hinted" "$ERR"
run --json pack "$E2E_TMP/src_b" --root "$E2E_TMP/store" --dataset other/train --samples-per-shard 2
[ "$RC" -eq 0 ] || die "pack other" "$ERR"
start_origin "$E2E_TMP/store"
export DATAVO_SERVER="$ORIGIN_URL"
write_config <<CONFIG
tiers:
  - name: local
    path: $E2E_TMP/cache
CONFIG

# entry_times DATASET: "<shard index> <mtime, ns>" of each cached entry of DATASET, by shard index.
entry_times() {
  run --json cache ls
  [ "$RC" -eq 0 ] || die "cache ls" "$ERR"
  python3 -c '
import json, os, sys
root, dataset = sys.argv[1], sys.argv[2]
rows = []
for e in json.load(sys.stdin)["entry_list"]:
    if e["dataset"] == dataset:
        st = os.stat(os.path.join(root, e["instance"], e["content_hash"] + ".tar"))
        rows.append((e["shard_index"], st.st_mtime_ns))
for index, ns in sorted(rows):
    print(index, ns)
' "$E2E_TMP/cache" "$1" <<<"$OUT"
}
# by_age TIMES: the shard indices, oldest mtime first.
by_age() { sort -k2,2n <<<"$1" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'; }

# 1. Another job reads its dataset without hints; its entries' mtimes are recorded.
run read other/train --key bin --key txt --order-hints off
[ "$RC" -eq 0 ] || die "read other" "$ERR"
other_before=$(entry_times other)
expect_eq "the other job's 3 shards are cached" 3 "$(wc -l <<<"$other_before")"

# 2. Two ranks of epoch 2 at once, with a step long against their start skew.
pids=()
for rank in 0 1; do
  timeout -k 5 "$E2E_CMD_TIMEOUT" "$DATAVO_BIN" --config "$E2E_CONFIG" --json read hinted/train --key bin --key txt \
    --shuffle --seed 5 --epoch 2 --world-size 2 --rank "$rank" --hint-step 600000 \
    >"$E2E_TMP/rank.$rank" 2>"$E2E_TMP/rank.$rank.err" &
  pids+=($!)
  track_pid $!
done
for rank in 0 1; do
  rc=0
  wait "${pids[$rank]}" || rc=$?
  expect_eq "rank $rank exits 0 ($(e2e_abbrev "$(cat "$E2E_TMP/rank.$rank.err")"))" 0 "$rc"
done
placed=$(cat "$E2E_TMP"/rank.0 "$E2E_TMP"/rank.1 |
  python3 -c 'import json, sys; print(sum(json.loads(l)["hints_placed"] for l in sys.stdin if l.strip()))')
expect_eq "each shard placed twice (landed, then read)" $((SHARDS * 2)) "$placed"

# The next epoch's order: a reader that reads nothing (--limit 0), places nothing and fetches nothing.
run --json read hinted/train --key bin --key txt --shuffle --seed 5 --epoch 3 --order-hints off --prefetch 0 --limit 0
[ "$RC" -eq 0 ] || die "read the order of epoch 3" "$ERR"
next_order=$(json "' '.join(str(i) for i in j['shard_indices'])" <<<"$OUT")
furthest_first=$(tr ' ' '\n' <<<"$next_order" | tac | tr '\n' ' ' | sed 's/ $//')
hinted=$(entry_times hinted)
expect_eq "LRU order after the epoch is the next epoch's order, reversed" "$furthest_first" "$(by_age "$hinted")"
marked=0
while read -r _ ns; do ((ns % 1000000 == 417417)) && marked=$((marked + 1)); done <<<"$hinted"
expect_eq "every hinted mtime carries the mark" "$SHARDS" "$marked"
expect_eq "the other job's entries kept their mtimes" "$other_before" "$(entry_times other)"

# 3. A reader without hints reads the hinted dataset: all hits, and the hinted mtimes stay (hours old as some are).
run --json read hinted/train --key bin --key txt --order-hints off
[ "$RC" -eq 0 ] || die "plain read" "$ERR"
expect_eq "the plain reader's shards were all hits" "$SHARDS" "$(json "j['tiers'][0]['hits']" <<<"$OUT")"
expect_eq "the plain reader's hits left the hinted mtimes alone" "$hinted" "$(entry_times hinted)"

# 4. gc with a budget of all but four shards evicts the shards needed furthest away, and none of the other job's
# (read minutes ago, they rank as fresher than hinted shards needed hours of steps away).
total=$(du -sb --apparent-size "$E2E_TMP/cache" | cut -f1)
shard_bytes=$(stat -c %s "$(find "$E2E_TMP/cache" -name '*.tar' | head -1)")
write_config <<CONFIG
tiers:
  - name: local
    path: $E2E_TMP/cache
    max_bytes: $((total - 4 * shard_bytes))
CONFIG
run --json cache gc
[ "$RC" -eq 0 ] || die "cache gc" "$ERR"
left=$(entry_times hinted | cut -d' ' -f1 | sort -n | tr '\n' ' ' | sed 's/ $//')
gone=$((SHARDS - $(wc -w <<<"$left")))
expect_cmp "gc evicted at least 4 hinted shards" "$gone" -ge 4
expected_left=$(tr ' ' '\n' <<<"$furthest_first" | tail -n +$((gone + 1)) | sort -n | tr '\n' ' ' | sed 's/ $//')
expect_eq "gc evicted the $gone shards needed furthest away" "$expected_left" "$left"
expect_eq "the other job's entries are all still there" 3 "$(entry_times other | wc -l)"

finish
