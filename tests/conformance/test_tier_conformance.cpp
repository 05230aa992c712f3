// The cases every tier type must pass (tier_conformance.hpp says how the instances are run). They hold each tier
// to include/datavo/tier.hpp's contract: a miss is a value, read_into() returns what the tier recorded about the
// bytes so that the caller can check them, installs are all-or-nothing and conditional, and a failing server is
// an Error, never wrong bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "conformance/tier_conformance.hpp"
#include "datavo/cloud_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo::conformance {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

// A sink that keeps the bytes in memory and takes them sequentially or positionally, recording which threads
// wrote where. Optional hooks: `before_first_write` runs once, before the first bytes are stored; with
// `rendezvous_part` set, the first write into the second part waits (up to 10 s) for a write into a later part,
// which only arrives meanwhile when the ranges are read in parallel.
class MemorySink final : public ByteSink, public PositionalSink {
 public:
  Result<void> write(const void* data, std::size_t size) override {
    hook();
    std::lock_guard lock(mu_);
    data_.append(static_cast<const char*>(data), size);
    return {};
  }
  Bytes written() const override {
    std::lock_guard lock(mu_);
    return positional_ ? prefix_ : Bytes{data_.size()};
  }
  Result<void> restart() override {
    std::lock_guard lock(mu_);
    data_.clear();
    prefix_ = Bytes{0};
    ++restarts_;
    return {};
  }
  PositionalSink* positional() override {
    std::lock_guard lock(mu_);
    positional_ = true;
    return this;
  }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    hook();
    if (rendezvous_part) wait_for_a_later_part(offset);
    std::lock_guard lock(mu_);
    if (data_.size() < offset + size) data_.resize(offset + size);
    std::memcpy(data_.data() + offset, data, size);
    writers_.insert(std::this_thread::get_id());
    return {};
  }
  Result<void> prefix_complete(Bytes size) override {
    std::lock_guard lock(mu_);
    prefix_ = size;
    return {};
  }

  std::string bytes() const {
    std::lock_guard lock(mu_);
    return positional_ ? data_.substr(0, prefix_.count()) : data_;
  }
  bool used_positionally() const { return positional_; }
  std::size_t writer_threads() const { return writers_.size(); }
  bool rendezvous_met() const { return met_; }
  int restarts() const { return restarts_; }

  std::function<void()> before_first_write;
  std::optional<std::uint64_t> rendezvous_part;

 private:
  void hook() {
    std::function<void()> once;
    {
      std::lock_guard lock(mu_);
      once.swap(before_first_write);
    }
    if (once) once();
  }
  void wait_for_a_later_part(std::uint64_t offset) {
    const std::uint64_t part = *rendezvous_part;
    std::unique_lock lock(mu_);
    if (offset >= 2 * part) {
      later_part_seen_ = true;
      cv_.notify_all();
    } else if (offset >= part && !waited_) {
      waited_ = true;
      met_ = cv_.wait_for(lock, 10s, [this] { return later_part_seen_; });
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string data_;
  Bytes prefix_;
  bool positional_ = false;
  std::set<std::thread::id> writers_;
  bool waited_ = false, later_part_seen_ = false, met_ = false;
  int restarts_ = 0;
};

class TierConformanceTest : public testing::TestWithParam<TierKind> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    if (auto why = harness_->unavailable(); !why.empty()) {
      if (emulators_required()) GTEST_FAIL() << why << " (DATAVO_REQUIRE_EMULATORS=1)";
      GTEST_SKIP() << why;
    }
  }

  std::shared_ptr<Tier> make(TierSetup setup = {}) { return harness_->make(setup); }

  Result<InstallOutcome> install(Tier& tier, const ShardKey& key, const std::string& bytes) {
    const std::string path = dir_.sub("source-" + std::to_string(++sources_));
    ShardHandle source = handle_on_new_file(path, bytes);
    return tier.install_copy(key, source, sha256_of(bytes));
  }

  void install_ok(Tier& tier, const ShardKey& key, const std::string& bytes) {
    auto installed = install(tier, key, bytes);
    ASSERT_TRUE(installed) << installed.error().message;
  }

  // read_into into a fresh MemorySink; the Expectation and the bytes.
  struct Read {
    Result<std::optional<Expectation>> result = std::optional<Expectation>{};
    std::string bytes;
  };
  Read read(Tier& tier, const ShardKey& key, MemorySink* sink = nullptr) {
    MemorySink own;
    MemorySink& target = sink ? *sink : own;
    Read out;
    out.result = tier.read_into(key, target);
    out.bytes = target.bytes();
    return out;
  }

  // Checks a hit: the bytes, and an Expectation that vouches for exactly them.
  void expect_hit(const Read& got, const std::string& bytes) {
    ASSERT_TRUE(got.result) << got.result.error().message;
    ASSERT_TRUE(got.result->has_value()) << "a miss where the object was stored";
    EXPECT_EQ(got.bytes.size(), bytes.size());
    EXPECT_TRUE(got.bytes == bytes) << "the bytes read differ from the bytes stored";
    const Expectation& e = **got.result;
    ASSERT_TRUE(e.size.has_value()) << "read_into reported no size";
    EXPECT_EQ(*e.size, Bytes{bytes.size()});
    ASSERT_TRUE(e.sha256.has_value()) << "read_into reported no SHA-256 (the tier's metadata must carry it)";
    EXPECT_EQ(*e.sha256, sha256_of(bytes));
  }

  std::shared_ptr<ShardCacheHierarchy> hierarchy_over(std::shared_ptr<Tier> tier,
                                                      std::shared_ptr<FolderTier>* top = nullptr) {
    auto local = make_folder(dir_.sub("top-" + std::to_string(++sources_)), "top");
    if (top) *top = local;
    auto made = ShardCacheHierarchy::create({local, std::move(tier)});
    if (!made) throw std::runtime_error(made.error().message);
    return *made;
  }

  TempDir dir_;
  std::unique_ptr<TierHarness> harness_;
  int sources_ = 0;
};

