#!/usr/bin/env bash
# Builds the tar reader fuzzer with clang (libFuzzer + ASan + UBSan), independently of the main CMake tree, and
# runs it for a bounded time over the seed corpus fuzz/corpus/tar/.
#
# Usage: fuzz/build.sh [seconds]        (default 60; 0 only builds and regenerates the seeds)
# Env:   DATAVO_FUZZ_OUT  build and work directory (default <repo>/build-fuzz)
#
# The seeds are regenerated deterministically on every run (the same bytes as the committed files). libFuzzer
# writes the inputs it discovers to $DATAVO_FUZZ_OUT/corpus, never into the source tree, and a crashing input
# to $DATAVO_FUZZ_OUT/artifacts/. Exit status: non-zero when the fuzzer found a crash, a leak or a timeout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
out="${DATAVO_FUZZ_OUT:-$root/build-fuzz}"
seeds="$root/fuzz/corpus/tar"
mkdir -p "$out/corpus" "$out/artifacts" "$seeds"

python3 - "$seeds" <<'PY'
# Crafted seeds: a few valid archives in each dialect and one archive per malformation the reader must refuse.
import bz2, gzip, io, lzma, os, sys, tarfile

seeds = sys.argv[1]
END = b"\0" * 1024


def pad(data):
    return data + b"\0" * (-len(data) % 512)


def member(name, data, fmt=tarfile.USTAR_FORMAT, type_=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.type = len(data), 0o644, 0, type_
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(fmt, "utf-8", "surrogateescape") + pad(data)


def fix_checksum(block):
    block = bytearray(block)
    block[148:156] = b" " * 8
    block[148:155] = b"%06o\0" % sum(block[:512])
    return bytes(block)


def with_field(block, offset, value):
    block = bytearray(block)
    block[offset:offset + len(value)] = value
    return fix_checksum(bytes(block))


def pax(records, type_=b"x"):
    head = with_field(member("PaxHeader/x", records), 156, type_)
    return head


def record(key, value):
    body = b" %s=%s\n" % (key, value)
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return str(n).encode() + body


def zstd_frame(data):
    # One frame of one raw block, by hand (Python has no zstd): magic, a single-segment header with a 1-byte content
    # size, the block header (last block, raw, its size), the bytes.
    assert len(data) < 256
    block = 1 | (len(data) << 3)
    return b"\x28\xb5\x2f\xfd\x20" + bytes([len(data)]) + block.to_bytes(3, "little") + data


def link(name, target, type_):
    return with_field(with_field(member(name, b""), 157, target.encode()), 156, type_)


def garbage(size):
    # Bytes with the high bit set (so no NUL ends the name field), from a fixed LCG: the same on every Python.
    out, state = bytearray(), 7
    for _ in range(size):
        state = (state * 1664525 + 1013904223) % 2**32
        out.append(0x80 | (state >> 24))
    return bytes(out)


long_dir = "d" * 90 + "/" + "e" * 90 + "/" + "f" * 90
ok = member("utt_0001.audio.wav", b"RIFF" + bytes(range(256))) + member("utt_0001.transcript.txt", b"hello")
second_header = member("utt_0002.audio.wav", b"abc")[:512]
x_header = member("x", b"a")[:512]

out = {
    "valid_ustar.tar": ok + member("a" * 120 + "/utt_0002.audio.wav", b"x" * 700) + END,
    "valid_gnu_longname.tar": member(long_dir + "/utt_0003.x.bin", b"gnu", tarfile.GNU_FORMAT) + END,
    "valid_pax_longname.tar": member(long_dir + "/\u00fctt_0004.x.bin", b"pax", tarfile.PAX_FORMAT) + END,
    "valid_pax_global.tar": pax(record(b"comment", b"seed") + record(b"size", b"2"), b"g")
    + with_field(member("g.a.txt", b""), 124, b"00000000000\0") + pad(b"ga") + END,
    "bad_checksum.tar": ok + with_field(second_header, 136, b"1")[:148] + second_header[148:] + pad(b"abc") + END,
    "size_lies.tar": ok + with_field(second_header, 124, b"00077777777\0") + pad(b"abc") + END,
    "truncated_last_member.tar": ok + member("utt_0002.audio.wav", b"z" * 2000)[:1500],
    "missing_end_blocks.tar": ok,
    "lone_zero_block.tar": ok + b"\0" * 512,
    "huge_pax_record.tar": pax(b"99999999999 path=a.txt\n") + member("a.txt", b"a") + END,
    "bad_pax_record.tar": pax(b"12 path=a.txt") + member("a.txt", b"a") + END,
    "dotdot_name.tar": ok + member("../../etc/evil.txt", b"x") + END,
    "dotdot_pax_name.tar": pax(record(b"path", b"a/../../b.txt")) + member("b.txt", b"x") + END,
    "absolute_name.tar": member("/etc/passwd.txt", b"x") + END,
    "bad_octal.tar": with_field(second_header, 124, b"0000000001x\0") + pad(b"abc") + END,
    "base256_size.tar": with_field(second_header, 124, b"\x80" + b"\0" * 9 + b"\x00\x03") + pad(b"abc") + END,
    "base256_huge.tar": with_field(second_header, 124, b"\x80" + b"\0" * 3 + b"\x01" + b"\0" * 7) + END,
    "extended_without_member.tar": pax(record(b"path", b"a.txt")) + END,
    "gnu_sparse.tar": with_field(member("s.bin", b"x"), 156, b"S") + END,
    "directory_and_symlink.tar": with_field(member("dir/", b""), 156, b"5")
    + with_field(member("utt.link.txt", b""), 156, b"2") + ok + END,
    "links_and_fifo.tar": ok + link("utt_0002.audio.wav", "utt_0001.audio.wav", b"1")
    + link("utt_0003.audio.wav", "utt_0001.audio.wav", b"2") + with_field(member("fifo", b""), 156, b"6") + END,
    "compressed_gzip.tar": gzip.compress(ok + END, mtime=0),
    "compressed_zstd.tar": zstd_frame((ok + END)[:255]),
    "compressed_bzip2.tar": bz2.compress(ok + END),
    "compressed_xz.tar": lzma.compress(ok + END),
    "magic_named_member.tar": member("BZh91AY&SY.txt", b"b") + END,
    "garbage_end_block.tar": ok + garbage(512) + END,
    "long_pax_name_bad_checksum.tar": pax(record(b"path", b"n" * 1000 + b".x.bin"))
    + with_field(x_header, 136, b"1")[:148] + x_header[148:] + pad(b"a") + END,
}
for name, data in out.items():
    assert len(data) < 10 * 1024, name
    path = os.path.join(seeds, name)
    if not os.path.exists(path) or open(path, "rb").read() != data:
        with open(path, "wb") as f:
            f.write(data)
PY

fuzzer="$out/tar_reader_fuzz"
clang++ -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Wall -Wextra -Wshadow -Wpedantic -Werror \
  -I"$root/include" -I"$root/src" \
  "$root/fuzz/tar_reader_fuzz.cpp" "$root"/src/tar/*.cpp "$root/src/base/result.cpp" "$root/src/util/text.cpp" \
  -o "$fuzzer"
echo "built $fuzzer"

if [[ "$seconds" == 0 ]]; then exit 0; fi
# One job: the machine is shared. -max_len covers the largest seed with room to grow.
"$fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/" "$out/corpus" "$seeds"
if compgen -G "$out/artifacts/*" >/dev/null; then
  echo "fuzz: crashing inputs in $out/artifacts/" >&2
  exit 1
fi
