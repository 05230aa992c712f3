// Tests of the origin client (src/client/origin_client.cpp, src/client/manifest_cache.cpp): the manifest cache and
// its request counts, and the shard fetcher's refusals, against the fake origin of fake_origin.hpp (a server that
// misbehaves on purpose). The protocol's values it reads are tested in tests/unit/protocol/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "datavo/origin_client.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo {
namespace {

using clienttest::fake_dataset;
using clienttest::FakeDataset;
using clienttest::FakeOrigin;
using shardtest::TempDir;

FakeDataset small_dataset() { return fake_dataset(3, 4); }

TEST(OriginClientTest, CreateNeedsAServerOrAnInstance) {
  TempDir dir;
  clienttest::ScopedEnv no_server("DATAVO_SERVER", std::nullopt);
  auto online = OriginClient::create(clienttest::client_options("", dir.path()));
  ASSERT_FALSE(online);
  EXPECT_EQ(online.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(online.error().message.find("DATAVO_SERVER"), std::string::npos);

  auto offline = OriginClient::create(clienttest::client_options("", dir.path(), Offline::yes));
  ASSERT_FALSE(offline);
  auto options = clienttest::client_options("", dir.path(), Offline::yes);
  options.instance = "prod";
  auto with_instance = OriginClient::create(options);
  ASSERT_TRUE(with_instance) << with_instance.error().message;
  EXPECT_EQ((*with_instance)->instance().name(), "prod");

  EXPECT_FALSE(OriginClient::create(clienttest::client_options("ftp://host", dir.path())));
}

TEST(OriginClientTest, InstanceComesFromTheServerUrl) {
  TempDir dir;
  auto client = clienttest::make_client(clienttest::client_options("http://Data.Example:8080/", dir.path()));
  EXPECT_EQ(client->instance().name(), "data.example_8080");
  EXPECT_EQ(client->server(), "http://Data.Example:8080");
}

TEST(OriginClientTest, OfflineFromTheEnvironment) {
  TempDir dir;
  {
    clienttest::ScopedEnv env("DATAVO_OFFLINE", "1");
    auto client = clienttest::make_client(clienttest::client_options("http://h:1", dir.path(), std::nullopt));
    EXPECT_EQ(client->offline(), Offline::yes);
  }
  {
    clienttest::ScopedEnv env("DATAVO_OFFLINE", "maybe");
    auto client = OriginClient::create(clienttest::client_options("http://h:1", dir.path(), std::nullopt));
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error().code, ErrorCode::invalid_argument);
  }
}

TEST(OriginClientTest, ServerInstanceOfflineWithoutARecordReadsTheServerUrlOrTheEnvironment) {
  TempDir dir;
  const std::string prod = "prod";
  const std::string empty;
  {
    clienttest::ScopedEnv offline("DATAVO_OFFLINE", "1");  // no request: the URL's instance
    clienttest::ScopedEnv env("DATAVO_SERVER", "http://[::1]:9000/x");
    EXPECT_EQ(OriginClient::server_instance(nullptr, {}, dir.path())->name(), "--1_9000");
    EXPECT_EQ(OriginClient::server_instance(&empty, {}, dir.path())->name(), "--1_9000");
    EXPECT_EQ(OriginClient::server_instance(&prod, {}, dir.path())->name(), "prod");
  }
  {
    clienttest::ScopedEnv env("DATAVO_SERVER", "");
    EXPECT_EQ(OriginClient::server_instance(nullptr, {}, dir.path())->name(), "local");
  }
  clienttest::ScopedEnv unset("DATAVO_SERVER", std::nullopt);
  EXPECT_EQ(OriginClient::server_instance(nullptr, {}, dir.path())->name(), "local");
  const std::string bad = ".hidden";
  EXPECT_FALSE(OriginClient::server_instance(&bad, {}, dir.path()));
}

class OriginClientFakeTest : public ::testing::Test {
 protected:
  OriginClientFakeTest() : origin(small_dataset()) {}
  std::shared_ptr<OriginClient> client(std::optional<Offline> offline = Offline::no) {
    return clienttest::make_client(clienttest::client_options(origin.base_url(), dir.sub("manifests"), offline));
  }
  TempDir dir;
  FakeOrigin origin;
  const DatasetName name{"fake", "train"};
};

TEST_F(OriginClientFakeTest, ManifestIsCachedPerInstanceDatasetAndRevision) {
  auto first = client()->manifest(name, std::nullopt);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->source, ManifestSource::fetched);
  EXPECT_EQ(first->manifest.revision, 7u);
  EXPECT_EQ(origin.manifest_requests.load(), 1);
  const std::string base = dir.sub("manifests") + "/127.0.0.1_" + std::to_string(origin.port()) + "/fake/train";
  EXPECT_TRUE(std::filesystem::exists(base + "/7.json"));
  EXPECT_TRUE(std::filesystem::exists(base + "/latest"));

