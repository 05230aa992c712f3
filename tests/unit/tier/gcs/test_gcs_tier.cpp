// Tests of the GCS request builder (src/tier/gcs/gcs_tier.cpp, through the remote-tier layer) against the GCS front
// end of the fake object store (tests/support/fake_cloud/fake_cloud.hpp): the paths the firebase-tools emulator of
// the e2e suites cannot exercise (it ignores preconditions, finalizes a resumable upload at its first chunk, has no
// auth, auto-creates buckets):
//   - chunked resumable uploads in order, a chunk the server persisted only in part continued from the offset it
//     reports (a 308 short of the chunk's end, and a 503 after which the session is asked how far it got), never
//     from byte 0; a failed upload cancels its session;
//   - ifGenerationMatch=0 on every create (412: already_present, at the initiation and at the finalization of a
//     resumable upload); a range answered with another generation by a server that ignores the pin;
//   - userProject only when the tier has a project; md5Hash checked for objects without datavo metadata, crc32c
//     for composite objects; the crc32c of uploads refused when it lies;
//   - bearer tokens: refreshed ahead of expiry, and after a 401 mid-upload with only that chunk sent again;
//   - STORAGE_EMULATOR_HOST: no credentials at all.
// What every cloud backend does alike (pins that fail, a missing bucket, list pages, a damaged upload, `cache check`)
// is tested for GCS too, in tests/unit/tier/cloud/test_blob_tier.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "support/fake_cloud/fake_cloud.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/checksums.hpp"
#include "tier/gcs/gcs_tier.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"
#include "unit/tier/credential_test_support.hpp"
#include "util/base64.hpp"

namespace datavo::gcs {
namespace {

using namespace std::chrono_literals;
using fakecloud::FakeCloud;
using fakecloud::SeenRequest;
using PartFailure = fakecloud::ObjectStore::PartFailure;
using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace shardtest;

constexpr const char* k_bucket = "datavo-test-bucket";
constexpr std::uint64_t k_part = 5 * 1024 * 1024;  // the tests' part_size: 20 chunks of 256 KiB

using MemorySink = PositionalMemorySink;

std::map<std::string, std::string> datavo_metadata(const std::string& bytes) {
  return {{"datavo-sha256", sha256_of(bytes).hex()}, {"datavo-size", std::to_string(bytes.size())}};
}
// What install_copy records: datavo_metadata and the chunk digests.
std::map<std::string, std::string> installed_metadata(const std::string& bytes) {
  auto metadata = datavo_metadata(bytes);
  metadata["datavo-chunks"] = fakecloud::chunks_value_of(bytes);
  return metadata;
}

std::vector<SeenRequest> matching(const std::vector<SeenRequest>& all,
                                  const std::function<bool(const SeenRequest&)>& f) {
  std::vector<SeenRequest> out;
  for (const auto& request : all)
    if (f(request)) out.push_back(request);
  return out;
}
bool is_chunk(const SeenRequest& r) { return r.chunk_start() >= 0; }
bool is_media(const SeenRequest& r) { return r.method == "GET" && r.param("alt") == "media"; }

struct TierSetup {
  std::optional<std::string> project = std::nullopt;
  bool single_flight = true;
  int max_attempts = 3;
  std::size_t concurrency = 4;
  bool emulator_host = true;  // STORAGE_EMULATOR_HOST instead of endpoint_url: no credentials
  Bytes part_size{k_part};
};

class GcsTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gcs_.add_bucket(k_bucket);
    std::filesystem::create_directories(dir_.sub("home"));
    env_.set_home(dir_.sub("home"));
    // No test may reach a real metadata server.
    env_.set("GCE_METADATA_HOST", "127.0.0.1:" + std::to_string(credtest::closed_port()));
  }

