// Tests of the lease wait's schedule (src/core/lease_wait.cpp): the bound on the polls holds for any jitter, the
// first polls come quickly, and no delay exceeds the renewal period by more than the jitter.
#include <gtest/gtest.h>

#include "core/lease_wait.hpp"

namespace datavo::core {
namespace {

TEST(LeasePolls, PollNComesAtLeastNMinusTwoRenewalPeriodsAfterTheWaitBegan) {
  for (const Milliseconds period : {Milliseconds{1000}, Milliseconds{20'000}, Milliseconds{200'000}}) {
    for (int trial = 0; trial < 50; ++trial) {
      LeasePolls polls(period);
      Milliseconds at{0};
      for (int n = 0; n < 40; ++n) {
        at += polls.next();
        const auto allowed_before = LeasePolls::k_quick_polls + at / period;
        ASSERT_LE(n + 1, allowed_before) << "poll " << n << " at " << at.count() << " ms, period " << period.count();
      }
    }
  }
}

TEST(LeasePolls, TheFirstPollsBackOffFromHalfASecondAndLaterOnesWaitAboutAPeriod) {
  LeasePolls polls(Milliseconds{20'000});
  const Milliseconds expected[] = {Milliseconds{500}, Milliseconds{1000}, Milliseconds{2000}, Milliseconds{20'000},
                                   Milliseconds{20'000}};
  for (const Milliseconds base : expected) {
    const Milliseconds delay = polls.next();
    EXPECT_GE(delay, base);
    EXPECT_LE(delay, base + base / 4);
  }
}

TEST(LeasePolls, AShortPeriodCapsTheFirstDelays) {
  LeasePolls polls(Milliseconds{600});
  for (int n = 0; n < 5; ++n) {
    const Milliseconds delay = polls.next();
    EXPECT_LE(delay, Milliseconds{750}) << n;
    EXPECT_GE(delay, n == 0 ? Milliseconds{500} : Milliseconds{600}) << n;
  }
}

}  // namespace
}  // namespace datavo::core
