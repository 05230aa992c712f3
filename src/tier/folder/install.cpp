// The folder tier's installs: staging files (new, or adopted from a writer that died), the commit, install_copy.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "tier/folder/scan.hpp"
#include "tier/folder/staging.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using folder::StagingFile;
using util::UniqueFd;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// The pid of a staging file written by this host, from its name <host>.<pid>.<random>...; 0 for another host's.
pid_t writer_on_this_host(const std::string& name) {
  const std::string& host = util::host_name();
  if (name.size() <= host.size() + 1 || name.compare(0, host.size(), host) != 0 || name[host.size()] != '.') return 0;
  char* end = nullptr;
  long pid = std::strtol(name.c_str() + host.size() + 1, &end, 10);
  return end && *end == '.' && pid > 0 ? pid_t(pid) : 0;
}

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

}  // namespace

Result<StagingFile> FolderTier::begin_staging(const ShardKey& key) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  DATAVO_TRY(impl_->ensure_dir(impl_->staging_dir));
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto file = util::AtomicFile::create(folder::new_staging_path(impl_->staging_dir, key), folder::entry_mode());
    if (file) return StagingFile(std::move(*file), options_.durability, Bytes{0});
    if (file.error().sys_errno != EEXIST) {
      return Error{
          file.error().code,
          "cannot create a staging file in " + impl_->staging_dir + ": " + std::strerror(file.error().sys_errno),
          file.error().sys_errno};
    }
  }
  return Error{ErrorCode::internal, "cannot find a free staging file name in " + impl_->staging_dir};
}

Result<std::optional<StagingFile>> FolderTier::adopt_partial(const ShardKey& key) {
  if (read_only()) return std::optional<StagingFile>{};
  std::unique_ptr<DIR, DirCloser> dir(::opendir(impl_->staging_dir.c_str()));
  if (!dir) {
    if (errno == ENOENT) return std::optional<StagingFile>{};
    return Error::from_errno(errno, "cannot read " + impl_->staging_dir);
  }
  const std::string suffix = folder::staging_suffix(key);
  // The dead writers' files of this key; the longest holds the most bytes worth keeping.
  std::string best;
  std::uint64_t best_size = 0;
  std::vector<std::string> others;
  int listing_error = 0;
  while (struct dirent* d = folder::next_dir_entry(dir.get(), &listing_error)) {
    const std::string entry = d->d_name;
    if (entry.size() <= suffix.size() || entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const pid_t writer = writer_on_this_host(entry);
    if (writer == 0 || writer == ::getpid() || util::process_alive(writer)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir.get()), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (best.empty() || std::uint64_t(st.st_size) > best_size) {
      if (!best.empty()) others.push_back(best);
      best = entry;
      best_size = std::uint64_t(st.st_size);
    } else {
      others.push_back(entry);
    }
  }
  // A listing that failed half-way may have missed the longest file: the caller starts a fresh one instead.
  if (listing_error != 0) return Error::from_errno(listing_error, "cannot list " + impl_->staging_dir);
  for (const auto& other : others) ::unlinkat(::dirfd(dir.get()), other.c_str(), 0);
  if (best.empty() || best_size == 0) {
    if (!best.empty()) ::unlinkat(::dirfd(dir.get()), best.c_str(), 0);
    return std::optional<StagingFile>{};
  }
  // The claim: of several adopters only one rename succeeds.
  const std::string from = impl_->staging_dir + "/" + best;
  const std::string to = folder::new_staging_path(impl_->staging_dir, key);
  if (::rename(from.c_str(), to.c_str()) != 0) return std::optional<StagingFile>{};
  auto file = util::AtomicFile::adopt(to);
  if (!file) {
    ::unlink(to.c_str());
    return std::optional<StagingFile>{};
  }
  struct stat st {};
  if (::fstat(file->fd(), &st) != 0) return Error::from_errno(errno, "cannot stat " + to);
  if (::lseek(file->fd(), 0, SEEK_END) < 0) return Error::from_errno(errno, "cannot seek in " + to);
  LOG_INFO("tier '" << name() << "': continuing the download of " << key.hash.hex() << " from byte " << st.st_size
                    << " (left by a writer that died)");
  return std::optional<StagingFile>{
      StagingFile(std::move(*file), options_.durability, Bytes{std::uint64_t(st.st_size)})};
}

Result<ShardHandle> FolderTier::commit(StagingFile&& staged, const ShardKey& key) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  auto budget = reserve();
  if (!budget) return std::move(budget).error();
  auto outcome = commit_staged(staged, key);
  if (!outcome) return std::move(outcome).error();
  if (outcome->second == InstallOutcome::installed) committed(budget->get(), outcome->first.size());
  budget->reset();
  expire_if_due(key);
  return std::move(outcome->first);
}