  // Unpinned: one conditional request, answered 304.
  auto again = client()->manifest(name, std::nullopt);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->source, ManifestSource::revalidated);
  EXPECT_EQ(origin.manifest_requests.load(), 2);
  EXPECT_EQ(origin.not_modified.load(), 1);

  // Pinned: no request at all.
  auto pinned = client()->manifest(name, 7);
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->source, ManifestSource::cache);
  EXPECT_EQ(origin.manifest_requests.load(), 2);

  // Offline: no request, from `latest`.
  auto offline = client(Offline::yes)->manifest(name, std::nullopt);
  ASSERT_TRUE(offline) << offline.error().message;
  EXPECT_EQ(offline->manifest.revision, 7u);
  EXPECT_EQ(origin.manifest_requests.load(), 2);
}

TEST_F(OriginClientFakeTest, OfflineWithNothingCachedIsAClearError) {
  auto c = client(Offline::yes);
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_FALSE(manifest);
  EXPECT_EQ(manifest.error().code, ErrorCode::not_found);
  EXPECT_NE(manifest.error().message.find("offline"), std::string::npos) << manifest.error().message;
  EXPECT_NE(manifest.error().message.find(dir.sub("manifests")), std::string::npos) << manifest.error().message;
  auto pinned = c->manifest(name, 7);
  ASSERT_FALSE(pinned);
  EXPECT_NE(pinned.error().message.find("revision 7"), std::string::npos) << pinned.error().message;
  EXPECT_EQ(origin.manifest_requests.load(), 0);
  EXPECT_EQ(c->requests().total(), 0u);
}

TEST_F(OriginClientFakeTest, CorruptCachedManifestIsRefetched) {
  ASSERT_TRUE(client()->manifest(name, 7));
  const std::string path = dir.sub("manifests") + "/127.0.0.1_" + std::to_string(origin.port()) + "/fake/train/7.json";
  { std::ofstream(path) << "{ torn"; }
  auto again = client()->manifest(name, 7);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->source, ManifestSource::fetched);
  EXPECT_EQ(origin.manifest_requests.load(), 2);
}

// An unknown dataset is the caller's bad input (the CLI's exit 2), like an unknown key.
TEST_F(OriginClientFakeTest, UnknownDatasetIsInvalidArgument) {
  auto manifest = client()->manifest(DatasetName{"nope", "train"}, std::nullopt);
  ASSERT_FALSE(manifest);
  EXPECT_EQ(manifest.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(manifest.error().message.find("nope/train"), std::string::npos) << manifest.error().message;
}

TEST_F(OriginClientFakeTest, FetcherInstallsVerifiedBytes) {
  auto c = client();
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav"};
  auto result =
      cache->get_or_fetch(c->shard_key(manifest->manifest, 1, keys), c->shard_fetcher(manifest->manifest, 1, keys));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->source, ServedFrom::fetched);
  EXPECT_EQ(result->handle.size().count(), origin.tar_of(1, keys).size());
  EXPECT_EQ(origin.ticket_requests.load(), 1);
  EXPECT_EQ(origin.shard_requests.load(), 1);
  EXPECT_EQ(c->requests().ticket, 1u);
  EXPECT_EQ(c->requests().shard, 1u);
  EXPECT_EQ(c->requests().shard_bytes.count(), origin.tar_of(1, keys).size());

  // A hit never calls the fetcher: no ticket.
  auto hit =
      cache->get_or_fetch(c->shard_key(manifest->manifest, 1, keys), c->shard_fetcher(manifest->manifest, 1, keys));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->source, ServedFrom::hit);
  EXPECT_EQ(origin.ticket_requests.load(), 1);
}