  std::shared_ptr<Tier> make(const TierSetup& setup = {}) {
    GcsTierOptions options;
    options.bucket = k_bucket;
    options.project = setup.project;
    options.remote.name = "gcs";
    options.remote.part_size = setup.part_size;
    options.remote.concurrency = setup.concurrency;
    options.remote.single_flight = setup.single_flight;
    options.remote.transport.connect_timeout = Milliseconds{2'000};
    options.remote.transport.stall_timeout = Seconds{10};
    options.remote.transport.max_attempts = setup.max_attempts;
    options.remote.transport.initial_backoff = Milliseconds{5};
    options.remote.transport.max_backoff = Milliseconds{20};
    // These tests count requests exactly; hedging (on by default, test_hedge.cpp) would add one to a range that a
    // loaded machine (TSan) leaves silent past the deadline.
    options.remote.hedge.mode = Hedging::off;
    if (setup.emulator_host) {
      env_.set("STORAGE_EMULATOR_HOST", gcs_.url());
    } else {
      env_.unset("STORAGE_EMULATOR_HOST");
      options.endpoint_url = gcs_.url();
    }
    auto tier = make_gcs_tier_with_env(std::move(options), env_.env());
    if (!tier) throw std::runtime_error(tier.error().message);
    return *tier;
  }

  // An authorized-user ADC file whose refresh-token grant is the fake's /token.
  void use_authorized_user() {
    const std::string path = dir_.sub("adc.json");
    credtest::write_text(path, json{{"type", "authorized_user"},
                                    {"client_id", "client-1.apps.googleusercontent.com"},
                                    {"client_secret", "client-secret-9"},
                                    {"refresh_token", "1//refresh-9"},
                                    {"token_uri", gcs_.url() + "/token"}}
                                   .dump());
    env_.set("GOOGLE_APPLICATION_CREDENTIALS", path);
    gcs_.require_token(true);
  }

  // install_copy() of `bytes` under `key`, from a file as the hierarchy hands it over.
  Result<InstallOutcome> install(Tier& tier, const ShardKey& key, const std::string& bytes) {
    const std::string path = dir_.sub("source-" + std::to_string(++sources_));
    ShardHandle handle = handle_on_new_file(path, bytes);
    return tier.install_copy(key, handle, sha256_of(bytes));
  }

  std::string object_name(const ShardKey& key) const { return key.instance.name() + "/" + key.hash.hex() + ".tar"; }

  FakeCloud gcs_{fakecloud::Dialect::gcs};
  TempDir dir_;
  credtest::FakeEnvironment env_;
  int sources_ = 0;
};

TEST_F(GcsTierTest, ASmallObjectIsOneMultipartUploadWithMetadataMd5AndTheConditionalCreate) {
  auto tier = make();
  const auto key = make_key(1);
  const std::string bytes = random_bytes(100'000, 1);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);

  const auto requests = gcs_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].param("uploadType"), "multipart");
  EXPECT_EQ(requests[0].param("ifGenerationMatch"), "0");
  EXPECT_EQ(requests[0].header("Authorization"), "") << "STORAGE_EMULATOR_HOST means no credentials";
  auto stored = gcs_.object(k_bucket, object_name(key));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, installed_metadata(bytes)) << "datavo-sha256 and datavo-size in the object's metadata";
}

