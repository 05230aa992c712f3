// Tests of src/tier/cloud/hedge.cpp: the hedge deadline (fixed, a percentile of a bounded window, the floor, the
// default before enough samples), the budget (one plus max_fraction of the GETs), and the race over a scripted
// BlobBackend whose requests stall, answer late or write other bytes on purpose:
//   (a) a stalled first request is hedged, the answer is the hedge's, and the first request is stopped;
//   (b) the budget caps the hedges of a run of slow GETs;
//   (c) Hedging::off sends one request per GET, however slow; a request retrying after a failed attempt (a 503's
//       backoff) is not hedged;
//   (d) a first request that goes on writing after the hedge won is fenced off: the sink holds the hedge's bytes
//       only; and a hedge that loses leaves nothing of its bytes in the sink;
//   (e) the deadline is on silence: a first request whose bytes keep flowing, however long it takes, is not
//       hedged; one that stalls mid-body is, and its hedge asks for the whole range; the deadline is estimated
//       from the time to first byte, not the whole time of a GET.
// The counts are the test's; no assertion is on time (the delays only order the requests).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "support/shard_fixtures.hpp"
#include "tier/cloud/hedge.hpp"
#include "util/cancel.hpp"

namespace datavo::cloud {
namespace {

using shardtest::StringSink;

// A backend whose get() runs the test's script; every other method is unused here.
class ScriptedBackend final : public BlobBackend {
 public:
  // call: 1-based, over the backend's life.
  using Script = std::function<Result<std::optional<ObjectInfo>>(int call, ByteRange range, ByteSink& sink)>;
  explicit ScriptedBackend(Script script) : script_(std::move(script)) {}

  std::string_view type() const override { return "scripted"; }
  std::string_view conditional_create() const override { return "none"; }
  std::string location() const override { return "scripted://"; }
  Result<std::string> credentials() override { return std::string("none"); }
  Result<std::optional<ObjectInfo>> get(const std::string&, std::optional<ByteRange> range, const std::string*,
                                        ByteSink& sink) override {
    return script_(++calls_, range.value_or(ByteRange{}), sink);
  }
  Result<std::optional<ObjectInfo>> head(const std::string&) override { return unused(); }
  Result<InstallOutcome> put(const std::string&, const net::RequestBody&, const std::optional<EntryMetadata>&,
                             Overwrite) override {
    return unused();
  }
  Result<std::string> start_upload(const std::string&, const EntryMetadata&) override { return unused(); }
  Result<UploadedPart> upload_part(const std::string&, const std::string&, int, const net::FileBody&) override {
    return unused();
  }
  Result<InstallOutcome> finish_upload(const std::string&, const std::string&, const std::vector<UploadedPart>&,
                                       const EntryMetadata&) override {
    return unused();
  }
  Result<void> abort_upload(const std::string&, const std::string&) override { return unused(); }
  Result<bool> remove(const std::string&) override { return unused(); }
  Result<std::vector<ListedObject>> list(const std::string&) override { return unused(); }

  int calls() const { return calls_.load(); }