// --- lookups ------------------------------------------------------------------------------------------------

TEST_P(TierConformanceTest, MissIsAValueAndLeavesTheSinkEmpty) {
  auto tier = make();
  const ShardKey key = make_key(1);
  auto contains = tier->contains(key);
  ASSERT_TRUE(contains) << contains.error().message;
  EXPECT_FALSE(*contains);
  MemorySink sink;
  auto got = read(*tier, key, &sink);
  ASSERT_TRUE(got.result) << got.result.error().message;
  EXPECT_FALSE(got.result->has_value());
  EXPECT_TRUE(got.bytes.empty());
}

TEST_P(TierConformanceTest, PutStoresTheBytesWithTheirSizeAndSha256) {
  auto tier = make();
  const ShardKey key = make_key(2);
  const std::string bytes = random_bytes(70'000, 2);
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  auto contains = tier->contains(key);
  ASSERT_TRUE(contains) << contains.error().message;
  EXPECT_TRUE(*contains);
  // What the storage itself recorded (object metadata datavo-sha256 / datavo-size, the folder tier's record).
  if (auto recorded = harness_->recorded(*tier, key)) {
    EXPECT_EQ(recorded->size, Bytes{bytes.size()});
    EXPECT_EQ(recorded->sha256, sha256_of(bytes));
  }
}

TEST_P(TierConformanceTest, GetReturnsTheBytesAndAnExpectationThatVouchesForThem) {
  auto tier = make();
  const ShardKey key = make_key(3);
  const std::string bytes = random_bytes(3 << 20, 3);  // several read buffers, below part_size
  install_ok(*tier, key, bytes);
  expect_hit(read(*tier, key), bytes);
  // Another process's view of the same storage finds it too.
  expect_hit(read(*harness_->another_view({}), key), bytes);
}

TEST_P(TierConformanceTest, AnEmptyObjectIsAHitOfZeroBytes) {
  if (auto problem = harness_->empty_object_problem(); !problem.empty()) GTEST_SKIP() << problem;
  auto tier = make();
  const ShardKey key = make_key(4);
  install_ok(*tier, key, "");
  expect_hit(read(*tier, key), "");
}

TEST_P(TierConformanceTest, InstancesAreSeparate) {
  auto tier = make();
  const ShardKey in_a = make_key(5, "a.example");
  const ShardKey in_b{make_instance("b.example"), in_a.hash};  // same content hash, other instance
  install_ok(*tier, in_a, "for a");
  auto b = read(*tier, in_b);
  ASSERT_TRUE(b.result) << b.result.error().message;
  EXPECT_FALSE(b.result->has_value());
  install_ok(*tier, in_b, "for b, longer");
  expect_hit(read(*tier, in_a), "for a");
  expect_hit(read(*tier, in_b), "for b, longer");
}

// An object above part_size: the remote tiers read it as parallel ranges (the first part, then the rest on
// `concurrency` threads), each written at its offset, each pinned to the first answer's version.
TEST_P(TierConformanceTest, RangesOfALargeObjectAreReadInParallelAtTheirOffsets) {
  TierSetup setup;
  setup.part_size = MiB(5);
  setup.concurrency = 4;
  setup.through_proxy = true;
  auto tier = make(setup);
  const ShardKey key = make_key(6);
  const std::string bytes = random_bytes(12 << 20, 6);
  install_ok(*tier, key, bytes);
  harness_->reset_counts();

  MemorySink sink;
  if (harness_->parallel_ranges()) sink.rendezvous_part = setup.part_size.count();
  auto got = read(*tier, key, &sink);
  expect_hit(got, bytes);
  if (!harness_->parallel_ranges()) return;
  EXPECT_TRUE(sink.used_positionally()) << "a large object was not written through the positional sink";
  EXPECT_TRUE(sink.rendezvous_met()) << "the second and third parts were not read at the same time";
  EXPECT_GE(sink.writer_threads(), 2u);
  if (harness_->observable()) {
    const RequestCounts counts = harness_->counts();
    EXPECT_EQ(counts.count("GetObject"), 3) << "one GET per part: 0-5 MiB, then 5-10 and 10-12 MiB";
    if (harness_->metadata_in_read_answers()) {
      EXPECT_EQ(counts.count("HeadObject"), 0) << "a lookup is a GET, not a HEAD first";
    } else {
      EXPECT_EQ(counts.count("HeadObject"), 1) << "the metadata is read once, after the first range only";
    }
    EXPECT_EQ(counts.with_if_match, 2) << "the ranges after the first must be pinned with If-Match";
    EXPECT_GE(counts.peak_in_flight.count("GetObject") ? counts.peak_in_flight.at("GetObject") : 0, 2);
  }
}

// Another writer replaces the object while it is being read. Whatever happens, the tier never vouches for bytes
// its Expectation does not describe; a server that honours If-Match makes the read restart and return one
// version whole.
TEST_P(TierConformanceTest, AnObjectChangedDuringTheReadIsNeverAMixVouchedFor) {
  auto tier = make();
  const ShardKey key = make_key(7);
  const std::string before = random_bytes(12 << 20, 70);
  const std::string after = random_bytes(12 << 20, 71);
  install_ok(*tier, key, before);
  MemorySink sink;
  sink.before_first_write = [&] { harness_->replace(*tier, key, after); };
  auto got = read(*tier, key, &sink);
  const bool pinned = harness_->remote() && harness_->parallel_ranges() && harness_->honours_if_match();
  if (pinned) {
    ASSERT_TRUE(got.result) << "the read should have restarted once: " << got.result.error().message;
  }
  if (!got.result) return;  // elsewhere an Error is acceptable: nothing is installed
  ASSERT_TRUE(got.result->has_value());
  const Expectation& e = **got.result;
  const bool consistent = e.sha256 && *e.sha256 == sha256_of(got.bytes);
  if (consistent) {
    EXPECT_TRUE(got.bytes == before || got.bytes == after) << "a mix of two versions";
  }
  if (pinned) {
    EXPECT_TRUE(consistent) << "If-Match should have made the read restart";
    EXPECT_TRUE(got.bytes == after) << "the restarted read should return the new version whole";
    EXPECT_GE(sink.restarts(), 1);
  }
}

// --- writes -------------------------------------------------------------------------------------------------

TEST_P(TierConformanceTest, AlreadyPresentKeepsTheStoredObject) {
  auto tier = make();
  const ShardKey key = make_key(8);
  const std::string bytes = random_bytes(10'000, 8);
  install_ok(*tier, key, bytes);
  auto again = install(*tier, key, bytes);
  ASSERT_TRUE(again) << again.error().message;
  if (harness_->honours_conditional_create()) {
    EXPECT_EQ(*again, InstallOutcome::already_present);
  } else {
    // s3rver ignores If-None-Match: the second create overwrote with the same bytes (`cache check` says so).
    EXPECT_EQ(*again, InstallOutcome::installed);
  }
  // A second VM's view of the same bucket: the same answer.
  auto from_another = install(*harness_->another_view({}), key, bytes);
  ASSERT_TRUE(from_another) << from_another.error().message;
  if (harness_->honours_conditional_create()) {
    EXPECT_EQ(*from_another, InstallOutcome::already_present);
  }
  expect_hit(read(*tier, key), bytes);
}

TEST_P(TierConformanceTest, RemoveSaysWhetherThereWasAnEntry) {
  auto tier = make();
  const ShardKey key = make_key(9);
  install_ok(*tier, key, "bytes to remove");
  auto removed = tier->remove(key);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_TRUE(*removed);
  auto contains = tier->contains(key);
  ASSERT_TRUE(contains);
  EXPECT_FALSE(*contains);
  auto got = read(*tier, key);
  ASSERT_TRUE(got.result);
  EXPECT_FALSE(got.result->has_value());
  auto again = tier->remove(key);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(*again);
}

TEST_P(TierConformanceTest, ListReportsEveryEntryOfEveryInstanceAndNothingElse) {
  auto tier = make();
  install_ok(*tier, make_key(10, "one"), random_bytes(100, 10));
  install_ok(*tier, make_key(11, "two.example"), random_bytes(200, 11));
  // A lease and a `cache check` probe are objects in the bucket, not entries.
  std::unique_ptr<Lease> lease;
  if (auto* coordination = tier->coordination()) {
    auto attempt = coordination->try_lease(make_key(12, "one"));
    ASSERT_TRUE(attempt) << attempt.error().message;
    lease = std::move(attempt->held);
  }
  auto listed = tier->list();
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 2u);
  std::map<std::string, EntryInfo> by_instance;
  for (const auto& e : *listed) by_instance.emplace(e.instance, e);
  ASSERT_TRUE(by_instance.count("one") && by_instance.count("two.example"));
  EXPECT_EQ(by_instance.at("one").hash, make_key(10).hash);
  EXPECT_EQ(by_instance.at("one").size, Bytes{100});
  EXPECT_EQ(by_instance.at("two.example").hash, make_key(11).hash);
  EXPECT_EQ(by_instance.at("two.example").size, Bytes{200});
}

TEST_P(TierConformanceTest, UsageSumsTheEntries) {
  auto tier = make();
  auto empty = tier->usage();
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_EQ(empty->entries, 0u);
  install_ok(*tier, make_key(13), random_bytes(100, 13));
  install_ok(*tier, make_key(14, "other"), random_bytes(250, 14));
  auto usage = tier->usage();
  ASSERT_TRUE(usage) << usage.error().message;
  EXPECT_EQ(usage->entries, 2u);
  if (harness_->remote()) {
    EXPECT_EQ(usage->used, Bytes{350});
  } else {
    EXPECT_GE(usage->used, Bytes{350});  // a folder tier counts its records and directories too
  }
  ASSERT_TRUE(tier->remove(make_key(13)));
  usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->entries, 1u);
}