TEST_F(GcsTierTest, ACreateOfAnExistingObjectIsRefusedWith412AndCountsAsAlreadyPresent) {
  auto tier = make();
  const auto key = make_key(2);
  const std::string first = random_bytes(50'000, 2);
  gcs_.put_object(k_bucket, object_name(key), first, datavo_metadata(first));
  const auto generation = gcs_.object(k_bucket, object_name(key))->generation;

  auto small = install(*tier, key, random_bytes(60'000, 3));
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ(*small, InstallOutcome::already_present);
  // A resumable upload is refused at its initiation already, before any byte is sent.
  gcs_.clear_requests();
  auto large = install(*tier, key, random_bytes(k_part + 1, 4));
  ASSERT_TRUE(large) << large.error().message;
  EXPECT_EQ(*large, InstallOutcome::already_present);
  const auto requests = gcs_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].param("uploadType"), "resumable");
  EXPECT_EQ(requests[0].param("ifGenerationMatch"), "0");
  EXPECT_EQ(requests[0].status, 412);
  EXPECT_EQ(gcs_.object(k_bucket, object_name(key))->generation, generation) << "the object was not replaced";
}

TEST_F(GcsTierTest, AnObjectCreatedByAnotherVmBeforeTheLastChunkIsAlreadyPresentAtTheFinalization) {
  auto tier = make();
  const auto key = make_key(3);
  const std::string bytes = random_bytes(2 * k_part + 1000, 5);
  const std::string other = random_bytes(2 * k_part + 1000, 6);
  // While the first chunk is on its way, another VM's upload of the same shard completes.
  gcs_.on_request([&](const SeenRequest& r) {
    if (r.chunk_start() == 0) gcs_.put_object(k_bucket, object_name(key), other, datavo_metadata(other));
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::already_present);
  EXPECT_EQ(gcs_.object(k_bucket, object_name(key))->bytes, other) << "the first VM's object stays";
}

// Above 8 MiB an upload is resumable even when part_size covers it, and then goes in one PUT of the whole object
// (what Google's clients do without a chunk size). That PUT has no Content-Type: the session's initiation gave it.
TEST_F(GcsTierTest, AnObjectAbove8MiBThatPartSizeCoversIsOneResumableSessionAndOnePutOfAllOfIt) {
  TierSetup setup;
  setup.part_size = MiB(32);
  auto tier = make(setup);

  const auto small = make_key(40);
  const std::string eight = random_bytes(8u << 20, 40);
  auto installed = install(*tier, small, eight);
  ASSERT_TRUE(installed) << installed.error().message;
  auto requests = gcs_.requests();
  ASSERT_EQ(requests.size(), 1u) << "8 MiB exactly is still one multipart request";
  EXPECT_EQ(requests[0].param("uploadType"), "multipart");

  gcs_.clear_requests();
  const auto large = make_key(41);
  const std::string bytes = random_bytes((9u << 20) + 1001, 41);
  installed = install(*tier, large, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  requests = gcs_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].param("uploadType"), "resumable");
  EXPECT_EQ(requests[0].param("ifGenerationMatch"), "0");
  EXPECT_EQ(requests[1].method, "PUT");
  EXPECT_EQ(requests[1].header("Content-Range"),
            "bytes 0-" + std::to_string(bytes.size() - 1) + "/" + std::to_string(bytes.size()));
  EXPECT_EQ(requests[1].body_bytes, bytes.size());
  EXPECT_EQ(requests[1].header("Content-Type"), "")
      << "a body parser that a Content-Type triggers would buffer the object";
  EXPECT_EQ(requests[1].status, 200);
  auto stored = gcs_.object(k_bucket, object_name(large));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, installed_metadata(bytes));
}

TEST_F(GcsTierTest, ALargeObjectIsAChunkedResumableUploadInOrder) {
  auto tier = make();
  const auto key = make_key(4);
  const std::string bytes = random_bytes(2 * k_part + 123'457, 7);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);

  const auto requests = gcs_.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].param("uploadType"), "resumable");
  EXPECT_EQ(requests[0].param("ifGenerationMatch"), "0");
  const std::string total = "/" + std::to_string(bytes.size());
  EXPECT_EQ(requests[1].header("Content-Range"), "bytes 0-" + std::to_string(k_part - 1) + total);
  EXPECT_EQ(requests[1].status, 308);
  EXPECT_EQ(requests[2].header("Content-Range"),
            "bytes " + std::to_string(k_part) + "-" + std::to_string(2 * k_part - 1) + total);
  EXPECT_EQ(requests[3].header("Content-Range"),
            "bytes " + std::to_string(2 * k_part) + "-" + std::to_string(bytes.size() - 1) + total);
  EXPECT_EQ(requests[3].status, 200);
  auto stored = gcs_.object(k_bucket, object_name(key));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->bytes, bytes);
  EXPECT_EQ(stored->metadata, installed_metadata(bytes)) << "the metadata goes with the session's initiation";

  // And it reads back, in parallel ranges pinned to its generation.
  gcs_.clear_requests();
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ((*read)->sha256, sha256_of(bytes));
  const auto ranges = matching(gcs_.requests(), is_media);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_FALSE(ranges[0].has("ifGenerationMatch")) << "the first range finds the generation";
  for (std::size_t i = 1; i < ranges.size(); ++i)
    EXPECT_EQ(ranges[i].param("ifGenerationMatch"), std::to_string(stored->generation));
}

