// SampleStream against the real in-process OriginServer (pack_dataset + OriginServer::start), counting requests on
// the server's /v1/metrics: a warm pass with a pinned revision or DATAVO_OFFLINE=1 makes zero requests, an unpinned
// one makes a single conditional manifest request (304) and no shard request; offline with nothing cached is a clear
// error; the bytes read are the bytes packed; the bearer token; a new revision.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "datavo/origin.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tar.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

constexpr std::size_t k_samples = 24;
constexpr std::size_t k_per_shard = 5;  // 5 shards, the last one short
constexpr std::size_t k_shards = (k_samples + k_per_shard - 1) / k_per_shard;

std::string payload(std::size_t i, const std::string& key) {
  return key + " of sample " + std::to_string(i) + std::string(100 + 13 * i, char('a' + i % 26));
}

// Writes samples [first, last) as one WebDataset tar.
void write_source(const std::string& path, std::size_t first, std::size_t last) {
  std::ofstream out(path, std::ios::binary);
  TarWriter writer([&out](std::span<const std::byte> bytes) -> Result<void> {
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return ok();
  });
  for (std::size_t i = first; i < last; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "utt_%03zu", i);
    for (const std::string key : {"audio.wav", "transcript.txt"}) {
      const std::string data = payload(i, key);
      ASSERT_TRUE(writer.add_member(std::string(id) + "." + key, std::as_bytes(std::span(data.data(), data.size()))));
    }
  }
  ASSERT_TRUE(writer.finish());
}

class SampleStreamOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir.sub("src"));
    write_source(dir.sub("src/part-0.tar"), 0, k_samples);
    revision = pack();
    ASSERT_GT(revision, 0u);
    start_server(std::nullopt);
  }

  // Packs dir/src into dir/store as voice_demo_v1/train; the new revision (0 after a failure, which it reports).
  std::uint64_t pack() {
    PackOptions options;
    options.source = dir.sub("src");
    options.store = dir.sub("store");
    options.dataset = "voice_demo_v1/train";
    options.samples_per_shard = k_per_shard;
    auto packed = pack_dataset(options);
    EXPECT_TRUE(packed) << packed.error().message;
    return packed ? packed->revision : 0;
  }

  void start_server(std::optional<std::string> token, Milliseconds ticket_wait = Milliseconds{5'000},
                    Bytes chunk_size = k_default_chunk_size) {
    server.reset();
    OriginServerOptions options;
    options.chunk_size = chunk_size;
    options.ticket_wait = ticket_wait;
    options.store = dir.sub("store");
    options.log_requests = false;
    options.threads = 4;
    options.token = std::move(token);
    auto started = OriginServer::start(options);
    ASSERT_TRUE(started) << started.error().message;
    server = std::move(*started);
  }

  SampleStreamOptions options(std::optional<Offline> offline = Offline::no) {
    SampleStreamOptions o;
    o.keys = {"audio.wav", "transcript.txt"};
    o.cache = cache;
    o.origin = clienttest::client_options(server->base_url(), dir.sub("manifests"), offline);
    return o;
  }

  // (manifest, ticket, shard) requests the server has answered so far, from /v1/metrics.
  std::array<std::uint64_t, 3> requests() {
    auto client = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("manifests")));
    auto metrics = client->metrics();
    if (!metrics) throw std::runtime_error(metrics.error().message);
    return {metrics->requests_for("manifest"), metrics->requests_for("ticket"), metrics->requests_for("shard")};
  }
  static std::array<std::uint64_t, 3> minus(std::array<std::uint64_t, 3> a, std::array<std::uint64_t, 3> b) {
    return {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
  }

  // Reads the whole stream, checking every byte against what was packed; the number of samples.
  std::size_t read_all(SampleStreamOptions o) {
    auto stream = SampleStream::from_dataset("voice_demo_v1/train", std::move(o));
    if (!stream) throw std::runtime_error(stream.error().message);
    std::size_t count = 0;
    for (;;) {
      auto sample = stream->next();
      if (!sample) throw std::runtime_error(sample.error().message);
      if (!*sample) return count;
      const std::size_t i = std::stoul((*sample)->id.substr(4));
      for (const auto& field : (*sample)->fields) {
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(field.data.data()), field.data.size()),
                  payload(i, field.key));
      }
      ++count;
    }
  }

  TempDir dir;
  std::unique_ptr<OriginServer> server;
  std::shared_ptr<ShardCacheHierarchy> cache = clienttest::fresh_cache(dir.sub("cache"));
  std::uint64_t revision = 0;
};

