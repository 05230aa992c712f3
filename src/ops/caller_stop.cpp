#include "ops/caller_stop.hpp"

#include <chrono>

namespace datavo::ops {
namespace {

// How soon a caller's stop reaches the token: well under what a person who pressed Ctrl-C notices.
constexpr std::chrono::milliseconds k_stop_poll{50};

}  // namespace

CallerStop::CallerStop(const std::atomic<bool>* flag) {
  if (flag == nullptr) return;
  if (flag->load()) {  // stopped before it began: at once, not one poll later
    token_.request_stop();
    return;
  }
  watcher_ = std::jthread([this, flag] {
    while (!finished_.load()) {
      if (flag->load(std::memory_order_relaxed)) {
        token_.request_stop();
        return;
      }
      std::this_thread::sleep_for(k_stop_poll);
    }
  });
}

CallerStop::~CallerStop() {
  finished_ = true;
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace datavo::ops
