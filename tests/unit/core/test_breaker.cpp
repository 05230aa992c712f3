// Tests of the per-tier circuit breaker (src/core/breaker.cpp) on a clock the test moves: opens after 3 failures
// in a row with one WARNING, skips the tier during the cooldown, lets one trial through after it, doubles the
// cooldown after a failed trial (up to 10 min) but not after the failures of calls that began before it opened, and
// closes on a successful trial with one WARNING.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/breaker.hpp"
#include "util/log.hpp"

namespace datavo::core {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  Breaker::Clock::time_point now = Breaker::Clock::time_point{} + 1000h;
  std::function<Breaker::Clock::time_point()> fn() {
    return [this] { return now; };
  }
};

// Runs `body` with WARNINGs captured from stderr.
template <typename F>
std::string warnings_of(F body) {
  const log::Level saved = log::level();
  log::set_level(log::Level::warning);
  testing::internal::CaptureStderr();
  body();
  std::string logged = testing::internal::GetCapturedStderr();
  log::set_level(saved);
  return logged;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Breaker, OpensAfterThreeFailuresInARowWithOneWarning) {
  FakeClock clock;
  Breaker breaker("tier 'b' (s3)", clock.fn());
  const std::string logged = warnings_of([&] {
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(breaker.allows());
      breaker.failed("HTTP 503");
      EXPECT_FALSE(breaker.open()) << "opened after " << i + 1 << " failures";
    }
    EXPECT_TRUE(breaker.allows());
    breaker.failed("HTTP 503");
    EXPECT_TRUE(breaker.open());
    // Skipped from now on: no more calls, so no more failures and no more warnings.
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(breaker.allows());
  });
  EXPECT_EQ(count_of(logged, "WARNING"), 1) << logged;
  EXPECT_NE(logged.find("tier 'b' (s3) failed 3 times in a row (last: HTTP 503); skipping it for 30 s"),
            std::string::npos)
      << logged;
}

TEST(Breaker, ASuccessInBetweenStartsTheCountAgain) {
  FakeClock clock;
  Breaker breaker("t", clock.fn());
  breaker.failed("x");
  breaker.failed("x");
  breaker.succeeded();
  breaker.failed("x");
  breaker.failed("x");
  EXPECT_FALSE(breaker.open()) << "failures separated by a success are not 'in a row'";
  breaker.failed("x");
  EXPECT_TRUE(breaker.open());
}

TEST(Breaker, SkipsDuringTheCooldownThenLetsOneTrialThrough) {
  FakeClock clock;
  Breaker breaker("t", clock.fn());
  (void)warnings_of([&] {
    for (int i = 0; i < 3; ++i) breaker.failed("x");
  });
  clock.now += 29s;
  EXPECT_FALSE(breaker.allows()) << "used during the cooldown";
  clock.now += 1s;
  EXPECT_TRUE(breaker.allows()) << "no trial after the cooldown";
  EXPECT_FALSE(breaker.allows()) << "a second caller got through while the trial runs";
  EXPECT_TRUE(breaker.open());
}

TEST(Breaker, AFailedTrialDoublesTheCooldownUpToTenMinutes) {
  FakeClock clock;
  Breaker breaker("t", clock.fn());
  const std::string logged = warnings_of([&] {
    for (int i = 0; i < 3; ++i) breaker.failed("x");
    std::chrono::seconds cooldown = 30s;
    for (int trial = 0; trial < 8; ++trial) {
      clock.now += cooldown;
      ASSERT_TRUE(breaker.allows()) << "trial " << trial << " after " << cooldown.count() << " s";
      breaker.failed("still down");
      cooldown = std::min<std::chrono::seconds>(cooldown * 2, 600s);
      clock.now += cooldown - 1s;
      EXPECT_FALSE(breaker.allows()) << "trial " << trial << ": used before " << cooldown.count() << " s";
      clock.now += 1s - cooldown;
    }
  });
  EXPECT_EQ(count_of(logged, "WARNING"), 1) << "failed trials must not warn again: " << logged;
}

TEST(Breaker, FailuresOfCallsStartedBeforeItOpenedDoNotPushTheTrialAway) {
  FakeClock clock;
  Breaker breaker("t", clock.fn());
  warnings_of([&] {
    for (int i = 0; i < 3; ++i) breaker.failed("x");
    // Four workers each had a request in flight when it opened; they fail one after the other, seconds later.
    for (int straggler = 0; straggler < 4; ++straggler) {
      clock.now += 2s;
      breaker.failed("in flight before it opened");
    }
  });
  EXPECT_EQ(breaker.last_failure(), "in flight before it opened");
  clock.now += 21s;  // 29 s after it opened
  EXPECT_FALSE(breaker.allows());
  clock.now += 1s;
  EXPECT_TRUE(breaker.allows()) << "the first trial comes 30 s after opening, whatever failed meanwhile";
  breaker.succeeded();
  EXPECT_FALSE(breaker.open());
}

TEST(Breaker, ASuccessfulTrialClosesItWithOneWarning) {
  FakeClock clock;
  Breaker breaker("tier 'b' (s3)", clock.fn());
  const std::string logged = warnings_of([&] {
    for (int i = 0; i < 3; ++i) breaker.failed("x");
    clock.now += 30s;
    ASSERT_TRUE(breaker.allows());
    breaker.succeeded();
  });
  EXPECT_FALSE(breaker.open());
  EXPECT_NE(logged.find("tier 'b' (s3) works again"), std::string::npos) << logged;
  EXPECT_EQ(count_of(logged, "WARNING"), 2) << "one when it opened, one when it closed: " << logged;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(breaker.allows());
  // Closed for good: it takes three new failures in a row to open it again, with the first cooldown.
  breaker.failed("x");
  breaker.failed("x");
  EXPECT_FALSE(breaker.open());
  (void)warnings_of([&] { breaker.failed("x"); });
  EXPECT_TRUE(breaker.open());
  clock.now += 30s;
  EXPECT_TRUE(breaker.allows());
}

// A call that is let through as the trial but never reports back (the hierarchy used the tier on a path that
// gives no verdict, e.g. a queued upload) must not keep the breaker open for the rest of the process.
TEST(Breaker, ATrialThatNeverReportsDoesNotKeepItOpenForever) {
  FakeClock clock;
  Breaker breaker("t", clock.fn());
  (void)warnings_of([&] {
    for (int i = 0; i < 3; ++i) breaker.failed("x");
  });
  clock.now += 30s;
  ASSERT_TRUE(breaker.allows());  // the trial, which never says how it went
  clock.now += 29s;
  EXPECT_FALSE(breaker.allows());
  clock.now += 1s;
  EXPECT_TRUE(breaker.allows()) << "a lost trial keeps the tier skipped for good";
}

}  // namespace
}  // namespace datavo::core
