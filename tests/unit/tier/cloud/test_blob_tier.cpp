// Tests of src/tier/cloud/blob_tier.cpp, the layer the three cloud backends share, run for each backend (S3 signed
// with SigV4, GCS without credentials, Azure Blob signed with SharedKey) against the fake object store
// (tests/support/fake_cloud/fake_cloud.hpp): the cases that are the same for every dialect and that the emulators
// of the conformance suite (tests/conformance/) cannot show, because the store fails on demand:
//   - a missing bucket or container is an Error naming it, a missing object a miss;
//   - an object replaced between the ranges of a read: 412 to the pin, the object read once more; replaced again
//     while it is read once more: a conflict;
//   - list pages, an empty object, a damaged upload refused, a throttled read retried;
//   - `cache check` on a server that honours conditional creates and on one that ignores them.
// The request-building cases of each backend are in tests/unit/tier/<s3,gcs,azure>/test_*_tier.cpp; the tier
// contract on the real emulators is tests/conformance/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/shard_fixtures.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"

namespace datavo::fakecloud {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace shardtest;

constexpr const char* k_bucket = "datavo-test-bucket";
constexpr std::uint64_t k_part = 5 * 1024 * 1024;

using MemorySink = PositionalMemorySink;

// The metadata names of each dialect (Azure's cannot hold '-').
std::map<std::string, std::string> datavo_metadata(Dialect dialect, const std::string& bytes) {
  const std::string separator = dialect == Dialect::azure ? "_" : "-";
  return {{"datavo" + separator + "sha256", sha256_of(bytes).hex()},
          {"datavo" + separator + "size", std::to_string(bytes.size())}};
}

// What a read is pinned to: If-Match (S3, Azure) or ifGenerationMatch (GCS); "" when it is not pinned.
std::string pin_of(const SeenRequest& r) {
  if (!r.header("If-Match").empty()) return r.header("If-Match");
  return r.param("ifGenerationMatch");
}
// What a pin names for a stored object: its ETag, or its generation.
std::string version_of(Dialect dialect, const StoredObject& object) {
  return dialect == Dialect::gcs ? std::to_string(object.generation) : object.etag;
}
// The query parameter that carries a list page's token.
const char* page_token(Dialect dialect) {
  switch (dialect) {
    case Dialect::s3: return "continuation-token";
    case Dialect::gcs: return "pageToken";
    case Dialect::azure: return "marker";
  }
  return "";
}

std::vector<SeenRequest> matching(const std::vector<SeenRequest>& all,
                                  const std::function<bool(const SeenRequest&)>& f) {
  std::vector<SeenRequest> out;
  for (const auto& request : all)
    if (f(request)) out.push_back(request);
  return out;
}
bool is_get(const SeenRequest& r) { return r.op == "GetObject"; }

class BlobTierTest : public ::testing::TestWithParam<Dialect> {
 protected:
  void SetUp() override {
    cloud_.add_bucket(k_bucket);
    point_at(env_, cloud_, dir_.sub("home"));
  }

  std::shared_ptr<Tier> make(const TierSetup& setup = {}) { return make_tier_on(cloud_, k_bucket, setup, env_); }

  Result<InstallOutcome> install(Tier& tier, const ShardKey& key, const std::string& bytes) {
    ShardHandle handle = handle_on_new_file(dir_.sub("source-" + std::to_string(++sources_)), bytes);
    return tier.install_copy(key, handle, sha256_of(bytes));
  }
  static std::string object_name(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex() + ".tar"; }
  void put(const ShardKey& key, const std::string& bytes) {
    cloud_.put_object(k_bucket, object_name(key), bytes, datavo_metadata(GetParam(), bytes));
  }

