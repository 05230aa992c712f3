#!/usr/bin/env bash
# `datavo pack` of tar shards as third-party tools write them: compressed shards (read when gzip or zstd, refused
# with a clear message when bzip2 or xz), compressed data named .tar, links and special members (packed as nothing,
# but counted and said), a tar without the end-of-archive marker (refused with a hint, accepted with
# --allow-missing-end-marker), and names in messages escaped and cut.
. "$(dirname "$0")/lib.sh"

command -v tar >/dev/null || die "setup" "GNU tar is required"

SRC=$E2E_TMP/src
mkdir -p "$SRC" "$E2E_TMP/tars"
for i in 0 1 2 3; do
  printf 'audio %s\n' "$i" >"$SRC/utt_000$i.audio.wav"
  printf 'text %s\n' "$i" >"$SRC/utt_000$i.transcript.txt"
done
members() { for i in "$@"; do printf 'utt_000%s.audio.wav utt_000%s.transcript.txt ' "$i" "$i"; done; }

# --- compressed shards --------------------------------------------------------------------------------------------

(cd "$SRC" && tar czf "$E2E_TMP/tars/shard-0.tar.gz" $(members 0 1) && tar --zstd -cf "$E2E_TMP/tars/shard-1.tar.zst" $(members 2 3))
run --json pack "$E2E_TMP/tars" --root "$E2E_TMP/store" --dataset voice/train
expect_eq "pack of .tar.gz and .tar.zst shards: exit 0" 0 "$RC"
expect_eq "pack of compressed shards: 4 samples" 4 "$(json "j['samples_added']" <<<"$OUT")"
expect_eq "pack --json: the field names of docs/cli.md" "" "$(json_vocabulary <<<"$OUT")"
expect_eq "pack --json: nothing skipped" '{"directories": 0, "hard_links": 0, "other": 0, "symlinks": 0, "unnamed": 0}' \
  "$(json "j['skipped_members']" <<<"$OUT")"
manifest=$(cat "$E2E_TMP"/store/datasets/voice/train/revisions/1.json)
expect_eq "the dataset's keys are the members' keys, not \"tar.gz\"" '["audio.wav", "transcript.txt"]' \
  "$(json "j['keys']" <<<"$manifest")"
expect_eq "no scratch file is left in the store" "" "$(find "$E2E_TMP/store" -name '*.tmp.*')"

# gzip data named .tar is read by its content, as tar itself reads it.
(cd "$SRC" && tar cf - $(members 0) | gzip >"$E2E_TMP/misnamed.tar")
run pack "$E2E_TMP/misnamed.tar" --root "$E2E_TMP/store-misnamed" --dataset voice/train
expect_eq "pack of gzip data named .tar: exit 0" 0 "$RC"

