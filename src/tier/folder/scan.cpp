#include "tier/folder/scan.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "tier/folder/internal.hpp"
#include "util/fs.hpp"
#include "util/temp_name.hpp"

namespace datavo::folder {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

bool is_entry_name(const char* name, std::string& hash_hex) {
  std::size_t len = std::strlen(name);
  if (len != 68 || std::strcmp(name + 64, ".tar") != 0) return false;
  for (std::size_t i = 0; i < 64; ++i) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  hash_hex.assign(name, 64);
  return true;
}

// Sums regular files in `dir` (one level); entries named <hash>.tar are collected when `entries` is non-null and
// visited when `visit` is.
Result<void> scan_dir(int parent_fd, const char* dir_name, const std::string& dir_path, const std::string& instance,
                      ScanResult& out, std::vector<ScannedEntry>* entries, const EntryVisitor* visit) {
  int fd = ::openat(parent_fd, dir_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    return Error::from_errno(errno, "cannot open directory " + dir_path);
  }
  DirPtr dir(::fdopendir(fd));
  if (!dir) {
    ::close(fd);
    return Error::from_errno(errno, "cannot read directory " + dir_path);
  }
  std::string hash_hex;
  std::vector<std::string> sidecars;
  const std::size_t first_entry = entries ? entries->size() : 0;
  int listing_error = 0;
  while (struct dirent* d = next_dir_entry(dir.get(), &listing_error)) {
    if (d->d_name[0] == '.' && (d->d_name[1] == 0 || (d->d_name[1] == '.' && d->d_name[2] == 0))) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir.get()), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
    if (!S_ISREG(st.st_mode)) continue;
    out.used += Bytes{std::uint64_t(st.st_size)};
    if (entries && !instance.empty() && std::strlen(d->d_name) == 71 && std::strcmp(d->d_name + 64, ".sha256") == 0) {
      sidecars.emplace_back(d->d_name, 64);
    }
    if (!instance.empty() && is_entry_name(d->d_name, hash_hex)) {
      ++out.entry_count;
      if (entries) {
        entries->push_back(ScannedEntry{instance, hash_hex, dir_path + "/" + d->d_name,
                                        Bytes{std::uint64_t(st.st_size)}, to_time_point(st.st_mtim)});
      }
      if (visit) {
        (*visit)(EntryVisit{instance, hash_hex, d->d_name, ::dirfd(dir.get()), Bytes{std::uint64_t(st.st_size)},
                            to_time_point(st.st_mtim)});
      }
    }
  }
  if (listing_error != 0) return Error::from_errno(listing_error, "cannot list directory " + dir_path);
  if (entries && !sidecars.empty()) {
    std::sort(sidecars.begin(), sidecars.end());
    for (std::size_t i = first_entry; i < entries->size(); ++i) {
      auto& e = (*entries)[i];
      e.has_sidecar = std::binary_search(sidecars.begin(), sidecars.end(), e.hash_hex);
    }
  }
  return {};
}

}  // namespace

struct dirent* next_dir_entry(DIR* dir, int* error) {
  errno = 0;
  struct dirent* d = ::readdir(dir);
  *error = d ? 0 : errno;
  return d;
}

namespace {

Result<ScanResult> scan_root(const std::string& root, std::vector<ScannedEntry>* entries, const EntryVisitor* visit) {
  ScanResult out;
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Error::from_errno(errno, "cannot open tier directory " + root);
  }
  DirPtr dir(::fdopendir(fd));
  if (!dir) {
    ::close(fd);
    return Error::from_errno(errno, "cannot read tier directory " + root);
  }
  int listing_error = 0;
  while (struct dirent* d = next_dir_entry(dir.get(), &listing_error)) {
    std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir.get()), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      out.used += Bytes{std::uint64_t(st.st_size)};
    } else if (S_ISDIR(st.st_mode)) {
      // .locks holds only bookkeeping of a few bytes each (locks, the usage count): not budgeted, so that an exact
      // budget is not tipped over by it.
      if (name == ".locks") continue;
      // Instance directories hold entries; dot-directories (.staging, .quarantine) only count.
      std::string instance = name[0] == '.' ? std::string() : name;
      DATAVO_TRY(scan_dir(::dirfd(dir.get()), d->d_name, root + "/" + name, instance, out, entries, visit));
    }
  }
  if (listing_error != 0) return Error::from_errno(listing_error, "cannot list tier directory " + root);
  return out;
}

}  // namespace

