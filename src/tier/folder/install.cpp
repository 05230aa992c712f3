// The folder tier's installs: staging transactions (new, or continued from a writer that died), the commit,
// install_copy.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "tier/folder/scan.hpp"
#include "tier/folder/staging.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/temp_name.hpp"

namespace datavo {
namespace {

using folder::StagingFile;
using util::UniqueFd;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// Records the entry's size, digest and key: xattrs where the filesystem has them, a sidecar otherwise (named by
// the key, so it needs no key inside).
Result<void> record_entry(int fd, const std::string& staged_path, const std::string& sidecar, const ShardKey& key,
                          Bytes size, const Sha256& digest, mode_t mode) {
  const std::string digest_hex = digest.hex();
  const std::string size_text = std::to_string(size.count());
  const std::string key_text = folder::key_record(key);
  if (::fsetxattr(fd, folder::k_digest_xattr, digest_hex.data(), digest_hex.size(), 0) == 0 &&
      ::fsetxattr(fd, folder::k_key_xattr, key_text.data(), key_text.size(), 0) == 0 &&
      ::fsetxattr(fd, folder::k_size_xattr, size_text.data(), size_text.size(), 0) == 0) {
    return {};
  }
  if (errno != ENOTSUP && errno != EOPNOTSUPP && errno != EPERM) {
    return Error::from_errno(errno, "cannot record the digest of " + staged_path);
  }
  // No user xattrs here (older tmpfs, some NFS): a sidecar, written before the entry so that an entry never
  // exists without its record.
  return util::write_file_atomic(sidecar, digest_hex + " " + size_text + "\n", mode, util::Sync::yes,
                                 folder::k_entry_group_bits);
}

// The files in `dir` whose names end with `suffix` and that a process of this host that died left behind, largest
// first.
Result<std::vector<std::pair<std::string, std::uint64_t>>> dead_writers_files(DIR* dir, const std::string& suffix) {
  std::vector<std::pair<std::string, std::uint64_t>> found;
  int listing_error = 0;
  while (struct dirent* d = folder::next_dir_entry(dir, &listing_error)) {
    const std::string_view entry = d->d_name;
    if (entry.size() <= suffix.size() || !entry.ends_with(suffix)) continue;
    if (!util::written_by_dead_local_process(entry)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    found.emplace_back(std::string(entry), std::uint64_t(st.st_size));
  }
  // A listing that failed half-way may have missed the longest file: the caller starts a fresh one instead.
  if (listing_error != 0) return Error::from_errno(listing_error, "cannot list the staging directory");
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return found;
}

}  // namespace

bool FolderTier::Impl::has_room(Bytes size) const {
  struct statvfs vfs {};
  if (::statvfs(root.c_str(), &vfs) != 0) return true;
  return std::uint64_t(vfs.f_bavail) * vfs.f_frsize >= size.count();
}

Result<StagingFile> FolderTier::Impl::new_staging(const ShardKey& key) {
  if (read_only) return Error{ErrorCode::permission_denied, "tier '" + self.name() + "' is read-only"};
  DATAVO_TRY(ensure_dir(staging_dir));
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto file = util::AtomicFile::create(folder::new_staging_path(staging_dir, key), folder::entry_mode());
    if (file) return StagingFile(*this, key, std::move(*file), self.options_.durability, Bytes{0});
    if (file.error().sys_errno != EEXIST) {
      return Error{file.error().code,
                   "cannot create a staging file in " + staging_dir + ": " + std::strerror(file.error().sys_errno),
                   file.error().sys_errno};
    }
  }
  return Error{ErrorCode::internal, "cannot find a free staging file name in " + staging_dir};
}

Result<std::optional<StagingFile>> FolderTier::Impl::adopt_partial(const ShardKey& key) {
  if (read_only) return std::optional<StagingFile>{};
  std::unique_ptr<DIR, DirCloser> dir(::opendir(staging_dir.c_str()));
  if (!dir) {
    if (errno == ENOENT) return std::optional<StagingFile>{};
    return Error::from_errno(errno, "cannot read " + staging_dir);
  }
  auto found = dead_writers_files(dir.get(), folder::staging_suffix(key));
  if (!found) return Error{found.error().code, found.error().message + " " + staging_dir, found.error().sys_errno};
  // The longest holds the most bytes worth keeping; the others are of no use.
  for (std::size_t i = 1; i < found->size(); ++i) ::unlinkat(::dirfd(dir.get()), (*found)[i].first.c_str(), 0);
  if (found->empty()) return std::optional<StagingFile>{};
  const auto& [best, best_size] = found->front();
  if (best_size == 0) {
    ::unlinkat(::dirfd(dir.get()), best.c_str(), 0);
    return std::optional<StagingFile>{};
  }
  // The claim: of several adopters only one rename succeeds.
  const std::string from = staging_dir + "/" + best;
  const std::string to = folder::new_staging_path(staging_dir, key);
  if (::rename(from.c_str(), to.c_str()) != 0) return std::optional<StagingFile>{};
  auto file = util::AtomicFile::adopt(to);
  if (!file) {
    ::unlink(to.c_str());
    return std::optional<StagingFile>{};
  }
  struct stat st {};
  if (::fstat(file->fd(), &st) != 0) return Error::from_errno(errno, "cannot stat " + to);
  if (::lseek(file->fd(), 0, SEEK_END) < 0) return Error::from_errno(errno, "cannot seek in " + to);
  LOG_INFO("tier '" << self.name() << "': continuing the download of " << key.hash.hex() << " from byte " << st.st_size
                    << " (left by a writer that died)");
  return std::optional<StagingFile>{
      StagingFile(*this, key, std::move(*file), self.options_.durability, Bytes{std::uint64_t(st.st_size)})};
}

Result<std::unique_ptr<ShardTransaction>> FolderTier::begin(const ShardKey& key, std::optional<Bytes> size,
                                                            Resume resume) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  if (size && !impl_->has_room(*size)) {
    return Error{ErrorCode::no_space, "its filesystem has no room for " + std::to_string(size->count()) + " bytes"};
  }
  if (resume == Resume::partial) {
    auto adopted = impl_->adopt_partial(key);
    if (adopted && *adopted)
      return std::unique_ptr<ShardTransaction>(std::make_unique<StagingFile>(std::move(**adopted)));
    if (!adopted) {
      counters().errors.fetch_add(1, std::memory_order_relaxed);
      LOG_WARNING("tier '" << name() << "': cannot continue a partial download of " << key.hash.hex() << " ("
                           << adopted.error().message << "); starting it over");
    }
  }
  auto staged = impl_->new_staging(key);
  if (!staged) return std::move(staged).error();
  return std::unique_ptr<ShardTransaction>(std::make_unique<StagingFile>(std::move(*staged)));
}

