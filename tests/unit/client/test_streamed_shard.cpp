#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client/streamed_shard.hpp"
#include "datavo/tar.hpp"
#include "net/chunk_verifying_sink.hpp"
#include "support/shard_fixtures.hpp"

namespace datavo::client {
namespace {

constexpr Bytes k_chunk = KiB(4);

struct TestShard {
  std::string tar;
  std::vector<std::string> ids;
  std::vector<std::string> payloads;       // one field per sample
  std::vector<std::uint64_t> padded_ends;  // where each sample's member ends in the tar (its padded payload)
  ChunkDigests chunks;
};

// A tar of one "bin" member per sample, of the given payload sizes.
TestShard make_shard(const std::vector<std::size_t>& sizes) {
  TestShard shard;
  TarWriter writer([&shard](std::span<const std::byte> bytes) -> Result<void> {
    shard.tar.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return ok();
  });
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    shard.ids.push_back("s" + std::to_string(1000 + i));
    shard.payloads.push_back(shardtest::random_bytes(sizes[i], i + 1));
    EXPECT_TRUE(writer.add_member(shard.ids.back() + ".bin", std::as_bytes(std::span(shard.payloads.back()))));
    shard.padded_ends.push_back(shard.tar.size());
  }
  EXPECT_TRUE(writer.finish());
  ChunkHasher hasher(k_chunk);
  hasher.update(shard.tar.data(), shard.tar.size());
  shard.chunks = hasher.finish();
  return shard;
}

struct SourceScript {
  SourceScript(std::string sent, std::optional<ChunkDigests> digests, std::size_t piece = 1000)
      : bytes(std::move(sent)), chunks(std::move(digests)), step(piece) {}
  std::string bytes;                         // what the "server" sends (a corrupted copy, say)
  std::optional<ChunkDigests> chunks;        // nullopt: an origin without chunk digests
  std::size_t step;                          // bytes per write
  std::optional<Sha256> sha256;              // the ticket's; default: the clean tar's
  std::optional<std::size_t> restart_after;  // restart the transfer from byte 0 once, after this many bytes
};

// A source standing in for OriginClient::fetch_shard: the ticket, then the bytes through a ChunkVerifyingSink.
StreamSource source_of(const TestShard& shard, SourceScript script) {
  return [&shard, script](const OriginClient::TicketSink& sink_for) -> Result<Expectation> {
    const StreamTicket ticket{*ContentHash::parse(std::string(64, 'a')),
                              Bytes{shard.tar.size()},
                              script.sha256.value_or(shardtest::sha256_of(shard.tar)),
                              "http://origin/shard",
                              0,
                              script.chunks};
    auto sink = sink_for(ticket);
    if (!sink) return std::move(sink).error();
    net::ChunkVerifyingSink verifying(**sink, *ticket.chunks, ticket.size, "content hash abc");
    bool restarted = false;
    for (std::size_t at = 0; at < script.bytes.size();) {
      if (script.restart_after && !restarted && at >= *script.restart_after) {
        restarted = true;
        DATAVO_TRY(verifying.restart());
        at = 0;
        continue;
      }
      const std::size_t n = std::min(script.step, script.bytes.size() - at);
      DATAVO_TRY(verifying.write(script.bytes.data() + at, n));
      at += n;
    }
    return Expectation{ticket.size, ticket.sha256};
  };
}

struct Outcome {
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  std::optional<Error> error;
  std::uint64_t max_buffered = 0;
};

// Every sample of a StreamedShard over `source`, until its end or its first error.
Outcome read_from(StreamSource source, Bytes window) {
  std::atomic<bool> cancelled{false};
  StreamCounters counters;
  Outcome out;
  {
    StreamedShard streamed(std::move(source), "7 (abc.tar)", window, cancelled, counters);
    for (;;) {
      auto sample = streamed.next();
      if (!sample) {
        out.error = sample.error();
        break;
      }
      if (!*sample) break;
      const Sample& s = **sample;
      out.ids.emplace_back(s.id);
      EXPECT_EQ(s.fields.size(), 1u);
      out.payloads.emplace_back(reinterpret_cast<const char*>(s.fields[0].data.data()), s.fields[0].data.size());
      // The bytes are the sample's own block, not the window's.
      const auto block = streamed.block()->bytes();
      EXPECT_GE(s.fields[0].data.data(), block.data());
      EXPECT_LE(s.fields[0].data.data() + s.fields[0].data.size(), block.data() + block.size());
    }
  }
  out.max_buffered = counters.max_buffered.load();
  return out;
}

Outcome read_all(const TestShard& shard, SourceScript script, Bytes window) {
  return read_from(source_of(shard, std::move(script)), window);
}

TEST(StreamedShard, YieldsEverySampleAcrossChunkBoundariesWithinTheWindow) {
  // 40 samples of 1..3 KiB: most members straddle a 4 KiB chunk boundary; the tar is ~5x the 16 KiB window.
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 40; ++i) sizes.push_back(1000 + (i * 577) % 2200);
  const TestShard shard = make_shard(sizes);
  ASSERT_GT(shard.tar.size(), 4 * KiB(16).count());
  std::size_t straddling = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t begin = shard.padded_ends[i] - (sizes[i] + 511) / 512 * 512;
    straddling += begin / k_chunk.count() != (shard.padded_ends[i] - 1) / k_chunk.count();
  }
  ASSERT_GE(straddling, 10u);
  for (std::size_t step : {1u, 700u, 4096u, 10000u}) {
    const Outcome out = read_all(shard, SourceScript(shard.tar, shard.chunks, step), KiB(16));
    ASSERT_FALSE(out.error) << out.error->message;
    EXPECT_EQ(out.ids, shard.ids) << "step " << step;
    EXPECT_EQ(out.payloads, shard.payloads) << "step " << step;
    // The window bound: never more than 16 KiB of the shard held at once.
    EXPECT_LE(out.max_buffered, KiB(16).count()) << "step " << step;
    EXPECT_GT(out.max_buffered, 0u);
  }
}

