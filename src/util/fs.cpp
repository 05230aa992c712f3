#include "util/fs.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <vector>

namespace datavo::util {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<void> make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Error{ErrorCode::invalid_argument, "empty directory path"};
  std::string partial;
  partial.reserve(path.size());
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) == 0) {
      // mkdir(2) ignores S_ISGID (and other bits above 0777) in `mode`; only chmod sets them.
      if ((mode & ~mode_t(0777)) != 0) {
        if (::chmod(partial.c_str(), mode & ~process_umask()) != 0) {
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

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "cannot open " + path);
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
  }
  return out;
}

Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode, Sync sync) {
  std::string tmp = path + ".tmp." + host_name() + "." + std::to_string(::getpid()) + "." + random_hex(4);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) return Error::from_errno(errno, "cannot create " + tmp);
  auto written = write_all(fd.get(), data.data(), data.size(), tmp);
  if (written && sync == Sync::yes && ::fsync(fd.get()) != 0) written = Error::from_errno(errno, "cannot fsync " + tmp);
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0)
    written = Error::from_errno(errno, "cannot rename to " + path);
  if (!written) ::unlink(tmp.c_str());
  return written;
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

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace datavo::util
