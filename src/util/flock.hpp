// The one cancellable wait for an exclusive flock, shared by every lock file that waits for another process: the
// folder tier's shard locks and budget (src/tier/folder), the origin store's pack lock (src/origin).
//
// A blocking flock(LOCK_EX) can be interrupted only by a signal, and the CLI's commands that stop cleanly take their
// signals on a thread of their own (cli/signals.cpp), so such a wait would ignore a Ctrl-C until the holder lets go.
// This one polls with LOCK_NB instead, from k_first_flock_poll backing off to k_max_flock_poll (a release ends the wait
// at most that late), and sleeps with util::sleep_unless_cancelled, so that a cancellation of the process or a stopped
// StopScope of the calling thread (util::must_stop()) ends it at once.
//
// Thread safety: any thread; the lock is the open file description's, as flock(2) says.
#pragma once

#include <string>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::util {

constexpr Milliseconds k_first_flock_poll{2};
constexpr Milliseconds k_max_flock_poll{50};

// Takes flock(LOCK_EX) on `fd` (the lock file at `path`), waiting for another holder. cancelled when util::must_stop()
// holds while it waits (the lock is not taken then); the errno of any other failure (Error::sys_errno), naming `path`.
Result<void> flock_exclusive(int fd, const std::string& path);

}  // namespace datavo::util
