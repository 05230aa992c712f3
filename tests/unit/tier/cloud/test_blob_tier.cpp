// Tests of src/tier/cloud/blob_tier.cpp, the layer the three cloud backends share, run for each backend (S3 signed
// with SigV4, GCS without credentials, Azure Blob signed with SharedKey) against the fake object store
// (tests/support/fake_cloud/fake_cloud.hpp): the cases that are the same for every dialect and that the emulators
// of the conformance suite (tests/conformance/) cannot show, because the store fails on demand:
//   - a missing bucket or container is an Error naming it, a missing object a miss;
//   - an object replaced between the ranges of a read: 412 to the pin, the object read once more; replaced again
//     while it is read once more: a conflict;
//   - list pages, an empty object, a damaged upload refused, a throttled read retried;
//   - `cache check` on a server that honours conditional creates and on one that ignores them;
//   - `cache verify` (ObjectVerifier): bad metadata, sizes and service checksums found with HEADs only, changed
//     bytes found by a full download, bad objects deleted with Repair::yes only from a writable tier; and the
//     judgement of one object (judge_object, judge_download) case by case.
// The request-building cases of each backend are in tests/unit/tier/<s3,gcs,azure>/test_*_tier.cpp; the tier
// contract on the real emulators is tests/conformance/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/shard_fixtures.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/chunk_metadata.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"
#include "util/base64.hpp"
#include "util/cancel.hpp"

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

// The x-amz-checksum-sha256 of `bytes`.
std::string sha256_base64(const std::string& bytes) {
  const auto raw = sha256_of(bytes).raw();
  return util::base64_encode(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

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

TEST_P(BlobTierTest, ACheckStoppedAfterItsPutRemovesItsProbeAndBeginsNoOtherStep) {
  auto tier = make();
  util::StopToken token;
  // Stopped while the probe is read back: the put has stored it.
  cloud_.on_request([&token](const SeenRequest& r) {
    if (r.op == "GetObject" && r.object.find(".datavo-check/") != std::string::npos) token.request_stop();
  });
  CheckReport report;
  {
    util::StopScope scope(token);
    report = tier->check();
  }
  cloud_.on_request(nullptr);
  EXPECT_EQ(cloud_.object_count(k_bucket), 0u) << "the probe object is removed";
  std::vector<std::string> steps;
  for (const auto& step : report.steps) steps.push_back(step.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"credentials", "put", "get"})) << "no step after the stop";
  EXPECT_FALSE(report.writable);
  std::vector<std::string> ops;
  for (const auto& r : cloud_.requests()) ops.push_back(r.op);
  EXPECT_EQ(ops.back(), "DeleteObject") << "the probe's delete is sent although the check was stopped";
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "PutObject"), 1) << "the conditional put is not begun";
}

