// Process-wide cancellation: one flag, set once (by the CLI's signal thread on SIGINT or SIGTERM, cli/signals.cpp),
// read by everything that can take long: the HTTP transport's progress callback and backoff sleeps, the origin
// client's "preparing" waits, and the loops of `datavo warm`, `read`, `cache put`. What it stops fails with
// ErrorCode::cancelled, and the RAII objects on the way out (staging files, shard locks, the progress bar) undo
// what was begun: nothing is ever cut short by _exit or a signal handler.
//
// Thread safety: every function may be called from any thread (one atomic).
#pragma once

#include <string_view>

#include "datavo/result.hpp"

namespace datavo::util {

// Asks every cancellable operation of the process to stop; `signal` (SIGINT, SIGTERM, ...) says why. The first
// request wins; later ones are ignored.
void request_cancel(int signal);
// The signal of the request, 0 when none was made.
int cancel_signal();
inline bool cancel_requested() { return cancel_signal() != 0; }
// "<what>: interrupted by SIGINT" as ErrorCode::cancelled.
Error cancelled_error(std::string_view what);
// "SIGINT", "SIGTERM", or "signal <n>".
std::string signal_name(int signal);

}  // namespace datavo::util
