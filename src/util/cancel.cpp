#include "util/cancel.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace datavo::util {
namespace {

std::atomic<int>& requested() {
  static std::atomic<int> signal{0};
  return signal;
}

// steady_clock ticks of the first request, written before the flag (release) and read after it (acquire).
std::atomic<std::chrono::steady_clock::rep>& requested_at() {
  static std::atomic<std::chrono::steady_clock::rep> ticks{0};
  return ticks;
}

thread_local int cleanup_depth = 0;
thread_local StopToken* stop_token = nullptr;

bool locally_stopped() { return stop_token != nullptr && stop_token->stop_requested(); }

// Wakes every sleep_unless_cancelled() at once when a cancellation is requested.
struct Wakeup {
  std::mutex mu;
  std::condition_variable cv;
};
Wakeup& wakeup() {
  // Never destroyed. A thread may still sleep on it at exit; and a child forked while a thread of its parent slept on
  // it (a SampleStream's prefetcher in a backoff) holds a copy that counts that sleeper, who does not exist there, so
  // destroying it at the child's exit (pthread_cond_destroy) would wait for ever.
  static Wakeup* const instance = new Wakeup;
  return *instance;
}

}  // namespace

void request_cancel(int signal) {
  // The first request's instant wins too: later requests find the flag set and leave both alone.
  if (requested().load(std::memory_order_acquire) == 0) {
    std::chrono::steady_clock::rep none_at = 0;
    requested_at().compare_exchange_strong(none_at, std::chrono::steady_clock::now().time_since_epoch().count(),
                                           std::memory_order_release);
  }
  int none = 0;
  requested().compare_exchange_strong(none, signal, std::memory_order_acq_rel);
  // Taking the lock orders the flag before the notification: a sleeper that checked the flag just before is
  // already waiting, and is woken.
  std::lock_guard lock(wakeup().mu);
  wakeup().cv.notify_all();
}

Result<void> sleep_unless_cancelled(Milliseconds duration, std::string_view what) {
  if (in_cleanup_scope()) {
    // A cleanup's backoff must not turn into a busy loop once the flag is set; its deadline bounds it instead.
    const auto until = std::chrono::steady_clock::now() + duration;
    {
      std::unique_lock lock(wakeup().mu);
      wakeup().cv.wait_until(lock, until, [] { return cancel_requested(); });
    }
    if (auto deadline = cleanup_deadline()) std::this_thread::sleep_until(std::min(until, *deadline));
    if (must_stop()) return cancelled_error(what);
    return {};
  }
  std::unique_lock lock(wakeup().mu);
  if (wakeup().cv.wait_for(lock, duration, [] { return cancel_requested() || locally_stopped(); }))
    return stopped_error(what);
  return {};
}

void StopToken::request_stop() {
  stopped_.store(true, std::memory_order_release);
  // As in request_cancel(): the lock orders the flag before the notification.
  std::lock_guard lock(wakeup().mu);
  wakeup().cv.notify_all();
}

void note_retry() {
  if (stop_token != nullptr) stop_token->retried_.store(true, std::memory_order_release);
}

StopScope::StopScope(StopToken& token) : enclosing_(stop_token) { stop_token = &token; }
StopScope::~StopScope() { stop_token = enclosing_; }

Error stopped_error(std::string_view what) {
  if (cancel_requested() || !locally_stopped()) return cancelled_error(what);
  return Error{ErrorCode::cancelled, std::string(what) + ": no longer needed"};
}

int cancel_signal() { return requested().load(std::memory_order_acquire); }

CleanupScope::CleanupScope() { ++cleanup_depth; }
CleanupScope::~CleanupScope() { --cleanup_depth; }

bool in_cleanup_scope() { return cleanup_depth > 0; }

std::optional<std::chrono::steady_clock::time_point> cleanup_deadline() {
  if (!cancel_requested()) return std::nullopt;
  const std::chrono::steady_clock::time_point at{
      std::chrono::steady_clock::duration{requested_at().load(std::memory_order_acquire)}};
  return at + k_cleanup_budget;
}

bool must_stop() {
  if (!in_cleanup_scope()) return locally_stopped() || cancel_requested();
  if (!cancel_requested()) return false;
  return std::chrono::steady_clock::now() >= *cleanup_deadline();
}

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
