#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "datavo/tar.hpp"
#include "support/tar_fixtures.hpp"
#include "util/compression.hpp"

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

std::string payload(std::size_t size, unsigned seed) { return tartest::payload(size, seed, 1); }

// Every regular member, or the error message.
Result<std::vector<Member>> read_members(const std::string& archive, TarReaderOptions options = {}) {
  TarReader reader(bytes_of(archive), "test.tar", options);
  std::vector<Member> members;
  for (;;) {
    auto member = reader.next();
    if (!member) return member.error();
    if (!*member) return members;
    members.push_back({std::string((*member)->name), text_of((*member)->data)});
  }
}

struct GroupedSample {
  std::string id;
  std::vector<std::string> keys;
  bool operator==(const GroupedSample&) const = default;
};

std::ostream& operator<<(std::ostream& os, const GroupedSample& s) {
  os << s.id << " {";
  for (const auto& key : s.keys) os << ' ' << key;
  return os << " }";
}

// ---------------------------------------------------------------------------------------------------------------
// Crafting archives header by header, so that single fields can be made wrong.

void put(std::string& block, std::size_t offset, std::size_t size, std::string_view value) {
  std::memset(block.data() + offset, 0, size);
  if (!value.empty()) std::memcpy(block.data() + offset, value.data(), std::min(size, value.size()));
}

std::string octal_field(std::uint64_t value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%0*llo", digits, static_cast<unsigned long long>(value));
  return text;
}

std::uint64_t unsigned_sum(const std::string& block) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
  return sum;
}

void fix_checksum(std::string& block) {
  put(block, 148, 8, octal_field(unsigned_sum(block), 6));
  block[155] = ' ';
}

std::string header(std::string_view name, std::uint64_t size, char type = '0', std::string_view prefix = {}) {
  std::string block(512, '\0');
  put(block, 0, 100, name);
  put(block, 100, 8, "0000644");
  put(block, 108, 8, "0000000");
  put(block, 116, 8, "0000000");
  put(block, 124, 12, octal_field(size, 11));
  put(block, 136, 12, "00000000000");
  block[156] = type;
  put(block, 257, 6, std::string_view("ustar\0", 6));
  put(block, 263, 2, "00");
  put(block, 345, 155, prefix);
  fix_checksum(block);
  return block;
}

std::string padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

std::string member(std::string_view name, const std::string& data, char type = '0') {
  return header(name, data.size(), type) + padded(data);
}

std::string pax_record(std::string_view keyword, std::string_view value) {
  const std::size_t base = keyword.size() + value.size() + 3;
  std::size_t length = base + 1;
  while (std::to_string(length).size() + base != length) ++length;
  return std::to_string(length) + " " + std::string(keyword) + "=" + std::string(value) + "\n";
}

const std::string k_end(1024, '\0');

struct ExpectedError {
  TarFault fault;
  std::uint64_t offset;
  std::string detail;  // a further substring of the message
};

// Reads `archive` with a TarReader and with a SampleIterator: both must fail with `expected`.
void expect_error(const std::string& archive, const ExpectedError& expected, TarReaderOptions options = {}) {
  const std::string offset_text = "byte offset " + std::to_string(expected.offset) + ":";
  {
    TarReader reader(bytes_of(archive), "crafted.tar", options);
    for (;;) {
      auto m = reader.next();
      if (!m) {
        const ErrorCode code = expected.fault == TarFault::unsupported ? ErrorCode::unsupported : ErrorCode::integrity;
        EXPECT_EQ(m.error().code, code);
        EXPECT_EQ(reader.fault(), expected.fault) << m.error().message;
        EXPECT_THAT(m.error().message, HasSubstr("shard crafted.tar: "));
        EXPECT_THAT(m.error().message, HasSubstr(offset_text));
        EXPECT_THAT(m.error().message, HasSubstr(expected.detail));
        // The error is sticky.
        auto again = reader.next();
        ASSERT_FALSE(again);
        EXPECT_EQ(again.error().message, m.error().message);
        break;
      }
      if (!*m) {
        ADD_FAILURE() << "the archive was read without error";
        break;
      }
    }
  }
  SampleIterator samples(bytes_of(archive), "crafted.tar", options);
  for (;;) {
    auto s = samples.next();
    if (!s) {
      EXPECT_EQ(samples.fault(), expected.fault);
      EXPECT_THAT(s.error().message, HasSubstr(offset_text));
      return;
    }
    if (*s == nullptr) {
      ADD_FAILURE() << "the samples were read without error";
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------

TEST(TarReader, ReadsMembersZeroCopy) {
  const std::string archive =
      member("utt_0001.audio.wav", payload(1000, 1)) + member("utt_0001.transcript.txt", "hello") + k_end;
  TarReader reader(bytes_of(archive), "a.tar");
  auto first = reader.next();
  ASSERT_TRUE(first && *first) << (first ? "" : first.error().message);
  EXPECT_EQ((*first)->name, "utt_0001.audio.wav");
  EXPECT_EQ((*first)->header_offset, 0u);
  EXPECT_EQ(reinterpret_cast<const char*>((*first)->data.data()), archive.data() + 512);
  EXPECT_EQ(text_of((*first)->data), payload(1000, 1));
  auto second = reader.next();
  ASSERT_TRUE(second && *second);
  EXPECT_EQ((*second)->name, "utt_0001.transcript.txt");
  EXPECT_EQ((*second)->header_offset, 1536u);
  EXPECT_EQ(text_of((*second)->data), "hello");
  auto end = reader.next();
  ASSERT_TRUE(end);
  EXPECT_FALSE(*end);
  auto still_end = reader.next();
  ASSERT_TRUE(still_end);
  EXPECT_FALSE(*still_end);
  EXPECT_EQ(reader.fault(), TarFault::none);
}

TEST(TarReader, EmptyArchiveIsJustTheEndMarker) {
  auto members = read_members(k_end);
  ASSERT_TRUE(members);
  EXPECT_TRUE(members->empty());
}

TEST(TarReader, JoinsUstarPrefixAndName) {
  const std::string prefix(150, 'p');
  const std::string archive = header("utt.audio.wav", 3, '0', prefix) + padded("abc") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{prefix + "/utt.audio.wav", "abc"}}));
}