TEST_F(GcsTierTest, AChunkThatTheServerPersistedInPartIsContinuedFromTheOffsetIn308sRange) {
  auto tier = make();
  const auto key = make_key(5);
  const std::string bytes = random_bytes(2 * k_part + 5000, 8);
  gcs_.persist_half_of_chunk(1, PartFailure::none);  // the first chunk: 308 with "Range: bytes=0-2621439"
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(gcs_.object(k_bucket, object_name(key))->bytes, bytes);

  const auto chunks = matching(gcs_.requests(), is_chunk);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].chunk_start(), 0);
  EXPECT_EQ(chunks[1].chunk_start(), long(k_part / 2)) << "continued from the offset the server reported";
  EXPECT_EQ(chunks[1].header("Content-Range"), "bytes " + std::to_string(k_part / 2) + "-" +
                                                   std::to_string(k_part - 1) + "/" + std::to_string(bytes.size()));
  EXPECT_EQ(chunks[2].chunk_start(), long(k_part));
  EXPECT_EQ(chunks[3].chunk_start(), long(2 * k_part));
  std::size_t sent = 0;
  for (const auto& chunk : chunks) sent += chunk.body_bytes;
  EXPECT_EQ(sent, bytes.size() + k_part / 2) << "only the half the server did not keep was sent again";
}

TEST_F(GcsTierTest, AFailureMidChunkIsResumedFromTheOffsetTheSessionReportsNotFromByteZero) {
  // One attempt per request: the backend, not the transport's retry of the same chunk, must resume.
  auto tier = make({.max_attempts = 1});
  const auto key = make_key(6);
  const std::string bytes = random_bytes(3 * k_part + 777, 9);
  gcs_.persist_half_of_chunk(2, PartFailure::unavailable);  // the second chunk: half persisted, then 503
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  EXPECT_EQ(gcs_.object(k_bucket, object_name(key))->bytes, bytes);

  const auto requests = gcs_.requests();
  std::vector<std::string> puts;
  for (const auto& r : requests)
    if (r.method == "PUT") puts.push_back(r.header("Content-Range") + " -> " + std::to_string(r.status));
  const std::string total = "/" + std::to_string(bytes.size());
  const std::string resumed_at = std::to_string(k_part + k_part / 2);
  EXPECT_THAT(puts,
              ::testing::ElementsAre(
                  "bytes 0-" + std::to_string(k_part - 1) + total + " -> 308",
                  "bytes " + std::to_string(k_part) + "-" + std::to_string(2 * k_part - 1) + total + " -> 503",
                  "bytes */" + std::to_string(bytes.size()) + " -> 308",
                  "bytes " + resumed_at + "-" + std::to_string(2 * k_part - 1) + total + " -> 308",
                  "bytes " + std::to_string(2 * k_part) + "-" + std::to_string(3 * k_part - 1) + total + " -> 308",
                  "bytes " + std::to_string(3 * k_part) + "-" + std::to_string(bytes.size() - 1) + total + " -> 200"));
  EXPECT_EQ(matching(requests, [](const SeenRequest& r) { return r.chunk_start() == 0; }).size(), 1u)
      << "nothing was sent again from byte 0";
}

TEST_F(GcsTierTest, AFailedResumableUploadCancelsItsSessionAndStoresNothing) {
  auto tier = make();
  const auto key = make_key(7);
  gcs_.refuse_parts_from(2);  // 403 for every chunk after the first
  auto installed = install(*tier, key, random_bytes(2 * k_part + 1, 10));
  ASSERT_FALSE(installed);
  EXPECT_EQ(installed.error().code, ErrorCode::permission_denied) << installed.error().message;
  EXPECT_FALSE(gcs_.object(k_bucket, object_name(key)));
  EXPECT_EQ(gcs_.open_uploads(), 0) << "the session was cancelled";
  const auto refused = matching(gcs_.requests(), [](const SeenRequest& r) { return r.status == 403; });
  EXPECT_EQ(refused.size(), 1u) << "a refusal is not a failure worth resuming after";
  EXPECT_EQ(matching(gcs_.requests(), [](const SeenRequest& r) { return r.method == "DELETE"; }).size(), 1u);
}