TEST_F(OriginClientFakeTest, TicketWithAnotherContentHashIsRefused) {
  origin.wrong_content_hash = true;
  auto c = client();
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav", "transcript.txt"};
  const ShardKey key = c->shard_key(manifest->manifest, 0, keys);
  auto result = cache->get_or_fetch(key, c->shard_fetcher(manifest->manifest, 0, keys));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::integrity);
  EXPECT_NE(result.error().message.find("refusing"), std::string::npos) << result.error().message;
  EXPECT_NE(result.error().message.find(key.hash.hex()), std::string::npos) << result.error().message;
  EXPECT_EQ(origin.shard_requests.load(), 0) << "nothing is downloaded for a refused ticket";
  auto cached = cache->get(key);
  ASSERT_TRUE(cached);
  EXPECT_FALSE(*cached);
}

TEST_F(OriginClientFakeTest, BytesThatDoNotMatchTheTicketAreNotInstalled) {
  origin.corrupt_bytes = true;
  auto c = client();
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav"};
  const ShardKey key = c->shard_key(manifest->manifest, 0, keys);
  auto result = cache->get_or_fetch(key, c->shard_fetcher(manifest->manifest, 0, keys));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::integrity);
  auto cached = cache->get(key);
  ASSERT_TRUE(cached);
  EXPECT_FALSE(*cached);
}

TEST_F(OriginClientFakeTest, ExpiredTicketIsRenewedOnce) {
  auto c = client();
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav"};
  origin.expire_downloads = 1;
  auto renewed =
      cache->get_or_fetch(c->shard_key(manifest->manifest, 0, keys), c->shard_fetcher(manifest->manifest, 0, keys));
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_EQ(origin.ticket_requests.load(), 2);
  EXPECT_EQ(origin.shard_requests.load(), 2);

  origin.expire_downloads = 2;
  auto failed =
      cache->get_or_fetch(c->shard_key(manifest->manifest, 1, keys), c->shard_fetcher(manifest->manifest, 1, keys));
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("410"), std::string::npos) << failed.error().message;
  EXPECT_EQ(origin.ticket_requests.load(), 4) << "exactly one renewal per fetch";
}

TEST_F(OriginClientFakeTest, OfflineFetcherMakesNoRequest) {
  ASSERT_TRUE(client()->manifest(name, std::nullopt));
  auto c = client(Offline::yes);
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav"};
  auto result =
      cache->get_or_fetch(c->shard_key(manifest->manifest, 0, keys), c->shard_fetcher(manifest->manifest, 0, keys));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found);
  EXPECT_NE(result.error().message.find("offline"), std::string::npos) << result.error().message;
  EXPECT_EQ(origin.ticket_requests.load(), 0);
}

TEST_F(OriginClientFakeTest, TokenGoesOnlyToTheServersOwnOrigin) {
  auto options = clienttest::client_options(origin.base_url(), dir.sub("manifests"));
  options.token = "t0ken";
  auto c = clienttest::make_client(options);
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  const std::vector<std::string> keys = {"audio.wav"};
  ASSERT_TRUE(
      cache->get_or_fetch(c->shard_key(manifest->manifest, 0, keys), c->shard_fetcher(manifest->manifest, 0, keys)));
  EXPECT_EQ(origin.shard_requests_with_authorization.load(), 1) << "a relative ticket URL is the server's own";

  // The same server under another name is another origin as far as the client can tell.
  origin.set_shard_url_base("http://localhost:" + std::to_string(origin.port()));
  ASSERT_TRUE(
      cache->get_or_fetch(c->shard_key(manifest->manifest, 1, keys), c->shard_fetcher(manifest->manifest, 1, keys)));
  EXPECT_EQ(origin.shard_requests.load(), 2);
  EXPECT_EQ(origin.shard_requests_with_authorization.load(), 1) << "no token for a third-party ticket URL";
}

TEST_F(OriginClientFakeTest, UnknownShardIndexIsAPermanentError) {
  auto c = client();
  auto manifest = c->manifest(name, std::nullopt);
  ASSERT_TRUE(manifest);
  Manifest tampered = manifest->manifest;
  tampered.shards[0].index = 99;
  auto ticket = c->request_ticket(tampered, 0, {"audio.wav"});
  ASSERT_FALSE(ticket);
  EXPECT_EQ(ticket.error().code, ErrorCode::not_found);
  EXPECT_EQ(origin.ticket_requests.load(), 1) << "a 404 is not retried";
}

}  // namespace
}  // namespace datavo