TEST(TarReader, IgnoresPrefixFieldOfOldGnuHeaders) {
  // Old GNU headers ("ustar  \0") keep atime/ctime where ustar has its prefix.
  std::string block = header("utt.audio.wav", 3, '0', "12345670123");
  put(block, 257, 8, std::string_view("ustar  \0", 8));
  fix_checksum(block);
  auto members = read_members(block + padded("abc") + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->at(0).name, "utt.audio.wav");
}

TEST(TarReader, AcceptsV7HeadersWithoutMagic) {
  std::string block = header("utt.audio.wav", 3, '\0');
  put(block, 257, 8, "");
  fix_checksum(block);
  auto members = read_members(block + padded("abc") + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"utt.audio.wav", "abc"}}));
}

TEST(TarReader, AcceptsSignedChecksum) {
  std::string block = header("utt.audio.wav", 3);
  put(block, 265, 32, "\xe9\xe9\xe9");  // uname bytes >= 0x80 make the two sums differ
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < 512; ++i) signed_sum += (i >= 148 && i < 156) ? ' ' : static_cast<signed char>(block[i]);
  ASSERT_NE(static_cast<std::uint64_t>(signed_sum), unsigned_sum(block));
  put(block, 148, 8, octal_field(static_cast<std::uint64_t>(signed_sum), 6));
  block[155] = ' ';
  auto members = read_members(block + padded("abc") + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->size(), 1u);
}

TEST(TarReader, AcceptsChecksumWithLeadingSpacesAndNoTerminator) {
  std::string block = header("utt.audio.wav", 3);
  put(block, 148, 8, " " + octal_field(unsigned_sum(block), 7));
  auto members = read_members(block + padded("abc") + k_end);
  ASSERT_TRUE(members) << members.error().message;
}

TEST(TarReader, SkipsDirectoriesLinksAndDevices) {
  std::string dir = header("train/", 0, '5');
  std::string dir_with_size = header("odd/", 4096, '5');  // a directory has no payload whatever its size says
  std::string v7_dir = header("v7dir/", 0, '\0');
  const std::string archive = dir + dir_with_size + v7_dir + member("utt.audio.wav", "a") +
                              header("utt.link.wav", 0, '2') + header("utt.hard.wav", 0, '1') +
                              header("fifo.x", 0, '6') + member("utt.text.txt", "b") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"utt.audio.wav", "a"}, {"utt.text.txt", "b"}}));
}

TEST(TarReader, CountsTheMembersItSkipsByKind) {
  const std::string archive = header("train/", 0, '5') + header("v7dir/", 0, '\0') + member("utt.audio.wav", "a") +
                              header("utt.link.wav", 0, '2') + header("utt2.link.wav", 0, '2') +
                              header("utt.hard.wav", 0, '1') + header("fifo.x", 0, '6') +
                              member("vol.label", "v", 'V') + member("README", "no key") + k_end;
  TarReader reader(bytes_of(archive), "a.tar");
  while (true) {
    auto m = reader.next();
    ASSERT_TRUE(m) << m.error().message;
    if (!*m) break;
  }
  EXPECT_EQ(reader.skipped(), (TarSkips{.directories = 2, .symlinks = 2, .hard_links = 1, .other = 2}));
  EXPECT_EQ(reader.skipped().notable(), 5u);
  EXPECT_EQ(describe_skips(reader.skipped()),
            "2 symbolic links, 1 hard link, 2 devices, FIFOs or other special members");

  SampleIterator samples(bytes_of(archive), "a.tar");
  while (true) {
    auto s = samples.next();
    ASSERT_TRUE(s) << s.error().message;
    if (*s == nullptr) break;
  }
  EXPECT_EQ(samples.skipped(), (TarSkips{.directories = 2, .symlinks = 2, .hard_links = 1, .other = 2, .unnamed = 1}));
  EXPECT_EQ(describe_skips(samples.skipped()),
            "2 symbolic links, 1 hard link, 2 devices, FIFOs or other special members, 1 file not named "
            "<sample_id>.<key>");
  EXPECT_EQ(describe_skips(TarSkips{.directories = 3}), "") << "directories are not news";
}

TEST(TarReader, AFirstMemberNamedLikeAMagicNumberIsNotTakenForCompression) {
  // "BZh9" starts bzip2 data, and is also a name a tar may hold: only a block that fails as a header is sniffed.
  const std::string archive = member("BZh91AY&SY.txt", "b") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"BZh91AY&SY.txt", "b"}}));
}

TEST(TarReader, SkipsPayloadOfUnknownTypes) {
  const std::string archive = member("vol.label", payload(700, 2), 'V') + member("a.b", "x", '7') + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"a.b", "x"}}));
}

TEST(TarReader, StripsLeadingDotSlash) {
  auto members = read_members(header("./", 0, '5') + member("././utt.audio.wav", "a") + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->at(0).name, "utt.audio.wav");
}

