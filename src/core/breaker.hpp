// Breaker: the circuit breaker of one tier in a hierarchy. A tier that fails k_failures_to_open times in a row
// is skipped for a cooldown (30 s, doubling after each failed trial up to 10 min; the failures of calls that began
// before it opened change nothing); when the cooldown ends one call
// is let through as a trial (another one a cooldown later if it never reports), and a success closes the
// breaker. It logs one WARNING when it opens and one when it
// closes, not one per request. Internal to the hierarchy.
//
// Thread safety: all methods are thread-safe; allows() on a closed breaker is one atomic load.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace datavo::core {

// The clock a Breaker measures its cooldowns on unless it is given one: std::chrono::steady_clock::now. The
// hierarchy makes its breakers itself, so the hierarchy's tests replace this before creating one, to move time on
// without waiting 30 s. REQUIRES: not replaced while breakers are being made.
std::function<std::chrono::steady_clock::time_point()>& breaker_clock();

class Breaker {
 public:
  static constexpr int k_failures_to_open = 3;
  static constexpr std::chrono::seconds k_first_cooldown{30};
  static constexpr std::chrono::seconds k_max_cooldown{600};

  using Clock = std::chrono::steady_clock;
  // `now`: the clock the cooldowns are measured on (tests pass their own).
  explicit Breaker(std::string tier_description, std::function<Clock::time_point()> now = breaker_clock())
      : tier_(std::move(tier_description)), now_(std::move(now)) {}

  // Whether the tier may be used now.
  bool allows();
  void succeeded();
  // `why`: the failure's message, quoted in the WARNING when this failure opens the breaker.
  void failed(const std::string& why);
  bool open() const { return open_.load(std::memory_order_relaxed); }
  // The message of the last failure reported (empty before the first), for a report that says why a tier was
  // skipped.
  std::string last_failure();

 private:
  const std::string tier_;
  const std::function<Clock::time_point()> now_;
  std::atomic<bool> open_{false};
  std::mutex mu_;
  int consecutive_failures_ = 0;      // guarded by mu_
  std::chrono::seconds cooldown_{0};  // guarded by mu_
  Clock::time_point open_until_;      // guarded by mu_
  bool trial_running_ = false;        // guarded by mu_
  Clock::time_point trial_started_;   // guarded by mu_
  std::string last_failure_;          // guarded by mu_
};

}  // namespace datavo::core
