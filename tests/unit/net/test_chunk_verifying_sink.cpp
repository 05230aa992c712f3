#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/chunk_verifying_sink.hpp"
#include "support/shard_fixtures.hpp"

namespace datavo::net {
namespace {

using ChunkTestSink = shardtest::StringSink;

constexpr Bytes k_chunk = KiB(4);

std::string chunk_test_bytes(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + 7) % 251);
  return out;
}

ChunkDigests digests_of(const std::string& data) {
  ChunkHasher hasher(k_chunk);
  hasher.update(data.data(), data.size());
  return hasher.finish();
}

// Writes `data[from, to)` through `sink` in pieces of `step`; the first Error, if any.
Result<void> feed(ByteSink& sink, const std::string& data, std::size_t from, std::size_t to, std::size_t step) {
  for (std::size_t at = from; at < to; at += step) DATAVO_TRY(sink.write(data.data() + at, std::min(step, to - at)));
  return ok();
}

// 5 chunks of 4 KiB, the last one 1000 bytes.
const std::string k_data = chunk_test_bytes(4 * 4096 + 1000);

TEST(ChunkVerifyingSink, PassesGoodBytesThroughAndVerifiesEveryChunk) {
  const ChunkDigests chunks = digests_of(k_data);
  for (std::size_t step : {1u, 1000u, 4096u, 6000u, 1u << 20}) {
    ChunkTestSink inner;
    ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
    ASSERT_TRUE(feed(sink, k_data, 0, k_data.size(), step)) << "step " << step;
    EXPECT_EQ(inner.bytes(), k_data);
    EXPECT_EQ(sink.written(), Bytes{k_data.size()});
    EXPECT_EQ(sink.chunks_verified(), 5u) << "step " << step;
    EXPECT_EQ(sink.chunks_skipped(), 0u);
  }
}

TEST(ChunkVerifyingSink, AFlippedByteInChunkKStopsAtChunkKNamingItAndItsOffset) {
  const ChunkDigests chunks = digests_of(k_data);
  for (std::size_t k : {0u, 2u, 4u}) {
    std::string bad = k_data;
    bad[k * 4096 + 17] ^= 0x01;
    ChunkTestSink inner;
    ChunkVerifyingSink sink(inner, chunks, Bytes{bad.size()}, "shard 1d8dd7d4");
    std::size_t stopped_at = 0;
    Result<void> result = ok();
    for (std::size_t at = 0; at < bad.size() && result; at += 512) {
      result = sink.write(bad.data() + at, std::min<std::size_t>(512, bad.size() - at));
      stopped_at = at;
    }
    ASSERT_FALSE(result) << "chunk " << k;
    EXPECT_EQ(result.error().code, ErrorCode::integrity);
    const std::string& message = result.error().message;
    EXPECT_NE(
        message.find("shard 1d8dd7d4: chunk " + std::to_string(k) + " (byte offset " + std::to_string(k * 4096) + ","),
        std::string::npos)
        << message;
    EXPECT_NE(message.find(chunks.digests[k].hex()), std::string::npos) << message;
    // It stopped on the write that completed chunk k: none of chunk k's last piece, nothing after it, reached inner.
    const std::size_t chunk_end = std::min<std::size_t>((k + 1) * 4096, bad.size());
    EXPECT_EQ(stopped_at + std::min<std::size_t>(512, bad.size() - stopped_at), chunk_end);
    EXPECT_EQ(inner.bytes().size(), stopped_at);
    EXPECT_EQ(sink.chunks_verified(), k);
  }
}

TEST(ChunkVerifyingSink, RefusesBytesPastTheSize) {
  const ChunkDigests chunks = digests_of(k_data);
  ChunkTestSink inner;
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  ASSERT_TRUE(feed(sink, k_data, 0, k_data.size(), 4096));
  auto more = sink.write("x", 1);
  ASSERT_FALSE(more);
  EXPECT_EQ(more.error().code, ErrorCode::integrity);
  EXPECT_NE(more.error().message.find("more than the ticket's"), std::string::npos);
}

// The transport resumes a cut transfer at written(): the chunk in progress is hashed on across the cut.
TEST(ChunkVerifyingSink, AResumeInTheMiddleOfAChunkGoesOnHashingIt) {
  const ChunkDigests chunks = digests_of(k_data);
  ChunkTestSink inner;
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  ASSERT_TRUE(feed(sink, k_data, 0, 6000, 1000));                                // cut in chunk 1
  ASSERT_TRUE(feed(sink, k_data, sink.written().count(), k_data.size(), 3000));  // "Range: bytes=6000-"
  EXPECT_EQ(inner.bytes(), k_data);
  EXPECT_EQ(sink.chunks_verified(), 5u);

  // A resume that delivers wrong bytes is caught at the chunk they fall in.
  std::string bad = k_data;
  bad[9000] ^= 0x40;
  ChunkTestSink inner2;
  ChunkVerifyingSink sink2(inner2, chunks, Bytes{bad.size()}, "shard x");
  ASSERT_TRUE(feed(sink2, bad, 0, 6000, 1000));
  auto resumed = feed(sink2, bad, 6000, bad.size(), 1000);
  ASSERT_FALSE(resumed);
  EXPECT_NE(resumed.error().message.find("chunk 2 (byte offset 8192,"), std::string::npos) << resumed.error().message;
}