TEST(TarReader, GnuLongNameAndLongLink) {
  const std::string long_name = std::string(300, 'x') + "/utt.audio.wav";
  const std::string archive = member("././@LongLink", long_name + '\0', 'L') +
                              member("././@LongLink", std::string(200, 'y') + '\0', 'K') +
                              header(std::string(long_name).substr(0, 100), 2) + padded("ab") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{long_name, "ab"}}));
  TarReader reader(bytes_of(archive), "t.tar");
  auto first = reader.next();
  ASSERT_TRUE(first && *first);
  EXPECT_EQ((*first)->header_offset, 0u);  // the member starts at its first extended header
}

TEST(TarReader, PaxPathAndSizeOverrideTheHeader) {
  const std::string long_name = std::string(400, 'z') + "/utt.ü.wav";
  const std::string records = pax_record("mtime", "1.5") + pax_record("path", long_name) + pax_record("size", "5") +
                              pax_record("comment", "a=b=c");
  const std::string archive =
      member("PaxHeaders/x", records, 'x') + header("short", 99) + padded("12345") + member("next.txt", "n") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{long_name, "12345"}, {"next.txt", "n"}}));
}

TEST(TarReader, PaxEmptyValueFallsBackToTheHeader) {
  const std::string records = pax_record("path", "");
  const std::string archive = member("PaxHeaders/x", records, 'x') + member("plain.txt", "p") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->at(0).name, "plain.txt");
}

TEST(TarReader, PaxGlobalHeaderAppliesToLaterMembers) {
  const std::string archive =
      member("GlobalHead", pax_record("comment", "made by hand") + pax_record("size", "2"), 'g') + header("a.txt", 0) +
      padded("aa") + header("b.txt", 0) + padded("bb") + member("GlobalHead", pax_record("size", ""), 'g') +
      member("c.txt", "ccc") + k_end;
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"a.txt", "aa"}, {"b.txt", "bb"}, {"c.txt", "ccc"}}));
}

TEST(TarReader, GnuBase256Size) {
  std::string block = header("utt.audio.wav", 0);
  std::string field(12, '\0');
  field[0] = '\x80';
  field[10] = '\x02';
  field[11] = '\xbc';  // 700
  put(block, 124, 12, field);
  fix_checksum(block);
  auto members = read_members(block + padded(payload(700, 3)) + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(*members, (std::vector<Member>{{"utt.audio.wav", payload(700, 3)}}));
}

TEST(TarReader, EndMarkerOptionalAcceptsEofAtAMemberBoundary) {
  const std::string archive = member("a.txt", "a");
  EXPECT_FALSE(read_members(archive));
  auto members = read_members(archive, {.end_marker = EndMarker::optional});
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->size(), 1u);
  auto lone = read_members(archive + std::string(512, '\0'), {.end_marker = EndMarker::optional});
  ASSERT_TRUE(lone) << lone.error().message;
  EXPECT_EQ(lone->size(), 1u);
}

TEST(TarReader, IgnoresBytesAfterTheEndMarker) {
  auto members = read_members(member("a.txt", "a") + k_end + "garbage after the end");
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->size(), 1u);
}

