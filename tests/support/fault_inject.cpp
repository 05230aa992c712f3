// An LD_PRELOAD library that makes chosen libc calls fail, so that the end-to-end suites can drive the real
// `datavo` binary into the failures of real filesystems without any test hook in production code.
//
// Fixed faults (every call fails, or behaves as described):
//   DATAVO_FAULT_FLOCK=ENOLCK|ENOSYS|EOPNOTSUPP   flock() fails (Lustre, some NFS mounts)
//   DATAVO_FAULT_FLOCK=NOOP                       flock() succeeds without locking anything (HF hub #4306)
//   DATAVO_FAULT_FUTIMENS=EPERM|EROFS|EACCES      futimens() fails (entry owned by another user, read-only mount)
//   DATAVO_FAULT_FSETXATTR=ENOTSUP                fsetxattr() fails (no user xattrs: the digest goes to a sidecar)
//   DATAVO_FAULT_RENAMEAT2=EINVAL                 renameat2() fails (no RENAME_NOREPLACE, as on NFS)
//
// Counted faults (the fault suite, tests/e2e/test_fault_nth.sh): calls are counted per group, and one call can
// be made to fail:
//   DATAVO_FAULT_PATH=DIR         count only calls on paths under DIR (the tier); a call on a descriptor counts when
//                                 /proc/self/fd/N names a path under DIR. Unset: every call counts.
//   DATAVO_FAULT_COUNT=FILE       at exit, append one line "open=N write=N ..." (every group) to FILE.
//   DATAVO_FAULT_NTH=GROUP:N:ERR  the Nth counted call of GROUP (1-based) fails with errno ERR (a name such as EIO,
//                                 or a number); it prints "datavo-fault: GROUP #N failed with ERR (PATH)" on stderr.
//                                 At exit, if the Nth call never came, "datavo-fault: GROUP #N not reached (M calls)".
// The groups and the calls in them:
//   open       open, open64, openat, openat64, __open_2, __open64_2, __openat_2, __openat64_2, creat
//   write      write, pwrite, pwrite64
//   fdatasync  fdatasync, fsync
//   rename     rename, renameat, renameat2
//   utimens    utimensat, futimens
//   flock      flock
//   readdir    readdir, readdir64, getdents64
//   read       read, pread, pread64
// glibc's own internal calls (readdir's getdents64, fopen's open) do not go through these symbols, so they are
// counted once, at the entry point the program called.
// Unset variables leave the calls alone.
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

struct Named {
  const char* name;
  int value;
};
const Named k_errnos[] = {
    {"ENOLCK", ENOLCK}, {"ENOSYS", ENOSYS},   {"EOPNOTSUPP", EOPNOTSUPP}, {"EPERM", EPERM},   {"EROFS", EROFS},
    {"EACCES", EACCES}, {"ENOTSUP", ENOTSUP}, {"EINVAL", EINVAL},         {"EIO", EIO},       {"ENOSPC", ENOSPC},
    {"EDQUOT", EDQUOT}, {"EINTR", EINTR},     {"ENOENT", ENOENT},         {"EEXIST", EEXIST}, {"EMFILE", EMFILE},
    {"EAGAIN", EAGAIN}, {"EXDEV", EXDEV},     {"ESTALE", ESTALE},         {"EBADF", EBADF}};

int errno_of(const char* value) {
  if (!value || !*value) return 0;
  for (const auto& n : k_errnos) {
    if (std::strcmp(n.name, value) == 0) return n.value;
  }
  char* end = nullptr;
  long number = std::strtol(value, &end, 10);
  if (end && *end == 0 && number > 0) return int(number);
  return EIO;
}

const char* errno_name(int err) {
  for (const auto& n : k_errnos) {
    if (n.value == err) return n.name;
  }
  return "errno";
}

int errno_named(const char* variable) { return errno_of(std::getenv(variable)); }

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// --- counted faults -----------------------------------------------------------------------------------------------

enum Group { g_open, g_write, g_fdatasync, g_rename, g_utimens, g_flock, g_readdir, g_read, g_count };
const char* const k_group_names[g_count] = {"open",    "write", "fdatasync", "rename",
                                            "utimens", "flock", "readdir",   "read"};

