// One mutex per key (src/origin/keyed_mutex.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "origin/keyed_mutex.hpp"

namespace datavo::origin {
namespace {

TEST(OriginKeyedMutex, OneMutexPerKeyWhileHeld) {
  KeyedMutex mutexes;
  auto a = mutexes.get("a");
  EXPECT_EQ(mutexes.get("a"), a);
  EXPECT_NE(mutexes.get("b"), a);
}

TEST(OriginKeyedMutex, HoldersOfOneKeyAreSerialisedAcrossASweep) {
  KeyedMutex mutexes;
  auto held = mutexes.get("key");
  // More keys than the sweep bound, none held: the sweep must not drop the one still held.
  for (int i = 0; i < 3000; ++i) mutexes.get("other" + std::to_string(i));
  EXPECT_EQ(mutexes.get("key"), held);

  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto mutex = mutexes.get("key");
        std::lock_guard lock(*mutex);
        most = std::max(most.load(), ++inside);
        --inside;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(most.load(), 1);
}

}  // namespace
}  // namespace datavo::origin