// Above part_size the remote tiers upload in parts, in parallel, and complete conditionally.
TEST_P(TierConformanceTest, ABigObjectGoesUpInPartsAndComesBackWhole) {
  TierSetup setup;
  setup.part_size = MiB(5);
  setup.concurrency = 4;
  setup.through_proxy = true;
  auto tier = make(setup);
  const ShardKey key = make_key(15);
  const std::string bytes = random_bytes((21 << 20) + 12345, 15);  // 5 parts, the last one short
  harness_->reset_counts();
  auto installed = install(*tier, key, bytes);
  ASSERT_TRUE(installed) << installed.error().message;
  EXPECT_EQ(*installed, InstallOutcome::installed);
  if (harness_->observable() && !harness_->uploads_in_parts()) {
    // The server cannot take parts: the harness's tier sent all the bytes in one request (tier_conformance.hpp), a
    // PutObject or the one chunk of a session.
    const RequestCounts counts = harness_->counts();
    EXPECT_EQ(counts.count("PutObject") + counts.count("UploadPart"), 1);
    EXPECT_EQ(counts.count("CreateMultipartUpload"), counts.count("UploadPart"));
    EXPECT_EQ(counts.count("CompleteMultipartUpload"), 0);
  } else if (harness_->observable()) {
    const RequestCounts counts = harness_->counts();
    EXPECT_EQ(counts.count("CreateMultipartUpload"), harness_->requests_to_start_an_upload());
    EXPECT_EQ(counts.count("UploadPart"), 5);
    EXPECT_EQ(counts.count("CompleteMultipartUpload"), 1);
    EXPECT_EQ(counts.count("PutObject"), 0);
    EXPECT_GE(counts.peak_in_flight.count("UploadPart") ? counts.peak_in_flight.at("UploadPart") : 0, 2)
        << "the parts were not sent in parallel";
  }
  if (auto open = harness_->open_uploads()) {
    EXPECT_EQ(*open, 0);
  }
  if (auto recorded = harness_->recorded(*tier, key)) {
    EXPECT_EQ(recorded->size, Bytes{bytes.size()});
    EXPECT_EQ(recorded->sha256, sha256_of(bytes));
  }
  expect_hit(read(*tier, key), bytes);
  // A conditional completion over an existing object is already_present, and leaves no upload open.
  auto again = install(*tier, key, bytes);
  ASSERT_TRUE(again) << again.error().message;
  if (harness_->honours_conditional_create()) {
    EXPECT_EQ(*again, InstallOutcome::already_present);
  }
  if (auto open = harness_->open_uploads()) {
    EXPECT_EQ(*open, 0) << "the losing multipart upload was not aborted";
  }
}