Result<std::pair<ShardHandle, InstallOutcome>> FolderTier::commit_staged(StagingFile& staged, const ShardKey& key) {
  DATAVO_TRY(impl_->ensure_dir(impl_->instance_dir(key.instance)));
  const std::string final_path = impl_->entry_path(key);
  auto digest = staged.digest();
  if (!digest) return std::move(digest).error();

  // Group members must be able to read entries (and bump their mtime) whatever the writer's umask.
  const mode_t mode = folder::entry_mode();
  if (::fchmod(staged.fd(), mode) != 0) return Error::from_errno(errno, "cannot chmod " + staged.path());
  DATAVO_TRY(record_entry(staged.fd(), staged.path(), impl_->sidecar_path(key), key, staged.written(), *digest, mode));
  // Data is made durable before the rename, so that after a crash the final name holds either nothing or the
  // whole entry. The directory is not synced: a rename lost in a crash is a miss, never a corrupt entry.
  if (options_.durability == Durability::fsync_before_commit) DATAVO_TRY(staged.file().sync());
  // A read-only fd on the staged inode survives the rename and becomes the caller's handle.
  UniqueFd reader(::open(staged.path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!reader.valid()) return Error::from_errno(errno, "cannot reopen " + staged.path());

  const Bytes size = staged.written();
  for (int round = 0; round < 2; ++round) {
    auto committed = staged.file().commit(final_path, util::AtomicFile::Replace::no);
    if (!committed) return std::move(committed).error();
    if (*committed) {
      return std::pair<ShardHandle, InstallOutcome>{ShardHandle(reader.release(), final_path, size),
                                                    InstallOutcome::installed};
    }
    // Someone installed the same content hash first: same bytes by definition. Keep theirs.
    auto existing = peek(key);
    if (existing && *existing) {
      return std::pair<ShardHandle, InstallOutcome>{std::move(**existing), InstallOutcome::already_present};
    }
    // Theirs vanished again (evicted at once, or quarantined): our copy is gone too (commit removed it), and the
    // reader still holds its bytes. Install them from the reader under a new staging name.
    auto again = begin_staging(key);
    if (!again) return std::move(again).error();
    DATAVO_TRY(util::copy_fd(reader.get(), again->fd(), size, "shard into " + again->path()));
    again->adopt(size, *digest);
    DATAVO_TRY(record_entry(again->fd(), again->path(), impl_->sidecar_path(key), key, size, *digest, mode));
    staged = std::move(*again);
    reader.reset(::open(staged.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (!reader.valid()) return Error::from_errno(errno, "cannot reopen " + staged.path());
  }
  return Error{ErrorCode::io, "cannot install " + final_path + ": it appears and vanishes under us"};
}

Result<InstallOutcome> FolderTier::install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  if (auto existing = peek(key); existing && *existing) return InstallOutcome::already_present;
  auto staged = begin_staging(key);
  if (!staged) return std::move(staged).error();
  DATAVO_TRY(util::copy_fd(source.fd(), staged->fd(), source.size(), "shard into " + staged->path()));
  staged->adopt(source.size(), digest);
  auto budget = reserve();
  if (!budget) return std::move(budget).error();
  auto outcome = commit_staged(*staged, key);
  if (!outcome) return std::move(outcome).error();
  if (outcome->second == InstallOutcome::installed) committed(budget->get(), source.size());
  budget->reset();
  expire_if_due(key);
  return outcome->second;
}

}  // namespace datavo