 private:
  static Error unused() { return Error{ErrorCode::internal, "not scripted"}; }
  Script script_;
  std::atomic<int> calls_{0};
};

ObjectInfo info_of(std::size_t size) {
  ObjectInfo info;
  info.size = Bytes{size};
  info.version = "v1";
  return info;
}

// Waits as the transport waits for a server that does not answer: until the request is stopped, or `limit`.
// True when it was stopped.
bool stall(Milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (util::must_stop()) return true;
    std::this_thread::sleep_for(Milliseconds{1});
  }
  return false;
}

Result<std::optional<ObjectInfo>> answer(ByteSink& sink, const std::string& bytes) {
  DATAVO_TRY(sink.write(bytes.data(), bytes.size()));
  return std::optional<ObjectInfo>{info_of(bytes.size())};
}

HedgePolicy after(Milliseconds delay, double max_fraction = 1.0) {
  HedgePolicy policy;
  policy.mode = Hedging::on;
  policy.after = delay;
  policy.max_fraction = max_fraction;
  return policy;
}

TEST(HedgeDeadlineTest, AFixedDelayIsUsedAsItIs) {
  HedgeDeadline deadline(after(Milliseconds{250}));
  for (int i = 0; i < 100; ++i) deadline.record(Milliseconds{5});
  EXPECT_EQ(deadline.current(), Milliseconds{250});
}

TEST(HedgeDeadlineTest, TheDefaultHoldsUntilEnoughSamplesThenThePercentile) {
  HedgeDeadline deadline(HedgePolicy{});
  EXPECT_EQ(deadline.current(), k_hedge_default_after);
  for (std::size_t i = 1; i < k_hedge_min_samples; ++i) deadline.record(Milliseconds{100});
  EXPECT_EQ(deadline.current(), k_hedge_default_after) << "one sample short";
  // 100 samples of 10..1000 ms: p95 is the 95th smallest.
  HedgeDeadline fresh(HedgePolicy{});
  for (int i = 1; i <= 100; ++i) fresh.record(Milliseconds{i * 10});
  EXPECT_EQ(fresh.current(), Milliseconds{950});
  HedgePolicy p50;
  p50.percentile = 50;
  HedgeDeadline median(p50);
  for (int i = 1; i <= 100; ++i) median.record(Milliseconds{i * 10});
  EXPECT_EQ(median.current(), Milliseconds{500});
}

TEST(HedgeDeadlineTest, NeverUnderTheFloor) {
  HedgeDeadline deadline(HedgePolicy{});
  for (int i = 0; i < 100; ++i) deadline.record(Milliseconds{1});
  EXPECT_EQ(deadline.current(), k_hedge_floor);
}

TEST(HedgeDeadlineTest, TheWindowForgetsOldSamples) {
  HedgeDeadline deadline(HedgePolicy{});
  for (std::size_t i = 0; i < k_hedge_window; ++i) deadline.record(Milliseconds{5000});
  EXPECT_EQ(deadline.current(), Milliseconds{5000});
  for (std::size_t i = 0; i < k_hedge_window; ++i) deadline.record(Milliseconds{200});
  EXPECT_EQ(deadline.current(), Milliseconds{200}) << "a window of the last " << k_hedge_window << " GETs";
}

TEST(HedgeBudgetTest, OnePlusTheFractionOfTheRequests) {
  HedgeBudget budget(0.05);
  int spent = 0;
  for (int i = 0; i < 200; ++i) {
    budget.earn();
    if (budget.try_spend()) ++spent;
  }
  EXPECT_LE(spent, 1 + 10);
  EXPECT_GE(spent, 10);
}

TEST(HedgeBudgetTest, SavesUpAtMostABurst) {
  HedgeBudget budget(0.5);
  for (int i = 0; i < 1000; ++i) budget.earn();
  int spent = 0;
  while (budget.try_spend()) ++spent;
  EXPECT_EQ(spent, int(k_hedge_burst));
}

class HedgedReaderTest : public ::testing::Test {
 protected:
  std::shared_ptr<ScriptedBackend> backend(ScriptedBackend::Script script) {
    return std::make_shared<ScriptedBackend>(std::move(script));
  }
  TierCounters counters_;
};

TEST_F(HedgedReaderTest, AStalledFirstRequestIsHedgedAndTheHedgeAnswers) {
  const std::string bytes = shardtest::random_bytes(100'000, 1);
  std::atomic<bool> first_stopped{false};
  auto fake = backend([&](int call, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    if (call == 1) {
      first_stopped = stall(Milliseconds{30'000});
      return Error{ErrorCode::cancelled, "stopped"};
    }
    return answer(sink, bytes);
  });
  auto reader = std::make_unique<HedgedReader>(after(Milliseconds{50}), fake, counters_);
  StringSink sink;
  auto got = reader->get("object", ByteRange{0, bytes.size()}, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(*got);
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ(fake->calls(), 2);
  EXPECT_EQ(counters_.hedges_sent.load(), 1u);
  EXPECT_EQ(counters_.hedges_won.load(), 1u);
  reader.reset();  // joins the first request's thread
  EXPECT_TRUE(first_stopped) << "the losing request was stopped, not left to run for 30 s";
}

TEST_F(HedgedReaderTest, AFastFirstRequestIsNotHedged) {
  const std::string bytes = shardtest::random_bytes(1000, 2);
  auto fake = backend([&](int, ByteRange, ByteSink& sink) { return answer(sink, bytes); });
  HedgedReader reader(after(Milliseconds{10'000}), fake, counters_);
  for (int i = 0; i < 5; ++i) {
    StringSink sink;
    ASSERT_TRUE(reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink));
    EXPECT_EQ(sink.bytes(), bytes);
  }
  EXPECT_EQ(fake->calls(), 5);
  EXPECT_EQ(counters_.hedges_sent.load(), 0u);
}

TEST_F(HedgedReaderTest, AFirstRequestThatIsRetryingIsNotHedged) {
  // As the transport does after a 503 with Retry-After: it notes the retry, then sleeps through the backoff.
  const std::string bytes = shardtest::random_bytes(1000, 6);
  auto fake = backend([&](int, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    util::note_retry();
    (void)stall(Milliseconds{150});
    return answer(sink, bytes);
  });
  HedgedReader reader(after(Milliseconds{20}), fake, counters_);
  StringSink sink;
  ASSERT_TRUE(reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink));
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ(fake->calls(), 1) << "no second request to a server that asked for less";
  EXPECT_EQ(counters_.hedges_sent.load(), 0u);
}

TEST_F(HedgedReaderTest, TheBudgetCapsTheHedges) {
  const std::string bytes = shardtest::random_bytes(1000, 3);
  // Every request takes 40 ms: every GET is worth hedging after 2 ms.
  auto fake = backend([&](int, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    (void)stall(Milliseconds{40});
    if (util::must_stop()) return Error{ErrorCode::cancelled, "stopped"};
    return answer(sink, bytes);
  });
  HedgedReader reader(after(Milliseconds{2}, 0.05), fake, counters_);
  constexpr int k_gets = 40;
  for (int i = 0; i < k_gets; ++i) {
    StringSink sink;
    auto got = reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(sink.bytes(), bytes);
  }
  const auto sent = counters_.hedges_sent.load();
  EXPECT_LE(sent, 1u + k_gets / 20) << "at most 1 + 5% of " << k_gets << " GETs";
  EXPECT_GE(sent, 2u) << "the budget allows some";
  EXPECT_EQ(fake->calls(), k_gets + int(sent));
}

TEST_F(HedgedReaderTest, HedgingOffSendsOneRequestPerGet) {
  const std::string bytes = shardtest::random_bytes(1000, 4);
  auto fake = backend([&](int, ByteRange, ByteSink& sink) {
    (void)stall(Milliseconds{30});
    return answer(sink, bytes);
  });
  HedgePolicy policy = after(Milliseconds{1});
  policy.mode = Hedging::off;
  HedgedReader reader(policy, fake, counters_);
  for (int i = 0; i < 3; ++i) {
    StringSink sink;
    ASSERT_TRUE(reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink));
    EXPECT_EQ(sink.bytes(), bytes);
  }
  EXPECT_EQ(fake->calls(), 3);
  EXPECT_EQ(counters_.hedges_sent.load(), 0u);
}

TEST_F(HedgedReaderTest, AFirstAnswerThatGoesOnAfterTheHedgeWonNeverMixesIn) {
  const std::size_t size = 64 * 1024;
  const std::string first_bytes(size, 'A');
  const std::string hedge_bytes(size, 'B');
  std::atomic<bool> late_write_refused{false};
  auto fake = backend([&](int call, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    if (call == 1) {
      // Half of its answer, then silence until the hedge has won (the request is stopped), then the rest.
      EXPECT_TRUE(sink.write(first_bytes.data(), size / 2));
      EXPECT_TRUE(stall(Milliseconds{30'000}));
      auto rest = sink.write(first_bytes.data() + size / 2, size / 2);
      late_write_refused = !rest;
      if (!rest) return std::move(rest).error();
      return std::optional<ObjectInfo>{info_of(size)};
    }
    return answer(sink, hedge_bytes);
  });
  auto reader = std::make_unique<HedgedReader>(after(Milliseconds{50}), fake, counters_);
  StringSink sink;
  auto got = reader->get("object", ByteRange{0, size}, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  reader.reset();
  EXPECT_EQ(sink.bytes(), hedge_bytes) << "the hedge's bytes whole, none of the first answer's";
  EXPECT_TRUE(late_write_refused) << "the first request could write nothing once the hedge had won";
  EXPECT_EQ(counters_.hedges_won.load(), 1u);
}

TEST_F(HedgedReaderTest, AHedgeThatLosesLeavesNothingInTheSink) {
  const std::size_t size = 64 * 1024;
  const std::string first_bytes(size, 'A');
  std::atomic<bool> first_done{false};
  auto fake = backend([&](int call, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    if (call == 1) {
      (void)stall(Milliseconds{200});  // slow enough to be hedged, then it answers first
      auto got = answer(sink, first_bytes);
      first_done = true;
      return got;
    }
    // The hedge writes half of other bytes, then waits until the first has answered, then goes on.
    EXPECT_TRUE(sink.write(std::string(size / 2, 'B').data(), size / 2));
    EXPECT_TRUE(stall(Milliseconds{30'000})) << "stopped once the first answered";
    EXPECT_TRUE(first_done);
    (void)sink.write(std::string(size / 2, 'B').data(), size / 2);
    return std::optional<ObjectInfo>{info_of(size)};
  });
  auto reader = std::make_unique<HedgedReader>(after(Milliseconds{50}), fake, counters_);
  StringSink sink;
  auto got = reader->get("object", ByteRange{0, size}, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  reader.reset();
  EXPECT_EQ(sink.bytes(), first_bytes);
  EXPECT_EQ(counters_.hedges_sent.load(), 1u);
  EXPECT_EQ(counters_.hedges_won.load(), 0u);
}

// Writes `bytes` in `pieces` writes, `gap` apart: a slow link that keeps flowing.
Result<std::optional<ObjectInfo>> trickle(ByteSink& sink, const std::string& bytes, int pieces, Milliseconds gap) {
  const std::size_t piece = bytes.size() / std::size_t(pieces);
  for (int i = 0; i < pieces; ++i) {
    if (i > 0) std::this_thread::sleep_for(gap);
    const std::size_t at = std::size_t(i) * piece;
    DATAVO_TRY(sink.write(bytes.data() + at, i + 1 == pieces ? bytes.size() - at : piece));
  }
  return std::optional<ObjectInfo>{info_of(bytes.size())};
}

TEST_F(HedgedReaderTest, AFlowingTransferIsNotHedgedHoweverLongItTakes) {
  // 160 writes 5 ms apart: about 800 ms in all, four times the deadline, but never silent for 200 ms. A deadline
  // on the whole time of the GET would hedge it.
  const std::string bytes = shardtest::random_bytes(160 * 1024, 7);
  auto fake = backend([&](int, ByteRange, ByteSink& sink) { return trickle(sink, bytes, 160, Milliseconds{5}); });
  HedgedReader reader(after(Milliseconds{200}), fake, counters_);
  StringSink sink;
  auto got = reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(sink.bytes(), bytes);
  EXPECT_EQ(fake->calls(), 1) << "a slow but flowing transfer is not hedged";
  EXPECT_EQ(counters_.hedges_sent.load(), 0u);
}

TEST_F(HedgedReaderTest, AStallMidBodyIsHedgedForTheWholeRange) {
  const std::size_t size = 64 * 1024;
  const std::string bytes = shardtest::random_bytes(size, 8);
  const ByteRange range{1000, size};
  std::optional<ByteRange> hedge_range;
  auto fake = backend([&](int call, ByteRange asked, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    if (call == 1) {
      // A quarter of the range flowing, then silence until it is stopped.
      DATAVO_TRY(trickle(sink, bytes.substr(0, size / 4), 16, Milliseconds{5}));
      (void)stall(Milliseconds{30'000});
      return Error{ErrorCode::cancelled, "stopped"};
    }
    hedge_range = asked;
    return answer(sink, bytes);
  });
  auto reader = std::make_unique<HedgedReader>(after(Milliseconds{100}), fake, counters_);
  StringSink sink;
  auto got = reader->get("object", range, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  reader.reset();
  EXPECT_EQ(sink.bytes(), bytes) << "the hedge's bytes, whole";
  EXPECT_EQ(fake->calls(), 2);
  ASSERT_TRUE(hedge_range);
  EXPECT_EQ(hedge_range->first, range.first);
  EXPECT_EQ(hedge_range->length, range.length) << "the hedge asks for the whole range again";
  EXPECT_EQ(counters_.hedges_sent.load(), 1u);
  EXPECT_EQ(counters_.hedges_won.load(), 1u);
}

TEST_F(HedgedReaderTest, TheDeadlineIsEstimatedFromTheTimeToFirstByte) {
  // Every GET answers its first byte at once, then trickles for at least 200 ms (21 writes 10 ms apart). Once
  // enough GETs were seen, the p95 deadline is near their first byte, not their whole time (200 ms and more).
  const std::string bytes = shardtest::random_bytes(21 * 1024, 9);
  auto fake = backend([&](int, ByteRange, ByteSink& sink) { return trickle(sink, bytes, 21, Milliseconds{10}); });
  HedgePolicy policy;
  policy.mode = Hedging::on;
  HedgedReader reader(policy, fake, counters_);
  for (std::size_t i = 0; i < k_hedge_min_samples; ++i) {
    StringSink sink;
    auto got = reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(sink.bytes(), bytes);
  }
  EXPECT_LT(reader.deadline().current(), Milliseconds{200}) << "the time to first byte, not the whole GET";
}

TEST_F(HedgedReaderTest, WhenBothFailTheFirstErrorIsReturnedAndOneFailureWaitsForTheOther) {
  const std::string bytes = shardtest::random_bytes(1000, 5);
  // The first request fails after the hedge was sent; the hedge answers: the GET succeeds.
  auto fake = backend([&](int call, ByteRange, ByteSink& sink) -> Result<std::optional<ObjectInfo>> {
    if (call == 1) {
      (void)stall(Milliseconds{150});
      return Error{ErrorCode::remote, "first: HTTP 500"};
    }
    if (call == 2) {
      std::this_thread::sleep_for(Milliseconds{300});
      return answer(sink, bytes);
    }
    if (call == 3) {
      (void)stall(Milliseconds{150});
      return Error{ErrorCode::remote, "third: HTTP 500"};
    }
    return Error{ErrorCode::remote, "fourth: HTTP 503"};
  });
  HedgedReader reader(after(Milliseconds{50}), fake, counters_);
  StringSink sink;
  auto got = reader.get("object", ByteRange{0, bytes.size()}, nullptr, sink);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(sink.bytes(), bytes);
  StringSink other;
  auto failed = reader.get("object", ByteRange{0, bytes.size()}, nullptr, other);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "third: HTTP 500");
}

}  // namespace
}  // namespace datavo::cloud
