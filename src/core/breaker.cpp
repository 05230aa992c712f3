#include "core/breaker.hpp"

#include "util/log.hpp"

namespace datavo::core {

std::function<std::chrono::steady_clock::time_point()>& breaker_clock() {
  static std::function<std::chrono::steady_clock::time_point()> clock = &std::chrono::steady_clock::now;
  return clock;
}

bool Breaker::allows() {
  if (!open_.load(std::memory_order_relaxed)) return true;
  std::lock_guard lock(mu_);
  const auto now = now_();
  if (now < open_until_) return false;
  // One call tries the tier again; the others keep skipping it meanwhile. A trial that has not reported within
  // a cooldown is taken as lost (its caller used the tier on a path that gives no verdict, such as a queued
  // upload), so that it cannot keep the tier skipped for the rest of the process.
  if (trial_running_ && now < trial_started_ + cooldown_) return false;
  trial_running_ = true;
  trial_started_ = now;
  return true;
}

void Breaker::succeeded() {
  if (!open_.load(std::memory_order_relaxed)) {
    std::lock_guard lock(mu_);
    consecutive_failures_ = 0;
    return;
  }
  std::lock_guard lock(mu_);
  if (!open_) return;
  open_ = false;
  consecutive_failures_ = 0;
  trial_running_ = false;
  cooldown_ = std::chrono::seconds{0};
  LOG_WARNING(tier_ << " works again; using it again");
}

std::string Breaker::last_failure() {
  std::lock_guard lock(mu_);
  return last_failure_;
}

void Breaker::failed(const std::string& why) {
  std::lock_guard lock(mu_);
  last_failure_ = why;
  if (open_) {
    // A call that began before the breaker opened and failed since says nothing new: only the trial's failure
    // doubles the cooldown. Counting such stragglers (a warm has a request in flight on each worker) pushed the
    // first trial minutes away after a short outage.
    if (!trial_running_) return;
    // A trial failed: stay open, for twice as long.
    trial_running_ = false;
    cooldown_ = std::min(k_max_cooldown, cooldown_ * 2);
    open_until_ = now_() + cooldown_;
    LOG_DEBUG(tier_ << " still failing (" << why << "); skipping it for " << cooldown_.count() << " s");
    return;
  }
  if (++consecutive_failures_ < k_failures_to_open) return;
  open_ = true;
  cooldown_ = k_first_cooldown;
  open_until_ = now_() + cooldown_;
  LOG_WARNING(tier_ << " failed " << consecutive_failures_ << " times in a row (last: " << why << "); skipping it for "
                    << cooldown_.count() << " s, then trying again");
}

}  // namespace datavo::core