TEST(StreamedShard, ASampleLargerThanTheWindowIsAnErrorNamingShardSampleAndWindow) {
  const TestShard shard = make_shard({1000, 1000, 20000, 1000});
  const Outcome out = read_all(shard, SourceScript(shard.tar, shard.chunks), KiB(8));
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->code, ErrorCode::invalid_argument);
  const std::string& message = out.error->message;
  EXPECT_NE(message.find("shard 7 (abc.tar)"), std::string::npos) << message;
  // s1001 is handed out only with the first member of s1002, which cannot fit.
  EXPECT_NE(message.find("the sample at byte offset " + std::to_string(shard.padded_ends[0])), std::string::npos)
      << message;
  EXPECT_NE(message.find("s1002.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("stream window of 8192 bytes"), std::string::npos) << message;
  EXPECT_EQ(out.ids, (std::vector<std::string>{"s1000"}));
  EXPECT_LE(out.max_buffered, KiB(8).count());
}

TEST(StreamedShard, ACorruptChunkKHandsOutNoSampleWithABytesInChunkKOrLater) {
  std::vector<std::size_t> sizes(30, 1500);
  const TestShard shard = make_shard(sizes);
  const std::uint64_t chunk = k_chunk.count();
  for (std::uint64_t k : {0u, 1u, 3u, 6u}) {
    std::string bad = shard.tar;
    bad[k * chunk + 100] ^= 0x20;
    const Outcome out = read_all(shard, SourceScript(bad, shard.chunks), KiB(16));
    ASSERT_TRUE(out.error) << "chunk " << k;
    EXPECT_EQ(out.error->code, ErrorCode::integrity);
    EXPECT_NE(out.error->message.find("chunk " + std::to_string(k) + " "), std::string::npos) << out.error->message;
    // Every sample handed out ends before chunk k; and they are exactly the clean ones, in order.
    for (std::size_t i = 0; i < out.ids.size(); ++i) {
      EXPECT_LE(shard.padded_ends[i], k * chunk) << "chunk " << k << ", sample " << i;
      EXPECT_EQ(out.payloads[i], shard.payloads[i]);
    }
    std::size_t before_k = 0;
    while (shard.padded_ends[before_k] <= k * chunk) ++before_k;
    // All of them but the last one before chunk k, whose end SampleIterator cannot see without the next member.
    EXPECT_GE(out.ids.size() + 1, before_k) << "chunk " << k;
    EXPECT_LE(out.ids.size(), before_k) << "chunk " << k;
    if (k >= 3) {
      EXPECT_GE(out.ids.size(), 3u);
    }
  }
}

TEST(StreamedShard, AWholeShardMismatchIsAnErrorAfterTheLastSample) {
  const TestShard shard = make_shard({1000, 2000, 3000});
  SourceScript script{shard.tar, shard.chunks};
  script.sha256 = shardtest::sha256_of("another shard");
  const Outcome out = read_all(shard, script, KiB(16));
  EXPECT_EQ(out.ids, shard.ids);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->code, ErrorCode::integrity);
  EXPECT_NE(out.error->message.find("shard 7 (abc.tar): the SHA-256 of the streamed bytes"), std::string::npos)
      << out.error->message;
}

