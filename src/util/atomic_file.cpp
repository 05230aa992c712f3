#include "util/atomic_file.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

namespace datavo::util {
namespace {

enum class Unlink { no, yes };  // whether a name of the temp file is left to remove

}  // namespace

Result<AtomicFile> AtomicFile::create(std::string temp_path, mode_t mode) {
  UniqueFd fd(::open(temp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) return Error::from_errno(errno, "cannot create " + temp_path);
  return AtomicFile(std::move(temp_path), std::move(fd));
}

Result<AtomicFile> AtomicFile::adopt(std::string temp_path) {
  UniqueFd fd(::open(temp_path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "cannot open " + temp_path);
  return AtomicFile(std::move(temp_path), std::move(fd));
}

AtomicFile::~AtomicFile() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept : path_(std::move(other.path_)), fd_(std::move(other.fd_)) {
  other.path_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) ::unlink(path_.c_str());
    path_ = std::move(other.path_);
    fd_ = std::move(other.fd_);
    other.path_.clear();
  }
  return *this;
}

Result<void> AtomicFile::write(std::string_view data) { return write_all(fd_.get(), data.data(), data.size(), path_); }

Result<void> AtomicFile::sync() {
  if (::fdatasync(fd_.get()) != 0) return Error::from_errno(errno, "cannot sync " + path_);
  return {};
}

Result<bool> AtomicFile::commit(const std::string& target, Replace replace) {
  if (replace == Replace::yes) {
    if (::rename(path_.c_str(), target.c_str()) != 0) return Error::from_errno(errno, "cannot rename to " + target);
    path_.clear();
    return true;
  }
  // Once the target is ours, or was already there: the temp file goes (if a name of it is left) and is done with.
  const auto settle = [this](bool installed, Unlink unlink) {
    if (unlink == Unlink::yes) ::unlink(path_.c_str());
    path_.clear();
    return installed;
  };
  if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0)
    return settle(true, Unlink::no);
  if (errno == EEXIST) return settle(false, Unlink::yes);
  if (errno != EINVAL && errno != ENOSYS) return Error::from_errno(errno, "cannot install " + target);
  // NFS and a few others lack RENAME_NOREPLACE; link(2) refuses an existing target just as well.
  if (::link(path_.c_str(), target.c_str()) == 0) return settle(true, Unlink::yes);
  if (errno == EEXIST) return settle(false, Unlink::yes);
  if (errno != EPERM && errno != EOPNOTSUPP) return Error::from_errno(errno, "cannot install " + target);
  // No hard links either (some FUSE and object-store mounts): a plain rename, which may replace a target that
  // appeared since the check above. Equally correct for content-addressed files, whose bytes are the same.
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) return settle(false, Unlink::yes);
  if (::rename(path_.c_str(), target.c_str()) != 0) return Error::from_errno(errno, "cannot install " + target);
  return settle(true, Unlink::no);
}

void AtomicFile::release() { path_.clear(); }

}  // namespace datavo::util
