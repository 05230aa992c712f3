#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
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

TEST(Cancel, WithoutACancellationACleanupScopeChangesNothing) {
  ASSERT_FALSE(cancel_requested());
  EXPECT_FALSE(in_cleanup_scope());
  {
    CleanupScope outer;
    {
      CleanupScope inner;  // scopes nest
      EXPECT_TRUE(in_cleanup_scope());
    }
    EXPECT_TRUE(in_cleanup_scope());
    EXPECT_FALSE(must_stop());
    EXPECT_FALSE(cleanup_deadline());
    auto slept = sleep_unless_cancelled(Milliseconds(30), "a cleanup's backoff");
    EXPECT_TRUE(slept) << slept.error().message;
  }
  EXPECT_FALSE(in_cleanup_scope());
}

void cleanup_scope_after_a_cancellation() {
  const auto requested = std::chrono::steady_clock::now();
  request_cancel(SIGINT);
  bool ok = must_stop() && cleanup_deadline() && *cleanup_deadline() >= requested + k_cleanup_budget &&
            *cleanup_deadline() <= std::chrono::steady_clock::now() + k_cleanup_budget;
  bool other_stops = false;  // its own flag, read after join(): the scope is the thread's own
  std::thread other([&other_stops] { other_stops = must_stop(); });
  {
    CleanupScope cleanup;
    ok = ok && !must_stop();
    // A backoff inside the scope is not cut short by the cancellation (no busy retry loop)...
    auto start = std::chrono::steady_clock::now();
    ok = ok && sleep_unless_cancelled(Milliseconds(200), "a cleanup's backoff") &&
         std::chrono::steady_clock::now() - start >= Milliseconds(200);
    // ... but ends at the cleanup deadline, which then stops the scope's work too.
    auto slept = sleep_unless_cancelled(Milliseconds(3'600'000), "a cleanup's backoff");
    ok = ok && !slept && slept.error().code == ErrorCode::cancelled &&
         std::chrono::steady_clock::now() >= *cleanup_deadline() &&
         std::chrono::steady_clock::now() - requested < k_cleanup_budget + Milliseconds(2000) && must_stop();
  }
  other.join();
  std::exit(ok && other_stops ? 0 : 1);
}

TEST(CancelDeathTest, ACleanupScopeIsExemptFromACancellationUntilTheCleanupDeadline) {
  EXPECT_EXIT(cleanup_scope_after_a_cancellation(), testing::ExitedWithCode(0), "");
}

TEST(StopScope, AStoppedTokenStopsItsThreadOnlyAndScopesNest) {
  StopToken outer, inner;
  EXPECT_FALSE(must_stop());
  {
    StopScope outer_scope(outer);
    {
      StopScope inner_scope(inner);
      outer.request_stop();
      EXPECT_FALSE(must_stop()) << "the innermost token is the one that counts";
      bool other_stops = true;
      std::thread other([&] { other_stops = must_stop(); });
      other.join();
      EXPECT_FALSE(other_stops);
      inner.request_stop();
      EXPECT_TRUE(must_stop());
      auto slept = sleep_unless_cancelled(Milliseconds(10000), "a sleep");
      ASSERT_FALSE(slept);
      EXPECT_EQ(slept.error().code, ErrorCode::cancelled);
      EXPECT_NE(slept.error().message.find("a sleep: no longer needed"), std::string::npos) << slept.error().message;
    }
    EXPECT_TRUE(must_stop()) << "the enclosing scope's token counts again once the inner scope ends";
  }
  EXPECT_FALSE(must_stop()) << "outside every scope the thread is not stopped";
}

TEST(StopScope, AStoppedTokenDoesNotStopACleanup) {
  StopToken token;
  StopScope scope(token);
  token.request_stop();
  EXPECT_TRUE(must_stop());
  {
    CleanupScope cleanup;  // a lease release, an upload's abort: what the stopped work must still undo
    EXPECT_FALSE(must_stop());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(sleep_unless_cancelled(Milliseconds(50), "a cleanup's backoff"));
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(must_stop());
}

// A child forked while a thread of its parent sleeps in sleep_unless_cancelled (a SampleStream's prefetcher in a
// backoff, when a Python training script forks) exits normally: the sleepers' wakeup is never destroyed, so the
// child's exit does not wait for a sleeper that does not exist there (pthread_cond_destroy of the copy would).
TEST(Cancel, AChildForkedWhileAThreadSleepsExitsNormally) {
  StopToken token;
  std::atomic<bool> sleeping{false};
  std::thread sleeper([&] {
    StopScope scope(token);
    sleeping = true;
    (void)sleep_unless_cancelled(Milliseconds(30'000), "a long sleep");
  });
  while (!sleeping.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // in its wait by now
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) std::exit(0);  // runs the static destructors, as Python's sys.exit does
  int status = 0;
  pid_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  token.request_stop();
  sleeper.join();
  EXPECT_EQ(done, child) << "the child hung in its exit";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace datavo::util