  FakeCloud cloud_{GetParam()};
  TempDir dir_;
  credtest::FakeEnvironment env_;
  int sources_ = 0;
};

TEST_P(BlobTierTest, AMissingBucketIsNotFoundNamingItAndAMissingObjectIsAMiss) {
  auto tier = make();
  MemorySink sink;
  auto miss = tier->read_into(make_key(30), sink);
  ASSERT_TRUE(miss) << miss.error().message;
  EXPECT_FALSE(*miss) << "a missing object is a miss, not an error";
  EXPECT_EQ(sink.written(), Bytes{0});
  auto held = tier->contains(make_key(30));
  ASSERT_TRUE(held);
  EXPECT_FALSE(*held);
  auto removed = tier->remove(make_key(30));
  ASSERT_TRUE(removed);
  EXPECT_FALSE(*removed);

  auto gone = make_tier_on(cloud_, "no-such-bucket", {}, env_);
  auto read = gone->read_into(make_key(30), sink);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::not_found);
  EXPECT_THAT(read.error().message, HasSubstr("no-such-bucket"));
  auto gone_removed = gone->remove(make_key(30));
  if (GetParam() == Dialect::s3) {
    // S3's remove asks with a HEAD first, whose 404 carries no body to say that the bucket is missing.
    ASSERT_TRUE(gone_removed) << gone_removed.error().message;
    EXPECT_FALSE(*gone_removed);
  } else {
    ASSERT_FALSE(gone_removed);
    EXPECT_EQ(gone_removed.error().code, ErrorCode::not_found);
  }
  EXPECT_EQ(gone->list().error().code, ErrorCode::not_found);
  EXPECT_FALSE(install(*gone, make_key(30), "bytes"));
  const CheckReport report = gone->check();
  EXPECT_FALSE(report.writable);
  EXPECT_FALSE(report.readable);
}

TEST_P(BlobTierTest, AnObjectReplacedBetweenRangesIs412ToItsPinAndIsReadOnceMore) {
  auto tier = make();
  const auto key = make_key(8);
  const std::string old_bytes = random_bytes(2 * k_part + 10, 11);
  const std::string new_bytes = random_bytes(2 * k_part + 20, 12);
  put(key, old_bytes);
  const std::string old_version = version_of(GetParam(), *cloud_.object(k_bucket, object_name(key)));
  // Another writer replaces the object right after the first range was served (once).
  std::atomic<bool> replaced{false};
  cloud_.on_request([&](const SeenRequest& r) {
    if (is_get(r) && !pin_of(r).empty() && !replaced.exchange(true)) put(key, new_bytes);
  });
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), new_bytes) << "read again from the start: no mix of two versions";
  EXPECT_EQ((*read)->sha256, sha256_of(new_bytes));

  const auto conflicts = matching(cloud_.requests(), [](const SeenRequest& r) { return is_get(r) && r.status == 412; });
  ASSERT_GE(conflicts.size(), 1u);
  for (const auto& c : conflicts) EXPECT_EQ(pin_of(c), old_version);
}

TEST_P(BlobTierTest, AnObjectThatChangesAgainWhileItIsReadOnceMoreIsAConflict) {
  auto tier = make();
  const auto key = make_key(9);
  cloud_.put_object(k_bucket, object_name(key), random_bytes(2 * k_part, 13));
  // Every round: once its first range has been served, the object is replaced.
  std::atomic<int> replacements{0};
  cloud_.on_request([&](const SeenRequest& r) {
    if (!is_get(r) || pin_of(r).empty()) return;
    auto current = cloud_.object(k_bucket, object_name(key));
    if (current && version_of(GetParam(), *current) == pin_of(r))
      put(key, random_bytes(2 * k_part, 100 + ++replacements));
  });
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::conflict) << read.error().message;
  const auto first_ranges =
      matching(cloud_.requests(), [](const SeenRequest& r) { return is_get(r) && pin_of(r).empty(); });
  EXPECT_EQ(first_ranges.size(), 2u) << "read once more, not more";
}

TEST_P(BlobTierTest, AnEmptyObjectIsAHitOfZeroBytes) {
  auto tier = make();
  const auto key = make_key(43);
  ASSERT_TRUE(install(*tier, key, ""));
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ((*read)->size, Bytes{0});
  EXPECT_EQ(sink.written(), Bytes{0});
}

