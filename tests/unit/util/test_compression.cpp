#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/tar_fixtures.hpp"
#include "util/compression.hpp"

namespace datavo::util {
namespace {

using tartest::have_tool;
using tartest::run;
using tartest::write_file;
using ::testing::HasSubstr;

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s)); }

// `data` compressed by the real tool (`gzip -c`, `zstd -c`, ...), run with `flags`.
std::string compressed_by(const std::string& tool, const std::string& flags, const std::string& data) {
  tartest::TempDir tmp;
  write_file(tmp.path() / "in", data);
  const std::string out = (tmp.path() / "out").string();
  EXPECT_EQ(run(tool + " " + flags + " -c '" + (tmp.path() / "in").string() + "' > '" + out + "'"), 0) << tool;
  return tartest::read_file(out);
}

// Decompresses `input`, returning the output and the size of each chunk, or the error.
struct Output {
  std::string data;
  std::vector<std::size_t> chunks;
};
Result<Output> decompressed(const std::string& input, Compression format) {
  Output out;
  auto done = decompress(bytes_of(input), format, "test.gz", [&out](std::span<const char> chunk) -> Result<void> {
    out.data.append(chunk.data(), chunk.size());
    out.chunks.push_back(chunk.size());
    return ok();
  });
  if (!done) return std::move(done).error();
  return out;
}

// Deterministic bytes that compress a little: 3 MiB decompress in several chunks.
std::string sample_data(std::size_t size) {
  std::string out = tartest::payload(size, 7, 3);
  for (std::size_t i = 0; i < out.size(); i += 3) out[i] = 'a';
  return out;
}

TEST(Compression, SniffsEachFormatByItsMagicBytes) {
  EXPECT_EQ(sniff_compression(bytes_of(std::string("\x1f\x8b\x08\0", 4))), Compression::gzip);
  EXPECT_EQ(sniff_compression(bytes_of("\x28\xb5\x2f\xfd\x04")), Compression::zstd);
  EXPECT_EQ(sniff_compression(bytes_of("BZh91AY&SY")), Compression::bzip2);
  EXPECT_EQ(sniff_compression(bytes_of(std::string("\xfd"
                                                   "7zXZ\0\0",
                                                   7))),
            Compression::xz);
  EXPECT_EQ(sniff_compression(bytes_of("BZh")), Compression::none) << "no block size digit";
  EXPECT_EQ(sniff_compression(bytes_of("BZhx")), Compression::none);
  EXPECT_EQ(sniff_compression(bytes_of("\x1f")), Compression::none);
  EXPECT_EQ(sniff_compression(bytes_of("utt_0001.audio.wav")), Compression::none);
  EXPECT_EQ(sniff_compression({}), Compression::none);
  EXPECT_EQ(compression_name(Compression::zstd), "zstd");
  EXPECT_TRUE(can_decompress(Compression::gzip));
  EXPECT_TRUE(can_decompress(Compression::zstd));
  EXPECT_FALSE(can_decompress(Compression::xz));
}

TEST(Compression, SniffsWhatTheRealToolsWrite) {
  const std::string data = "hello";
  for (const auto& [tool, format] : std::vector<std::pair<std::string, Compression>>{{"gzip", Compression::gzip},
                                                                                     {"zstd", Compression::zstd},
                                                                                     {"bzip2", Compression::bzip2},
                                                                                     {"xz", Compression::xz}}) {
    if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
    EXPECT_EQ(sniff_compression(bytes_of(compressed_by(tool, "-q", data))), format) << tool;
  }
}

class Decompress : public ::testing::TestWithParam<std::pair<std::string, Compression>> {};

TEST_P(Decompress, GivesBackWhatTheToolCompressedInBoundedChunks) {
  const auto& [tool, format] = GetParam();
  if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
  const std::string data = sample_data(3 << 20);
  auto out = decompressed(compressed_by(tool, "-q", data), format);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE(out->data == data);
  EXPECT_GE(out->chunks.size(), 3u);
  for (std::size_t chunk : out->chunks) EXPECT_LE(chunk, std::size_t{1} << 20);

  auto empty = decompressed(compressed_by(tool, "-q", ""), format);
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_EQ(empty->data, "");
}

TEST_P(Decompress, ReadsMembersOrFramesOneAfterAnother) {
  const auto& [tool, format] = GetParam();
  if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
  auto out = decompressed(compressed_by(tool, "-q", "first ") + compressed_by(tool, "-q", "second"), format);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->data, "first second");
}

TEST_P(Decompress, RefusesATruncatedStream) {
  const auto& [tool, format] = GetParam();
  if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
  const std::string whole = compressed_by(tool, "-q", sample_data(100000));
  auto out = decompressed(whole.substr(0, whole.size() / 2), format);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::integrity);
  EXPECT_THAT(out.error().message, HasSubstr("test.gz: at compressed byte offset "));
  EXPECT_THAT(out.error().message, HasSubstr("truncated"));
  EXPECT_THAT(out.error().message, HasSubstr(std::string(compression_name(format))));
}

TEST_P(Decompress, RefusesCorruptDataAndTrailingGarbageNamingTheOffset) {
  const auto& [tool, format] = GetParam();
  if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
  const std::string whole = compressed_by(tool, "-q", sample_data(100000));
  std::string corrupt = whole;
  for (std::size_t i = corrupt.size() / 3; i < corrupt.size() / 3 + 64; ++i)
    corrupt[i] = static_cast<char>(~corrupt[i]);
  auto bad = decompressed(corrupt, format);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::integrity);
  EXPECT_THAT(bad.error().message, HasSubstr("at compressed byte offset "));

  auto trailing = decompressed(whole + "garbage", format);
  ASSERT_FALSE(trailing);
  EXPECT_EQ(trailing.error().code, ErrorCode::integrity);
  EXPECT_THAT(trailing.error().message, HasSubstr("at compressed byte offset " + std::to_string(whole.size())));
}

TEST_P(Decompress, PassesTheConsumersErrorThrough) {
  const auto& [tool, format] = GetParam();
  if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
  const std::string input = compressed_by(tool, "-q", "data");
  auto done = decompress(bytes_of(input), format, "x", [](std::span<const char>) -> Result<void> {
    return Error{ErrorCode::no_space, "disk full"};
  });
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code, ErrorCode::no_space);
  EXPECT_EQ(done.error().message, "disk full");
}

INSTANTIATE_TEST_SUITE_P(Compression, Decompress,
                         ::testing::Values(std::pair<std::string, Compression>{"gzip", Compression::gzip},
                                           std::pair<std::string, Compression>{"zstd", Compression::zstd}),
                         [](const auto& tool_info) { return tool_info.param.first; });

TEST(Compression, RefusesFormatsItCannotRead) {
  for (const Compression format : {Compression::none, Compression::bzip2, Compression::xz}) {
    auto out = decompressed("BZh91AY&SY", format);
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, ErrorCode::unsupported);
    EXPECT_THAT(out.error().message, HasSubstr("test.gz: cannot decompress " + std::string(compression_name(format))));
  }
}

}  // namespace
}  // namespace datavo::util
