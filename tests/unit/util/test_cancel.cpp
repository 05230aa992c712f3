#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "util/cancel.hpp"

namespace datavo::util {
namespace {

// A cancellation is process-wide and sticky, so every case that requests one runs in a child process of its own
// (a death test) and leaves this process's flag alone.

TEST(Cancel, ASleepWithoutACancellationLastsItsDurationAndSucceeds) {
  ASSERT_FALSE(cancel_requested());
  const auto start = std::chrono::steady_clock::now();
  auto slept = sleep_unless_cancelled(Milliseconds(30), "a wait");
  EXPECT_TRUE(slept) << slept.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - start, Milliseconds(30));
}

void sleep_woken_by_a_cancellation_from_another_thread() {
  std::thread canceller([] {
    std::this_thread::sleep_for(Milliseconds(50));
    request_cancel(SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  auto slept = sleep_unless_cancelled(Milliseconds(60'000), "waiting for a lease");
  const auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  const bool ok = !slept && slept.error().code == ErrorCode::cancelled &&
                  slept.error().message == "waiting for a lease: interrupted by SIGTERM" && took < Milliseconds(30'000);
  std::exit(ok ? 0 : 1);
}

TEST(CancelDeathTest, ACancellationWakesASleepAtOnceWithACancelledError) {
  EXPECT_EXIT(sleep_woken_by_a_cancellation_from_another_thread(), testing::ExitedWithCode(0), "");
}

void sleep_after_a_cancellation() {
  request_cancel(SIGINT);
  request_cancel(SIGTERM);  // the first request wins
  auto slept = sleep_unless_cancelled(Milliseconds(60'000), "backoff");
  std::exit(!slept && slept.error().message == "backoff: interrupted by SIGINT" ? 0 : 1);
}

TEST(CancelDeathTest, ASleepAfterACancellationReturnsAtOnceNamingTheFirstSignal) {
  EXPECT_EXIT(sleep_after_a_cancellation(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace datavo::util