TEST(StreamedShard, ATicketWithoutChunkDigestsIsUnsupported) {
  const TestShard shard = make_shard({1000});
  const Outcome out = read_all(shard, SourceScript(shard.tar, std::nullopt), KiB(16));
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->code, ErrorCode::unsupported);
  EXPECT_NE(out.error->message.find("no chunk digests"), std::string::npos) << out.error->message;
  EXPECT_TRUE(out.ids.empty());
}

TEST(StreamedShard, ATransferRestartedFromByteZeroYieldsEachSampleOnce) {
  std::vector<std::size_t> sizes(20, 2500);
  const TestShard shard = make_shard(sizes);
  SourceScript script{shard.tar, shard.chunks};
  script.restart_after = 3 * k_chunk.count() + 1234;
  const Outcome out = read_all(shard, script, KiB(16));
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.ids, shard.ids);
  EXPECT_EQ(out.payloads, shard.payloads);
}

TEST(StreamedShard, AWindowOfFewerThanTwoChunksIsRefused) {
  const TestShard shard = make_shard({1000});
  const Outcome out = read_all(shard, SourceScript(shard.tar, shard.chunks), Bytes{k_chunk.count() + 100});
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->code, ErrorCode::invalid_argument);
  EXPECT_NE(out.error->message.find("fewer than 2"), std::string::npos) << out.error->message;
}

// A server that drops a connection whose client read nothing for a while (datavo serve: 5 s; here 1.2 s), and
// answers the next request from where the sink stands (a Range request); `starts` gets where each call began.
StreamSource dropping_source(const TestShard& shard, std::vector<std::uint64_t>& starts) {
  return [&shard, &starts](const OriginClient::TicketSink& sink_for) -> Result<Expectation> {
    const StreamTicket ticket{*ContentHash::parse(std::string(64, 'a')),
                              Bytes{shard.tar.size()},
                              shardtest::sha256_of(shard.tar),
                              "http://origin/shard",
                              0,
                              shard.chunks};
    auto sink = sink_for(ticket);
    if (!sink) return std::move(sink).error();
    net::ChunkVerifyingSink verifying(**sink, *ticket.chunks, ticket.size, "content hash abc");
    starts.push_back(verifying.written().count());
    for (std::size_t at = verifying.written().count(); at < shard.tar.size();) {
      const std::size_t n = std::min<std::size_t>(1000, shard.tar.size() - at);
      const auto started = std::chrono::steady_clock::now();
      DATAVO_TRY(verifying.write(shard.tar.data() + at, n));
      if (std::chrono::steady_clock::now() - started > std::chrono::milliseconds(1200))
        return Error{ErrorCode::remote, "connection reset by peer (the server's write timeout)"};
      at += n;
    }
    return Expectation{ticket.size, ticket.sha256};
  };
}

TEST(StreamedShard, ADownloadCutWhileTheReaderHeldItBackGoesOnFromTheLastVerifiedChunk) {
  std::vector<std::size_t> sizes(30, 2000);
  const TestShard shard = make_shard(sizes);
  std::vector<std::uint64_t> starts;
  std::atomic<bool> cancelled{false};
  StreamCounters counters;
  std::vector<std::string> payloads;
  {
    StreamedShard streamed(dropping_source(shard, starts), "7 (abc.tar)", KiB(16), cancelled, counters);
    for (;;) {
      auto sample = streamed.next();
      ASSERT_TRUE(sample) << sample.error().message;
      if (!*sample) break;
      payloads.emplace_back(reinterpret_cast<const char*>((*sample)->fields[0].data.data()),
                            (*sample)->fields[0].data.size());
      // A reader that pauses after its third sample, long enough for the "server" to drop the connection.
      if (payloads.size() == 3) std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    }
  }
  EXPECT_EQ(payloads, shard.payloads);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], 0u);
  // The second round asked from a chunk boundary past the start: what was verified is not fetched again.
  EXPECT_GT(starts[1], 0u);
  EXPECT_EQ(starts[1] % k_chunk.count(), 0u);
  EXPECT_LE(counters.max_buffered.load(), KiB(16).count());
}

