#include "util/fs.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "util/atomic_file.hpp"

namespace datavo::util {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<void> make_dirs(const std::string& path, mode_t mode, mode_t always) {
  if (path.empty()) return Error{ErrorCode::invalid_argument, "empty directory path"};
  std::string partial;
  partial.reserve(path.size());
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) == 0) {
      // mkdir(2) ignores S_ISGID (and other bits above 0777) in `mode`, and applies the umask to `always`; only
      // chmod sets them.
      const mode_t wanted = (mode & ~process_umask()) | (mode & always);
      if ((mode & ~mode_t(0777)) != 0 || (wanted & 0777) != (mode & 0777 & ~process_umask())) {
        if (::chmod(partial.c_str(), wanted) != 0) {
          return Error::from_errno(errno, "cannot set the mode of directory " + partial);
        }
      }
    } else if (errno != EEXIST) {
      return Error::from_errno(errno, "cannot create directory " + partial);
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
  if (!S_ISDIR(st.st_mode)) return Error{ErrorCode::io, path + " exists and is not a directory", ENOTDIR};
  return {};
}

Result<void> write_all(int fd, const void* data, std::size_t size, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot write " + what);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

Result<void> pread_all(int fd, void* data, std::size_t size, off_t offset, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read " + what);
    }
    if (n == 0)
      return Error{ErrorCode::io, "unexpected end of file in " + what + " at byte offset " + std::to_string(offset)};
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += n;
  }
  return {};
}

Result<void> read_chunks(int fd, off_t offset, std::optional<std::uint64_t> length, const std::string& what,
                         const ChunkConsumer& consume) {
  // Big enough to amortise the syscall, small enough for a stack of upload workers.
  constexpr std::uint64_t k_chunk = 1u << 20;
  std::vector<char> buffer(std::size_t(length ? std::min(*length, k_chunk) : k_chunk));
  std::uint64_t done = 0;
  while (!length || done < *length) {
    const std::size_t want =
        std::size_t(length ? std::min<std::uint64_t>(buffer.size(), *length - done) : buffer.size());
    const ssize_t n = ::pread(fd, buffer.data(), want, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read " + what);
    }
    if (n == 0) {
      if (!length) break;
      return Error{ErrorCode::io, "unexpected end of file in " + what + " at byte offset " +
                                      std::to_string(std::uint64_t(offset) + done)};
    }
    DATAVO_TRY(consume(std::span<const char>(buffer.data(), std::size_t(n))));
    done += std::uint64_t(n);
  }
  return {};
}

Result<Sha256> sha256_of_fd(int fd) {
  Sha256Hasher hasher;
  DATAVO_TRY(read_chunks(fd, 0, std::nullopt, "a file for its SHA-256", [&](std::span<const char> chunk) {
    hasher.update(chunk.data(), chunk.size());
    return Result<void>{};
  }));
  return hasher.finish();
}

Result<void> copy_fd(int in, int out, Bytes size, const std::string& what) {
  std::uint64_t left = size.count();
  loff_t in_off = 0;
  bool kernel_copy = true;
  while (left > 0 && kernel_copy) {
    ssize_t n = ::copy_file_range(in, &in_off, out, nullptr, left, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // EXDEV (old kernels), EINVAL/ENOSYS/EOPNOTSUPP (filesystems without support): fall back to read/write.
      if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
        kernel_copy = false;
        break;
      }
      return Error::from_errno(errno, "cannot copy " + what);
    }
    if (n == 0) return Error{ErrorCode::io, "source of " + what + " is shorter than " + std::to_string(size.count())};
    left -= static_cast<std::uint64_t>(n);
  }
  if (left == 0) return {};
  std::vector<char> buffer(1 << 20);
  while (left > 0) {
    std::size_t chunk = left < buffer.size() ? static_cast<std::size_t>(left) : buffer.size();
    ssize_t n = ::pread(in, buffer.data(), chunk, in_off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read source of " + what);
    }
    if (n == 0) return Error{ErrorCode::io, "source of " + what + " is shorter than " + std::to_string(size.count())};
    DATAVO_TRY(write_all(out, buffer.data(), static_cast<std::size_t>(n), what));
    in_off += n;
    left -= static_cast<std::uint64_t>(n);
  }
  return {};
}