using Counts = std::array<std::uint64_t, 3>;

// Reading while fetching with chunks of 4 KiB (a shard spans a few): streams of one process reading the same shards at
// once, each on its thread, the first to fetch a shard leading the others (GrowingShard's flights); every byte is the
// packed one and each shard is fetched once. With it off, the same.
TEST_F(SampleStreamOriginTest, StreamsReadingTheSameShardsAtOnceReadEveryByteRightAndFetchEachOnce) {
  for (ReadWhileFetching mode : {ReadWhileFetching::on, ReadWhileFetching::off}) {
    start_server(std::nullopt, Milliseconds{5'000}, KiB(4));
    cache = clienttest::fresh_cache(dir.sub(mode == ReadWhileFetching::on ? "cache-on" : "cache-off"));
    const Counts before = requests();
    std::vector<std::size_t> counts(4, 0);
    std::vector<std::thread> readers;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      readers.emplace_back([&, r] {
        auto o = options();
        o.read_while_fetching = mode;
        o.prefetch_shards = r % 2;  // with and without a prefetcher thread
        counts[r] = read_all(std::move(o));
      });
    }
    for (auto& reader : readers) reader.join();
    for (std::size_t count : counts) EXPECT_EQ(count, k_samples);
    EXPECT_EQ(minus(requests(), before)[2], k_shards) << "shard downloads";
  }
}

TEST_F(SampleStreamOriginTest, ColdPassFetchesEveryShardOnce) {
  const Counts before = requests();
  EXPECT_EQ(read_all(options()), k_samples);
  EXPECT_EQ(minus(requests(), before), (Counts{1, k_shards, k_shards}));
}

// With ticket_wait 0 the server answers every first ticket of a shard 202 ("preparing", Retry-After: 1) and builds
// the tar in the background; the client waits and asks again, and the pass reads every byte once.
TEST_F(SampleStreamOriginTest, TicketsAnsweredPreparingAreAskedForAgainUntilReady) {
  start_server(std::nullopt, Milliseconds{0});
  EXPECT_EQ(read_all(options()), k_samples);
  auto client = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("manifests")));
  auto metrics = client->metrics();
  ASSERT_TRUE(metrics) << metrics.error().message;
  EXPECT_GE(metrics->requests_for("ticket", "202"), k_shards);
  EXPECT_EQ(metrics->requests_for("ticket", "200"), k_shards);
  EXPECT_EQ(metrics->requests_for("shard", "200"), k_shards);
}

TEST_F(SampleStreamOriginTest, AShardStillPreparingAfterPreparingTimeoutIsATimeoutError) {
  start_server(std::nullopt, Milliseconds{0});
  auto options = clienttest::client_options(server->base_url(), dir.sub("manifests"));
  options.preparing_timeout = Seconds{0};
  auto client = clienttest::make_client(options);
  auto manifest = client->manifest(DatasetName{"voice_demo_v1", "train"}, std::nullopt);
  ASSERT_TRUE(manifest) << manifest.error().message;
  auto ticket = client->request_ticket(manifest->manifest, 0, {"audio.wav", "transcript.txt"});
  ASSERT_FALSE(ticket);
  EXPECT_EQ(ticket.error().code, ErrorCode::timeout);
  EXPECT_NE(ticket.error().message.find("still preparing the shard after 0 s"), std::string::npos)
      << ticket.error().message;
}

