#include "core/lease_wait.hpp"

#include <algorithm>

namespace datavo::core {

std::shared_ptr<net::Clock>& lease_wait_clock() {
  static std::shared_ptr<net::Clock> clock = net::system_clock();
  return clock;
}

LeasePolls::LeasePolls(Milliseconds renewal_period)
    : period_(std::max(renewal_period, Milliseconds{1})), random_(std::random_device{}()) {}

Milliseconds LeasePolls::next() {
  Milliseconds base = period_;
  if (polls_ < k_quick_polls) base = std::min(period_, k_first_delay * (1 << polls_));
  ++polls_;
  std::uniform_real_distribution<double> jitter(0.0, k_max_jitter);
  return base + std::chrono::duration_cast<Milliseconds>(base * jitter(random_));
}

}  // namespace datavo::core
