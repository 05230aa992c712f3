// An LD_PRELOAD library that makes chosen libc calls fail, so that the end-to-end suites can drive the real
// `datavo` binary into the failures of real filesystems without any test hook in production code:
//   DATAVO_FAULT_FLOCK=ENOLCK|ENOSYS|EOPNOTSUPP   flock() fails (Lustre, some NFS mounts)
//   DATAVO_FAULT_FLOCK=NOOP                       flock() succeeds without locking anything (HF hub #4306)
//   DATAVO_FAULT_FUTIMENS=EPERM|EROFS|EACCES      futimens() fails (entry owned by another user, read-only mount)
//   DATAVO_FAULT_FSETXATTR=ENOTSUP                fsetxattr() fails (no user xattrs: the digest goes to a sidecar)
//   DATAVO_FAULT_RENAMEAT2=EINVAL                 renameat2() fails (no RENAME_NOREPLACE, as on NFS)
// Unset variables leave the call alone.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <cstring>

namespace {

int errno_named(const char* variable) {
  const char* value = std::getenv(variable);
  if (!value || !*value) return 0;
  struct Named {
    const char* name;
    int value;
  };
  static const Named names[] = {{"ENOLCK", ENOLCK}, {"ENOSYS", ENOSYS}, {"EOPNOTSUPP", EOPNOTSUPP}, {"EPERM", EPERM},
                                {"EROFS", EROFS},   {"EACCES", EACCES}, {"ENOTSUP", ENOTSUP},       {"EINVAL", EINVAL},
                                {"EIO", EIO},       {"ENOSPC", ENOSPC}};
  for (const auto& n : names) {
    if (std::strcmp(n.name, value) == 0) return n.value;
  }
  return EIO;
}

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int flock(int fd, int operation) {
  if (const char* mode = std::getenv("DATAVO_FAULT_FLOCK"); mode && std::strcmp(mode, "NOOP") == 0) return 0;
  if (int err = errno_named("DATAVO_FAULT_FLOCK")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, int)>("flock");
  return real(fd, operation);
}

int futimens(int fd, const struct timespec times[2]) {
  if (int err = errno_named("DATAVO_FAULT_FUTIMENS")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const struct timespec*)>("futimens");
  return real(fd, times);
}

int fsetxattr(int fd, const char* name, const void* value, size_t size, int flags) {
  if (int err = errno_named("DATAVO_FAULT_FSETXATTR")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const char*, const void*, size_t, int)>("fsetxattr");
  return real(fd, name, value, size, flags);
}

int renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, unsigned int flags) {
  if (int err = errno_named("DATAVO_FAULT_RENAMEAT2")) {
    errno = err;
    return -1;
  }
  static auto real = next_symbol<int (*)(int, const char*, int, const char*, unsigned int)>("renameat2");
  return real(olddirfd, oldpath, newdirfd, newpath, flags);
}

}  // extern "C"
