#include "util/cancel.hpp"

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

namespace datavo::util {
namespace {

std::atomic<int>& requested() {
  static std::atomic<int> signal{0};
  return signal;
}

// Wakes every sleep_unless_cancelled() at once when a cancellation is requested.
struct Wakeup {
  std::mutex mu;
  std::condition_variable cv;
};
Wakeup& wakeup() {
  static Wakeup instance;
  return instance;
}

}  // namespace

void request_cancel(int signal) {
  int none = 0;
  requested().compare_exchange_strong(none, signal);
  // Taking the lock orders the flag before the notification: a sleeper that checked the flag just before is
  // already waiting, and is woken.
  std::lock_guard lock(wakeup().mu);
  wakeup().cv.notify_all();
}

Result<void> sleep_unless_cancelled(Milliseconds duration, std::string_view what) {
  std::unique_lock lock(wakeup().mu);
  if (wakeup().cv.wait_for(lock, duration, [] { return cancel_requested(); })) return cancelled_error(what);
  return {};
}

int cancel_signal() { return requested().load(std::memory_order_relaxed); }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signal);
  }
}

Error cancelled_error(std::string_view what) {
  return Error{ErrorCode::cancelled, std::string(what) + ": interrupted by " + signal_name(cancel_signal())};
}

}  // namespace datavo::util