TEST_F(GcsTierTest, WithoutMetadataInMediaResponsesAReadInRangesDescribesTheObjectOnceNotOncePerRange) {
  // The emulator's media responses carry no x-goog-meta-*: the tier asks for the object resource, once per read
  // (docs/BENCHMARKS-cloud.md found 32 requests for a 256 MiB object when it asked after every range).
  gcs_.set_metadata_in_reads(false);
  auto tier = make();
  const auto key = make_key(21);
  const std::string bytes = random_bytes(5 * k_part + 3, 21);
  gcs_.put_object(k_bucket, object_name(key), bytes, datavo_metadata(bytes));
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ((*read)->sha256, sha256_of(bytes));
  const auto requests = gcs_.requests();
  EXPECT_EQ(matching(requests, is_media).size(), 6u);
  EXPECT_EQ(matching(requests, [](const SeenRequest& r) { return r.method == "GET" && !is_media(r); }).size(), 1u)
      << "one object resource per read";
}

// A server that ignores ifGenerationMatch (the firebase Storage emulator, found by the conformance suite) serves
// the new generation to a pinned range: its x-goog-generation gives it away, and the read starts over. The later
// ranges read no object resource: the first answer brought the metadata.
TEST_F(GcsTierTest, ARangeAnsweredWithAnotherGenerationByAServerIgnoringThePinIsAConflictAndReadOnceMore) {
  gcs_.set_ignore_preconditions(true);
  auto tier = make();
  const auto key = make_key(18);
  const std::string old_bytes = random_bytes(3 * k_part + 10, 21);
  const std::string new_bytes = random_bytes(3 * k_part + 20, 22);
  gcs_.put_object(k_bucket, object_name(key), old_bytes, datavo_metadata(old_bytes));
  std::atomic<bool> replaced{false};
  gcs_.on_request([&](const SeenRequest& r) {
    if (is_media(r) && r.has("ifGenerationMatch") && !replaced.exchange(true))
      gcs_.put_object(k_bucket, object_name(key), new_bytes, datavo_metadata(new_bytes));
  });
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), new_bytes) << "read again from the start: no mix of two generations";
  EXPECT_EQ((*read)->sha256, sha256_of(new_bytes));
  const auto first_ranges =
      matching(gcs_.requests(), [](const SeenRequest& r) { return is_media(r) && !r.has("ifGenerationMatch"); });
  EXPECT_EQ(first_ranges.size(), 2u) << "read once more";
  const auto resources = matching(gcs_.requests(), [](const SeenRequest& r) {
    return r.method == "GET" && !is_media(r) && r.path.find("/o/") != std::string::npos;
  });
  EXPECT_EQ(resources.size(), first_ranges.size()) << "the object resource is read after each first range only";
}

TEST_F(GcsTierTest, UserProjectIsSentWithEveryJsonApiRequestOnlyWhenTheProjectIsSet) {
  for (const bool with_project : {false, true}) {
    SCOPED_TRACE(with_project ? "project: datavo-prod" : "no project");
    gcs_.clear_requests();
    TierSetup setup;
    if (with_project) setup.project = "datavo-prod";
    auto tier = make(setup);
    const auto small = make_key(with_project ? 20 : 10);
    const auto large = make_key(with_project ? 21 : 11);
    ASSERT_TRUE(install(*tier, small, random_bytes(1000, 14)));
    ASSERT_TRUE(install(*tier, large, random_bytes(k_part + 1, 15)));
    MemorySink sink;
    ASSERT_TRUE(tier->read_into(large, sink));
    ASSERT_TRUE(tier->contains(small));
    ASSERT_TRUE(tier->list());
    ASSERT_TRUE(tier->remove(small));
    int api_requests = 0;
    for (const auto& r : gcs_.requests()) {
      if (r.has("upload_id")) continue;  // a resumable session's URI is the server's, used as it is given
      ++api_requests;
      if (with_project)
        EXPECT_EQ(r.param("userProject"), "datavo-prod") << r.method << " " << r.path;
      else
        EXPECT_FALSE(r.has("userProject")) << r.method << " " << r.path;
    }
    EXPECT_GE(api_requests, 7);
  }
}