TEST_F(SampleStreamOriginTest, StallTimeoutComesFromTheEnvironmentAndABadValueIsRefused) {
  {
    clienttest::ScopedEnv env("DATAVO_STALL_TIMEOUT", "120");
    auto from_env = stall_timeout_from_env();
    ASSERT_TRUE(from_env);
    EXPECT_EQ(*from_env, std::optional<Seconds>(Seconds{120}));
  }
  for (const char* bad : {"0", "-5", "1.5", "30s", "86401", "999999999999"}) {
    clienttest::ScopedEnv env("DATAVO_STALL_TIMEOUT", bad);
    auto client = OriginClient::create(clienttest::client_options(server->base_url(), dir.sub("manifests")));
    ASSERT_FALSE(client) << bad;
    EXPECT_EQ(client.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(client.error().message.find(std::string("DATAVO_STALL_TIMEOUT=") + bad), std::string::npos)
        << client.error().message;
  }
  auto zero = clienttest::client_options(server->base_url(), dir.sub("manifests"));
  zero.stall_timeout = Seconds{0};
  auto refused = OriginClient::create(zero);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  clienttest::ScopedEnv unset("DATAVO_STALL_TIMEOUT", std::nullopt);
  auto from_env = stall_timeout_from_env();
  ASSERT_TRUE(from_env);
  EXPECT_FALSE(*from_env);
}

TEST_F(SampleStreamOriginTest, WarmPassWithAPinnedRevisionMakesZeroRequests) {
  EXPECT_EQ(read_all(options()), k_samples);
  const Counts before = requests();
  auto pinned = options();
  pinned.revision = revision;
  EXPECT_EQ(read_all(std::move(pinned)), k_samples);
  EXPECT_EQ(minus(requests(), before), (Counts{0, 0, 0}));
}

TEST_F(SampleStreamOriginTest, WarmPassOfflineMakesZeroRequests) {
  EXPECT_EQ(read_all(options()), k_samples);
  const Counts before = requests();
  {
    clienttest::ScopedEnv offline("DATAVO_OFFLINE", "1");
    EXPECT_EQ(read_all(options(std::nullopt)), k_samples);
  }
  EXPECT_EQ(minus(requests(), before), (Counts{0, 0, 0}));
}

// huggingface_hub's automatic offline fallback: with the origin gone (connection refused) and the manifest cached, a
// stream goes on from the cached manifest and reads every cached shard; a shard that is not cached fails at once.
TEST_F(SampleStreamOriginTest, OriginDownReadsFromTheCachedManifest) {
  EXPECT_EQ(read_all(options()), k_samples);
  auto down = options();
  server.reset();  // nothing listens on its port any more
  EXPECT_EQ(read_all(down), k_samples);

  auto client = clienttest::make_client(down.origin);
  auto manifest = client->manifest(DatasetName{"voice_demo_v1", "train"}, std::nullopt);
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(manifest->source, ManifestSource::fallback);
  EXPECT_EQ(manifest->manifest.revision, revision);
  // Not cached: the ticket request is not even attempted (the manifest request found the origin unreachable).
  const auto started = std::chrono::steady_clock::now();
  auto ticket = client->request_ticket(manifest->manifest, 0, {"audio.wav"});
  ASSERT_FALSE(ticket);
  EXPECT_EQ(ticket.error().code, ErrorCode::remote);
  EXPECT_NE(ticket.error().message.find("not attempted"), std::string::npos) << ticket.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(100));
}

// The instance is the server's own identity (GET /v1/instance), remembered per URL: http://localhost:P reads what
// http://127.0.0.1:P cached, and an offline client finds the remembered identity without any request.
TEST_F(SampleStreamOriginTest, TwoUrlsOfOneServerShareOneCache) {
  EXPECT_EQ(read_all(options()), k_samples);
  auto by_ip = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("manifests")));
  ASSERT_TRUE(by_ip->manifest(DatasetName{"voice_demo_v1", "train"}, std::nullopt));
  const std::string id = by_ip->instance().name();
  EXPECT_EQ(id.size(), 32u) << id;  // the store's instance_id, not "127.0.0.1_<port>"

  const Counts before = requests();
  auto by_name = options();
  by_name.origin.server = "http://localhost:" + std::to_string(server->port());
  EXPECT_EQ(read_all(by_name), k_samples);
  EXPECT_EQ(minus(requests(), before)[1], 0u) << "no ticket: every shard was cached under the server's identity";
  EXPECT_EQ(minus(requests(), before)[2], 0u);

  auto offline = clienttest::make_client(clienttest::client_options(
      "http://localhost:" + std::to_string(server->port()), dir.sub("manifests"), Offline::yes));
  EXPECT_EQ(offline->instance().name(), id);
  auto remembered = OriginClient::server_instance(nullptr, server->base_url(), dir.sub("manifests"));
  ASSERT_TRUE(remembered);
  EXPECT_EQ(remembered->name(), id);
  const std::string elsewhere = "elsewhere";
  EXPECT_EQ(OriginClient::server_instance(&elsewhere, server->base_url(), dir.sub("manifests"))->name(), "elsewhere");
}