TEST(ChunkVerifyingSink, RestartHashesFromTheFirstByteAgain) {
  const ChunkDigests chunks = digests_of(k_data);
  std::string bad = k_data;
  bad[100] ^= 0x01;
  ChunkTestSink inner;
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  ASSERT_TRUE(feed(sink, bad, 0, 4000, 1000));  // chunk 0 not complete yet: no verdict
  ASSERT_TRUE(sink.restart());
  EXPECT_EQ(inner.written(), Bytes{0});
  ASSERT_TRUE(feed(sink, k_data, 0, k_data.size(), 1000));
  EXPECT_EQ(inner.bytes(), k_data);
  EXPECT_EQ(sink.chunks_verified(), 5u);
}

// A download a killed process left half-done, in an inner sink that cannot read its bytes back: they cannot be hashed
// here, so the chunks they touch are left to the whole-shard SHA-256 and checking starts at the next chunk boundary.
TEST(ChunkVerifyingSink, AnInheritedPrefixIsCheckedFromTheNextChunkBoundary) {
  const ChunkDigests chunks = digests_of(k_data);
  ChunkTestSink inner;
  ASSERT_TRUE(inner.write(k_data.data(), 5000));
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  EXPECT_EQ(sink.chunks_skipped(), 2u);
  ASSERT_TRUE(feed(sink, k_data, 5000, k_data.size(), 700));
  EXPECT_EQ(inner.bytes(), k_data);
  EXPECT_EQ(sink.chunks_verified(), 3u);

  std::string bad = k_data;
  bad[13000] ^= 0x01;  // chunk 3
  ChunkTestSink inner2;
  ASSERT_TRUE(inner2.write(bad.data(), 8192));  // exactly at a boundary: nothing skipped but chunks 0 and 1
  ChunkVerifyingSink sink2(inner2, chunks, Bytes{bad.size()}, "shard x");
  EXPECT_EQ(sink2.chunks_skipped(), 2u);
  auto result = feed(sink2, bad, 8192, bad.size(), 700);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("chunk 3 (byte offset 12288,"), std::string::npos) << result.error().message;
}

// Records the verified prefixes the sink reports, and what it held at each report.
class ProgressSink final : public ByteSink {
 public:
  Result<void> write(const void* data, std::size_t size) override { return inner.write(data, size); }
  Bytes written() const override { return inner.written(); }
  Result<void> restart() override {
    ++restarts;
    return inner.restart();
  }
  Result<void> read_back(std::uint64_t offset, void* out, std::size_t size) override {
    if (!can_read_back) return ByteSink::read_back(offset, out, size);
    EXPECT_LE(offset + size, inner.bytes().size());
    inner.bytes().copy(static_cast<char*>(out), size, offset);
    return ok();
  }
  void verified_prefix(Bytes prefix, Bytes total) override {
    reports.push_back(prefix.count());
    held_at_report.push_back(inner.written().count());
    totals.push_back(total.count());
  }
  ChunkTestSink inner;
  bool can_read_back = false;  // as a staging file can
  int restarts = 0;
  std::vector<std::uint64_t> reports;
  std::vector<std::uint64_t> held_at_report;
  std::vector<std::uint64_t> totals;
};

TEST(ChunkVerifyingSink, ReportsTheVerifiedPrefixChunkByChunkAfterItsBytesArePassedOn) {
  const ChunkDigests chunks = digests_of(k_data);
  ProgressSink inner;
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  ASSERT_TRUE(feed(sink, k_data, 0, k_data.size(), 3000));
  // Writes end at 3000, 6000, ..., 15000 and 17384: the last one completes chunks 3 and 4 at once.
  EXPECT_EQ(inner.reports, (std::vector<std::uint64_t>{4096, 8192, 12288, k_data.size()}));
  for (std::size_t i = 0; i < inner.reports.size(); ++i) {
    EXPECT_GE(inner.held_at_report[i], inner.reports[i]) << "report " << i << " came before its bytes";
    EXPECT_EQ(inner.totals[i], k_data.size());
  }
}

TEST(ChunkVerifyingSink, NeverReportsAChunkThatFailsNorAnythingAfterIt) {
  const ChunkDigests chunks = digests_of(k_data);
  std::string bad = k_data;
  bad[2 * 4096 + 5] ^= 0x01;  // chunk 2
  ProgressSink inner;
  ChunkVerifyingSink sink(inner, chunks, Bytes{bad.size()}, "shard x");
  ASSERT_FALSE(feed(sink, bad, 0, bad.size(), 1000));
  EXPECT_EQ(inner.reports, (std::vector<std::uint64_t>{4096, 8192}));
}

