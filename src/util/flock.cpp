#include "util/flock.hpp"

#include <sys/file.h>

#include <algorithm>
#include <cerrno>

#include "util/cancel.hpp"

namespace datavo::util {

Result<void> flock_exclusive(int fd, const std::string& path) {
  auto poll = k_first_flock_poll;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return ok();
    if (errno != EWOULDBLOCK && errno != EINTR) return Error::from_errno(errno, "cannot lock " + path);
    DATAVO_TRY(sleep_unless_cancelled(poll, "waiting for the lock " + path));
    poll = std::min(k_max_flock_poll, Milliseconds(poll.count() * 2));
  }
}

}  // namespace datavo::util