std::atomic<unsigned long> g_calls[g_count];

// Raw syscalls only below: the library must not count (or fail) its own I/O.
void raw_print(const char* text) { syscall(SYS_write, 2, text, std::strlen(text)); }

struct Config {
  bool active = false;         // any counted-fault variable set
  char prefix[PATH_MAX] = {};  // DATAVO_FAULT_PATH, resolved
  std::size_t prefix_len = 0;
  const char* count_file = nullptr;
  int nth_group = -1;
  unsigned long nth = 0;
  int nth_errno = 0;
  std::atomic<bool> fired{false};
};

Config& config() {
  static Config* c = [] {
    static Config cfg;
    const char* prefix = std::getenv("DATAVO_FAULT_PATH");
    cfg.count_file = std::getenv("DATAVO_FAULT_COUNT");
    const char* nth = std::getenv("DATAVO_FAULT_NTH");
    if (prefix && *prefix) {
      if (!realpath(prefix, cfg.prefix)) {
        std::strncpy(cfg.prefix, prefix, sizeof cfg.prefix - 1);
      }
      cfg.prefix_len = std::strlen(cfg.prefix);
      while (cfg.prefix_len > 1 && cfg.prefix[cfg.prefix_len - 1] == '/') cfg.prefix[--cfg.prefix_len] = 0;
    }
    if (nth && *nth) {
      // GROUP:N:ERR
      char buffer[128] = {};
      std::strncpy(buffer, nth, sizeof buffer - 1);
      char* first = std::strchr(buffer, ':');
      char* second = first ? std::strchr(first + 1, ':') : nullptr;
      if (first) *first = 0;
      if (second) *second = 0;
      for (int g = 0; g < g_count; ++g) {
        if (std::strcmp(buffer, k_group_names[g]) == 0) cfg.nth_group = g;
      }
      if (cfg.nth_group < 0 || !first) {
        raw_print("datavo-fault: bad DATAVO_FAULT_NTH (want GROUP:N:ERR)\n");
      } else {
        cfg.nth = std::strtoul(first + 1, nullptr, 10);
        cfg.nth_errno = second ? errno_of(second + 1) : EIO;
      }
    }
    cfg.active = cfg.prefix_len > 0 || cfg.count_file || cfg.nth_group >= 0;
    return &cfg;
  }();
  return *c;
}

bool under_prefix(const char* path) {
  const Config& c = config();
  if (c.prefix_len == 0) return true;
  if (!path) return false;
  return std::strncmp(path, c.prefix, c.prefix_len) == 0 && (path[c.prefix_len] == '/' || path[c.prefix_len] == 0);
}

// The path `fd` refers to, via /proc/self/fd; "" when unknown.
void path_of_fd(int fd, char* out, std::size_t size) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  long n = syscall(SYS_readlink, link, out, size - 1);
  out[n > 0 ? n : 0] = 0;
}

// `path` as an absolute path, resolved against `dirfd` (or the working directory) when relative.
void absolute_path(int dirfd, const char* path, char* out, std::size_t size) {
  if (!path) {
    out[0] = 0;
  } else if (path[0] == '/') {
    std::snprintf(out, size, "%s", path);
  } else {
    char dir[PATH_MAX] = {};
    if (dirfd == AT_FDCWD) {
      if (syscall(SYS_getcwd, dir, sizeof dir) < 0) dir[0] = 0;
    } else {
      path_of_fd(dirfd, dir, sizeof dir);
    }
    std::snprintf(out, size, "%s/%s", dir, path);
  }
}

// Counts a call of `group` on `path` when it is under the prefix. True when this call must fail; errno is set.
bool counted_fault(Group group, const char* path) {
  Config& c = config();
  if (!c.active || !under_prefix(path)) return false;
  const unsigned long n = g_calls[group].fetch_add(1, std::memory_order_relaxed) + 1;
  if (group != c.nth_group || n != c.nth) return false;
  c.fired = true;
  char line[PATH_MAX + 128];
  std::snprintf(line, sizeof line, "datavo-fault: %s #%lu failed with %s (%s)\n", k_group_names[group], n,
                errno_name(c.nth_errno), path ? path : "?");
  raw_print(line);
  errno = c.nth_errno;
  return true;
}