// A streamed read through a tier's chunk list (small chunks) that fails at a chunk in the middle of one of the
// origin's larger chunks: the origin's download starts at its own chunk boundary at or before the verified bytes
// (so that its chunk is checked whole), and the bytes taken already are not handed out twice.
TEST(StreamedShard, AListOfLargerChunksGoesOnFromItsOwnBoundaryAndHandsOutNoByteTwice) {
  const TestShard shard = make_shard(std::vector<std::size_t>(40, 2000));
  constexpr Bytes k_origin_chunk = KiB(16);
  ChunkHasher origin_hasher(k_origin_chunk);
  origin_hasher.update(shard.tar.data(), shard.tar.size());
  const ChunkDigests origin_chunks = origin_hasher.finish();
  std::string corrupt = shard.tar;
  const std::size_t flipped = 3 * k_origin_chunk.count() + 5000;  // in the tier's chunk 13, the origin's chunk 3
  corrupt[flipped] = static_cast<char>(corrupt[flipped] ^ 1);
  std::vector<std::uint64_t> starts;
  std::optional<Error> first_failure;
  StreamSource source = [&](const OriginClient::TicketSink& sink_for) -> Result<Expectation> {
    const auto ticket_with = [&](const ChunkDigests& chunks) {
      return StreamTicket{*ContentHash::parse(std::string(64, 'a')),
                          Bytes{shard.tar.size()},
                          shardtest::sha256_of(shard.tar),
                          "",
                          0,
                          chunks};
    };
    const StreamTicket tier_list = ticket_with(shard.chunks);
    auto sink = sink_for(tier_list);
    if (!sink) return std::move(sink).error();
    starts.push_back((*sink)->written().count());
    {
      net::ChunkVerifyingSink verifying(**sink, *tier_list.chunks, tier_list.size, "content hash abc", "the object's");
      for (std::size_t at = 0; at < corrupt.size() && !first_failure; at += 1000) {
        if (auto wrote = verifying.write(corrupt.data() + at, std::min<std::size_t>(1000, corrupt.size() - at));
            !wrote) {
          first_failure = wrote.error();
        }
      }
    }
    const StreamTicket origin_ticket = ticket_with(origin_chunks);
    sink = sink_for(origin_ticket);
    if (!sink) return std::move(sink).error();
    const std::uint64_t from = (*sink)->written().count();
    starts.push_back(from);
    net::ChunkVerifyingSink verifying(**sink, *origin_ticket.chunks, origin_ticket.size, "content hash abc");
    for (std::uint64_t at = from; at < shard.tar.size(); at += 1000)
      DATAVO_TRY(verifying.write(shard.tar.data() + at, std::min<std::uint64_t>(1000, shard.tar.size() - at)));
    return Expectation{origin_ticket.size, origin_ticket.sha256};
  };
  const Outcome out = read_from(source, KiB(64));
  ASSERT_FALSE(out.error) << out.error->message;
  ASSERT_TRUE(first_failure);
  EXPECT_NE(first_failure->message.find("chunk 13 (byte offset 53248"), std::string::npos) << first_failure->message;
  EXPECT_NE(first_failure->message.find("but the object's chunk list gives"), std::string::npos);
  EXPECT_EQ(out.payloads, shard.payloads) << "every sample once, none from the flipped byte";
  EXPECT_EQ(starts, (std::vector<std::uint64_t>{0, 3 * k_origin_chunk.count()}))
      << "the origin's bytes start at its chunk 3, not at the tier's chunk 13";
}

TEST(StreamedShard, ADownloadCutWithoutAPauseOfTheReaderEndsTheShard) {
  const TestShard shard = make_shard(std::vector<std::size_t>(30, 2000));
  std::atomic<bool> cancelled{false};
  StreamCounters counters;
  int rounds = 0;
  StreamSource cut = [&](const OriginClient::TicketSink& sink_for) -> Result<Expectation> {
    ++rounds;
    const StreamTicket ticket{*ContentHash::parse(std::string(64, 'a')),
                              Bytes{shard.tar.size()},
                              shardtest::sha256_of(shard.tar),
                              "http://origin/shard",
                              0,
                              shard.chunks};
    auto sink = sink_for(ticket);
    if (!sink) return std::move(sink).error();
    net::ChunkVerifyingSink verifying(**sink, *ticket.chunks, ticket.size, "content hash abc");
    DATAVO_TRY(verifying.write(shard.tar.data(), 5000));
    return Error{ErrorCode::remote, "connection reset by peer"};
  };
  StreamedShard streamed(cut, "7 (abc.tar)", KiB(64), cancelled, counters);
  std::size_t samples = 0;
  Result<const Sample*> sample = streamed.next();
  for (; sample && *sample; sample = streamed.next()) ++samples;
  ASSERT_FALSE(sample);
  EXPECT_EQ(sample.error().code, ErrorCode::remote);
  EXPECT_EQ(rounds, 1);
  EXPECT_LE(samples, 2u);
}

}  // namespace
}  // namespace datavo::client