TEST_P(BlobTierTest, ListFollowsEveryPageAndKeepsOnlyEntries) {
  auto tier = make();
  cloud_.set_page_size(2);
  std::set<std::string> want;
  for (int i = 0; i < 5; ++i) {
    const auto key = make_key(50 + i);
    ASSERT_TRUE(install(*tier, key, random_bytes(100 + i, 50 + i)));
    want.insert(key.hash.hex());
  }
  cloud_.put_object(k_bucket, "local/.leases/abc", "lease");
  cloud_.put_object(k_bucket, "unrelated.txt", "x");
  auto listed = tier->list();
  ASSERT_TRUE(listed) << listed.error().message;
  std::set<std::string> got;
  for (const auto& entry : *listed) got.insert(entry.hash.hex());
  EXPECT_EQ(got, want);
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->entries, 5u);
  const char* token = page_token(GetParam());
  EXPECT_GE(matching(cloud_.requests(), [token](const SeenRequest& r) { return !r.param(token).empty(); }).size(), 2u);
}

TEST_P(BlobTierTest, AnUploadWhoseBytesArriveDamagedIsRefusedThroughItsChecksum) {
  auto tier = make();
  const auto key = make_key(42);
  cloud_.corrupt_next_upload();  // the service computes the checksum of what arrived and compares it
  auto installed = install(*tier, key, random_bytes(10'000, 17));
  ASSERT_FALSE(installed);
  EXPECT_EQ(matching(cloud_.requests(), [](const SeenRequest& r) { return r.status == 400; }).size(), 1u);
  EXPECT_FALSE(cloud_.object(k_bucket, object_name(key))) << "nothing stored";
}

TEST_P(BlobTierTest, AThrottledReadIsRetriedAndSucceeds) {
  auto tier = make();
  const auto key = make_key(44);
  put(key, "small");
  cloud_.inject({.op = "GetObject", .status = 503, .count = 2, .retry_after = std::chrono::seconds(0)});
  MemorySink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(*read);
  EXPECT_EQ(sink.bytes(), "small");
  std::vector<int> statuses;
  for (const auto& r : matching(cloud_.requests(), is_get)) statuses.push_back(r.status);
  EXPECT_EQ(statuses, (std::vector<int>{503, 503, 206}));
}

TEST_P(BlobTierTest, CheckPassesWhereCreatesAreConditionalAndSaysSoWhereTheyAreIgnored) {
  auto tier = make();
  CheckReport report = tier->check();
  EXPECT_TRUE(report.readable);
  EXPECT_TRUE(report.writable);
  EXPECT_TRUE(report.warnings.empty());
  for (const auto& step : report.steps) EXPECT_TRUE(step.ok) << step.name << ": " << step.detail;
  EXPECT_EQ(cloud_.object_count(k_bucket), 0u) << "the probe object is removed";

  // As some emulators: preconditions ignored. A failure with single_flight: true, a warning without.
  cloud_.set_ignore_preconditions(true);
  report = tier->check();
  EXPECT_FALSE(report.writable);
  auto conditional = std::find_if(report.steps.begin(), report.steps.end(),
                                  [](const CheckStep& s) { return s.name == "conditional put"; });
  ASSERT_NE(conditional, report.steps.end());
  EXPECT_FALSE(conditional->ok);
  EXPECT_THAT(conditional->detail, HasSubstr("ignores conditional writes"));
  // Each service's own mechanism is named: GCS has no If-None-Match on its uploads.
  if (GetParam() == Dialect::gcs) {
    EXPECT_THAT(conditional->detail, HasSubstr("(ifGenerationMatch=0)"));
    EXPECT_THAT(conditional->detail, Not(HasSubstr("If-None-Match")));
  } else {
    EXPECT_THAT(conditional->detail, HasSubstr("(If-None-Match: *)"));
  }
  auto relaxed = make({.single_flight = false});
  report = relaxed->check();
  EXPECT_TRUE(report.writable);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_THAT(report.warnings[0], HasSubstr("ignores conditional writes"));
  EXPECT_EQ(cloud_.object_count(k_bucket), 0u);
}

std::string dialect_name(const ::testing::TestParamInfo<Dialect>& info) { return to_string(info.param); }

INSTANTIATE_TEST_SUITE_P(Dialects, BlobTierTest, ::testing::Values(Dialect::s3, Dialect::gcs, Dialect::azure),
                         dialect_name);

}  // namespace
}  // namespace datavo::fakecloud