Result<std::pair<ShardHandle, InstallOutcome>> FolderTier::Impl::commit(StagingFile& staged) {
  if (read_only) return Error{ErrorCode::permission_denied, "tier '" + self.name() + "' is read-only"};
  auto budget = self.reserve();
  if (!budget) return std::move(budget).error();
  auto outcome = rename_into_place(staged);
  if (!outcome) return outcome;
  if (outcome->second == InstallOutcome::installed) self.committed(budget->get(), outcome->first.size());
  budget->reset();
  self.expire_if_due(staged.key());
  return outcome;
}

Result<std::pair<ShardHandle, InstallOutcome>> FolderTier::Impl::rename_into_place(StagingFile& staged) {
  const ShardKey key = staged.key();
  DATAVO_TRY(ensure_dir(instance_dir(key.instance)));
  const std::string final_path = entry_path(key);
  auto digest = staged.digest();
  if (!digest) return std::move(digest).error();

  // Group members must be able to read entries (and bump their mtime) whatever the writer's umask.
  const mode_t mode = folder::entry_mode();
  if (::fchmod(staged.fd(), mode) != 0) return Error::from_errno(errno, "cannot chmod " + staged.path());
  DATAVO_TRY(record_entry(staged.fd(), staged.path(), sidecar_path(key), key, staged.written(), *digest, mode));
  // Data is made durable before the rename, so that after a crash the final name holds either nothing or the
  // whole entry. The directory is not synced: a rename lost in a crash is a miss, never a corrupt entry.
  if (self.options_.durability == Durability::fsync_before_commit) DATAVO_TRY(staged.sync());
  // A read-only fd on the staged inode survives the rename and becomes the caller's handle.
  UniqueFd reader(::open(staged.path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!reader.valid()) return Error::from_errno(errno, "cannot reopen " + staged.path());

  const Bytes size = staged.written();
  for (int round = 0; round < 2; ++round) {
    auto committed = staged.rename_to(final_path);
    if (!committed) return std::move(committed).error();
    if (*committed) {
      return std::pair<ShardHandle, InstallOutcome>{ShardHandle(reader.release(), final_path, size),
                                                    InstallOutcome::installed};
    }
    // Someone installed the same content hash first: same bytes by definition. Keep theirs.
    auto existing = self.peek(key);
    if (existing && *existing) {
      return std::pair<ShardHandle, InstallOutcome>{std::move(**existing), InstallOutcome::already_present};
    }
    // Theirs vanished again (evicted at once, or quarantined): our copy is gone too (the rename removed it), and the
    // reader still holds its bytes. Install them from the reader under a new staging name.
    auto again = new_staging(key);
    if (!again) return std::move(again).error();
    DATAVO_TRY(util::copy_fd(reader.get(), again->fd(), size, "shard into " + again->path()));
    again->adopt(size, *digest);
    DATAVO_TRY(record_entry(again->fd(), again->path(), sidecar_path(key), key, size, *digest, mode));
    staged = std::move(*again);
    reader.reset(::open(staged.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (!reader.valid()) return Error::from_errno(errno, "cannot reopen " + staged.path());
  }
  return Error{ErrorCode::io, "cannot install " + final_path + ": it appears and vanishes under us"};
}

Result<InstallOutcome> FolderTier::install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  if (auto existing = peek(key); existing && *existing) return InstallOutcome::already_present;
  auto staged = impl_->new_staging(key);
  if (!staged) return std::move(staged).error();
  DATAVO_TRY(util::copy_fd(source.fd(), staged->fd(), source.size(), "shard into " + staged->path()));
  staged->adopt(source.size(), digest);
  auto outcome = impl_->commit(*staged);
  if (!outcome) return std::move(outcome).error();
  return outcome->second;
}

}  // namespace datavo