Result<std::string> read_file(const std::string& path, std::optional<std::size_t> max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "cannot open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
  if (S_ISDIR(st.st_mode)) return Error::from_errno(EISDIR, "cannot read " + path);
  std::string out;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read " + path);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    if (max_bytes && out.size() > *max_bytes) {
      return Error{ErrorCode::io, "cannot read " + path + ": larger than " + std::to_string(*max_bytes) + " bytes"};
    }
  }
  return out;
}

Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode, Sync sync, mode_t always) {
  auto file = AtomicFile::create(AtomicFile::temp_name_beside(path), mode);
  if (!file) return std::move(file).error();
  if (always != 0 && ::fchmod(file->fd(), (mode & ~process_umask()) | (mode & always)) != 0)
    return Error::from_errno(errno, "cannot set the mode of " + file->path());
  DATAVO_TRY(file->write(data));
  if (sync == Sync::yes) DATAVO_TRY(file->sync());
  auto committed = file->commit(path, AtomicFile::Replace::yes);
  if (!committed) return std::move(committed).error();
  return {};
}

const std::string& host_name() {
  static const std::string name = [] {
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof buffer - 1) != 0) return std::string("unknown-host");
    std::string out;
    for (const char* p = buffer; *p; ++p) {
      char c = *p;
      out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    }
    return out.empty() ? std::string("unknown-host") : out;
  }();
  return name;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

mode_t process_umask() {
  // umask(2) can only be read by setting it; done once, and the value restored at once.
  static const mode_t mask = [] {
    mode_t m = ::umask(0022);
    ::umask(m);
    return m;
  }();
  return mask;
}

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

bool exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Whether /proc shows this process's PID namespace (/proc/self is our pid), so that /proc/<pid> is `pid`.
bool proc_is_ours() {
  char link[32] = {};
  const ssize_t n = ::readlink("/proc/self", link, sizeof link - 1);
  return n > 0 && std::strtol(link, nullptr, 10) == ::getpid();
}

enum class ThreadState { running, exiting, unknown };

// One thread's state from /proc/<pid>/task/<tid>/stat: "tid (comm) S ppid pgrp session tty tpgid flags ...". The
// comm may hold spaces and parentheses: the fields start after the last ')'.
ThreadState thread_state(const std::string& stat_path) {
  constexpr unsigned long k_pf_exiting = 0x4;  // include/linux/sched.h, set first thing in do_exit()
  auto text = read_file(stat_path, std::size_t{4096});
  if (!text) return text.error().sys_errno == ENOENT ? ThreadState::exiting : ThreadState::unknown;
  const auto close = text->rfind(')');
  if (close == std::string::npos) return ThreadState::unknown;
  char state = 0;
  unsigned long flags = 0;
  if (std::sscanf(text->c_str() + close + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) {
    return ThreadState::unknown;
  }
  const bool gone = state == 'Z' || state == 'X' || state == 'x' || (flags & k_pf_exiting) != 0;
  return gone ? ThreadState::exiting : ThreadState::running;
}

}  // namespace

bool process_alive(pid_t pid) {
  if (pid <= 0 || !exists(pid)) return false;
  // kill() succeeds on a process that has exited and awaits its parent's wait() (a zombie), and on one still in
  // exit() whose descriptors are already closed: a waiter woken by the release of its flock meets it so. /proc
  // tells them apart: the process lives while one of its threads is neither a zombie nor exiting.
  if (!proc_is_ours()) return true;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::unique_ptr<DIR, DirCloser> dir(::opendir(tasks.c_str()));
  // Missing: reaped meanwhile, or hidden from us (hidepid), where the process still exists.
  if (!dir) return errno == ENOENT ? exists(pid) : true;
  while (const struct dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] == '.') continue;
    if (thread_state(tasks + "/" + entry->d_name + "/stat") != ThreadState::exiting) return true;
  }
  return false;
}

}  // namespace datavo::util