for format in bzip2:tar.bz2 xz:tar.xz; do
  tool=${format%%:*} suffix=${format#*:}
  (cd "$SRC" && tar cf - $(members 0) | "$tool" >"$E2E_TMP/shard.$suffix")
  run pack "$E2E_TMP/shard.$suffix" --root "$E2E_TMP/store-$tool" --dataset voice/train
  expect_eq "pack of a .$suffix shard: exit 2" 2 "$RC"
  expect_contains "pack of a .$suffix shard: says it is $tool-compressed at byte offset 0" \
    "datavo: ERROR: $E2E_TMP/shard.$suffix: at byte offset 0: $tool-compressed data" "$ERR"
  expect_contains "pack of a .$suffix shard: says what to do" "decompress it first ($tool -d)" "$ERR"
done

# --- links and special members ------------------------------------------------------------------------------------

mkdir -p "$E2E_TMP/linked"
cp "$SRC"/utt_0000.* "$E2E_TMP/linked/"
(cd "$E2E_TMP/linked" && ln -s utt_0000.audio.wav utt_0001.audio.wav && ln -s utt_0000.transcript.txt utt_0001.transcript.txt &&
  ln utt_0000.audio.wav utt_0002.audio.wav && ln utt_0000.transcript.txt utt_0002.transcript.txt &&
  tar cf "$E2E_TMP/linked.tar" utt_0000.* utt_0001.* utt_0002.*)
run pack "$E2E_TMP/linked.tar" --root "$E2E_TMP/store-linked" --dataset voice/train
expect_eq "pack of a tar with links: exit 0" 0 "$RC"
expect_contains "pack of a tar with links: 1 sample added" "added 1 samples" "$OUT"
expect_contains "pack of a tar with links: a warning counts the skipped members and says why" \
  "datavo: WARNING: $E2E_TMP/linked.tar: skipped 4 members of the source tars, in no sample: 2 symbolic links, 2 hard links (samples are made of regular files named <sample_id>.<key>; \`tar --dereference --hard-dereference\` stores the files that links name)" "$ERR"
run --json pack "$E2E_TMP/linked.tar" --root "$E2E_TMP/store-linked2" --dataset voice/train
expect_eq "pack --json of a tar with links: the skipped members by kind" \
  '{"directories": 0, "hard_links": 2, "other": 0, "symlinks": 2, "unnamed": 0}' "$(json "j['skipped_members']" <<<"$OUT")"
(cd "$E2E_TMP/linked" && tar cf "$E2E_TMP/only-links.tar" utt_0001.*)
run pack "$E2E_TMP/only-links.tar" --root "$E2E_TMP/store-only-links" --dataset voice/train
expect_eq "pack of a tar of symlinks only: exit 2" 2 "$RC"
expect_contains "pack of a tar of symlinks only: says why there is no sample" \
  "holds no samples (its tars hold only members that make none: 2 symbolic links)" "$ERR"

# --- the end-of-archive marker --------------------------------------------------------------------------------------

(cd "$SRC" && tar cf "$E2E_TMP/whole.tar" $(members 0))
size=$(python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); m = t.getmembers()[-1]; print(m.offset_data + (m.size + 511) // 512 * 512)' "$E2E_TMP/whole.tar")
head -c "$size" "$E2E_TMP/whole.tar" >"$E2E_TMP/no-end.tar"
run pack "$E2E_TMP/no-end.tar" --root "$E2E_TMP/store-no-end" --dataset voice/train
expect_eq "pack of a tar without the end-of-archive marker: exit 2" 2 "$RC"
expect_contains "pack of a tar without the marker: the hint" \
  "at byte offset $size: archive ends without the end-of-archive marker (two zero blocks): it was cut short, or written by a tool that omits the marker; if the tar is complete, pack it with --allow-missing-end-marker" "$ERR"
run pack "$E2E_TMP/no-end.tar" --root "$E2E_TMP/store-no-end" --dataset voice/train --allow-missing-end-marker
expect_eq "pack --allow-missing-end-marker: exit 0" 0 "$RC"
expect_contains "pack --allow-missing-end-marker: 1 sample added" "added 1 samples" "$OUT"
head -c $((size - 100)) "$E2E_TMP/whole.tar" >"$E2E_TMP/torn.tar"
run pack "$E2E_TMP/torn.tar" --root "$E2E_TMP/store-torn" --dataset voice/train --allow-missing-end-marker
expect_eq "pack --allow-missing-end-marker of a tar cut inside a member: still exit 2" 2 "$RC"

# --- names in messages --------------------------------------------------------------------------------------------

python3 - "$E2E_TMP/whole.tar" "$E2E_TMP/garbage-end.tar" <<'PY'
import random, sys
data = open(sys.argv[1], "rb").read()
import tarfile
t = tarfile.open(sys.argv[1]); m = t.getmembers()[-1]
end = m.offset_data + (m.size + 511) // 512 * 512
random.seed(7)
garbage = bytes(random.randrange(128, 256) for _ in range(512))  # no NUL: the name field is 100 bytes of binary
open(sys.argv[2], "wb").write(data[:end] + garbage + b"\0" * 1024)
PY
run pack "$E2E_TMP/garbage-end.tar" --root "$E2E_TMP/store-garbage" --dataset voice/train
expect_eq "pack of a tar with a garbage block for its end marker: exit 2" 2 "$RC"
expect_contains "garbage block: names the byte offset" "byte offset $size: bad checksum field" "$ERR"
expect_eq "garbage block: the message is printable ASCII (and \"…\")" "" "$(LC_ALL=C tr -d '\040-\176\n' <<<"${ERR//…/}")"
expect_cmp "garbage block: the message is short" "${#ERR}" -lt 350

python3 - "$E2E_TMP/long.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    info = tarfile.TarInfo("a" * 1000 + ".wav"); info.size = 1
    t.addfile(info, io.BytesIO(b"x"))
PY
run pack "$E2E_TMP/long.tar" --root "$E2E_TMP/store-long" --dataset voice/train
expect_eq "pack of a tar with a 1,004-byte member name: exit 2" 2 "$RC"
expect_contains "long name: the reason" "longer than 512 bytes" "$ERR"
expect_contains "long name: cut with …" "aaa…aaa" "$ERR"
expect_cmp "long name: the message is short" "${#ERR}" -lt 300

finish
