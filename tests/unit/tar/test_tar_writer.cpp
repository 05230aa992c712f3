#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/tar.hpp"
#include "support/tar_fixtures.hpp"

namespace datavo {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using tartest::bytes_of;
using tartest::have_tool;
using tartest::Member;
using tartest::read_file;
using tartest::run;
using tartest::text_of;
using tartest::write_file;

std::string written_payload(std::size_t size, unsigned seed) { return tartest::payload(size, seed, 7); }

TarSink append_to(std::string& out) {
  return [&out](std::span<const std::byte> bytes) -> Result<void> {
    out += text_of(bytes);
    return ok();
  };
}

std::string write_archive(const std::vector<Member>& members) {
  std::string out;
  TarWriter writer(append_to(out));
  for (const Member& m : members) {
    auto added = writer.add_member(m.name, bytes_of(m.data));
    EXPECT_TRUE(added) << added.error().message;
  }
  auto finished = writer.finish();
  EXPECT_TRUE(finished) << finished.error().message;
  EXPECT_EQ(writer.bytes_written(), Bytes{out.size()});
  return out;
}

std::vector<Member> read_back(const std::string& archive) {
  TarReader reader(bytes_of(archive), "written.tar");
  std::vector<Member> members;
  for (;;) {
    auto m = reader.next();
    if (!m) {
      ADD_FAILURE() << m.error().message;
      return members;
    }
    if (!*m) return members;
    members.push_back({std::string((*m)->name), text_of((*m)->data)});
  }
}

const std::string k_a(90, 'a'), k_b(90, 'b'), k_c(90, 'c');

// Names exercising every header layout: plain, exactly 100 bytes, prefix split, pax for length, pax for bytes
// >= 0x80; payloads of 0, 1, 511, 512, 513 bytes and several blocks.
std::vector<Member> sample_members() {
  return {
      {"utt_0001.audio.wav", written_payload(1000, 1)},
      {"utt_0001.transcript.txt", ""},
      {std::string(91, 'e') + ".json.txt", written_payload(1, 2)},
      {k_a + "/utt_0002.audio.wav", written_payload(512, 3)},
      {k_a + "/utt_0002.transcript.txt", written_payload(511, 4)},
      {k_a + "/" + k_b + "/" + k_c + "/utt_0003.x.bin", written_payload(70000, 5)},
      {std::string(120, 'd') + ".long.txt", written_payload(513, 6)},
      {"\xc3\xbctt_0004.audio.wav", written_payload(4, 7)},
  };
}

TEST(TarWriter, RoundTripsThroughTheReader) {
  const std::vector<Member> members = sample_members();
  const std::string archive = write_archive(members);
  EXPECT_EQ(read_back(archive), members);
  EXPECT_EQ(archive.size() % 512, 0u);
  EXPECT_EQ(archive.substr(archive.size() - 1024), std::string(1024, '\0'));

  std::vector<std::string> ids;
  auto grouped = for_each_sample(bytes_of(archive), "w.tar", [&](const Sample& s) -> Result<void> {
    ids.emplace_back(s.id);
    return ok();
  });
  ASSERT_TRUE(grouped) << grouped.error().message;
  EXPECT_EQ(ids, (std::vector<std::string>{"utt_0001", std::string(91, 'e'), k_a + "/utt_0002",
                                           k_a + "/" + k_b + "/" + k_c + "/utt_0003", std::string(120, 'd'),
                                           "\xc3\xbctt_0004"}));
}

TEST(TarWriter, EmptyArchiveIsTwoZeroBlocks) { EXPECT_EQ(write_archive({}), std::string(1024, '\0')); }

TEST(TarWriter, IsDeterministic) { EXPECT_EQ(write_archive(sample_members()), write_archive(sample_members())); }

TEST(TarWriter, GoldenBytes) {
  // Pins the format: a change here changes every key-group tar the origin serves.
  const std::string archive = write_archive(sample_members());
  Sha256Hasher hasher;
  hasher.update(archive.data(), archive.size());
  EXPECT_EQ(hasher.finish().hex(), "fb16b1cd3c9eba2d02f05442b94741375a147c25ed14cdbf9674e05d7e0a2c8c");
  EXPECT_EQ(archive.size(), 82432u);
}

TEST(TarWriter, StreamingInPiecesGivesTheSameBytes) {
  const std::vector<Member> members = sample_members();
  std::string streamed;
  std::size_t largest_piece = 0;
  TarWriter writer([&](std::span<const std::byte> bytes) -> Result<void> {
    largest_piece = std::max(largest_piece, bytes.size());
    streamed += text_of(bytes);
    return ok();
  });
  for (const Member& m : members) {
    ASSERT_TRUE(writer.begin_member(m.name, Bytes{m.data.size()}));
    for (std::size_t at = 0; at < m.data.size(); at += 333) {
      ASSERT_TRUE(writer.write(bytes_of(std::string_view(m.data).substr(at, 333))));
    }
  }
  ASSERT_TRUE(writer.finish());
  EXPECT_EQ(streamed, write_archive(members));
  EXPECT_LE(largest_piece, 1024u);  // the writer buffers nothing bigger than a header or the end marker
}

TEST(TarWriter, HeaderFieldsFollowTheDeterminismRules) {
  const std::string archive = write_archive({{"utt.audio.wav", "abc"}});
  const std::string h = archive.substr(0, 512);
  EXPECT_EQ(h.substr(0, 14), std::string("utt.audio.wav\0", 14));
  EXPECT_EQ(h.substr(100, 8), std::string("0000644\0", 8));
  EXPECT_EQ(h.substr(108, 8), std::string("0000000\0", 8));
  EXPECT_EQ(h.substr(116, 8), std::string("0000000\0", 8));
  EXPECT_EQ(h.substr(124, 12), std::string("00000000003\0", 12));
  EXPECT_EQ(h.substr(136, 12), std::string("00000000000\0", 12));
  EXPECT_EQ(h[155], ' ');
  EXPECT_EQ(h[156], '0');
  EXPECT_EQ(h.substr(257, 8), std::string("ustar\0"
                                          "00",
                                          8));
  EXPECT_EQ(h.substr(265, 64), std::string(64, '\0'));  // uname, gname
  EXPECT_EQ(archive.substr(512, 512), std::string("abc") + std::string(509, '\0'));
}

TEST(TarWriter, SplitsLongNamesIntoPrefixWhenPossible) {
  const std::string name = k_a + "/" + k_b + "/x.txt";  // 188 bytes: prefix "aaa…" (90), name "bbb…/x.txt" (96)
  const std::string archive = write_archive({{name, "x"}});
  EXPECT_EQ(archive[156], '0');  // no pax header
  EXPECT_EQ(archive.substr(345, 91), k_a + '\0');
  EXPECT_EQ(archive.substr(0, 97), k_b + "/x.txt" + '\0');
  EXPECT_EQ(archive.size(), 512u + 512u + 1024u);
}

TEST(TarWriter, UsesPaxOnlyForNamesThatNeedIt) {
  EXPECT_EQ(write_archive({{std::string(100, 'n'), "x"}})[156], '0');
  const std::string unsplittable = write_archive({{std::string(101, 'n'), "x"}});
  EXPECT_EQ(unsplittable[156], 'x');
  EXPECT_EQ(unsplittable.substr(0, 15), std::string("././@PaxHeader\0", 15));
  EXPECT_THAT(unsplittable.substr(512, 512), HasSubstr("111 path=" + std::string(101, 'n') + "\n"));
  EXPECT_EQ(unsplittable[1024 + 156], '0');
  EXPECT_EQ(unsplittable.substr(1024, 100), std::string(100, 'n'));  // the ustar field holds what fits

  const std::string non_ascii = write_archive({{"\xc3\xbc.txt", "x"}});
  EXPECT_EQ(non_ascii[156], 'x');
  EXPECT_THAT(non_ascii.substr(512, 512), HasSubstr("15 path=\xc3\xbc.txt\n"));
  EXPECT_EQ(non_ascii.substr(1024, 7), std::string("??.txt\0", 7));
}

TEST(TarWriter, SizesBeyondElevenOctalDigitsUsePaxSize) {
  const std::uint64_t size = std::uint64_t{8} << 30;
  std::string out;
  TarWriter writer(append_to(out));
  ASSERT_TRUE(writer.begin_member("big.bin", Bytes{size}));
  ASSERT_EQ(out.size(), 1536u);
  EXPECT_EQ(out[156], 'x');
  EXPECT_THAT(out.substr(512, 512), HasSubstr("19 size=8589934592\n"));
  EXPECT_EQ(out.substr(1024 + 124, 12), std::string("00000000000\0", 12));
  auto predicted = tar_archive_size(std::vector<TarEntryInfo>{{"big.bin", Bytes{size}}});
  ASSERT_TRUE(predicted);
  EXPECT_EQ(predicted->count(), 1536u + size + 1024u);
  EXPECT_FALSE(writer.finish());  // the payload was never written

  // Just below the limit the octal field suffices.
  EXPECT_EQ(tar_archive_size(std::vector<TarEntryInfo>{{"big.bin", Bytes{size - 1}}})->count(), 512u + size + 1024u);
}

TEST(TarWriter, ArchiveSizeMatchesBytesWritten) {
  const std::vector<Member> members = sample_members();
  for (std::size_t count = 0; count <= members.size(); ++count) {
    const std::vector<Member> some(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(count));
    std::vector<TarEntryInfo> entries;
    for (const Member& m : some) entries.push_back({m.name, Bytes{m.data.size()}});
    auto predicted = tar_archive_size(entries);
    ASSERT_TRUE(predicted) << predicted.error().message;
    EXPECT_EQ(predicted->count(), write_archive(some).size()) << count << " members";
  }
}

TEST(TarWriter, RefusesNamesTheReaderWouldRefuseOrChange) {
  for (const std::string& name :
       {std::string(""), std::string("/abs.txt"), std::string("../x.txt"), std::string("a/../b.txt"),
        std::string("a/.."), std::string("./a.txt"), std::string("dir/"), std::string("a\0b.txt", 7)}) {
    SCOPED_TRACE(name);
    std::string out;
    TarWriter writer(append_to(out));
    auto begun = writer.begin_member(name, Bytes{1});
    ASSERT_FALSE(begun);
    EXPECT_EQ(begun.error().code, ErrorCode::invalid_argument);
    EXPECT_TRUE(out.empty());
    auto size = tar_archive_size(std::vector<TarEntryInfo>{{name, Bytes{1}}});
    ASSERT_FALSE(size);
    EXPECT_EQ(size.error().code, ErrorCode::invalid_argument);
  }
}

TEST(TarWriter, MisuseIsInvalidArgumentAndSticky) {
  {
    std::string out;
    TarWriter writer(append_to(out));
    ASSERT_TRUE(writer.begin_member("a.txt", Bytes{3}));
    auto too_much = writer.write(bytes_of("abcd"));
    ASSERT_FALSE(too_much);
    EXPECT_EQ(too_much.error().code, ErrorCode::invalid_argument);
    auto after = writer.finish();  // sticky: the first error again
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().message, too_much.error().message);
  }
  {
    std::string out;
    TarWriter writer(append_to(out));
    ASSERT_TRUE(writer.begin_member("a.txt", Bytes{3}));
    ASSERT_TRUE(writer.write(bytes_of("ab")));
    auto early = writer.begin_member("b.txt", Bytes{1});
    ASSERT_FALSE(early);
    EXPECT_THAT(early.error().message, HasSubstr("owes 1 payload bytes"));
  }
  {
    std::string out;
    TarWriter writer(append_to(out));
    ASSERT_TRUE(writer.begin_member("a.txt", Bytes{3}));
    auto unfinished = writer.finish();
    ASSERT_FALSE(unfinished);
    EXPECT_EQ(unfinished.error().code, ErrorCode::invalid_argument);
  }
  {
    std::string out;
    TarWriter writer(append_to(out));
    ASSERT_TRUE(writer.finish());
    EXPECT_FALSE(writer.add_member("late.txt", bytes_of("x")));
    EXPECT_EQ(out.size(), 1024u);
  }
}