// The leftovers of killed processes, and what must survive the sweep beside them.
TEST_P(BlobTierTest, TheSweepRemovesOnlyExpiredLeasesAndStaleProbesAndADryRunRemovesNothing) {
  auto tier = make();
  const auto now = std::chrono::system_clock::now();
  auto lease_body = [now](std::chrono::seconds from_now) {
    return "host-a 4242 " +
           std::to_string(
               std::chrono::duration_cast<std::chrono::seconds>((now + from_now).time_since_epoch()).count()) +
           "\n";
  };
  const std::string hash_a(64, 'a'), hash_b(64, 'b'), hash_c(64, 'c');
  using std::chrono::hours;
  using std::chrono::minutes;
  using std::chrono::seconds;
  // A dead holder's lease: not written for an hour, expired 59 minutes ago.
  cloud_.put_object(k_bucket, "local/.leases/" + hash_a, lease_body(-minutes(59)));
  cloud_.backdate(k_bucket, "local/.leases/" + hash_a, hours(1));
  // A live holder's lease, just renewed.
  cloud_.put_object(k_bucket, "local/.leases/" + hash_b, lease_body(seconds(60)));
  // A lease not rewritten for 2 minutes but whose holder's clock says it runs for another minute (skew, a long
  // lease): not stale.
  cloud_.put_object(k_bucket, "local/.leases/" + hash_c, lease_body(seconds(60)));
  cloud_.backdate(k_bucket, "local/.leases/" + hash_c, minutes(2));
  // A killed check's probe, and a running check's.
  cloud_.put_object(k_bucket, ".datavo-check/host-a.4242.aaaaaa", "datavo cache check\n");
  cloud_.backdate(k_bucket, ".datavo-check/host-a.4242.aaaaaa", minutes(11));
  cloud_.put_object(k_bucket, ".datavo-check/host-b.77.bbbbbb", "datavo cache check\n");
  // An old entry and other tools' old objects, lease-like names among them.
  const ShardKey key = make_key(7);
  put(key, "old entry");
  cloud_.backdate(k_bucket, object_name(key), hours(48));
  for (const std::string& other :
       std::vector<std::string>{"local/.leases/" + hash_a + ".bak", "local/.leases/not-a-hash", "local/readme.txt"}) {
    cloud_.put_object(k_bucket, other, "other tool");
    cloud_.backdate(k_bucket, other, hours(48));
  }
  const std::size_t objects = cloud_.object_count(k_bucket);
  LeftoverSweeper* sweeper = tier->sweeper();
  ASSERT_NE(sweeper, nullptr);

  auto dry = sweeper->sweep_leftovers(DryRun::yes);
  ASSERT_TRUE(dry) << dry.error().message;
  EXPECT_EQ((std::vector<std::uint64_t>{dry->expired_leases, dry->stale_probes, dry->removed}),
            (std::vector<std::uint64_t>{1, 1, 0}));
  EXPECT_EQ(cloud_.object_count(k_bucket), objects) << "a dry run removes nothing";

  auto swept = sweeper->sweep_leftovers(DryRun::no);
  ASSERT_TRUE(swept) << swept.error().message;
  EXPECT_EQ((std::vector<std::uint64_t>{swept->expired_leases, swept->stale_probes, swept->removed}),
            (std::vector<std::uint64_t>{1, 1, 2}));
  EXPECT_TRUE(swept->failures.empty());
  EXPECT_FALSE(cloud_.object(k_bucket, "local/.leases/" + hash_a));
  EXPECT_FALSE(cloud_.object(k_bucket, ".datavo-check/host-a.4242.aaaaaa"));
  EXPECT_EQ(cloud_.object_count(k_bucket), objects - 2);
  // Only the two leases not rewritten for a lease_duration were read; the fresh one was judged by its listing.
  EXPECT_EQ(matching(cloud_.requests(), [](const SeenRequest& r) { return is_get(r); }).size(), 2u * 2u);

  EXPECT_EQ(make({.access = Access::read_only})->sweeper(), nullptr) << "a read-only tier is never swept";
}

bool is_head(const SeenRequest& r) { return r.op == "HeadObject"; }

ObjectVerifyReport verify(Tier& tier, VerifyDepth depth, Repair repair) {
  ObjectVerifier* verifier = tier.verifier();
  if (verifier == nullptr) throw std::runtime_error("a cloud tier offers no verifier");
  auto report = verifier->verify_objects(depth, repair);
  if (!report) throw std::runtime_error(report.error().message);
  return *report;
}

std::set<std::string> bad_names(const ObjectVerifyReport& report) {
  std::set<std::string> names;
  for (const auto& bad : report.bad_objects) names.insert(bad.object);
  return names;
}

