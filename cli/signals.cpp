// InterruptOnSignal: SIGINT and SIGTERM become a cancellation request (util/cancel.hpp) instead of an abrupt exit.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "cli/cli.hpp"
#include "util/cancel.hpp"

namespace datavo::cli {

struct InterruptOnSignal::State {
  sigset_t signals{};
  sigset_t previous_mask{};
  std::atomic<bool> stopping{false};
  pthread_t thread{};
  bool started = false;
};

namespace {

void* wait_for_signals(void* arg) {
  auto& state = *static_cast<InterruptOnSignal::State*>(arg);
  for (;;) {
    int sig = 0;
    if (sigwait(&state.signals, &sig) != 0) continue;
    if (state.stopping.load()) return nullptr;
    if (!util::cancel_requested()) {
      util::request_cancel(sig);
      continue;
    }
    // A second signal: the user does not want to wait for the clean stop (a wait on another process's lock can
    // outlast it). Nothing is unwound; what is left behind is what a SIGKILL leaves, which gc sweeps.
    const std::string line = "\ndatavo: " + util::signal_name(sig) + " again: exiting at once\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    ::_exit(128 + sig);
  }
}

}  // namespace

InterruptOnSignal::InterruptOnSignal() : state_(new State) {
  sigemptyset(&state_->signals);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    // A signal the process was started with ignored (SIGINT in a background job of a shell) stays ignored.
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&state_->signals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &state_->signals, &state_->previous_mask);
  state_->started = pthread_create(&state_->thread, nullptr, wait_for_signals, state_.get()) == 0;
}

InterruptOnSignal::~InterruptOnSignal() {
  if (state_->started) {
    state_->stopping = true;
    // Wakes the waiter with a signal of its set (SIGTERM is always in it unless ignored; then SIGINT is).
    pthread_kill(state_->thread, sigismember(&state_->signals, SIGTERM) ? SIGTERM : SIGINT);
    pthread_join(state_->thread, nullptr);
  }
  pthread_sigmask(SIG_SETMASK, &state_->previous_mask, nullptr);
}

}  // namespace datavo::cli