bool fault_on_path(Group group, int dirfd, const char* path) {
  if (!config().active) return false;
  char full[PATH_MAX];
  absolute_path(dirfd, path, full, sizeof full);
  return counted_fault(group, full);
}

bool fault_on_fd(Group group, int fd) {
  if (!config().active) return false;
  char full[PATH_MAX];
  path_of_fd(fd, full, sizeof full);
  return counted_fault(group, full);
}

__attribute__((destructor)) void report_counts() {
  Config& c = config();
  if (c.nth_group >= 0 && !c.fired) {
    char line[160];
    std::snprintf(line, sizeof line, "datavo-fault: %s #%lu not reached (%lu calls)\n", k_group_names[c.nth_group],
                  c.nth, g_calls[c.nth_group].load());
    raw_print(line);
  }
  if (!c.count_file) return;
  char line[512];
  std::size_t used = 0;
  for (int g = 0; g < g_count; ++g) {
    used += std::size_t(
        std::snprintf(line + used, sizeof line - used, "%s%s=%lu", g ? " " : "", k_group_names[g], g_calls[g].load()));
  }
  used += std::size_t(std::snprintf(line + used, sizeof line - used, "\n"));
  long fd = syscall(SYS_openat, AT_FDCWD, c.count_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  syscall(SYS_write, fd, line, used);
  syscall(SYS_close, fd);
}

mode_t mode_arg(int flags, va_list args) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(args, int)) : 0;
}

}  // namespace

