// A caller's stop flag as a StopToken: WarmRequest::stop and the `stop` of the cache operations (operations.hpp),
// which Python's KeyboardInterrupt sets. The flag alone would be seen only where the code looks at it; a watcher
// thread stops the token once the flag turns true, so that everything that waits without looking at the flag (a
// transfer, a retry's backoff, another process's lock: util::must_stop()) ends too. A thread that works for the
// caller enters a util::StopScope on token().
//
// Thread safety: token() may be used from any thread; construction and destruction from one.
#pragma once

#include <atomic>
#include <thread>

#include "util/cancel.hpp"

namespace datavo::ops {

class CallerStop {
 public:
  // `flag` nullptr: never stopped, and no watcher runs; a flag already true stops the token at once. REQUIRES:
  // `flag` outlives this object.
  explicit CallerStop(const std::atomic<bool>* flag);
  // Ends the watcher (within one poll, 50 ms).
  ~CallerStop();
  CallerStop(const CallerStop&) = delete;
  CallerStop& operator=(const CallerStop&) = delete;

  util::StopToken& token() { return token_; }

 private:
  util::StopToken token_;
  std::atomic<bool> finished_{false};
  std::jthread watcher_;  // last: started once what it reads exists
};

}  // namespace datavo::ops