TEST(ChunkVerifyingSink, AnInheritedPrefixIsNeverReportedAsVerifiedWhenTheSinkCannotReadItBack) {
  const ChunkDigests chunks = digests_of(k_data);
  ProgressSink inner;
  ASSERT_TRUE(inner.write(k_data.data(), 4096));
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  ASSERT_TRUE(feed(sink, k_data, 4096, k_data.size(), 700));
  EXPECT_EQ(sink.chunks_verified(), 4u);
  EXPECT_TRUE(inner.reports.empty());
}

// An inner sink that can read its bytes back (a staging file): the inherited bytes are checked at construction,
// their verified prefix is reported before any byte more arrives, and the chunk in progress is hashed on.
TEST(ChunkVerifyingSink, AnInheritedPrefixThatCanBeReadBackIsCheckedAndReportedAtOnce) {
  const ChunkDigests chunks = digests_of(k_data);
  ProgressSink inner;
  inner.can_read_back = true;
  ASSERT_TRUE(inner.write(k_data.data(), 9000));  // chunks 0 and 1, and 808 bytes of chunk 2
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  EXPECT_EQ(sink.chunks_skipped(), 0u);
  EXPECT_EQ(sink.chunks_verified(), 2u);
  EXPECT_EQ(inner.reports, (std::vector<std::uint64_t>{8192})) << "the inherited chunks, reported at once";
  ASSERT_TRUE(feed(sink, k_data, 9000, k_data.size(), 3000));
  EXPECT_EQ(inner.inner.bytes(), k_data);
  EXPECT_EQ(sink.chunks_verified(), 5u);
  EXPECT_EQ(inner.reports.back(), k_data.size());
  EXPECT_EQ(inner.restarts, 0);

  // Wrong bytes after the inherited ones are caught in the chunk that was in progress.
  std::string bad = k_data;
  bad[10000] ^= 0x01;  // chunk 2
  ProgressSink inner2;
  inner2.can_read_back = true;
  ASSERT_TRUE(inner2.write(k_data.data(), 9000));
  ChunkVerifyingSink sink2(inner2, chunks, Bytes{bad.size()}, "shard x");
  auto result = feed(sink2, bad, 9000, bad.size(), 3000);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("chunk 2 (byte offset 8192,"), std::string::npos) << result.error().message;
  EXPECT_EQ(inner2.reports, (std::vector<std::uint64_t>{8192}));

  // A whole shard inherited is verified whole.
  ProgressSink whole;
  whole.can_read_back = true;
  ASSERT_TRUE(whole.write(k_data.data(), k_data.size()));
  ChunkVerifyingSink sink3(whole, chunks, Bytes{k_data.size()}, "shard x");
  EXPECT_EQ(sink3.chunks_verified(), 5u);
  EXPECT_EQ(whole.reports, (std::vector<std::uint64_t>{k_data.size()}));
}

// Inherited bytes that cannot be the shard's (a chunk differs, or there are more bytes than the ticket's size) are
// dropped at once: the inner sink restarts and the download starts over at byte 0, instead of fetching the rest of a
// shard that the whole-shard SHA-256 would then refuse. Nothing of the dropped bytes is reported.
TEST(ChunkVerifyingSink, InheritedBytesThatAreNotTheShardsAreDroppedAndTheDownloadStartsOver) {
  const ChunkDigests chunks = digests_of(k_data);
  std::string bad = k_data;
  bad[5000] ^= 0x01;  // chunk 1; chunk 0 is right
  ProgressSink inner;
  inner.can_read_back = true;
  ASSERT_TRUE(inner.write(bad.data(), 9000));
  ChunkVerifyingSink sink(inner, chunks, Bytes{k_data.size()}, "shard x");
  EXPECT_EQ(inner.restarts, 1);
  EXPECT_EQ(sink.written(), Bytes{0});
  EXPECT_TRUE(inner.reports.empty());
  ASSERT_TRUE(feed(sink, k_data, 0, k_data.size(), 3000));
  EXPECT_EQ(inner.inner.bytes(), k_data);
  EXPECT_EQ(sink.chunks_verified(), 5u);
  EXPECT_EQ(sink.chunks_skipped(), 0u);

  ProgressSink longer;
  longer.can_read_back = true;
  ASSERT_TRUE(longer.write((k_data + "x").data(), k_data.size() + 1));
  ChunkVerifyingSink sink2(longer, chunks, Bytes{k_data.size()}, "shard x");
  EXPECT_EQ(longer.restarts, 1);
  EXPECT_EQ(sink2.written(), Bytes{0});
  EXPECT_TRUE(longer.reports.empty());
}

}  // namespace
}  // namespace datavo::net