TEST(TarReader, AllowsDotsThatAreNotComponents) {
  auto members = read_members(member("..a.txt", "1") + member("a..b/c...d.txt", "2") + member("x/.y.txt", "3") + k_end);
  ASSERT_TRUE(members) << members.error().message;
  EXPECT_EQ(members->size(), 3u);
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed archives: each is an integrity error naming the byte offset of the offending header.

TEST(TarReaderMalformed, BadChecksumNamesMemberAndOffset) {
  std::string second = header("utt_0002.audio.wav", 3);
  const std::uint64_t stored = unsigned_sum(second);
  second[136] = '1';  // mtime changed after the checksum was computed
  const std::uint64_t computed = unsigned_sum(second);
  const std::string archive = member("utt_0001.audio.wav", payload(1000, 4)) + second + padded("abc") + k_end;
  char detail[128];
  std::snprintf(detail, sizeof detail,
                "shard crafted.tar: member \"utt_0002.audio.wav\" at byte offset 1536: header checksum mismatch "
                "(stored 0o%llo, computed 0o%llo)",
                static_cast<unsigned long long>(stored), static_cast<unsigned long long>(computed));
  expect_error(archive, {TarFault::bad_checksum, 1536, detail});
}

TEST(TarReaderMalformed, UnparsableChecksumField) {
  std::string block = header("a.txt", 1);
  put(block, 148, 8, "12z4");
  expect_error(block + padded("a") + k_end, {TarFault::bad_checksum, 0, "bad checksum field"});
}

TEST(TarReaderMalformed, SizeThatLiesRunsPastEof) {
  const std::string archive =
      member("utt_0001.audio.wav", "ok") + header("utt_0002.audio.wav", 1 << 20) + padded("short") + k_end;
  expect_error(archive, {TarFault::truncated, 1024, "member size 1048576 runs past the end of the archive"});
}

TEST(TarReaderMalformed, TruncatedLastMember) {
  const std::string full = member("a.txt", "a") + member("b.bin", payload(2000, 5)) + k_end;
  expect_error(full.substr(0, 1024 + 512 + 1500), {TarFault::truncated, 1024, "runs past the end"});
  // The payload is all there but its padding is cut.
  expect_error(full.substr(0, 1024 + 512 + 2000), {TarFault::truncated, 1024, "truncated member"},
               {.end_marker = EndMarker::optional});
}

TEST(TarReaderMalformed, TruncatedHeader) {
  const std::string full = member("a.txt", "a") + member("b.txt", "b") + k_end;
  expect_error(full.substr(0, 1024 + 100), {TarFault::truncated, 1024, "truncated header"});
}

TEST(TarReaderMalformed, MissingEndBlocks) {
  const std::string archive = member("a.txt", "a") + member("b.txt", "b");
  expect_error(archive, {TarFault::missing_end_marker, 2048, "end-of-archive marker"});
  // The message says what the missing marker may mean.
  expect_error(archive, {TarFault::missing_end_marker, 2048, "cut short, or written by a tool that omits"});
  expect_error(archive + std::string(512, '\0'), {TarFault::missing_end_marker, 2048, "lone zero block"});
  expect_error(archive + std::string(512, '\0'), {TarFault::missing_end_marker, 2048, "cut short"});
  expect_error(archive + std::string(512, '\0') + member("c.txt", "c"),
               {TarFault::missing_end_marker, 2048, "lone zero block"});
}

TEST(TarReaderMalformed, HugePaxRecordLength) {
  const std::string records = "99999999999 path=a.txt\n";
  expect_error(member("first.txt", "1") + member("PaxHeaders/a", records, 'x') + member("a.txt", "a") + k_end,
               {TarFault::bad_pax_record, 1024, "record length 99999999999 runs past the end of the extended header"});
  const std::string overflowing = std::string(40, '9') + " path=a.txt\n";
  expect_error(member("PaxHeaders/a", overflowing, 'x') + member("a.txt", "a") + k_end,
               {TarFault::bad_pax_record, 0, "bad record length"});
}

TEST(TarReaderMalformed, OtherBadPaxRecords) {
  for (const std::string& records :
       {std::string("12 path=a.txt"), std::string("4 a=\n"), std::string("x path=a\n"), std::string("8 =abc\n"),
        std::string("11 size=-1\n"), std::string("10 path=ab"), pax_record("size", "12a")}) {
    SCOPED_TRACE(records);
    expect_error(member("PaxHeaders/a", records, 'x') + member("a.txt", "a") + k_end,
                 {TarFault::bad_pax_record, 0, "pax record at offset 0"});
  }
}

TEST(TarReaderMalformed, PaxHeaderWhoseOwnSizeLies) {
  std::string block = header("PaxHeaders/a", std::uint64_t{1} << 30, 'x');
  expect_error(block + padded(pax_record("path", "a.txt")) + k_end, {TarFault::truncated, 0, "member size"});
}

TEST(TarReaderMalformed, PaxSizeThatLies) {
  const std::string archive =
      member("PaxHeaders/a", pax_record("size", "999999999999"), 'x') + member("a.txt", "a") + k_end;
  expect_error(archive, {TarFault::truncated, 1024, "member size 999999999999 runs past"});
}

TEST(TarReaderMalformed, ExtendedHeaderWithoutMember) {
  expect_error(member("x", pax_record("path", "a.txt"), 'x') + k_end,
               {TarFault::bad_extended_header, 0, "followed by the end of the archive"});
  expect_error(member("ok.txt", "o") + member("././@LongLink", "a.txt", 'L'),
               {TarFault::bad_extended_header, 1024, "not followed by a member header"},
               {.end_marker = EndMarker::optional});
}

TEST(TarReaderMalformed, DotDotAndAbsoluteNames) {
  const std::string ok = member("utt_0001.audio.wav", "ok");
  expect_error(ok + member("../evil.txt", "x") + k_end, {TarFault::unsafe_name, 1024, "member \"../evil.txt\""});
  expect_error(ok + member("a/../../b.txt", "x") + k_end, {TarFault::unsafe_name, 1024, "'..' component"});
  expect_error(ok + member("a/..", "x") + k_end, {TarFault::unsafe_name, 1024, "'..' component"});
  expect_error(ok + member("/etc/passwd.txt", "x") + k_end,
               {TarFault::unsafe_name, 1024, "member \"/etc/passwd.txt\" at byte offset 1024: absolute member name"});
  expect_error(ok + header("x.txt", 1, '0', "..") + padded("x") + k_end,
               {TarFault::unsafe_name, 1024, "member \"../x.txt\""});
  expect_error(
      ok + member("PaxHeaders/a", pax_record("path", "a/../../etc/x.txt"), 'x') + member("fine.txt", "x") + k_end,
      {TarFault::unsafe_name, 2048, "member \"a/../../etc/x.txt\" at byte offset 2048"});
  expect_error(ok + member("PaxHeaders/a", pax_record("path", std::string("a\0b.txt", 7)), 'x') +
                   member("fine.txt", "x") + k_end,
               {TarFault::unsafe_name, 2048, "member \"a\\x00b.txt\" at byte offset 2048: member name contains a NUL"});
  expect_error(ok + member("././@LongLink", std::string("/abs/x.txt") + '\0', 'L') + member("fine.txt", "x") + k_end,
               {TarFault::unsafe_name, 2048, "absolute member name"});
  expect_error(ok + member("./", "x") + k_end, {TarFault::unsafe_name, 1024, "empty member name"});
  // A global pax path that escapes is refused at the first member it names.
  expect_error(member("g", pax_record("path", "../g.txt"), 'g') + ok + k_end, {TarFault::unsafe_name, 1024, "'..'"});
}

TEST(TarReaderMalformed, BadOctalDigits) {
  std::string block = header("utt.audio.wav", 0);
  put(block, 124, 12, "0000000001x");
  fix_checksum(block);
  expect_error(member("a.txt", "a") + block + padded("a") + k_end,
               {TarFault::bad_number, 1024,
                "member \"utt.audio.wav\" at byte offset 1024: bad size field: bad octal "
                "digit 'x'"});
  put(block, 124, 12, "00000000018");
  fix_checksum(block);
  expect_error(block + padded("a") + k_end, {TarFault::bad_number, 0, "bad octal digit '8'"});
  put(block, 124, 12, "777777777777");  // twelve digits and no terminator are accepted, as GNU tar does
  fix_checksum(block);
  expect_error(block + k_end, {TarFault::truncated, 0, "runs past"});
}

TEST(TarReaderMalformed, GnuBase256SizeThatLiesOrIsNegative) {
  std::string block = header("utt.audio.wav", 0);
  std::string field(12, '\0');
  field[0] = '\x80';
  field[7] = '\x01';  // 2^32
  put(block, 124, 12, field);
  fix_checksum(block);
  expect_error(member("a.txt", "a") + block + padded("abc") + k_end,
               {TarFault::truncated, 1024, "member size 4294967296 runs past the end of the archive"});
  field.assign(12, '\xff');  // -1
  put(block, 124, 12, field);
  fix_checksum(block);
  expect_error(block + padded("abc") + k_end, {TarFault::bad_number, 0, "negative base-256 value"});
  field.assign(12, '\xbf');  // larger than 64 bits
  field[0] = '\xbf';
  put(block, 124, 12, field);
  fix_checksum(block);
  expect_error(block + padded("abc") + k_end, {TarFault::bad_number, 0, "overflows 64 bits"});
}

TEST(TarReaderMalformed, GnuSparseIsUnsupported) {
  expect_error(member("a.txt", "a") + member("sparse.bin", "x", 'S') + k_end, {TarFault::unsupported, 1024, "sparse"});
  expect_error(member("PaxHeaders/a", pax_record("GNU.sparse.major", "1"), 'x') + member("s.bin", "x") + k_end,
               {TarFault::unsupported, 1024, "sparse"});
}

// Compressed data given as a tar is named as such, at byte offset 0, whatever its size: a small archive compresses
// to less than one header, a large one to a first block whose checksum field holds no octal number.
TEST(TarReaderMalformed, CompressedArchivesAreNamedAsSuch) {
  for (const auto& [tool, format] : std::vector<std::pair<std::string, std::string>>{
           {"gzip", "gzip"}, {"zstd", "zstd"}, {"bzip2", "bzip2"}, {"xz", "xz"}}) {
    if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
    tartest::TempDir tmp;
    for (const std::size_t size : {std::size_t{10}, std::size_t{200000}}) {
      write_file(tmp.path() / "in.tar", member("utt.audio.wav", payload(size, 3)) + k_end);
      const fs::path out = tmp.path() / "out.tar";
      ASSERT_EQ(run(tool + " -q -c '" + (tmp.path() / "in.tar").string() + "' > '" + out.string() + "'"), 0);
      const std::string archive = read_file(out);
      ASSERT_EQ(archive.size() < 512, size == 10) << tool << " " << archive.size();
      TarReader reader(bytes_of(archive), "shard.tar");
      auto m = reader.next();
      ASSERT_FALSE(m) << tool;
      EXPECT_EQ(reader.fault(), TarFault::compressed) << m.error().message;
      EXPECT_EQ(m.error().code, ErrorCode::unsupported);
      EXPECT_EQ(m.error().message, "shard shard.tar: at byte offset 0: the archive is " + format +
                                       "-compressed data, not a tar (its first bytes are the " + format +
                                       " magic number); decompress it first");
    }
  }
}

TEST(TarReaderMalformed, GarbageInPlaceOfTheEndMarkerIsShownEscapedAndCut) {
  std::string garbage(512, '\0');
  std::uint32_t state = 1;
  for (char& c : garbage) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>((state >> 24) | 0x80);  // no NUL: the whole 100-byte name field is "the name"
  }
  const std::string archive = member("a.txt", "a") + garbage + k_end;
  expect_error(archive, {TarFault::bad_checksum, 1024, "bad checksum field"});
  auto members = read_members(archive);
  ASSERT_FALSE(members);
  const std::string& message = members.error().message;
  const std::size_t open = message.find("member \"") + 8;
  const std::size_t close = message.find("\" at byte offset 1024");
  ASSERT_NE(close, std::string::npos) << message;
  const std::string shown = message.substr(open, close - open);
  EXPECT_LE(shown.size(), 122u) << "at most 120 characters, one of them \"…\" (3 bytes): " << shown;
  EXPECT_NE(shown.find("\u2026"), std::string::npos) << shown;
  EXPECT_TRUE(shown.starts_with("\\x")) << shown;
  const std::string without_ellipsis = shown.substr(0, shown.find("\u2026")) + shown.substr(shown.find("\u2026") + 3);
  for (char c : without_ellipsis) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "only printable ASCII: " << message;
}