TEST(TarWriter, SinkErrorStopsTheWriter) {
  int calls = 0;
  TarWriter writer([&](std::span<const std::byte>) -> Result<void> {
    if (++calls == 2) return Error{ErrorCode::remote, "client went away"};
    return ok();
  });
  ASSERT_TRUE(writer.begin_member("a.txt", Bytes{3}));
  auto failed = writer.write(bytes_of("abc"));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::remote);
  EXPECT_EQ(writer.bytes_written(), Bytes{512});
  auto again = writer.add_member("b.txt", bytes_of("b"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::remote);
  EXPECT_EQ(calls, 2);
}

// ---------------------------------------------------------------------------------------------------------------
// Other tools read what TarWriter writes, byte-exact.

class TarWriterInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    members_ = sample_members();
    archive_path_ = tmp_.path() / "out.tar";
    write_file(archive_path_, write_archive(members_));
  }

  tartest::TempDir tmp_;
  std::vector<Member> members_;
  fs::path archive_path_;
};

TEST_F(TarWriterInterop, GnuTarListsAndExtractsByteExact) {
  if (!have_tool("tar")) GTEST_SKIP() << "GNU tar is not installed";
  const fs::path listing = tmp_.path() / "listing";
  ASSERT_EQ(run("LC_ALL=C.UTF-8 tar --quoting-style=literal -tvf '" + archive_path_.string() + "' > '" +
                listing.string() + "'"),
            0);
  std::istringstream lines(read_file(listing));
  std::string line;
  std::size_t index = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(index, members_.size());
    const Member& m = members_[index++];
    EXPECT_THAT(line, HasSubstr("-rw-r--r-- 0/0 "));
    EXPECT_THAT(line, HasSubstr(" " + std::to_string(m.data.size()) + " 1970-01-01 00:00 " + m.name));
  }
  EXPECT_EQ(index, members_.size());

  const fs::path extracted = tmp_.path() / "x";
  fs::create_directories(extracted);
  ASSERT_EQ(run("LC_ALL=C.UTF-8 tar -xf '" + archive_path_.string() + "' -C '" + extracted.string() + "'"), 0);
  for (const Member& m : members_) {
    EXPECT_TRUE(read_file(extracted / m.name) == m.data) << m.name;
  }
}

