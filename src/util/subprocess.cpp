#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <thread>

#include "util/fs.hpp"

extern char** environ;

namespace datavo::util {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Reaps `pid`, waiting until `deadline`; false when it is still running then.
bool reap_until(pid_t pid, SteadyClock::time_point deadline, int& status) {
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return true;  // ECHILD: nothing left to reap
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);  // the child leads its own process group: this also ends what it started
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::optional<std::string> find_in_path(std::string_view name, std::string_view path_value) {
  if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  while (true) {
    const auto colon = path_value.find(':');
    const auto dir = path_value.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + std::string(name);
      struct stat info {};
      if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path_value.remove_prefix(colon + 1);
  }
}

Result<ProgramOutput> run_program(const std::string& program, const std::vector<std::string>& argv,
                                  const RunOptions& options) {
  const auto deadline = SteadyClock::now() + options.timeout;
  std::array<int, 2> out_pipe{-1, -1}, err_pipe{-1, -1};
  if (::pipe2(out_pipe.data(), O_CLOEXEC) != 0) return Error::from_errno(errno, "pipe for " + program);
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe.data(), O_CLOEXEC) != 0) return Error::from_errno(errno, "pipe for " + program);
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  if (posix_spawn_file_actions_init(&actions) != 0) return Error{ErrorCode::io, "posix_spawn_file_actions_init"};
  if (posix_spawnattr_init(&attributes) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return Error{ErrorCode::io, "posix_spawnattr_init"};
  }
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  // Its own process group, so that a timeout can end the program and anything it started.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, program.c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return Error::from_errno(spawned, "start " + program);
  out_write.reset();
  err_write.reset();

  ProgramOutput output;
  std::array<pollfd, 2> fds{pollfd{out_read.get(), POLLIN, 0}, pollfd{err_read.get(), POLLIN, 0}};
  std::array<std::string*, 2> into{&output.out, &output.err};
  int open_streams = 2;
  char buffer[16384];
  while (open_streams > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      kill_and_reap(pid);
      return Error{ErrorCode::timeout, program + " did not finish within " + std::to_string(options.timeout.count()) +
                                           " ms; it was killed"};
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      kill_and_reap(pid);
      return Error::from_errno(err, "poll on the output of " + program);
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        fds[i].fd = -1;  // EOF (or an error: treated as the end of that stream)
        --open_streams;
        continue;
      }
      const std::size_t room = options.max_output - std::min(options.max_output, into[i]->size());
      into[i]->append(buffer, std::min(room, static_cast<std::size_t>(got)));
    }
  }
  int status = 0;
  if (!reap_until(pid, deadline, status)) {
    kill_and_reap(pid);
    return Error{ErrorCode::timeout,
                 program + " did not exit within " + std::to_string(options.timeout.count()) + " ms; it was killed"};
  }
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

}  // namespace datavo::util