// A cloud tier records each entry's chunk digests in its metadata (datavo-chunks) and reads them back for
// streamed reads; the service must keep the value as sent, for a single request and for an upload in parts alike
// (docs/protocol.md, "Where a cloud tier's chunk list lives"). Local tiers keep none.
TEST_P(TierConformanceTest, ACloudEntryKeepsChunkDigestsThatItsBytesMatch) {
  TierSetup setup;
  setup.part_size = MiB(5);
  auto tier = make(setup);
  const ShardKey small_key = make_key(22), large_key = make_key(23);
  const std::string small = random_bytes(3'000'000, 22);
  const std::string large = random_bytes((9 << 20) + 777, 23);  // in parts everywhere (GCS: resumable above 8 MiB)
  for (const auto& [key, bytes] : {std::pair{small_key, &small}, std::pair{large_key, &large}}) {
    install_ok(*tier, key, *bytes);
    auto recorded = tier->recorded_digests(key);
    ASSERT_TRUE(recorded) << recorded.error().message;
    if (tier->reach() != TierReach::shared) {
      EXPECT_FALSE(recorded->has_value()) << "a local tier keeps no chunk digests";
      continue;
    }
    ASSERT_TRUE(recorded->has_value()) << "no datavo-chunks came back for " << bytes->size() << " bytes";
    EXPECT_EQ((*recorded)->size, Bytes{bytes->size()});
    EXPECT_EQ((*recorded)->sha256, sha256_of(*bytes));
    ChunkHasher hasher((*recorded)->chunks.chunk_size);
    hasher.update(bytes->data(), bytes->size());
    EXPECT_EQ((*recorded)->chunks, hasher.finish()) << "the recorded digests are not those of the bytes";
    EXPECT_LE((*recorded)->chunks.digests.size(), 32u);
    // Another process's view of the same storage reads the same list.
    auto seen = harness_->another_view({})->recorded_digests(key);
    ASSERT_TRUE(seen && seen->has_value());
    EXPECT_EQ((*seen)->chunks, (*recorded)->chunks);
  }
  auto miss = tier->recorded_digests(make_key(24));
  ASSERT_TRUE(miss) << miss.error().message;
  EXPECT_FALSE(miss->has_value());
}

