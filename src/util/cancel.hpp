// Process-wide cancellation: one flag, set once (by the CLI's signal thread on SIGINT or SIGTERM, cli/signals.cpp),
// read by everything that can take long: the HTTP transport's progress callback and backoff sleeps, the origin
// client's "preparing" waits, and the loops of `datavo warm`, `read`, `cache put`. What it stops fails with
// ErrorCode::cancelled, and the RAII objects on the way out (staging files, shard locks, the progress bar) undo
// what was begun: nothing is ever cut short by _exit or a signal handler.
//
// Thread safety: every function may be called from any thread (one atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::util {

// Asks every cancellable operation of the process to stop; `signal` (SIGINT, SIGTERM, ...) says why. The first
// request wins; later ones are ignored. Wakes every sleep_unless_cancelled(). Not async-signal-safe: call it from
// a thread (cli/signals.cpp takes signals with sigwait), never from a signal handler.
void request_cancel(int signal);
// The signal of the request, 0 when none was made.
int cancel_signal();
inline bool cancel_requested() { return cancel_signal() != 0; }
// "<what>: interrupted by SIGINT" as ErrorCode::cancelled.
Error cancelled_error(std::string_view what);
// The one cancellable wait: sleeps for `duration`, or until a cancellation is requested (then at once), whichever
// comes first. cancelled_error(what) when a cancellation was requested, before or during the sleep.
Result<void> sleep_unless_cancelled(Milliseconds duration, std::string_view what);
// "SIGINT", "SIGTERM", or "signal <n>".
std::string signal_name(int signal);

// --- Cleanup after a cancellation -----------------------------------------------------------------------------
// What a cancelled operation must still undo on a remote service (release a lease, abort a multipart upload,
// cancel a resumable session) runs inside a CleanupScope: the HTTP transport then sends it although a cancellation
// was requested, but ends it, retries and backoff included, by cleanup_deadline(): k_cleanup_budget after the
// request, for all the cleanups of the process together. sleep_unless_cancelled() in a scope sleeps up to that
// deadline. Without a cancellation a scope changes nothing.
inline constexpr Milliseconds k_cleanup_budget{2000};

// Marks the calling thread as cleaning up for its lifetime (scopes nest). Not movable: it belongs to its thread.
class CleanupScope {
 public:
  CleanupScope();
  ~CleanupScope();
  CleanupScope(const CleanupScope&) = delete;
  CleanupScope& operator=(const CleanupScope&) = delete;
};
// Whether the calling thread is inside a CleanupScope.
bool in_cleanup_scope();
// When the cleanups must have ended: the instant of the cancellation request plus k_cleanup_budget; nullopt when
// none was requested.
std::optional<std::chrono::steady_clock::time_point> cleanup_deadline();
// Whether the calling thread must stop now: outside a CleanupScope, when its StopScope's token was stopped or a
// cancellation was requested; inside one, once a cancellation was requested and cleanup_deadline() has passed (a
// stopped token alone does not stop a cleanup: what it undoes, a lease or an unfinished upload, must be undone).
bool must_stop();

// --- Stopping one piece of work -------------------------------------------------------------------------------
// What one thread does for a caller that may stop needing it (a hedged read's losing request, tier/cloud/hedge.hpp;
// a SampleStream's shard loads, client/prefetcher.hpp) runs inside a StopScope on a StopToken: once the token is
// stopped, must_stop() is true on that thread (the HTTP transport ends its transfer within a fraction of a second,
// a backoff sleep and a wait for a shard lock end at once), and the work fails with ErrorCode::cancelled
// (stopped_error). Nothing else of the process is affected.
class StopToken {
 public:
  // Idempotent; wakes the thread's sleep_unless_cancelled().
  void request_stop();
  bool stop_requested() const { return stopped_.load(std::memory_order_acquire); }
  // Whether the work retried after a failed attempt (note_retry(): the HTTP transport, before a backoff).
  bool retried() const { return retried_.load(std::memory_order_acquire); }

 private:
  friend void note_retry();
  std::atomic<bool> stopped_{false};
  std::atomic<bool> retried_{false};
};
// Marks the calling thread as doing work for `token` for its lifetime. Scopes nest: the innermost token is the one
// that counts, and the enclosing one counts again when the inner scope ends. REQUIRES: `token` outlives the scope.
// Not movable: it belongs to its thread.
class StopScope {
 public:
  explicit StopScope(StopToken& token);
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  StopToken* enclosing_;
};
// Records on the calling thread's StopScope token, when it has one, that its work is retrying after a failed
// attempt (StopToken::retried). Does nothing on a thread without a scope.
void note_retry();
// Why the calling thread stopped: cancelled_error(what) after a cancellation, else "<what>: no longer needed" as
// ErrorCode::cancelled (its StopScope's token was stopped).
Error stopped_error(std::string_view what);

}  // namespace datavo::util