TEST_F(TarWriterInterop, PythonTarfileReadsByteExact) {
  if (!have_tool("python3")) GTEST_SKIP() << "python3 is not installed";
  const char* const script = R"(import os, sys, tarfile
out = sys.argv[2]
with tarfile.open(sys.argv[1]) as tar, open(os.path.join(out, "names"), "wb") as names:
    for i, m in enumerate(tar):
        assert m.isreg() and m.mode == 0o644 and m.mtime == 0 and m.uid == 0 and m.gid == 0, m
        names.write(m.name.encode("utf-8", "surrogateescape") + b"\n")
        with open(os.path.join(out, str(i)), "wb") as f:
            f.write(tar.extractfile(m).read())
)";
  write_file(tmp_.path() / "read.py", script);
  const fs::path out = tmp_.path() / "py";
  fs::create_directories(out);
  ASSERT_EQ(run("python3 '" + (tmp_.path() / "read.py").string() + "' '" + archive_path_.string() + "' '" +
                out.string() + "'"),
            0);
  std::istringstream names(read_file(out / "names"));
  std::string name;
  std::size_t index = 0;
  while (std::getline(names, name)) {
    ASSERT_LT(index, members_.size());
    EXPECT_EQ(name, members_[index].name);
    EXPECT_TRUE(read_file(out / std::to_string(index)) == members_[index].data) << name;
    ++index;
  }
  EXPECT_EQ(index, members_.size());
}