TEST_P(BlobTierTest, VerifyFindsBadMetadataAndSizesWithHeadsAloneAndChangedBytesByDownloading) {
  auto tier = make();
  const auto good1 = make_key(60), good2 = make_key(61), truncated = make_key(62), bare = make_key(63),
             changed = make_key(64);
  ASSERT_TRUE(install(*tier, good1, random_bytes(3000, 60)));
  ASSERT_TRUE(install(*tier, good2, random_bytes(4000, 61)));
  const std::string whole = random_bytes(5000, 62);
  cloud_.put_object(k_bucket, object_name(truncated), whole.substr(0, 4000), datavo_metadata(GetParam(), whole));
  cloud_.put_object(k_bucket, object_name(bare), "no metadata");
  // Other bytes of the same size under consistent metadata: nothing but the bytes themselves tells.
  const std::string recorded = random_bytes(2000, 64);
  cloud_.put_object(k_bucket, object_name(changed), random_bytes(2000, 65), datavo_metadata(GetParam(), recorded));
  cloud_.put_object(k_bucket, "local/.leases/abc", "lease");
  cloud_.put_object(k_bucket, "unrelated.txt", "x");
  cloud_.clear_requests();

  const ObjectVerifyReport metadata = verify(*tier, VerifyDepth::metadata, Repair::no);
  EXPECT_EQ(metadata.objects, 5u);
  EXPECT_EQ(metadata.bad, 2u);
  EXPECT_EQ(bad_names(metadata), (std::set<std::string>{object_name(truncated), object_name(bare)}));
  if (GetParam() == Dialect::s3) {
    // S3 keeps the SHA-256 sent with the single PUTs of the tier; the changed object was written without one.
    EXPECT_EQ(metadata.verified_by_service, 2u);
    EXPECT_EQ(metadata.metadata_only, 1u);
  } else {
    EXPECT_EQ(metadata.verified_by_service, 0u) << "GCS and Azure keep no SHA-256";
    EXPECT_EQ(metadata.metadata_only, 3u);
  }
  EXPECT_EQ(metadata.removed, 0u);
  EXPECT_TRUE(matching(cloud_.requests(), is_get).empty()) << "no object's bytes are read";
  EXPECT_EQ(matching(cloud_.requests(), is_head).size(), 5u);
  for (const auto& bad : metadata.bad_objects) {
    if (bad.object == object_name(truncated)) {
      EXPECT_THAT(bad.why, HasSubstr("size 4000 but datavo-size 5000"));
    }
  }

  cloud_.clear_requests();
  const ObjectVerifyReport full = verify(*tier, VerifyDepth::full, Repair::no);
  EXPECT_EQ(full.objects, 5u);
  EXPECT_EQ(full.verified_by_download, 2u);
  EXPECT_EQ(full.verified_by_service + full.metadata_only, 0u) << "every good object downloaded";
  EXPECT_EQ(bad_names(full), (std::set<std::string>{object_name(truncated), object_name(bare), object_name(changed)}));
  EXPECT_EQ(matching(cloud_.requests(), is_get).size(), 3u) << "one GET per object whose metadata holds";
  EXPECT_EQ(cloud_.object_count(k_bucket), 7u) << "nothing deleted without Repair::yes";

  auto read_only = make({.access = Access::read_only});
  const ObjectVerifyReport reported = verify(*read_only, VerifyDepth::full, Repair::yes);
  EXPECT_EQ(reported.bad, 3u);
  EXPECT_EQ(reported.removed, 0u) << "a read-only tier is only reported";
  EXPECT_EQ(cloud_.object_count(k_bucket), 7u);

  const ObjectVerifyReport repaired = verify(*tier, VerifyDepth::full, Repair::yes);
  EXPECT_EQ(repaired.removed, 3u);
  for (const auto& bad : repaired.bad_objects) EXPECT_TRUE(bad.removed) << bad.object;
  EXPECT_FALSE(cloud_.object(k_bucket, object_name(changed)));
  EXPECT_TRUE(cloud_.object(k_bucket, object_name(good1)));
  const ObjectVerifyReport after = verify(*tier, VerifyDepth::metadata, Repair::no);
  EXPECT_EQ(after.objects, 2u);
  EXPECT_EQ(after.bad, 0u);
}

TEST_P(BlobTierTest, VerifyTrustsOnlyAWholeObjectSha256OfTheService) {
  if (GetParam() != Dialect::s3) GTEST_SKIP() << "only S3 keeps a SHA-256 of the object";
  auto tier = make();
  const std::string bytes = random_bytes(1000, 70);
  const auto lying = make_key(70), composite = make_key(71), other = make_key(72);
  // Overwritten out of band with other bytes (and their checksum) under the old metadata.
  cloud_.put_object_with_sha256(k_bucket, object_name(lying), random_bytes(1000, 71),
                                datavo_metadata(GetParam(), bytes), sha256_base64(random_bytes(1000, 71)));
  // A multipart upload's checksum is of its parts: not comparable, so the object is not proven either way.
  cloud_.put_object_with_sha256(k_bucket, object_name(composite), bytes, datavo_metadata(GetParam(), bytes),
                                sha256_base64(bytes) + "-2");
  cloud_.put_object_with_sha256(k_bucket, object_name(other), bytes, datavo_metadata(GetParam(), bytes),
                                sha256_base64(bytes));
  const ObjectVerifyReport report = verify(*tier, VerifyDepth::metadata, Repair::no);
  EXPECT_EQ(report.objects, 3u);
  EXPECT_EQ(report.verified_by_service, 1u);
  EXPECT_EQ(report.metadata_only, 1u);
  ASSERT_EQ(report.bad_objects.size(), 1u);
  EXPECT_EQ(report.bad_objects[0].object, object_name(lying));
  EXPECT_THAT(report.bad_objects[0].why, HasSubstr("the service's SHA-256"));
  for (const auto& head : matching(cloud_.requests(), is_head))
    EXPECT_EQ(head.header("x-amz-checksum-mode"), "ENABLED");
}

