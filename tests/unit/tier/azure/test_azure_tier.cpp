// Tests of the Azure request builder (src/tier/azure/azure_tier.cpp, through the remote-tier layer) with bearer
// tokens from the DefaultAzureCredential chain (an AAD client secret at a fake authority), against the Azure front
// end of the fake object store (tests/support/fake_cloud/fake_cloud.hpp). Azurite checks SharedKey and SAS
// (tests/e2e/test_azure_*.sh run those), but it takes bearer tokens only over https, so the token paths are covered
// here:
//   - a token refused with 401 mid-upload: refreshed, and only the refused blocks sent again (once each); the
//     other blocks and the Put Block List are sent once;
//   - a token refused mid-download: only the refused ranges read again;
//   - a short-lived token refreshed ahead of its expiry between two requests of one transfer (no 401 at all);
//   - the conditional create (If-None-Match: *; 409 BlobAlreadyExists is already_present) and Content-MD5.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "support/fake_cloud/fake_cloud.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/azure/azure_tier.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"
#include "unit/tier/credential_test_support.hpp"

namespace datavo::azure {
namespace {

using namespace std::chrono_literals;
using fakecloud::FakeCloud;
using fakecloud::SeenRequest;
using namespace shardtest;

constexpr std::uint64_t k_part = 5 * 1024 * 1024;
constexpr const char* k_container = "shards";

using MemorySink = PositionalMemorySink;

class AzureTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    blobs_.add_bucket(k_container);
    std::filesystem::create_directories(dir_.sub("home"));
    env_.set_home(dir_.sub("home"));
    // The chain's first link: an AAD client secret at the fake's authority. No key in the environment.
    env_.set("AZURE_AUTHORITY_HOST", blobs_.url());
    env_.set("AZURE_TENANT_ID", "tenant-1");
    env_.set("AZURE_CLIENT_ID", "app-1");
    env_.set("AZURE_CLIENT_SECRET", "aad-client-secret-7");
    env_.set("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:" + std::to_string(credtest::closed_port()));
    env_.set("PATH", "/nonexistent");
  }