TEST_F(TarWriterInterop, BsdtarLists) {
  if (!have_tool("bsdtar")) GTEST_SKIP() << "bsdtar is not installed (apt-get install libarchive-tools)";
  const fs::path listing = tmp_.path() / "listing";
  ASSERT_EQ(run("LC_ALL=C.UTF-8 bsdtar -tf '" + archive_path_.string() + "' > '" + listing.string() + "'"), 0);
  std::string expected;
  for (const Member& m : members_) expected += m.name + "\n";
  EXPECT_EQ(read_file(listing), expected);
}

TEST_F(TarWriterInterop, SameBytesAsPythonUstarWithTheSameRules) {
  // Python's tarfile, told to use our fixed metadata, must write the same headers; it only pads the archive
  // to its 10 KiB record size after the end marker.
  if (!have_tool("python3")) GTEST_SKIP() << "python3 is not installed";
  std::vector<Member> ustar_members;
  std::string list;
  for (const Member& m : members_) {
    const bool ascii = std::all_of(m.name.begin(), m.name.end(), [](char c) { return (c & 0x80) == 0; });
    if (!ascii || m.name.size() > 256 || m.name.starts_with(std::string(120, 'd'))) continue;
    write_file(tmp_.path() / "data" / std::to_string(ustar_members.size()), m.data);
    list += m.name + "\n";
    ustar_members.push_back(m);
  }
  ASSERT_GE(ustar_members.size(), 4u);
  write_file(tmp_.path() / "list", list);
  const char* const script = R"(import io, os, sys, tarfile
d = sys.argv[1]
names = [n for n in open(os.path.join(d, "list")).read().split("\n") if n]
with tarfile.open(os.path.join(d, "py.tar"), "w", format=tarfile.USTAR_FORMAT) as tar:
    for i, name in enumerate(names):
        data = open(os.path.join(d, "data", str(i)), "rb").read()
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime, info.uid, info.gid = len(data), 0o644, 0, 0, 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))
)";
  write_file(tmp_.path() / "write.py", script);
  ASSERT_EQ(run("python3 '" + (tmp_.path() / "write.py").string() + "' '" + tmp_.path().string() + "'"), 0);
  const std::string ours = write_archive(ustar_members);
  const std::string theirs = read_file(tmp_.path() / "py.tar");
  ASSERT_GE(theirs.size(), ours.size());
  const auto mismatch = std::mismatch(ours.begin(), ours.end(), theirs.begin());
  EXPECT_EQ(mismatch.first, ours.end()) << "first difference at byte " << (mismatch.first - ours.begin()) << ": ours "
                                        << int(*mismatch.first) << ", Python's " << int(*mismatch.second);
  EXPECT_EQ(theirs.substr(ours.size()), std::string(theirs.size() - ours.size(), '\0'));
}

}  // namespace
}  // namespace datavo