// --- integrity ----------------------------------------------------------------------------------------------

// Bytes that do not match the object's metadata: read_into's Expectation disagrees with them, so the hierarchy
// never installs them; it deletes the object (the tier is writable) and the read falls through to the fetcher.
TEST_P(TierConformanceTest, ACorruptObjectIsDetectedNeverInstalledAndDeleted) {
  auto tier = make();
  const ShardKey key = make_key(16);
  const std::string good = random_bytes(40'000, 16);
  std::string bad = good;
  bad[bad.size() / 2] = char(bad[bad.size() / 2] ^ 0x5a);
  harness_->store_mismatching(*tier, key, bad, sha256_of(good));

  auto got = read(*tier, key);
  if (got.result && got.result->has_value()) {
    const Expectation& e = **got.result;
    ASSERT_TRUE(e.sha256.has_value());
    EXPECT_NE(*e.sha256, sha256_of(got.bytes)) << "the Expectation vouches for bytes it does not describe";
  }
  if (!harness_->remote()) return;  // a folder tier is read directly: see its own tests for verify: full

  std::shared_ptr<FolderTier> top;
  auto h = hierarchy_over(tier, &top);
  auto found = h->get(key);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_FALSE(found->has_value()) << "a corrupt remote object was served";
  auto local = top->peek(key);
  ASSERT_TRUE(local);
  EXPECT_FALSE(local->has_value()) << "a corrupt remote object was installed locally";
  EXPECT_TRUE(list_dir(top->location() + "/.staging").empty());
  auto still = tier->contains(key);
  ASSERT_TRUE(still) << still.error().message;
  EXPECT_FALSE(*still) << "the corrupt object was not deleted from the tier";
  EXPECT_GE(tier->counters().snapshot().quarantined, 1u);

  // The read falls through to the fetcher, and the good bytes go up again.
  CountingFetcher fetch(good);
  auto fetched = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_TRUE(read_handle(fetched->handle) == good);
  const UploadSummary uploads = h->flush_uploads(Milliseconds{30'000});
  EXPECT_EQ(uploads.failed, 0u);
  EXPECT_EQ(uploads.pending, 0u);
  expect_hit(read(*tier, key), good);
}

// --- the server going away ----------------------------------------------------------------------------------

TEST_P(TierConformanceTest, ServerGoingAwayMidDownloadIsAnErrorNeverWrongBytes) {
  if (!harness_->remote()) GTEST_SKIP() << "no server: the tier is in this process";
  TierSetup setup;
  setup.through_proxy = true;
  auto tier = make(setup);
  if (!harness_->observable()) GTEST_SKIP() << "no proxy in front of this tier's storage";
  const ShardKey key = make_key(17);
  const std::string bytes = random_bytes(12 << 20, 17);
  install_ok(*tier, key, bytes);

  // Every answer cut halfway (RST), then only the parallel ranges, then a clean FIN mid-body.
  for (const char* mode : {"reset op=GetObject", "reset op=GetObject after=1", "truncate op=GetObject after=1"}) {
    SCOPED_TRACE(mode);
    harness_->set_fault(mode);
    auto got = read(*tier, key);
    EXPECT_FALSE(got.result) << "a read through a dying server succeeded";
  }
  // Through a hierarchy: a miss (degraded), nothing installed, and the fetcher serves.
  harness_->set_fault("reset op=GetObject after=1");
  std::shared_ptr<FolderTier> top;
  auto h = hierarchy_over(tier, &top);
  CountingFetcher fetch(bytes);
  auto fetched = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_TRUE(read_handle(fetched->handle) == bytes);
  EXPECT_GE(tier->counters().snapshot().errors, 1u);
  EXPECT_TRUE(list_dir(top->location() + "/.staging").empty());
  h.reset();  // waits for its background upload, which would otherwise overlap the read below

  harness_->set_fault("ok");
  expect_hit(read(*tier, key), bytes);
}

TEST_P(TierConformanceTest, ServerGoingAwayMidUploadIsAnErrorAndLeavesNothing) {
  if (!harness_->remote()) GTEST_SKIP() << "no server: the tier is in this process";
  TierSetup setup;
  setup.through_proxy = true;
  auto tier = make(setup);
  if (!harness_->observable()) GTEST_SKIP() << "no proxy in front of this tier's storage";
  const ShardKey big = make_key(18);
  const ShardKey small = make_key(19);

  // A server that cannot take parts gets the big object in one request (tier_conformance.hpp): that one dies.
  harness_->set_fault(harness_->uploads_in_parts() ? "drop op=UploadPart after=1" : "drop op=PutObject,UploadPart");
  auto multipart = install(*tier, big, random_bytes(12 << 20, 18));
  EXPECT_FALSE(multipart) << "a multipart upload whose parts died succeeded";
  harness_->set_fault("drop op=PutObject");
  auto single = install(*tier, small, random_bytes(1000, 19));
  EXPECT_FALSE(single) << "a PUT that never reached the server succeeded";

  harness_->set_fault("ok");
  for (const ShardKey& key : {big, small}) {
    auto contains = tier->contains(key);
    ASSERT_TRUE(contains) << contains.error().message;
    EXPECT_FALSE(*contains);
  }
  if (auto open = harness_->open_uploads()) {
    EXPECT_EQ(*open, 0) << "the failed multipart upload was not aborted";
  }
  // The tier works again once the server is back.
  install_ok(*tier, small, "back again");
  expect_hit(read(*tier, small), "back again");
}

// --- requests -----------------------------------------------------------------------------------------------

TEST_P(TierConformanceTest, ALookupIsOneRequest) {
  if (!harness_->remote()) GTEST_SKIP() << "a folder tier makes no requests";
  TierSetup setup;
  setup.through_proxy = true;
  auto tier = make(setup);
  if (!harness_->observable()) GTEST_SKIP() << "no proxy in front of this tier's storage";
  const ShardKey key = make_key(20);
  harness_->reset_counts();
  auto miss = read(*tier, key);
  ASSERT_TRUE(miss.result) << miss.result.error().message;
  EXPECT_FALSE(miss.result->has_value());
  EXPECT_EQ(harness_->counts().ops, (std::map<std::string, int>{{"GetObject", 1}})) << "a miss is one GET (a 404)";
  install_ok(*tier, key, "small");
  harness_->reset_counts();
  expect_hit(read(*tier, key), "small");
  if (harness_->metadata_in_read_answers()) {
    EXPECT_EQ(harness_->counts().ops, (std::map<std::string, int>{{"GetObject", 1}})) << "a small hit is one GET";
  } else {
    EXPECT_EQ(harness_->counts().ops, (std::map<std::string, int>{{"GetObject", 1}, {"HeadObject", 1}}))
        << "a small hit is one GET, and one read of the metadata the GET's answer does not carry";
  }
}

// --- coordination and check ---------------------------------------------------------------------------------

TEST_P(TierConformanceTest, ALeaseIsHeldByOneVmAtATime) {
  auto tier = make();
  if (tier->coordination() == nullptr) GTEST_SKIP() << "this tier offers no cross-VM leases";
  auto other = harness_->another_view({});
  const ShardKey key = make_key(21);
  auto nobody = other->coordination()->lease_holder(key);
  ASSERT_TRUE(nobody) << nobody.error().message;
  EXPECT_FALSE(*nobody) << "a lease nobody took has a holder";
  auto first = tier->coordination()->try_lease(key);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(first->held);
  // What a waiting VM polls: who holds it, and until when, without taking it.
  auto seen = other->coordination()->lease_holder(key);
  ASSERT_TRUE(seen) << seen.error().message;
  ASSERT_TRUE(*seen) << "the held lease is not seen";
  EXPECT_FALSE((*seen)->held);
  EXPECT_FALSE((*seen)->holder.empty());
  EXPECT_GT((*seen)->expires, std::chrono::system_clock::now());
  EXPECT_GT(tier->coordination()->renewal_period(), Milliseconds{0});
  auto second = other->coordination()->try_lease(key);
  ASSERT_TRUE(second) << second.error().message;
  if (harness_->honours_conditional_create()) {
    EXPECT_FALSE(second->held) << "two VMs hold the same lease";
    EXPECT_FALSE(second->holder.empty());
    EXPECT_GT(second->expires, std::chrono::system_clock::now());
  } else {
    // The server ignored If-None-Match: both "hold" it. `cache check` fails such a tier with single_flight: true.
    EXPECT_TRUE(second->held);
  }
  first->held.reset();  // released: the lease object is deleted
  second->held.reset();
  auto released = other->coordination()->lease_holder(key);
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_FALSE(*released) << "a released lease still has a holder";
  auto third = other->coordination()->try_lease(key);
  ASSERT_TRUE(third) << third.error().message;
  EXPECT_TRUE(third->held) << "a released lease is free again";
}

TEST_P(TierConformanceTest, CheckSaysWhatWorksAndLeavesNothingBehind) {
  auto tier = make();
  const CheckReport report = tier->check();
  std::string steps;
  for (const auto& step : report.steps) steps += step.name + (step.ok ? " ok: " : " FAIL: ") + step.detail + "\n";
  EXPECT_TRUE(report.readable) << steps;
  EXPECT_EQ(report.writable, harness_->honours_conditional_create()) << steps;
  if (harness_->remote() && !harness_->honours_conditional_create()) {
    TierSetup lenient;
    lenient.single_flight = false;
    const CheckReport without = harness_->make(lenient)->check();
    EXPECT_TRUE(without.writable) << "single_flight: false does not need conditional writes";
    EXPECT_FALSE(without.warnings.empty()) << "ignored conditional writes must be a warning";
  }
  auto listed = tier->list();
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_TRUE(listed->empty());
  if (auto stored = harness_->stored_objects()) {
    EXPECT_EQ(*stored, 0) << "the probe object was left behind";
  }
}

// --- the instances: one line per tier type (tier_conformance.hpp) -------------------------------------------

std::string kind_name(const testing::TestParamInfo<TierKind>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Folder, TierConformanceTest, testing::Values(folder_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(Memory, TierConformanceTest, testing::Values(memory_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(S3rver, TierConformanceTest, testing::Values(s3rver_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(Moto, TierConformanceTest, testing::Values(moto_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(AzuriteSharedKey, TierConformanceTest, testing::Values(azurite_shared_key_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(AzuriteSas, TierConformanceTest, testing::Values(azurite_sas_kind()), kind_name);
INSTANTIATE_TEST_SUITE_P(FirebaseGcs, TierConformanceTest, testing::Values(firebase_gcs_kind()), kind_name);

}  // namespace
}  // namespace datavo::conformance