TEST_P(BlobTierTest, VerifyOfAMissingBucketIsNotFound) {
  auto gone = make_tier_on(cloud_, "no-such-bucket", {}, env_);
  auto report = gone->verifier()->verify_objects(VerifyDepth::metadata, Repair::no);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, ErrorCode::not_found);
}

// The chunk digests of an entry (docs/protocol.md, "Where a cloud tier's chunk list lives"): recorded in its
// metadata by install_copy, for a single PUT and for an upload in parts alike, and read back with one HEAD by
// recorded_digests; an object without them, or with a value that does not fit it, has none (and the latter is bad
// to `cache verify`).
TEST_P(BlobTierTest, AnEntryRecordsItsChunkDigestsAndOneHeadReadsThemBack) {
  auto tier = make();
  const std::string chunks_name = GetParam() == Dialect::azure ? "datavo_chunks" : "datavo-chunks";
  const std::string small = random_bytes(3'000'000, 80);  // one PUT: 23 chunks of 128 KiB
  const std::string large = random_bytes(6 << 20, 81);    // above part_size: an upload in parts, 24 of 256 KiB
  const auto small_key = make_key(80), large_key = make_key(81), bare = make_key(82), mangled = make_key(83);
  for (const auto& [key, bytes] : {std::pair{small_key, &small}, std::pair{large_key, &large}}) {
    ASSERT_TRUE(install(*tier, key, *bytes));
    const auto object = cloud_.object(k_bucket, object_name(key));
    ASSERT_TRUE(object);
    ASSERT_TRUE(object->metadata.count(chunks_name)) << "no " << chunks_name << " on " << object_name(key);
    const Bytes chunk_size = *cloud::object_chunk_size(Bytes{bytes->size()});
    ChunkHasher hasher(chunk_size);
    hasher.update(bytes->data(), bytes->size());
    const ChunkDigests expected = hasher.finish();
    EXPECT_EQ(object->metadata.at(chunks_name), cloud::encode_chunk_metadata(expected));

    cloud_.clear_requests();
    auto recorded = tier->recorded_digests(key);
    ASSERT_TRUE(recorded) << recorded.error().message;
    ASSERT_TRUE(recorded->has_value());
    EXPECT_EQ((*recorded)->size, Bytes{bytes->size()});
    EXPECT_EQ((*recorded)->sha256, sha256_of(*bytes));
    EXPECT_EQ((*recorded)->chunks, expected);
    EXPECT_EQ(cloud_.requests().size(), 1u) << "one HEAD (GCS: the object resource)";
  }
  EXPECT_EQ(cloud::object_chunk_size(Bytes{large.size()}), KiB(256));

  put(bare, "written by an older Datavo");  // datavo-sha256 and datavo-size only
  auto metadata = datavo_metadata(GetParam(), "mangled");
  metadata[chunks_name] = "65536 AAAA";  // 3 bytes of digests
  cloud_.put_object(k_bucket, object_name(mangled), "mangled", metadata);
  for (const auto& key : {bare, mangled, make_key(84)}) {
    auto recorded = tier->recorded_digests(key);
    ASSERT_TRUE(recorded) << recorded.error().message;
    EXPECT_FALSE(recorded->has_value()) << "none for " << object_name(key);
  }
  const ObjectVerifyReport report = verify(*tier, VerifyDepth::metadata, Repair::no);
  EXPECT_EQ(report.objects, 4u);
  ASSERT_EQ(report.bad_objects.size(), 1u);
  EXPECT_EQ(report.bad_objects[0].object, object_name(mangled));
  EXPECT_THAT(report.bad_objects[0].why, HasSubstr("datavo-chunks"));
}