TEST(TarReaderMalformed, ALongNameIsCutInMessagesKeepingItsEnd) {
  const std::string name = std::string(1000, 'd') + "/utt_0001.audio.wav";
  std::string block = header("x", 1);
  block[200] = 'x';  // breaks the checksum of the member the pax header names
  const std::string records = pax_record("path", name);
  const std::string archive = header("././@PaxHeader", records.size(), 'x') + padded(records) + block + padded("a");
  auto members = read_members(archive + k_end);
  ASSERT_FALSE(members);
  const std::string& message = members.error().message;
  EXPECT_LT(message.size(), 250u) << message;
  EXPECT_THAT(message, HasSubstr("member \"dddd"));
  EXPECT_THAT(message, HasSubstr("\u2026"));
  const std::string offset = std::to_string(512 + padded(records).size());
  EXPECT_THAT(message, HasSubstr("/utt_0001.audio.wav\" at byte offset " + offset + ": header checksum mismatch"));
}

TEST(TarReaderMalformed, MessageEscapesHostileNames) {
  std::string block = header("bad\"name\n\x01.txt", 1);
  block[200] = 'x';  // breaks the checksum
  const std::string archive = block + padded("a") + k_end;
  TarReader reader(bytes_of(archive), "crafted.tar");
  auto m = reader.next();
  ASSERT_FALSE(m);
  EXPECT_THAT(m.error().message, HasSubstr("member \"bad\\\"name\\x0a\\x01.txt\" at byte offset 0"));
}