TEST_F(GcsTierTest, AnObjectWithoutDatavoMetadataIsCheckedAgainstItsMd5Hash) {
  auto tier = make();
  const std::string bytes = random_bytes(300'000, 16);
  // Another tool's object, without datavo-sha256: its md5Hash is all there is to check the bytes against.
  const auto good = make_key(40);
  gcs_.put_object(k_bucket, object_name(good), bytes);
  MemorySink sink;
  auto read = tier->read_into(good, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_FALSE((*read)->sha256);

  // The same object whose stored bytes no longer match the md5Hash GCS recorded: refused, not a hit.
  const auto bad = make_key(41);
  gcs_.put_object(k_bucket, object_name(bad), bytes, {},
                  util::base64_encode(cloud::md5_of(bytes + "the bytes it was written with")));
  MemorySink bad_sink;
  auto refused = tier->read_into(bad, bad_sink);
  ASSERT_FALSE(refused) << "a hit of bytes that do not match md5Hash";
  EXPECT_EQ(refused.error().code, ErrorCode::integrity) << refused.error().message;
}

TEST_F(GcsTierTest, AMultipartUploadCarriesTheCrc32cOfItsBytes) {
  auto tier = make();
  const auto key = make_key(44);
  const std::string bytes = random_bytes(20'000, 44);
  ASSERT_TRUE(install(*tier, key, bytes));
  const auto sent = gcs_.object(k_bucket, object_name(key))->client_checksums;
  ASSERT_TRUE(sent.contains("crc32c")) << ::testing::PrintToString(sent);
  EXPECT_EQ(sent.at("crc32c"), cloud::crc32c_base64(cloud::crc32c_extend(0, bytes.data(), bytes.size())));
  EXPECT_TRUE(sent.contains("md5"));
}

// The request that completes a resumable upload says the object's CRC-32C (X-Goog-Hash): GCS refuses to finalise
// an object whose bytes were damaged on the way, and nothing is stored.
TEST_F(GcsTierTest, AResumableUploadWhoseBytesArriveDamagedIsRefusedThroughItsCrc32c) {
  auto tier = make();
  const auto key = make_key(45);
  const std::string bytes = random_bytes(2 * k_part + 777, 45);
  ASSERT_TRUE(install(*tier, make_key(46), bytes)) << "undamaged, the same upload goes through";
  auto chunks = matching(gcs_.requests(), [](const SeenRequest& r) { return r.chunk_start() >= 0; });
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].header("X-Goog-Hash"), "") << "only the request that completes the object carries it";
  EXPECT_EQ(chunks[2].header("X-Goog-Hash"),
            "crc32c=" + cloud::crc32c_base64(cloud::crc32c_extend(0, bytes.data(), bytes.size())));

  gcs_.clear_requests();
  gcs_.corrupt_next_upload();  // a byte of the first chunk flipped on its way in
  auto installed = install(*tier, key, bytes);
  ASSERT_FALSE(installed) << "a damaged upload was accepted";
  EXPECT_EQ(matching(gcs_.requests(), [](const SeenRequest& r) { return r.status == 400; }).size(), 1u);
  EXPECT_FALSE(gcs_.object(k_bucket, object_name(key))) << "nothing stored";
}

// An object another tool wrote as a composite (no md5Hash, no datavo-sha256) is checked against its crc32c.
TEST_F(GcsTierTest, AnObjectWithOnlyACrc32cIsCheckedAgainstIt) {
  auto tier = make();
  const std::string bytes = random_bytes(30'000, 47);
  const auto good = make_key(47);
  gcs_.put_composite_object(k_bucket, object_name(good), bytes,
                            cloud::crc32c_base64(cloud::crc32c_extend(0, bytes.data(), bytes.size())));
  MemorySink sink;
  auto read = tier->read_into(good, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), bytes);

  const auto bad = make_key(48);
  const std::string other = bytes + "x";
  gcs_.put_composite_object(k_bucket, object_name(bad), bytes,
                            cloud::crc32c_base64(cloud::crc32c_extend(0, other.data(), other.size())));
  MemorySink bad_sink;
  auto refused = tier->read_into(bad, bad_sink);
  ASSERT_FALSE(refused) << "a hit of bytes that do not match crc32c";
  EXPECT_EQ(refused.error().code, ErrorCode::integrity) << refused.error().message;
  EXPECT_NE(refused.error().message.find("crc32c"), std::string::npos) << refused.error().message;
}

TEST_F(GcsTierTest, ABearerTokenRefusedMidUploadIsRefreshedAndOnlyThatChunkIsSentAgain) {
  use_authorized_user();
  auto tier = make({.emulator_host = false});
  const auto key = make_key(60);
  const std::string bytes = random_bytes(3 * k_part + 99, 18);
  // The token stops working after the first chunk (revoked, or expired early on the server's clock).
  gcs_.on_request([&](const SeenRequest& r) {
    if (r.chunk_start() == long(k_part) && gcs_.tokens_issued() == 1) gcs_.revoke_tokens();
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(gcs_.object(k_bucket, object_name(key))->bytes, bytes);
  EXPECT_EQ(gcs_.tokens_issued(), 2);

  std::vector<std::string> chunks;
  for (const auto& r : matching(gcs_.requests(), is_chunk))
    chunks.push_back(std::to_string(r.chunk_start()) + " " + std::to_string(r.status) + " " +
                     r.header("Authorization"));
  EXPECT_THAT(chunks,
              ::testing::ElementsAre("0 308 Bearer ya29.fake-1", std::to_string(k_part) + " 401 Bearer ya29.fake-1",
                                     std::to_string(k_part) + " 308 Bearer ya29.fake-2",
                                     std::to_string(2 * k_part) + " 308 Bearer ya29.fake-2",
                                     std::to_string(3 * k_part) + " 200 Bearer ya29.fake-2"));
}

TEST_F(GcsTierTest, AShortLivedTokenIsRefreshedAheadOfItsExpiryBetweenChunks) {
  use_authorized_user();
  gcs_.set_token_lifetime(60s);
  auto tier = make({.emulator_host = false});
  const auto key = make_key(61);
  const std::string bytes = random_bytes(2 * k_part + 1, 19);
  // 50 s pass during the first chunk: less than half of the token's minute is left, so the next request takes a
  // fresh token before the old one could be refused.
  gcs_.on_request([&](const SeenRequest& r) {
    if (r.chunk_start() == 0) env_.advance(50s);
  });
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(gcs_.tokens_issued(), 2);
  const auto chunks = matching(gcs_.requests(), is_chunk);
  ASSERT_EQ(chunks.size(), 3u) << "no chunk was refused or sent twice";
  EXPECT_EQ(chunks[0].header("Authorization"), "Bearer ya29.fake-1");
  EXPECT_EQ(chunks[1].header("Authorization"), "Bearer ya29.fake-2");
  for (const auto& r : gcs_.requests()) EXPECT_NE(r.status, 401);
}

// GCS's JSON error bodies are worded from error.message, keeping the code, never pasted as JSON.
TEST(GcsErrorWords, KnownStatusesSayWhatToDoAndKeepTheCode) {
  auto body = [](int code, const std::string& message) {
    return nlohmann::json{{"error",
                           {{"code", code},
                            {"message", message},
                            {"errors", {{{"message", message}, {"domain", "global"}, {"reason", "x"}}}}}}}
        .dump();
  };
  EXPECT_EQ(describe_gcs_error(404, body(404, "The specified bucket does not exist.")),
            "the bucket does not exist (GCS 404: The specified bucket does not exist.); check the tier's bucket and "
            "endpoint_url");
  EXPECT_THAT(describe_gcs_error(401, body(401, "Invalid Credentials")),
              ::testing::StartsWith("the service refused the credentials (GCS 401: Invalid Credentials); check "
                                    "GOOGLE_APPLICATION_CREDENTIALS"));
  EXPECT_THAT(describe_gcs_error(403, body(403, "x@y.iam.gserviceaccount.com does not have storage.objects.get")),
              ::testing::StartsWith("access denied (GCS 403: x@y.iam.gserviceaccount.com does not have "
                                    "storage.objects.get); the account in use needs roles/storage.objectAdmin"));
  EXPECT_EQ(describe_gcs_error(404, body(404, "No such object: b/o")), "GCS 404: No such object: b/o");
  EXPECT_THAT(describe_gcs_error(429, body(429, "rate")), ::testing::Not(HasSubstr("{")));
  EXPECT_EQ(describe_gcs_error(502, "<html>Bad Gateway</html>"), "");
  EXPECT_EQ(describe_gcs_error(500, "{\"error\": \"text\"}"), "");
}

// A page of objects.list as the JSON API sends it (the shape of its documented response, which fake-gcs-server also
// writes): the time is the item's `updated`, RFC 3339 with a fraction.
TEST(GcsObjectList, ReadsNameSizeAndUpdatedOfARealPage) {
  const std::string body = R"({
  "kind": "storage#objects",
  "nextPageToken": "CgV0ZWFtLWEvbG9jYWwvYmJiYi50YXI=",
  "items": [
    {
      "kind": "storage#object",
      "id": "datavo-b/team-a/local/aaaa.tar/1733131815123456",
      "selfLink": "https://www.googleapis.com/storage/v1/b/datavo-b/o/team-a%2Flocal%2Faaaa.tar",
      "mediaLink": "https://storage.googleapis.com/download/storage/v1/b/datavo-b/o/team-a%2Flocal%2Faaaa.tar?generation=1733131815123456&alt=media",
      "name": "team-a/local/aaaa.tar",
      "bucket": "datavo-b",
      "generation": "1733131815123456",
      "metageneration": "1",
      "contentType": "application/x-tar",
      "storageClass": "STANDARD",
      "size": "1048576",
      "md5Hash": "1B2M2Y8AsgTpgAmY7PhCfg==",
      "crc32c": "AAAAAA==",
      "etag": "CMDy7Y2Q4okDEAE=",
      "timeCreated": "2026-12-02T09:30:15.123Z",
      "updated": "2026-12-02T09:30:15.123Z",
      "timeStorageClassUpdated": "2026-12-02T09:30:15.123Z",
      "metadata": {"datavo-sha256": "abc"}
    },
    {"kind": "storage#object", "name": "team-a/local/bbbb.tar", "size": "7", "updated": "2026-12-03T01:00:01+01:00"}
  ]
})";
  auto page = parse_object_list(body, "gs://datavo-b/team-a");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].name, "team-a/local/aaaa.tar");
  EXPECT_EQ(page->objects[0].size, Bytes{1048576});
  EXPECT_EQ(page->objects[0].last_modified, std::chrono::sys_days{std::chrono::year{2026} / 12 / 2} +
                                                std::chrono::hours{9} + std::chrono::minutes{30} +
                                                std::chrono::seconds{15});
  EXPECT_EQ(page->objects[1].last_modified,
            std::chrono::sys_days{std::chrono::year{2026} / 12 / 3} + std::chrono::seconds{1});
  EXPECT_EQ(page->next_page_token, "CgV0ZWFtLWEvbG9jYWwvYmJiYi50YXI=");
}

TEST(GcsObjectList, TheLastPageHasNoTokenAndAMissingTimeIsNamed) {
  auto last = parse_object_list(R"({"kind": "storage#objects"})", "gs://b");
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_TRUE(last->objects.empty());
  EXPECT_EQ(last->next_page_token, std::nullopt);
  auto bad = parse_object_list(R"({"items": [{"name": "x.tar", "size": "1"}]})", "gs://b");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::remote);
  EXPECT_EQ(bad.error().message, "listing of gs://b: object 'x.tar' has no readable updated time");
  auto not_json = parse_object_list("<html>", "gs://b");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.error().message, "listing of gs://b: not JSON");
}

}  // namespace
}  // namespace datavo::gcs