// A datavo-chunks that decodes but lies (the digests of other bytes of the same size) passes the metadata check, and
// a full verify finds it: every streamed read of the object would stop at its first chunk.
TEST_P(BlobTierTest, AFullVerifyFindsAChunkListThatLiesAboutBytesThatMatchTheirSha256) {
  auto tier = make();
  const std::string chunks_name = GetParam() == Dialect::azure ? "datavo_chunks" : "datavo-chunks";
  const std::string bytes = random_bytes(300'000, 90);  // 5 chunks of 64 KiB
  std::string other = bytes;
  other[200'000] = static_cast<char>(other[200'000] ^ 1);  // chunk 3
  const auto honest = make_key(90), lying = make_key(91);
  ASSERT_TRUE(install(*tier, honest, bytes));
  auto metadata = datavo_metadata(GetParam(), bytes);
  metadata[chunks_name] = chunks_value_of(other);
  cloud_.put_object(k_bucket, object_name(lying), bytes, metadata);

  const ObjectVerifyReport heads = verify(*tier, VerifyDepth::metadata, Repair::no);
  EXPECT_EQ(heads.bad, 0u) << "the list decodes and fits the size: HEADs cannot tell";
  const ObjectVerifyReport full = verify(*tier, VerifyDepth::full, Repair::no);
  EXPECT_EQ(full.objects, 2u);
  EXPECT_EQ(full.verified_by_download, 1u);
  ASSERT_EQ(full.bad_objects.size(), 1u);
  EXPECT_EQ(full.bad_objects[0].object, object_name(lying));
  EXPECT_THAT(full.bad_objects[0].why, HasSubstr("chunk 3 (byte offset 196608) does not match its digest"));
}

TEST(JudgeObjectTest, EachWayAnObjectCanFailItsMetadata) {
  const Sha256 recorded = sha256_of("recorded");
  const Sha256 other = sha256_of("other");
  auto info = [&](std::optional<Sha256> sha, std::optional<Bytes> size, std::optional<Sha256> service) {
    cloud::ObjectInfo out;
    out.size = Bytes{8};
    out.sha256 = sha;
    out.recorded_size = size;
    out.service_sha256 = service;
    return out;
  };
  using cloud::ObjectVerdict;
  EXPECT_EQ(cloud::judge_object(info(std::nullopt, Bytes{8}, std::nullopt)).verdict, ObjectVerdict::bad);
  EXPECT_EQ(cloud::judge_object(info(recorded, std::nullopt, std::nullopt)).verdict, ObjectVerdict::bad);
  const auto short_one = cloud::judge_object(info(recorded, Bytes{9}, std::nullopt));
  EXPECT_EQ(short_one.verdict, ObjectVerdict::bad);
  EXPECT_EQ(short_one.why, "size 8 but datavo-size 9");
  EXPECT_EQ(cloud::judge_object(info(recorded, Bytes{8}, other)).verdict, ObjectVerdict::bad);
  EXPECT_EQ(cloud::judge_object(info(recorded, Bytes{8}, recorded)).verdict, ObjectVerdict::verified_by_service);
  EXPECT_EQ(cloud::judge_object(info(recorded, Bytes{8}, std::nullopt)).verdict, ObjectVerdict::metadata_only);

  const Expectation expected{Bytes{8}, recorded};
  EXPECT_EQ(cloud::judge_download(expected, Bytes{8}, recorded).verdict, ObjectVerdict::verified_by_download);
  EXPECT_EQ(cloud::judge_download(expected, Bytes{8}, other).verdict, ObjectVerdict::bad);
  EXPECT_EQ(cloud::judge_download(expected, Bytes{7}, recorded).verdict, ObjectVerdict::bad);
  EXPECT_EQ(cloud::judge_download(Expectation{Bytes{8}, std::nullopt}, Bytes{8}, recorded).verdict, ObjectVerdict::bad);

  const ChunkDigests listed{KiB(64), {recorded, other}};
  EXPECT_EQ(cloud::judge_chunks(listed, listed).verdict, ObjectVerdict::verified_by_download);
  const auto swapped = cloud::judge_chunks(listed, ChunkDigests{KiB(64), {recorded, recorded}});
  EXPECT_EQ(swapped.verdict, ObjectVerdict::bad);
  EXPECT_EQ(swapped.why,
            "chunk 1 (byte offset 65536) does not match its digest in datavo-chunks (the bytes match "
            "datavo-sha256)");
  EXPECT_EQ(cloud::judge_chunks(listed, ChunkDigests{KiB(64), {recorded}}).verdict, ObjectVerdict::bad);
}

std::string dialect_name(const ::testing::TestParamInfo<Dialect>& info) { return to_string(info.param); }

INSTANTIATE_TEST_SUITE_P(Dialects, BlobTierTest, ::testing::Values(Dialect::s3, Dialect::gcs, Dialect::azure),
                         dialect_name);

}  // namespace
}  // namespace datavo::fakecloud