// ---------------------------------------------------------------------------------------------------------------

TEST(TarSamples, SplitSampleName) {
  auto split = [](std::string_view name) -> std::pair<std::string, std::string> {
    auto s = split_sample_name(name);
    if (!s) return {"<none>", ""};
    return {std::string(s->id), std::string(s->key)};
  };
  EXPECT_EQ(split("utt_0001.audio.wav"), std::make_pair(std::string("utt_0001"), std::string("audio.wav")));
  EXPECT_EQ(split("train/v1.2/utt_0001.audio.wav"),
            std::make_pair(std::string("train/v1.2/utt_0001"), std::string("audio.wav")));
  EXPECT_EQ(split("a.b"), std::make_pair(std::string("a"), std::string("b")));
  EXPECT_EQ(split("README").first, "<none>");
  EXPECT_EQ(split("dir.v2/README").first, "<none>");
  EXPECT_EQ(split(".hidden.txt").first, "<none>");
  EXPECT_EQ(split("dir/.hidden").first, "<none>");
  EXPECT_EQ(split("utt.").first, "<none>");
}

TEST(TarSamples, GroupsConsecutiveMembersBySampleId) {
  const std::string archive = member("utt_0001.audio.wav", "a1") + member("utt_0001.transcript.txt", "t1") +
                              member("README", "skip me") + member("utt_0001.meta.json", "m1") +
                              header("utt_0002.dir", 0, '5') + member("utt_0002.audio.wav", "a2") +
                              member("x/utt_0002.audio.wav", "other dir, other sample") +
                              member("utt_0001.audio.wav", "id seen again: a new sample") + k_end;
  SampleIterator samples(bytes_of(archive), "s.tar");
  std::vector<GroupedSample> got;
  std::vector<std::string> datas;
  for (;;) {
    auto s = samples.next();
    ASSERT_TRUE(s) << s.error().message;
    if (*s == nullptr) break;
    GroupedSample g{std::string((*s)->id), {}};
    for (const SampleField& f : (*s)->fields) {
      g.keys.emplace_back(f.key);
      datas.push_back(text_of(f.data));
    }
    got.push_back(g);
  }
  EXPECT_EQ(got, (std::vector<GroupedSample>{{"utt_0001", {"audio.wav", "transcript.txt", "meta.json"}},
                                             {"utt_0002", {"audio.wav"}},
                                             {"x/utt_0002", {"audio.wav"}},
                                             {"utt_0001", {"audio.wav"}}}));
  EXPECT_EQ(datas, (std::vector<std::string>{"a1", "t1", "m1", "a2", "other dir, other sample",
                                             "id seen again: a new sample"}));
  EXPECT_EQ(samples.skipped().unnamed, 1u);
  auto after = samples.next();
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, nullptr);
}

TEST(TarSamples, FieldOffsetsPointAtTheirHeaders) {
  const std::string archive = member("a.x", payload(600, 1)) + member("a.y", "y") + k_end;
  SampleIterator samples(bytes_of(archive), "s.tar");
  auto s = samples.next();
  ASSERT_TRUE(s && *s);
  ASSERT_EQ((*s)->fields.size(), 2u);
  EXPECT_EQ((*s)->fields[0].header_offset, 0u);
  EXPECT_EQ((*s)->fields[1].header_offset, 1536u);
}

TEST(TarSamples, DuplicateKeyInOneSampleIsAnError) {
  const std::string archive =
      member("utt_0001.audio.wav", "a") + member("utt_0001.text.txt", "b") + member("utt_0001.audio.wav", "c") + k_end;
  SampleIterator samples(bytes_of(archive), "dup.tar");
  auto s = samples.next();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::integrity);
  EXPECT_EQ(samples.fault(), TarFault::duplicate_key);
  EXPECT_THAT(s.error().message,
              HasSubstr("shard dup.tar: member \"utt_0001.audio.wav\" at byte offset 2048: sample \"utt_0001\" has "
                        "the key \"audio.wav\" twice"));
}

