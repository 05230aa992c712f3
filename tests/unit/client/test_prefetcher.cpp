// Tests of the background prefetcher (src/client/prefetcher.hpp): order, the bound on items ahead, sticky errors,
// the synchronous mode and cancellation by the destructor and by cancel().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "client/prefetcher.hpp"
#include "util/cancel.hpp"

namespace datavo::client {
namespace {

using namespace std::chrono_literals;

TEST(PrefetcherTest, YieldsEveryItemInOrder) {
  for (std::size_t depth : {0u, 1u, 3u, 10u}) {
    Prefetcher<int> prefetcher(5, depth,
                               [](std::size_t i, const std::atomic<bool>&) -> Result<int> { return int(i) * 10; });
    for (int i = 0; i < 5; ++i) {
      auto item = prefetcher.next();
      ASSERT_TRUE(item && *item) << "depth " << depth;
      EXPECT_EQ(**item, i * 10);
    }
    auto end = prefetcher.next();
    ASSERT_TRUE(end);
    EXPECT_FALSE(*end);
  }
}

TEST(PrefetcherTest, NeverLoadsMoreThanDepthAhead) {
  constexpr std::size_t k_depth = 2;
  std::atomic<std::size_t> started{0};
  Prefetcher<std::size_t> prefetcher(20, k_depth, [&](std::size_t i, const std::atomic<bool>&) -> Result<std::size_t> {
    ++started;
    return i;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(started.load(), k_depth) << "with nothing taken, exactly `depth` items are loaded";
  ASSERT_TRUE(prefetcher.next());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(started.load(), k_depth + 1);
  EXPECT_LE(prefetcher.max_ahead(), k_depth);
}

// The byte bound: items of 100 bytes in a window of 10 items and 250 bytes: one is started alone (nothing to estimate
// by yet), then at most two are held or loading ahead, and the bytes held never exceed 250. A window smaller than one
// item still moves, one item at a time.
TEST(PrefetcherTest, TheByteBoundHoldsByTheSizesOfTheItemsLoaded) {
  for (const auto& [budget, most_ahead] : std::vector<std::pair<std::uint64_t, std::size_t>>{{250, 2}, {50, 1}}) {
    std::atomic<std::size_t> started{0};
    Prefetcher<std::size_t> prefetcher(
        20, Prefetcher<std::size_t>::Window{10, Bytes{budget}},
        [&](std::size_t i, const std::atomic<bool>&) -> Result<std::size_t> {
          ++started;
          return i;
        },
        /*max_parallel=*/4, [](const std::size_t&) { return Bytes{100}; });
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(started.load(), most_ahead) << "budget " << budget << ": with nothing taken";
    for (std::size_t i = 0; i < 20; ++i) {
      auto item = prefetcher.next();
      ASSERT_TRUE(item && *item);
      EXPECT_EQ(**item, i);
    }
    EXPECT_FALSE(*prefetcher.next());
    EXPECT_LE(prefetcher.max_ahead(), most_ahead) << "budget " << budget;
    EXPECT_LE(prefetcher.max_ahead_bytes(), Bytes{budget < 100 ? 100 : budget}) << "budget " << budget;
    EXPECT_GT(prefetcher.max_ahead_bytes(), Bytes{0});
  }
}

TEST(PrefetcherTest, ParallelLoadsStayInOrderAndWithinTheBound) {
  constexpr std::size_t k_depth = 3;
  std::atomic<int> running{0}, peak{0};
  Prefetcher<std::size_t> prefetcher(
      30, k_depth,
      [&](std::size_t i, const std::atomic<bool>&) -> Result<std::size_t> {
        const int now = ++running;
        for (int seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
        }
        // Later items finish first now and then: the consumer must still see them in order.
        std::this_thread::sleep_for(std::chrono::milliseconds((i * 7) % 5));
        --running;
        return i;
      },
      /*max_parallel=*/3);
  for (std::size_t i = 0; i < 30; ++i) {
    auto item = prefetcher.next();
    ASSERT_TRUE(item && *item);
    EXPECT_EQ(**item, i);
  }
  EXPECT_FALSE(*prefetcher.next());
  EXPECT_LE(peak.load(), 3);
  EXPECT_LE(prefetcher.max_ahead(), k_depth);
}

TEST(PrefetcherTest, LoadsRunConcurrently) {
  // Three loads that each wait for the other two to start: they only finish if they run at the same time.
  std::atomic<int> started{0};
  Prefetcher<int> prefetcher(
      3, 3,
      [&](std::size_t i, const std::atomic<bool>& cancelled) -> Result<int> {
        ++started;
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (started.load() < 3 && !cancelled.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(1ms);
        if (started.load() < 3) return Error{ErrorCode::timeout, "loads did not overlap"};
        return int(i);
      },
      /*max_parallel=*/3);
  for (int i = 0; i < 3; ++i) {
    auto item = prefetcher.next();
    ASSERT_TRUE(item) << item.error().message;
    ASSERT_TRUE(*item);
  }
}

TEST(PrefetcherTest, ItemsBeforeAFailureAreStillDelivered) {
  Prefetcher<int> prefetcher(
      10, 4,
      [&](std::size_t i, const std::atomic<bool>&) -> Result<int> {
        if (i == 2) return Error{ErrorCode::remote, "item 2 failed"};
        // Items 0 and 1 finish after item 2 has failed.
        if (i < 2) std::this_thread::sleep_for(50ms);
        return int(i);
      },
      /*max_parallel=*/4);
  for (int i = 0; i < 2; ++i) {
    auto item = prefetcher.next();
    ASSERT_TRUE(item && *item);
    EXPECT_EQ(**item, i);
  }
  auto failed = prefetcher.next();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "item 2 failed");
}

TEST(PrefetcherTest, SynchronousModeLoadsOnDemand) {
  std::atomic<std::size_t> started{0};
  Prefetcher<std::size_t> prefetcher(3, 0, [&](std::size_t i, const std::atomic<bool>&) -> Result<std::size_t> {
    ++started;
    return i;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(started.load(), 0u);
  ASSERT_TRUE(prefetcher.next());
  EXPECT_EQ(started.load(), 1u);
  EXPECT_EQ(prefetcher.max_ahead(), 0u);
}

TEST(PrefetcherTest, FirstErrorIsStickyAndStopsLoading) {
  std::atomic<std::size_t> started{0};
  Prefetcher<int> prefetcher(10, 4, [&](std::size_t i, const std::atomic<bool>&) -> Result<int> {
    ++started;
    if (i == 1) return Error{ErrorCode::remote, "item 1 failed"};
    return int(i);
  });
  auto first = prefetcher.next();
  ASSERT_TRUE(first && *first);
  for (int round = 0; round < 2; ++round) {
    auto failed = prefetcher.next();
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().message, "item 1 failed");
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(started.load(), 2u) << "nothing is loaded after a failure";
}

TEST(PrefetcherTest, DestructorCancelsALoadInProgress) {
  std::atomic<bool> saw_cancel{false};
  std::atomic<bool> loading{false};
  const auto started = std::chrono::steady_clock::now();
  {
    Prefetcher<int> prefetcher(3, 1, [&](std::size_t, const std::atomic<bool>& cancelled) -> Result<int> {
      loading = true;
      while (!cancelled.load()) std::this_thread::sleep_for(1ms);
      saw_cancel = true;
      return Error{ErrorCode::io, "cancelled"};
    });
    while (!loading.load()) std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(saw_cancel.load());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(PrefetcherTest, CancelFromAnotherThreadWakesAWaitingConsumer) {
  for (std::size_t depth : {0u, 2u}) {
    std::atomic<bool> loading{false};
    Prefetcher<int> prefetcher(3, depth, [&](std::size_t, const std::atomic<bool>& cancelled) -> Result<int> {
      loading = true;
      while (!cancelled.load()) std::this_thread::sleep_for(1ms);
      return Error{ErrorCode::io, "load cut short"};
    });
    const auto started = std::chrono::steady_clock::now();
    std::thread canceller([&] {
      while (!loading.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);  // the consumer is inside next() by now
      prefetcher.cancel();
    });
    auto item = prefetcher.next();  // blocks on the never-ending load until cancel()
    canceller.join();
    ASSERT_FALSE(item) << "depth " << depth;
    if (depth > 0) {
      EXPECT_EQ(item.error().code, ErrorCode::cancelled);
    }
    auto again = prefetcher.next();
    ASSERT_FALSE(again) << "depth " << depth << ": sticky";
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    prefetcher.cancel();  // idempotent
  }
}

// A load that waits for something that does not look at the flag (here a cancellable sleep, as a transfer, a backoff
// or another process's shard lock wait) is stopped by cancel() and by the destructor through its thread's StopScope,
// on the prefetcher's threads and on the consumer's (depth 0) alike; outside the loads the thread is not stopped.
TEST(PrefetcherTest, CancelStopsWhatTheLoadWaitsForThroughItsStopScope) {
  for (std::size_t depth : {0u, 2u}) {
    for (const bool by_destructor : {false, true}) {
      std::atomic<bool> loading{false};
      std::atomic<bool> stopped_in_load{false};
      Result<void> slept;
      const auto started = std::chrono::steady_clock::now();
      {
        auto prefetcher =
            std::make_unique<Prefetcher<int>>(3, depth, [&](std::size_t, const std::atomic<bool>&) -> Result<int> {
              loading = true;
              slept = util::sleep_unless_cancelled(Milliseconds(30000), "a load");
              stopped_in_load = util::must_stop();
              return Error{ErrorCode::io, "load cut short"};
            });
        std::thread canceller([&] {
          while (!loading.load()) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(20ms);
          if (by_destructor && depth > 0) {
            prefetcher.reset();
          } else {
            prefetcher->cancel();
          }
        });
        if (depth == 0 || !by_destructor) (void)prefetcher->next();
        canceller.join();
      }
      ASSERT_FALSE(slept) << "depth " << depth << ": the load's sleep was not stopped";
      EXPECT_EQ(slept.error().code, ErrorCode::cancelled);
      EXPECT_TRUE(stopped_in_load.load());
      EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
      EXPECT_FALSE(util::must_stop()) << "the consumer's thread stays unstopped outside the loads";
    }
  }
}

}  // namespace
}  // namespace datavo::client