  std::shared_ptr<Tier> make(std::size_t concurrency = 4) {
    AzureBlobTierOptions options;
    options.container_url = blobs_.container_url(k_container);
    options.remote.name = "azure";
    options.remote.part_size = Bytes{k_part};
    options.remote.concurrency = concurrency;
    options.remote.transport.connect_timeout = Milliseconds{2'000};
    options.remote.transport.stall_timeout = Seconds{10};
    options.remote.transport.max_attempts = 3;
    options.remote.transport.initial_backoff = Milliseconds{5};
    options.remote.transport.max_backoff = Milliseconds{20};
    // These tests count requests exactly; hedging (on by default, test_hedge.cpp) would add one to a range that a
    // loaded machine (TSan) leaves silent past the deadline.
    options.remote.hedge.mode = Hedging::off;
    auto tier = make_azure_blob_tier_with_env(std::move(options), env_.env());
    if (!tier) throw std::runtime_error(tier.error().message);
    return *tier;
  }

  Result<InstallOutcome> install(Tier& tier, const ShardKey& key, const std::string& bytes) {
    ShardHandle handle = handle_on_new_file(dir_.sub("source-" + std::to_string(++sources_)), bytes);
    return tier.install_copy(key, handle, sha256_of(bytes));
  }
  static std::string blob_name(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex() + ".tar"; }
  // What install_copy records.
  static std::map<std::string, std::string> metadata(const std::string& bytes) {
    return {{"datavo_sha256", sha256_of(bytes).hex()},
            {"datavo_size", std::to_string(bytes.size())},
            {"datavo_chunks", fakecloud::chunks_value_of(bytes)}};
  }

  FakeCloud blobs_{fakecloud::Dialect::azure};
  TempDir dir_;
  credtest::FakeEnvironment env_;
  int sources_ = 0;
};

TEST_F(AzureTierTest, APartSizeAboveAzuresLargestBlockIsRefusedNamingTheLimit) {
  AzureBlobTierOptions options;
  options.container_url = blobs_.container_url(k_container);
  options.remote.name = "azure";
  options.remote.part_size = Bytes{4001ull * 1024 * 1024};
  auto tier = make_azure_blob_tier_with_env(options, env_.env());
  ASSERT_FALSE(tier);
  EXPECT_EQ(tier.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(tier.error().message.find("4000MiB"), std::string::npos) << tier.error().message;
  options.remote.part_size = Bytes{4000ull * 1024 * 1024};
  EXPECT_TRUE(make_azure_blob_tier_with_env(options, env_.env()));
}

TEST_F(AzureTierTest, ATokenRefusedMidUploadIsRefreshedAndOnlyTheRefusedBlocksAreSentAgain) {
  auto tier = make();
  const auto key = make_key(1);
  const std::string bytes = random_bytes(5 * k_part + 4321, 1);
  // The token stops working once two blocks are in (revoked, or expired early on the service's clock).
  std::atomic<int> blocks_seen{0};
  blobs_.on_request([&](const SeenRequest& r) {
    if (r.param("comp") == "block" && ++blocks_seen == 3) blobs_.revoke_tokens();
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  auto stored = blobs_.object(k_container, blob_name(key));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, metadata(bytes));

  std::map<std::string, int> sent, refused;
  int lists = 0;
  for (const auto& r : blobs_.requests()) {
    if (r.param("comp") == "blocklist") ++lists;
    if (r.param("comp") != "block") continue;
    ++sent[r.param("blockid")];
    if (r.status == 401) ++refused[r.param("blockid")];
  }
  EXPECT_EQ(sent.size(), 6u);
  EXPECT_GE(refused.size(), 1u);
  for (const auto& [block, times] : sent)
    EXPECT_EQ(times, 1 + (refused.contains(block) ? refused.at(block) : 0))
        << "block " << block << ": sent again only after its own 401";
  for (const auto& [block, times] : refused) EXPECT_EQ(times, 1) << block;
  EXPECT_EQ(lists, 1);
  EXPECT_GE(blobs_.tokens_issued(), 2);
}

TEST_F(AzureTierTest, ATokenRefusedMidDownloadRepeatsOnlyTheRefusedRanges) {
  auto tier = make();
  const auto key = make_key(2);
  const std::string bytes = random_bytes(4 * k_part + 17, 2);
  blobs_.put_object(k_container, blob_name(key), bytes, metadata(bytes));
  // A first token, then revoked as the first pinned range arrives.
  bool revoked = false;
  blobs_.on_request([&](const SeenRequest& r) {
    if (!r.header("If-Match").empty() && !revoked) {
      revoked = true;
      blobs_.revoke_tokens();
    }
  });
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);
  std::map<std::string, int> sent, refused;
  for (const auto& r : blobs_.requests()) {
    if (r.method != "GET") continue;
    ++sent[r.header("x-ms-range")];
    if (r.status == 401) ++refused[r.header("x-ms-range")];
  }
  EXPECT_EQ(sent.size(), 5u) << "five ranges of part_size";
  for (const auto& [range, times] : sent) EXPECT_EQ(times, 1 + refused[range]) << range;
  EXPECT_GE(refused.size(), 1u);
  EXPECT_EQ(sent["bytes=0-" + std::to_string(k_part - 1)], 1) << "the first range is not read again";
}

TEST_F(AzureTierTest, AShortLivedTokenIsRefreshedAheadOfItsExpiryMidTransfer) {
  blobs_.set_token_lifetime(60s);
  auto tier = make(/*concurrency=*/1);
  const auto key = make_key(3);
  const std::string bytes = random_bytes(3 * k_part + 5, 3);
  // 40 s pass while the first block is sent: less than half of the token's minute is left.
  blobs_.on_request([&](const SeenRequest& r) {
    if (r.param("comp") == "block" && blobs_.tokens_issued() == 1) env_.advance(40s);
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(blobs_.tokens_issued(), 2);
  std::vector<std::string> tokens;
  for (const auto& r : blobs_.requests()) {
    EXPECT_NE(r.status, 401) << "refreshed before it could be refused";
    tokens.push_back(r.header("Authorization"));
  }
  ASSERT_EQ(tokens.size(), 5u) << "four blocks and the block list, each sent once";
  EXPECT_EQ(tokens.front(), "Bearer aad-1");
  EXPECT_EQ(tokens.back(), "Bearer aad-2");
}

TEST_F(AzureTierTest, PutBlobIsAConditionalCreateWithContentMd5AndTheMetadata) {
  auto tier = make();
  const auto key = make_key(4);
  const std::string bytes = random_bytes(70'000, 4);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  EXPECT_EQ(blobs_.object(k_container, blob_name(key))->metadata, metadata(bytes));
  // Another VM's second create: 409 BlobAlreadyExists, which is success (already_present); the blob stays.
  const std::string etag = blobs_.object(k_container, blob_name(key))->etag;
  auto again = install(*tier, key, random_bytes(70'000, 5));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, InstallOutcome::already_present);
  EXPECT_EQ(blobs_.object(k_container, blob_name(key))->etag, etag);
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read && *read);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ((*read)->sha256, sha256_of(bytes));
  EXPECT_EQ((*read)->size, Bytes{bytes.size()});
}

// Azure's error bodies are worded, keeping the code, never pasted as XML (nor its RequestId and Time lines).
// `cache check` without credentials fails at its credentials step, as S3's and GCS's do (issue 16: it said "ok
// credentials: bearer tokens ... (DefaultAzureCredential)", then "FAIL put: no Azure credentials found"), and sends
// nothing to the container.
TEST_F(AzureTierTest, CheckWithoutCredentialsFailsAtTheCredentialsStep) {
  env_.unset("AZURE_CLIENT_SECRET");  // every link of the chain now comes up empty (IMDS at a closed port)
  auto tier = make();
  const CheckReport report = tier->check();
  ASSERT_EQ(report.steps.size(), 1u) << report.steps.back().name << ": " << report.steps.back().detail;
  EXPECT_EQ(report.steps[0].name, "credentials");
  EXPECT_FALSE(report.steps[0].ok);
  EXPECT_NE(report.steps[0].detail.find("no Azure credentials found"), std::string::npos) << report.steps[0].detail;
  EXPECT_FALSE(report.writable);
  EXPECT_TRUE(blobs_.requests().empty()) << "a request reached the container without credentials";
}

TEST_F(AzureTierTest, CheckObtainsATokenAtItsCredentialsStepAndNamesWhereItCameFrom) {
  auto tier = make();
  const CheckReport report = tier->check();
  ASSERT_FALSE(report.steps.empty());
  EXPECT_EQ(report.steps[0].name, "credentials");
  EXPECT_TRUE(report.steps[0].ok) << report.steps[0].detail;
  EXPECT_NE(report.steps[0].detail.find("bearer tokens"), std::string::npos) << report.steps[0].detail;
  EXPECT_NE(report.steps[0].detail.find("from "), std::string::npos) << report.steps[0].detail;
}

TEST(AzureErrorWords, KnownCodesSayWhatToDoAndKeepTheCode) {
  auto body = [](const std::string& code, const std::string& message) {
    return "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>" + code + "</Code><Message>" + message +
           "\nRequestId:3e1f5a4e-301e-0005-4c5c-5d1ab4000000\nTime:2026-12-02T22:00:00.0000000Z</Message></Error>";
  };
  EXPECT_EQ(describe_azure_error(404, body("ContainerNotFound", "The specified container does not exist.")),
            "the container does not exist (Azure ContainerNotFound: The specified container does not exist.); check "
            "container_url, or create the container");
  const std::string auth = describe_azure_error(403, body("AuthenticationFailed", "Server failed to authenticate."));
  EXPECT_THAT(auth,
              ::testing::StartsWith("the service refused the request's authentication (Azure "
                                    "AuthenticationFailed: Server failed to authenticate.); check the account key"));
  const std::string denied = describe_azure_error(403, body("AuthorizationPermissionMismatch", "Not allowed."));
  EXPECT_THAT(denied, ::testing::StartsWith("access denied (Azure AuthorizationPermissionMismatch: Not allowed.)"));
  EXPECT_THAT(denied, ::testing::HasSubstr("Storage Blob Data Contributor"));
  for (const std::string& text : {auth, denied}) {
    EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("RequestId")));
    EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("<")));
  }
  EXPECT_EQ(describe_azure_error(503, body("ServerBusy", "Ingress is over the account limit.")),
            "Azure ServerBusy: Ingress is over the account limit.");
  EXPECT_EQ(describe_azure_error(502, "Bad Gateway"), "");
}

// A page of List Blobs as Azure Blob Storage sends it (the shape of the service's documented response, as Azurite
// also writes it): the time is the blob's Last-Modified, an RFC 1123 date.
TEST(AzureBlobList, ReadsNameSizeAndLastModifiedOfARealPage) {
  const std::string body = R"(<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="https://datavoeastus.blob.core.windows.net/" ContainerName="shards">
  <Prefix>team-a/</Prefix>
  <MaxResults>5000</MaxResults>
  <Blobs>
    <Blob>
      <Name>team-a/local/aaaa.tar</Name>
      <Properties>
        <Creation-Time>Tue, 01 Dec 2026 08:00:00 GMT</Creation-Time>
        <Last-Modified>Wed, 02 Dec 2026 09:30:15 GMT</Last-Modified>
        <Etag>0x8DCF2A1B2C3D4E5</Etag>
        <Content-Length>1048576</Content-Length>
        <Content-Type>application/x-tar</Content-Type>
        <Content-Encoding />
        <Content-Language />
        <Content-CRC64 />
        <Content-MD5>1B2M2Y8AsgTpgAmY7PhCfg==</Content-MD5>
        <Cache-Control />
        <Content-Disposition />
        <BlobType>BlockBlob</BlobType>
        <AccessTier>Hot</AccessTier>
        <AccessTierInferred>true</AccessTierInferred>
        <LeaseStatus>unlocked</LeaseStatus>
        <LeaseState>available</LeaseState>
        <ServerEncrypted>true</ServerEncrypted>
      </Properties>
      <Metadata><datavo_sha256>abc</datavo_sha256></Metadata>
      <OrMetadata />
    </Blob>
    <Blob>
      <Name>team-a/local/bbbb.tar</Name>
      <Properties>
        <Last-Modified>Thu, 03 Dec 2026 00:00:01 GMT</Last-Modified>
        <Content-Length>7</Content-Length>
        <BlobType>BlockBlob</BlobType>
      </Properties>
    </Blob>
  </Blobs>
  <NextMarker>2!88!MDAwMDE3IXRlYW0tYS9sb2NhbC9iYmJiLnRhciEwMDAwMjghOTk5OS0xMi0zMVQyMzo1OTo1OS45OTk5OTk5Wi</NextMarker>
</EnumerationResults>)";
  auto page = parse_blob_list(body, "https://datavoeastus.blob.core.windows.net/shards");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->blobs.size(), 2u);
  EXPECT_EQ(page->blobs[0].name, "team-a/local/aaaa.tar");
  EXPECT_EQ(page->blobs[0].size, Bytes{1048576});
  EXPECT_EQ(page->blobs[0].last_modified, std::chrono::sys_days{std::chrono::year{2026} / 12 / 2} + 9h + 30min + 15s);
  EXPECT_EQ(page->blobs[1].last_modified, std::chrono::sys_days{std::chrono::year{2026} / 12 / 3} + 1s);
  EXPECT_EQ(page->next_marker.substr(0, 6), "2!88!M");
}

TEST(AzureBlobList, TheLastPageHasAnEmptyMarkerAndABadDateIsNamed) {
  auto last = parse_blob_list(
      R"(<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs /><NextMarker /></EnumerationResults>)", "c");
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_TRUE(last->blobs.empty());
  EXPECT_EQ(last->next_marker, "");
  auto bad = parse_blob_list(
      "<EnumerationResults><Blobs><Blob><Name>x.tar</Name><Properties><Last-Modified>yesterday</Last-Modified>"
      "<Content-Length>1</Content-Length></Properties></Blob></Blobs><NextMarker/></EnumerationResults>",
      "https://a.blob.core.windows.net/c");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::remote);
  EXPECT_EQ(bad.error().message,
            "List Blobs of https://a.blob.core.windows.net/c: blob 'x.tar' has no readable Last-Modified");
}

}  // namespace
}  // namespace datavo::azure