TEST(TarSamples, ForEachSamplePassesVisitorErrorsThrough) {
  const std::string archive = member("a.x", "1") + member("b.x", "2") + member("c.x", "3") + k_end;
  std::vector<std::string> ids;
  auto result = for_each_sample(bytes_of(archive), "s.tar", [&](const Sample& s) -> Result<void> {
    ids.emplace_back(s.id);
    if (s.id == "b") return Error{ErrorCode::capacity, "stop here"};
    return ok();
  });
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::capacity);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b"}));

  ids.clear();
  auto all = for_each_sample(bytes_of(archive), "s.tar", [&](const Sample& s) -> Result<void> {
    ids.emplace_back(s.id);
    return ok();
  });
  EXPECT_TRUE(all);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(TarSamples, EmptyArchiveHasNoSamples) {
  SampleIterator samples(bytes_of(k_end), "s.tar");
  auto s = samples.next();
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// Interoperability: archives written by GNU tar, bsdtar and Python's tarfile.

struct InteropFile {
  std::string name;
  std::size_t size;
  bool fits_ustar;  // at most 256 bytes and splittable into prefix/name
};

std::vector<InteropFile> interop_files() {
  const std::string a(90, 'a'), b(90, 'b'), c(90, 'c');
  return {
      {"utt_0001.audio.wav", 1000, true},
      {"utt_0001.transcript.txt", 12, true},
      {"README", 5, true},  // no dot: a member, but not part of any sample
      {"utt_0002.audio.wav", 512, true},
      {"utt_0002.meta.json", 0, true},
      {a + "/utt_0003.audio.wav", 513, true},  // 109 bytes: ustar prefix + name
      {a + "/utt_0003.transcript.txt", 511, true},
      {a + "/" + b + "/" + c + "/utt_0004.x.bin", 70000, false},  // 287 bytes
      {std::string(120, 'd') + ".long.txt", 3, false},            // a 129-byte basename cannot be split
      {"\xc3\xbctt_0006.audio.wav", 4, true},                     // "ütt_0006": non-ASCII
  };
}

std::vector<GroupedSample> interop_samples(bool ustar_only) {
  const std::string a(90, 'a'), b(90, 'b'), c(90, 'c');
  std::vector<GroupedSample> samples = {{"utt_0001", {"audio.wav", "transcript.txt"}},
                                        {"utt_0002", {"audio.wav", "meta.json"}},
                                        {a + "/utt_0003", {"audio.wav", "transcript.txt"}}};
  if (!ustar_only) {
    samples.push_back({a + "/" + b + "/" + c + "/utt_0004", {"x.bin"}});
    samples.push_back({std::string(120, 'd'), {"long.txt"}});
  }
  samples.push_back({"\xc3\xbctt_0006", {"audio.wav"}});
  return samples;
}

struct Tool {
  std::string label;
  std::string program;  // skipped when not installed
  // Shell command run in the source directory: %L is the list of names (one per line), %O the output archive.
  std::string command;
  bool ustar_only;
};

std::ostream& operator<<(std::ostream& os, const Tool& tool) { return os << tool.label; }

// argv: <format>[:<compression>] <list> <output>, e.g. "pax:gz" writes a gzip-compressed pax archive.
const char* const k_python_writer = R"(import sys, tarfile
fmt_name, _, compression = sys.argv[1].partition(":")
fmt = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}[fmt_name]
names = open(sys.argv[2], encoding="utf-8").read().split("\n")
with tarfile.open(sys.argv[3], "w:" + compression, format=fmt, encoding="utf-8") as tar:
    for name in names:
        if name:
            tar.add(name, arcname=name, recursive=False)
)";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The interop source directory: the files of interop_files() (those that fit ustar when `ustar_only`), plus a
// directory, a symbolic link and a hard link with sample-like names. Returns the regular members a reader must
// yield, and writes the list of names to give the tool.
std::vector<Member> write_interop_source(const fs::path& tmp, bool ustar_only) {
  const fs::path src = tmp / "src";
  std::vector<Member> expected;
  std::string list;
  unsigned seed = 10;
  for (const InteropFile& file : interop_files()) {
    if (ustar_only && !file.fits_ustar) continue;
    const std::string data = payload(file.size, seed++);
    write_file(src / file.name, data);
    expected.push_back({file.name, data});
    list += file.name + "\n";
    if (file.name == "README") {
      // Members that are not regular files are skipped, even with sample-like names. The second name of a file
      // is stored as a hard link to the first.
      fs::create_directories(src / "utt_0002.dir");
      fs::create_symlink("README", src / "utt_0002.link.txt");
      fs::create_hard_link(src / "README", src / "utt_0002.hard.txt");
      list += "utt_0002.dir\nutt_0002.link.txt\nutt_0002.hard.txt\n";
    }
  }
  write_file(tmp / "list", list);
  write_file(tmp / "writer.py", k_python_writer);
  return expected;
}

// Runs `tool`'s command in the source directory, writing `out`.
void run_interop_tool(const Tool& tool, const fs::path& tmp, const fs::path& out) {
  std::string command = replace_all(tool.command, "%L", "'" + (tmp / "list").string() + "'");
  command = replace_all(command, "%O", "'" + out.string() + "'");
  command = replace_all(command, "%P", "'" + (tmp / "writer.py").string() + "'");
  ASSERT_EQ(run("cd '" + (tmp / "src").string() + "' && LC_ALL=C.UTF-8 " + command), 0) << command;
}

// Reads `archive` as written from write_interop_source() by a tool, checking members, skips and samples.
void expect_interop_archive(const std::string& archive, const std::vector<Member>& expected, const Tool& tool) {
  auto members = read_members(archive);
  ASSERT_TRUE(members) << members.error().message;
  ASSERT_EQ(members->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(members->at(i).name, expected[i].name);
    EXPECT_TRUE(members->at(i).data == expected[i].data) << expected[i].name;
  }

  std::vector<GroupedSample> samples;
  SampleIterator iterator(bytes_of(archive), tool.label);
  for (;;) {
    auto s = iterator.next();
    ASSERT_TRUE(s) << s.error().message;
    if (*s == nullptr) break;
    GroupedSample g{std::string((*s)->id), {}};
    for (const SampleField& f : (*s)->fields) g.keys.emplace_back(f.key);
    samples.push_back(std::move(g));
  }
  EXPECT_EQ(samples, interop_samples(tool.ustar_only));
  EXPECT_EQ(iterator.skipped(), (TarSkips{.directories = 1, .symlinks = 1, .hard_links = 1, .unnamed = 1}));
}