Result<ScanResult> scan_tier(const std::string& root, ScanDetail detail) {
  std::vector<ScannedEntry> entries;
  auto out = scan_root(root, detail == ScanDetail::entries ? &entries : nullptr, nullptr);
  if (out) out->entries = std::move(entries);
  return out;
}

Result<ScanResult> walk_tier(const std::string& root, const EntryVisitor& visit) {
  return scan_root(root, nullptr, &visit);
}

Result<Bytes> directory_bytes(const std::string& path) {
  DirPtr dir{::opendir(path.c_str())};
  if (!dir) {
    if (errno == ENOENT) return Bytes{0};
    return Error::from_errno(errno, "cannot read " + path);
  }
  Bytes total;
  int listing_error = 0;
  while (struct dirent* d = next_dir_entry(dir.get(), &listing_error)) {
    struct stat st {};
    if (::fstatat(::dirfd(dir.get()), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    total += Bytes{std::uint64_t(st.st_size)};
  }
  if (listing_error != 0) return Error::from_errno(listing_error, "cannot list " + path);
  return total;
}

namespace {

// A progress record (".lock.progress", locks.hpp) older than `orphan_lock_age` whose lock no process holds: left by a
// holder that was killed, and no other process took the lock since (the next holder removes it on release). Removed
// while its lock is held here, so that no holder publishes in between; true when it was (or, dry, would be) removed.
bool sweep_progress_record(const std::string& locks_dir, const std::string& name, Seconds orphan_lock_age,
                           std::chrono::system_clock::time_point now, bool dry_run) {
  constexpr std::string_view suffix = ".lock.progress";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string path = locks_dir + "/" + name;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || now - to_time_point(st.st_mtim) <= orphan_lock_age) return false;
  const std::string lock_path = path.substr(0, path.size() - std::string_view(".progress").size());
  util::UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
  if (lock.valid() && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return false;  // held: its holder's
  return dry_run || ::unlink(path.c_str()) == 0;
}

}  // namespace

Result<SweepResult> sweep_leftovers(const std::string& staging_dir, const std::string& locks_dir,
                                    Seconds stale_staging_age, Seconds orphan_lock_age,
                                    std::chrono::system_clock::time_point now, bool dry_run) {
  SweepResult result;

  int listing_error = 0;
  if (DirPtr dir{::opendir(staging_dir.c_str())}) {
    while (struct dirent* d = next_dir_entry(dir.get(), &listing_error)) {
      std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(::dirfd(dir.get()), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      // Staging names carry their writer's host and pid (util/temp_name.hpp).
      const bool dead_writer = util::written_by_dead_local_process(name);
      const bool stale = now - to_time_point(st.st_mtim) > stale_staging_age;
      if (!dead_writer && !stale) continue;
      if (!dry_run && ::unlinkat(::dirfd(dir.get()), d->d_name, 0) != 0) continue;
      ++result.staging_files;
    }
    if (listing_error != 0) return Error::from_errno(listing_error, "cannot list " + staging_dir);
  } else if (errno != ENOENT) {
    return Error::from_errno(errno, "cannot read " + staging_dir);
  }

  if (DirPtr dir{::opendir(locks_dir.c_str())}) {
    while (struct dirent* d = next_dir_entry(dir.get(), &listing_error)) {
      std::string name = d->d_name;
      if (sweep_progress_record(locks_dir, name, orphan_lock_age, now, dry_run)) {
        ++result.lock_files;
        continue;
      }
      if (name.size() < 6 || name.compare(name.size() - 5, 5, ".lock") != 0) continue;
      if (name == "evict.lock" || name == ".stats.lock") continue;
      std::string path = locks_dir + "/" + name;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;
      if (now - to_time_point(st.st_mtim) <= orphan_lock_age) continue;
      util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
      if (!fd.valid()) continue;
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // held: not an orphan
      // Unlinked while we hold it; lockers re-check the inode after locking (see FolderTier::lock_shard).
      if (!dry_run && ::unlink(path.c_str()) != 0) continue;
      ++result.lock_files;
    }
    if (listing_error != 0) return Error::from_errno(listing_error, "cannot list " + locks_dir);
  } else if (errno != ENOENT) {
    return Error::from_errno(errno, "cannot read " + locks_dir);
  }
  return result;
}

}  // namespace datavo::folder
