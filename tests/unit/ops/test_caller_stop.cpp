// Tests of ops::CallerStop (src/ops/caller_stop.cpp): a caller's stop flag reaches the token that work for it runs
// under, and so util::must_stop() on that work's thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ops/caller_stop.hpp"

namespace datavo::ops {
namespace {

bool stops_within(util::StopToken& token, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!token.stop_requested() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return token.stop_requested();
}

TEST(CallerStop, AFlagThatTurnsTrueStopsTheWorkRunningUnderItsToken) {
  std::atomic<bool> flag{false};
  CallerStop caller(&flag);
  std::atomic<bool> seen{false};
  std::thread work([&] {
    util::StopScope scope(caller.token());
    while (!util::must_stop()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    seen = true;
  });
  EXPECT_FALSE(caller.token().stop_requested());
  flag = true;
  EXPECT_TRUE(stops_within(caller.token(), std::chrono::seconds(10)));
  work.join();
  EXPECT_TRUE(seen);
}

TEST(CallerStop, AFlagAlreadyTrueStopsTheTokenBeforeTheConstructorReturns) {
  std::atomic<bool> flag{true};
  CallerStop caller(&flag);
  EXPECT_TRUE(caller.token().stop_requested());
}

TEST(CallerStop, WithoutAFlagTheTokenIsNeverStoppedAndTheDestructorReturns) {
  CallerStop caller(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_FALSE(caller.token().stop_requested());
}

}  // namespace
}  // namespace datavo::ops
