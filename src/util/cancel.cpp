#include "util/cancel.hpp"

#include <signal.h>

#include <atomic>
#include <string>

namespace datavo::util {
namespace {

std::atomic<int>& requested() {
  static std::atomic<int> signal{0};
  return signal;
}

}  // namespace

void request_cancel(int signal) {
  int none = 0;
  requested().compare_exchange_strong(none, signal);
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
