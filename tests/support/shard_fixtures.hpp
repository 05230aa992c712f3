// Helpers for the tier and hierarchy tests: shard keys from seeds, deterministic random bytes, file and mtime
// utilities, a counting fetcher, and small process helpers (pipes, a pid that is certainly dead).
// Header-only test support.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/result.hpp"
#include "datavo/tier.hpp"
#include "support/temp_dir.hpp"

namespace datavo::shardtest {

// ---------------------------------------------------------------------------------------------------------------
// Bytes and digests

inline Sha256 sha256_of(std::string_view bytes) {
  Sha256Hasher hasher;
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish();
}

// `size` pseudo-random bytes, the same for the same seed.
inline std::string random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Keys

inline Instance make_instance(std::string_view name) {
  auto parsed = Instance::parse(name);
  if (!parsed) throw std::runtime_error("bad instance in test: " + std::string(name));
  return *parsed;
}

// A key whose content hash is derived from `seed` (distinct seeds give distinct hashes).
inline ShardKey make_key(std::uint64_t seed, std::string_view instance = "local") {
  std::string text = "datavo-test-shard:" + std::to_string(seed);
  auto hash = ContentHash::parse(sha256_of(text).hex());
  if (!hash) throw std::runtime_error("sha256 hex is not a content hash");
  return ShardKey{make_instance(instance), *hash};
}

// ---------------------------------------------------------------------------------------------------------------
// Files

inline void write_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// Writes `size` random bytes (from `seed`) to `path` and returns them.
inline std::string write_random_file(const std::string& path, std::size_t size, std::uint64_t seed) {
  std::string bytes = random_bytes(size, seed);
  write_file(path, bytes);
  return bytes;
}

// Every byte of `fd` from offset 0 (pread: the file offset is left alone).
inline std::string read_fd(int fd) {
  std::string out;
  char buffer[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
  return out;
}

inline std::string read_handle(const ShardHandle& handle) { return read_fd(handle.fd()); }

inline std::string read_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out = read_fd(fd);
  ::close(fd);
  return out;
}

inline bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

inline bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The names in `dir` (not . and ..), sorted; empty when `dir` does not exist.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// An open ShardHandle on a regular file holding `bytes` at `path` (for install_copy sources).
inline ShardHandle handle_on_new_file(const std::string& path, std::string_view bytes) {
  write_file(path, bytes);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  return ShardHandle(fd, path, Bytes{bytes.size()});
}

// ---------------------------------------------------------------------------------------------------------------
// Times

using Clock = std::chrono::system_clock;

inline Clock::time_point mtime_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + path);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(st.st_mtim.tv_sec) +
                                                                       std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

inline struct timespec to_timespec(Clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  return ts;
}

// Sets both atime and mtime of `path` to `t`.
inline void set_mtime(const std::string& path, Clock::time_point t) {
  struct timespec times[2] = {to_timespec(t), to_timespec(t)};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
    throw std::runtime_error("utimensat " + path + ": " + std::strerror(errno));
  }
}

inline void set_mtime_ago(const std::string& path, std::chrono::seconds ago) { set_mtime(path, Clock::now() - ago); }

// ---------------------------------------------------------------------------------------------------------------
// Folder tiers

inline FolderTierOptions folder_options(const std::string& path, std::string name = {}) {
  FolderTierOptions options;
  options.path = path;
  options.name = std::move(name);
  return options;
}

inline std::shared_ptr<FolderTier> make_folder(FolderTierOptions options) {
  auto tier = FolderTier::create(std::move(options));
  if (!tier) throw std::runtime_error("FolderTier::create failed: " + tier.error().message);
  return *tier;
}

inline std::shared_ptr<FolderTier> make_folder(const std::string& path, std::string name = {}) {
  return make_folder(folder_options(path, std::move(name)));
}

// Stages `bytes` in `tier` and commits them under `key` (a staging transaction).
inline Result<ShardHandle> commit_bytes(LocalTier& tier, const ShardKey& key, std::string_view bytes) {
  auto staged = tier.begin(key);
  if (!staged) return std::move(staged).error();
  if (auto written = (*staged)->write(bytes.data(), bytes.size()); !written) return std::move(written).error();
  return (*staged)->commit();
}

// The paths of the files in the .staging/ directory of folder tier `tier`, sorted.
inline std::vector<std::string> staging_paths(const Tier& tier) {
  std::vector<std::string> paths;
  for (const auto& name : list_dir(tier.location() + "/.staging"))
    paths.push_back(tier.location() + "/.staging/" + name);
  return paths;
}