class TarInterop : public ::testing::TestWithParam<Tool> {};

TEST_P(TarInterop, ReadsEveryMemberAndSample) {
  const Tool& tool = GetParam();
  if (!have_tool(tool.program)) GTEST_SKIP() << tool.program << " is not installed";
  tartest::TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::vector<Member> expected = write_interop_source(tmp.path(), tool.ustar_only);
  const fs::path out = tmp.path() / "out.tar";
  run_interop_tool(tool, tmp.path(), out);
  expect_interop_archive(read_file(out), expected, tool);
}

INSTANTIATE_TEST_SUITE_P(
    Tar, TarInterop,
    ::testing::Values(Tool{"gnu_tar_gnu", "tar", "tar --format=gnu -cf %O --no-recursion -T %L", false},
                      Tool{"gnu_tar_pax", "tar", "tar --format=pax -cf %O --no-recursion -T %L", false},
                      Tool{"gnu_tar_ustar", "tar", "tar --format=ustar -cf %O --no-recursion -T %L", true},
                      Tool{"bsdtar_pax", "bsdtar", "bsdtar --format=pax -n -cf %O -T %L", false},
                      Tool{"bsdtar_gnutar", "bsdtar", "bsdtar --format=gnutar -n -cf %O -T %L", false},
                      Tool{"bsdtar_ustar", "bsdtar", "bsdtar --format=ustar -n -cf %O -T %L", true},
                      Tool{"python_ustar", "python3", "python3 %P ustar %L %O", true},
                      Tool{"python_gnu", "python3", "python3 %P gnu %L %O", false},
                      Tool{"python_pax", "python3", "python3 %P pax %L %O", false}),
    [](const ::testing::TestParamInfo<Tool>& tool_info) { return tool_info.param.label; });

// Compressed archives written by the real tools: the reader names the compression at byte offset 0 instead of
// reading a header; gzip and zstd, once decompressed with util::decompress (as `datavo pack` does), read in full.
struct CompressedTool {
  Tool tool;
  std::string format;  // as util::compression_name() says it
};

std::ostream& operator<<(std::ostream& os, const CompressedTool& tool) { return os << tool.tool.label; }

class TarInteropCompressed : public ::testing::TestWithParam<CompressedTool> {};

TEST_P(TarInteropCompressed, NamesTheCompressionAndReadsItDecompressed) {
  const CompressedTool& param = GetParam();
  if (!have_tool(param.tool.program)) GTEST_SKIP() << param.tool.program << " is not installed";
  tartest::TempDir tmp;
  const std::vector<Member> expected = write_interop_source(tmp.path(), param.tool.ustar_only);
  const fs::path out = tmp.path() / "out.tar";
  run_interop_tool(param.tool, tmp.path(), out);
  const std::string compressed = read_file(out);

  TarReader reader(bytes_of(compressed), "out.tar");
  auto m = reader.next();
  ASSERT_FALSE(m);
  EXPECT_EQ(reader.fault(), TarFault::compressed) << m.error().message;
  EXPECT_THAT(m.error().message, HasSubstr("shard out.tar: at byte offset 0: the archive is " + param.format +
                                           "-compressed data, not a tar"));

  const util::Compression format = util::sniff_compression(bytes_of(compressed));
  ASSERT_EQ(util::compression_name(format), param.format);
  if (!util::can_decompress(format)) return;
  std::string archive;
  auto unpacked = util::decompress(bytes_of(compressed), format, "out.tar", [&](std::span<const char> chunk) {
    archive.append(chunk.data(), chunk.size());
    return ok();
  });
  ASSERT_TRUE(unpacked) << unpacked.error().message;
  expect_interop_archive(archive, expected, param.tool);
}

INSTANTIATE_TEST_SUITE_P(
    Tar, TarInteropCompressed,
    ::testing::Values(
        CompressedTool{{"gnu_tar_gzip", "tar", "tar --format=pax -czf %O --no-recursion -T %L", false}, "gzip"},
        CompressedTool{{"gnu_tar_zstd", "zstd", "tar --format=gnu --zstd -cf %O --no-recursion -T %L", false}, "zstd"},
        CompressedTool{{"gnu_tar_xz", "xz", "tar --format=pax -cJf %O --no-recursion -T %L", false}, "xz"},
        CompressedTool{{"bsdtar_gzip", "bsdtar", "bsdtar --format=pax -n -czf %O -T %L", false}, "gzip"},
        CompressedTool{{"bsdtar_zstd", "bsdtar", "bsdtar --format=gnutar --zstd -n -cf %O -T %L", false}, "zstd"},
        CompressedTool{{"bsdtar_bzip2", "bsdtar", "bsdtar --format=ustar -n -cjf %O -T %L", true}, "bzip2"},
        CompressedTool{{"python_gz", "python3", "python3 %P pax:gz %L %O", false}, "gzip"},
        CompressedTool{{"python_bz2", "python3", "python3 %P gnu:bz2 %L %O", false}, "bzip2"},
        CompressedTool{{"python_xz", "python3", "python3 %P ustar:xz %L %O", true}, "xz"}),
    [](const ::testing::TestParamInfo<CompressedTool>& tool_info) { return tool_info.param.tool.label; });

}  // namespace
}  // namespace datavo
