// The schedule of a machine that waits on another machine's lease (hierarchy.cpp, wait_for_lease): it polls the
// lease, one small request each, with a jittered exponential backoff capped at the holder's renewal period, so that
// it makes at most k_quick_polls polls per shard plus one per renewal period however long it waits (issue 16: three
// waiting VMs made about 600 requests in one region run). Internal to the hierarchy.
//
// Thread safety: lease_wait_clock() may be read from any thread; a LeasePolls belongs to one wait.
#pragma once

#include <cstdint>
#include <memory>
#include <random>

#include "datavo/units.hpp"
#include "net/http_client.hpp"

namespace datavo::core {

// The clock a lease wait sleeps and measures on: net::system_clock(), whose sleeps a cancellation ends. The
// hierarchy's tests replace it with one that records the sleeps and returns at once, to count the polls of a long
// wait without waiting. REQUIRES: not replaced while a wait runs.
std::shared_ptr<net::Clock>& lease_wait_clock();

class LeasePolls {
 public:
  static constexpr int k_quick_polls = 3;
  static constexpr Milliseconds k_first_delay{500};
  // Each delay is lengthened by up to this fraction, at random, so that machines that started waiting together do
  // not poll together. Never shortened: the bound above holds with any jitter.
  static constexpr double k_max_jitter = 0.25;

  // `renewal_period`: how often the holder renews its lease (RemoteCoordination::renewal_period()).
  explicit LeasePolls(Milliseconds renewal_period);

  // The wait before the next poll: k_first_delay doubling for the first k_quick_polls polls, then the renewal
  // period, each at most the renewal period before its jitter. Poll n (from 0) therefore comes at least
  // (n - k_quick_polls + 1) renewal periods after the wait began.
  Milliseconds next();

 private:
  const Milliseconds period_;
  int polls_ = 0;
  std::minstd_rand random_;
};

}  // namespace datavo::core