extern "C" {

// --- open ---------------------------------------------------------------------------------------------------------

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  if (fault_on_path(g_open, AT_FDCWD, path)) return -1;
  static auto real = next_symbol<int (*)(const char*, int, ...)>("open");
  return real(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  if (fault_on_path(g_open, AT_FDCWD, path)) return -1;
  static auto real = next_symbol<int (*)(const char*, int, ...)>("open64");
  return real(path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  if (fault_on_path(g_open, dirfd, path)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, int, ...)>("openat");
  return real(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_arg(flags, args);
  va_end(args);
  if (fault_on_path(g_open, dirfd, path)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, int, ...)>("openat64");
  return real(dirfd, path, flags, mode);
}

int __open_2(const char* path, int flags) {
  if (fault_on_path(g_open, AT_FDCWD, path)) return -1;
  static auto real = next_symbol<int (*)(const char*, int)>("__open_2");
  return real(path, flags);
}

int __open64_2(const char* path, int flags) {
  if (fault_on_path(g_open, AT_FDCWD, path)) return -1;
  static auto real = next_symbol<int (*)(const char*, int)>("__open64_2");
  return real(path, flags);
}

int __openat_2(int dirfd, const char* path, int flags) {
  if (fault_on_path(g_open, dirfd, path)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, int)>("__openat_2");
  return real(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char* path, int flags) {
  if (fault_on_path(g_open, dirfd, path)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, int)>("__openat64_2");
  return real(dirfd, path, flags);
}

int creat(const char* path, mode_t mode) {
  if (fault_on_path(g_open, AT_FDCWD, path)) return -1;
  static auto real = next_symbol<int (*)(const char*, mode_t)>("creat");
  return real(path, mode);
}

// --- write, read --------------------------------------------------------------------------------------------------

ssize_t write(int fd, const void* data, size_t size) {
  if (fault_on_fd(g_write, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, const void*, size_t)>("write");
  return real(fd, data, size);
}

ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) {
  if (fault_on_fd(g_write, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  return real(fd, data, size, offset);
}

ssize_t pwrite64(int fd, const void* data, size_t size, off64_t offset) {
  if (fault_on_fd(g_write, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  return real(fd, data, size, offset);
}

ssize_t read(int fd, void* data, size_t size) {
  if (fault_on_fd(g_read, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, void*, size_t)>("read");
  return real(fd, data, size);
}

ssize_t pread(int fd, void* data, size_t size, off_t offset) {
  if (fault_on_fd(g_read, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, void*, size_t, off_t)>("pread");
  return real(fd, data, size, offset);
}

ssize_t pread64(int fd, void* data, size_t size, off64_t offset) {
  if (fault_on_fd(g_read, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, void*, size_t, off64_t)>("pread64");
  return real(fd, data, size, offset);
}

// --- fdatasync ----------------------------------------------------------------------------------------------------

int fdatasync(int fd) {
  if (fault_on_fd(g_fdatasync, fd)) return -1;
  static auto real = next_symbol<int (*)(int)>("fdatasync");
  return real(fd);
}

int fsync(int fd) {
  if (fault_on_fd(g_fdatasync, fd)) return -1;
  static auto real = next_symbol<int (*)(int)>("fsync");
  return real(fd);
}

// --- rename -------------------------------------------------------------------------------------------------------

int rename(const char* from, const char* to) {
  if (fault_on_path(g_rename, AT_FDCWD, from)) return -1;
  static auto real = next_symbol<int (*)(const char*, const char*)>("rename");
  return real(from, to);
}

int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  if (fault_on_path(g_rename, from_dir, from)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, int, const char*)>("renameat");
  return real(from_dir, from, to_dir, to);
}

int renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, unsigned int flags) {
  if (fault_on_path(g_rename, olddirfd, oldpath)) return -1;
  if (int err = errno_named("DATAVO_FAULT_RENAMEAT2")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const char*, int, const char*, unsigned int)>("renameat2");
  return real(olddirfd, oldpath, newdirfd, newpath, flags);
}

// --- utimensat, futimens ------------------------------------------------------------------------------------------

int utimensat(int dirfd, const char* path, const struct timespec times[2], int flags) {
  // glibc declares path nonnull, but the kernel takes NULL (futimens is utimensat(fd, NULL, ...)).
  const char* volatile maybe_null = path;
  if (maybe_null ? fault_on_path(g_utimens, dirfd, path) : fault_on_fd(g_utimens, dirfd)) return -1;
  static auto real = next_symbol<int (*)(int, const char*, const struct timespec*, int)>("utimensat");
  return real(dirfd, path, times, flags);
}

int futimens(int fd, const struct timespec times[2]) {
  if (fault_on_fd(g_utimens, fd)) return -1;
  if (int err = errno_named("DATAVO_FAULT_FUTIMENS")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const struct timespec*)>("futimens");
  return real(fd, times);
}

// --- flock --------------------------------------------------------------------------------------------------------

int flock(int fd, int operation) {
  if (fault_on_fd(g_flock, fd)) return -1;
  if (const char* mode = std::getenv("DATAVO_FAULT_FLOCK"); mode && std::strcmp(mode, "NOOP") == 0) return 0;
  if (int err = errno_named("DATAVO_FAULT_FLOCK")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, int)>("flock");
  return real(fd, operation);
}

// --- readdir, getdents64 ------------------------------------------------------------------------------------------

struct dirent* readdir(DIR* dir) {
  if (fault_on_fd(g_readdir, dirfd(dir))) return nullptr;
  static auto real = next_symbol<struct dirent* (*)(DIR*)>("readdir");
  return real(dir);
}

struct dirent64* readdir64(DIR* dir) {
  if (fault_on_fd(g_readdir, dirfd(dir))) return nullptr;
  static auto real = next_symbol<struct dirent64* (*)(DIR*)>("readdir64");
  return real(dir);
}

ssize_t getdents64(int fd, void* buffer, size_t size) {
  if (fault_on_fd(g_readdir, fd)) return -1;
  static auto real = next_symbol<ssize_t (*)(int, void*, size_t)>("getdents64");
  return real(fd, buffer, size);
}

// --- fsetxattr ----------------------------------------------------------------------------------------------------

int fsetxattr(int fd, const char* name, const void* value, size_t size, int flags) {
  if (int err = errno_named("DATAVO_FAULT_FSETXATTR")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const char*, const void*, size_t, int)>("fsetxattr");
  return real(fd, name, value, size, flags);
}

}  // extern "C"