// The SHA-256 recorded for an entry at install; nullopt when there is no entry or no digest.
inline Result<std::optional<Sha256>> recorded_digest(FolderTier& tier, const ShardKey& key) {
  auto record = tier.record_of(key);
  if (!record) return std::move(record).error();
  if (!*record) return std::optional<Sha256>{};
  return (*record)->sha256;
}

// A key for staging files whose key does not matter to the test.
inline ShardKey staging_key() { return make_key(999'999); }

// The root of the folder tier a test makes under `dir`.
inline std::string tier_root(const TempDir& dir) { return dir.sub("tier"); }

// A ByteSink that keeps what it receives in memory.
class StringSink final : public ByteSink {
 public:
  Result<void> write(const void* data, std::size_t size) override {
    bytes_.append(static_cast<const char*>(data), size);
    return {};
  }
  Bytes written() const override { return Bytes{bytes_.size()}; }
  Result<void> restart() override {
    bytes_.clear();
    return {};
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A ByteSink that also takes bytes at any offset, from several threads at once, as a staging file does (the
// parallel ranged reads of the cloud tiers write into it).
class PositionalMemorySink final : public ByteSink, public PositionalSink {
 public:
  Result<void> write(const void* data, std::size_t size) override {
    std::lock_guard lock(mu_);
    bytes_.append(static_cast<const char*>(data), size);
    return {};
  }
  Bytes written() const override {
    std::lock_guard lock(mu_);
    return Bytes{bytes_.size()};
  }
  Result<void> restart() override {
    std::lock_guard lock(mu_);
    bytes_.clear();
    return {};
  }
  PositionalSink* positional() override { return this; }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    std::lock_guard lock(mu_);
    if (bytes_.size() < offset + size) bytes_.resize(offset + size);
    bytes_.replace(offset, size, static_cast<const char*>(data), size);
    return {};
  }
  Result<void> prefix_complete(Bytes) override { return {}; }
  std::string bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }

 private:
  mutable std::mutex mu_;
  std::string bytes_;
};

// ---------------------------------------------------------------------------------------------------------------
// Fetchers

// What a CountingFetcher reports back about the bytes it wrote.
enum class Report { nothing, size_and_sha, wrong_size, wrong_sha };

// A fetcher that writes fixed bytes into the sink, optionally after a delay, and counts its calls. Copies share
// the count, so the Fetcher handed to the hierarchy and the test see the same number.
class CountingFetcher {
 public:
  explicit CountingFetcher(std::string bytes, Report report = Report::size_and_sha,
                           std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : state_(std::make_shared<State>()) {
    state_->bytes = std::move(bytes);
    state_->report = report;
    state_->delay = delay;
  }

  Fetcher fetcher() const {
    std::shared_ptr<State> state = state_;
    return [state](ByteSink& sink) -> Result<Expectation> {
      state->calls.fetch_add(1);
      if (state->delay.count() > 0) std::this_thread::sleep_for(state->delay);
      if (auto written = sink.write(state->bytes.data(), state->bytes.size()); !written) {
        return std::move(written).error();
      }
      Expectation e;
      switch (state->report) {
        case Report::nothing: break;
        case Report::size_and_sha:
          e.size = Bytes{state->bytes.size()};
          e.sha256 = sha256_of(state->bytes);
          break;
        case Report::wrong_size: e.size = Bytes{state->bytes.size() + 1}; break;
        case Report::wrong_sha: e.sha256 = sha256_of(state->bytes + "x"); break;
      }
      return e;
    };
  }

  int calls() const { return state_->calls.load(); }
  const std::string& bytes() const { return state_->bytes; }

 private:
  struct State {
    std::string bytes;
    Report report = Report::size_and_sha;
    std::chrono::milliseconds delay{0};
    std::atomic<int> calls{0};
  };
  std::shared_ptr<State> state_;
};

// A fetcher that must never run: it counts the call and fails.
inline Fetcher failing_fetcher(std::shared_ptr<std::atomic<int>> calls) {
  return [calls](ByteSink&) -> Result<Expectation> {
    calls->fetch_add(1);
    return Error{ErrorCode::remote, "this fetcher must not be called"};
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Processes

// A pipe with RAII ends; one byte at a time is enough for handshakes between parent and child.
class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  void close_read() {
    if (fds_[0] >= 0) ::close(fds_[0]);
    fds_[0] = -1;
  }
  void close_write() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }
  bool write_byte(char c = 'x') {
    for (;;) {
      ssize_t n = ::write(fds_[1], &c, 1);
      if (n == 1) return true;
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
  }
  // The byte read, or nullopt at end of file.
  std::optional<char> read_byte() {
    char c = 0;
    for (;;) {
      ssize_t n = ::read(fds_[0], &c, 1);
      if (n == 1) return c;
      if (n < 0 && errno == EINTR) continue;
      return std::nullopt;
    }
  }

 private:
  int fds_[2] = {-1, -1};
};

// The exit code of child `pid` (128 + signal when killed), after waiting for it.
inline int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Kills (SIGKILL) and reaps a child process on scope exit unless it was reaped already, so that a failed assertion
// never leaves a child behind.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_child(pid_);
    }
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  // Waits for the child and returns its exit code (see wait_child); the guard then has nothing left to do.
  int wait() {
    int code = wait_child(pid_);
    pid_ = -1;
    return code;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// A child process that holds the shard locks of `keys` in the folder tier of `options` (across processes, as
// another reader on the machine would) until release(). The child is single-threaded (so it also runs under TSan).
// `while_held` (optional) runs in the child once every lock is held, with the tier and the first key's lock; it
// returns false when it failed, and what it captures is destroyed before the locks are released. Exit codes: 0 held and
// released, 2 no tier, 3 no lock, 4 `while_held` failed, 5 the parent went away before release(). Killed and reaped on
// destruction unless wait() reaped it.
class LockHolderProcess {
 public:
  using WhileHeld = std::function<bool(FolderTier&, ShardLock&)>;
  LockHolderProcess(FolderTierOptions options, std::vector<ShardKey> keys, WhileHeld while_held = {}) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) ::_exit(hold(options, keys, std::move(while_held)));
    guard_.emplace(pid);
    locked_.close_write();
    release_.close_read();
  }
  // Waits until the child holds every lock (and `while_held` ran); false when it could not.
  bool started() { return locked_.read_byte().has_value(); }
  // Lets the locks go; the child then exits.
  void release() { release_.write_byte(); }
  // The child's exit code (wait_child) once it exited.
  int wait() { return guard_->wait(); }
  pid_t pid() const { return guard_->pid(); }

 private:
  int hold(const FolderTierOptions& options, const std::vector<ShardKey>& keys, WhileHeld while_held) {
    locked_.close_read();
    release_.close_write();
    auto tier = FolderTier::create(options);
    if (!tier) return 2;
    std::vector<std::unique_ptr<ShardLock>> held;
    for (const auto& key : keys) {
      auto lock = (*tier)->lock_shard(key);
      if (!lock || !(*lock)->across_processes()) return 3;
      held.push_back(std::move(*lock));
    }
    if (while_held && !held.empty() && !while_held(**tier, *held.front())) return 4;
    if (!locked_.write_byte()) return 4;
    const int code = release_.read_byte() ? 0 : 5;
    while_held = nullptr;
    return code;
  }

  Pipe locked_;   // child -> parent: "I hold every lock"
  Pipe release_;  // parent -> child: "let them go"
  std::optional<ChildGuard> guard_;
};

// A LockHolderProcess's `while_held` that lands `bytes` of `key` in a staging file and publishes it with a verified
// prefix of `verified` of `total` bytes (ShardLock::publish_*), as a holder part-way through a fetch does. The
// staging file is aborted when the lock is let go.
inline LockHolderProcess::WhileHeld publish_partial_landing(const ShardKey& key, std::string bytes, Bytes verified,
                                                            Bytes total) {
  auto staged = std::make_shared<std::unique_ptr<ShardTransaction>>();
  return [staged, key, bytes = std::move(bytes), verified, total](FolderTier& tier, ShardLock& lock) {
    auto begun = tier.begin(key);
    if (!begun || !(*begun)->write(bytes.data(), bytes.size())) return false;
    *staged = std::move(*begun);
    auto reading = (*staged)->open_staged();
    if (!reading) return false;
    lock.publish_staging(*reading);
    lock.publish_verified(verified, total);
    return true;
  };
}

// The pid of a process that existed and has exited and been reaped: a pid that is (almost certainly) dead.
inline pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  if (pid < 0) throw std::runtime_error("fork failed");
  wait_child(pid);
  return pid;
}

}  // namespace datavo::shardtest