// A front end used first on a machine (the SDK's get_or_fetch, `datavo cache fetch`) keys its entries by the
// server's identity too: server_instance asks for it once, and a later process finds it remembered.
TEST_F(SampleStreamOriginTest, ServerInstanceAsksAServerNothingIsRememberedForOnce) {
  const auto instance_requests = [&] {
    auto client = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("probe")));
    auto metrics = client->metrics();
    if (!metrics) throw std::runtime_error(metrics.error().message);
    return metrics->requests_for("instance");
  };
  const std::uint64_t before = instance_requests();
  auto first = OriginClient::server_instance(nullptr, server->base_url(), dir.sub("fresh"));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->name().size(), 32u) << first->name();  // the store's instance_id, not "127.0.0.1_<port>"
  EXPECT_EQ(instance_requests(), before + 1);
  auto again =
      OriginClient::server_instance(nullptr, "http://localhost:" + std::to_string(server->port()), dir.sub("fresh"));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->name(), first->name()) << "another URL of the same server: asked, the same identity";
  const std::uint64_t after_two_urls = instance_requests();
  EXPECT_EQ(after_two_urls, before + 2);
  EXPECT_EQ(OriginClient::server_instance(nullptr, server->base_url(), dir.sub("fresh"))->name(), first->name());
  EXPECT_EQ(instance_requests(), after_two_urls) << "remembered: no request";
  {
    clienttest::ScopedEnv offline("DATAVO_OFFLINE", "1");
    EXPECT_EQ(OriginClient::server_instance(nullptr, server->base_url(), dir.sub("other"))->name(),
              "127.0.0.1_" + std::to_string(server->port()));
  }
  EXPECT_EQ(instance_requests(), after_two_urls) << "offline: no request";
}

TEST_F(SampleStreamOriginTest, WarmPassWithoutAPinMakesOneConditionalRequest) {
  EXPECT_EQ(read_all(options()), k_samples);
  auto client = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("manifests")));
  const auto before = client->metrics();
  ASSERT_TRUE(before);
  EXPECT_EQ(read_all(options()), k_samples);
  const auto after = client->metrics();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->requests_for("manifest") - before->requests_for("manifest"), 1u);
  EXPECT_EQ(after->requests_for("manifest", "304") - before->requests_for("manifest", "304"), 1u);
  EXPECT_EQ(after->requests_for("ticket"), before->requests_for("ticket"));
  EXPECT_EQ(after->requests_for("shard"), before->requests_for("shard"));
}

TEST_F(SampleStreamOriginTest, OfflineWithNothingCachedIsAClearError) {
  const Counts before = requests();
  auto stream = SampleStream::from_dataset("voice_demo_v1/train", options(Offline::yes));
  ASSERT_FALSE(stream);
  EXPECT_EQ(stream.error().code, ErrorCode::not_found);
  EXPECT_NE(stream.error().message.find("offline (DATAVO_OFFLINE=1) and no cached manifest of voice_demo_v1/train"),
            std::string::npos)
      << stream.error().message;
  EXPECT_EQ(minus(requests(), before), (Counts{0, 0, 0}));
}

TEST_F(SampleStreamOriginTest, OfflineWithAManifestButNoShardsFailsOnTheShard) {
  auto client = clienttest::make_client(clienttest::client_options(server->base_url(), dir.sub("manifests")));
  ASSERT_TRUE(client->manifest(DatasetName{"voice_demo_v1", "train"}, std::nullopt));
  const Counts before = requests();
  auto stream = SampleStream::from_dataset("voice_demo_v1/train", options(Offline::yes));
  ASSERT_TRUE(stream) << stream.error().message;
  auto sample = stream->next();
  ASSERT_FALSE(sample);
  EXPECT_NE(sample.error().message.find("not available offline"), std::string::npos) << sample.error().message;
  EXPECT_EQ(minus(requests(), before), (Counts{0, 0, 0}));
}

TEST_F(SampleStreamOriginTest, BearerToken) {
  start_server("s3cret");
  auto without = SampleStream::from_dataset("voice_demo_v1/train", options());
  ASSERT_FALSE(without);
  EXPECT_EQ(without.error().code, ErrorCode::permission_denied);
  auto with = options();
  with.origin.token = "s3cret";
  EXPECT_EQ(read_all(std::move(with)), k_samples);
}

TEST_F(SampleStreamOriginTest, NewRevisionIsSeenWithoutAPin) {
  EXPECT_EQ(read_all(options()), k_samples);
  write_source(dir.sub("src/part-1.tar"), k_samples, k_samples + 3);
  EXPECT_EQ(pack(), revision + 1);
  EXPECT_EQ(read_all(options()), k_samples + 3);
  // The old revision is still readable, from the cache, without a request.
  const Counts before = requests();
  auto old = options();
  old.revision = revision;
  EXPECT_EQ(read_all(std::move(old)), k_samples);
  EXPECT_EQ(minus(requests(), before), (Counts{0, 0, 0}));
}

}  // namespace
}  // namespace datavo
