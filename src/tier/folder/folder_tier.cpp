#include "datavo/folder_tier.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tier/folder/scan.hpp"
#include "tier/folder/trailing_digest.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using util::UniqueFd;

constexpr const char* k_digest_xattr = "user.datavo.sha256";
constexpr const char* k_entry_suffix = ".tar";
constexpr const char* k_sidecar_suffix = ".sha256";
// Directories are setgid so that entries inherit the tier's group: a tier shared by a Unix group stays
// readable by all its members (docs/layout.md, "Sharing").
constexpr mode_t k_dir_mode = 02775;
// Entries are group-writable so that members of the group can bump mtime (the LRU clock) on a hit.
constexpr mode_t k_entry_mode = 0664;
constexpr mode_t k_entry_mode_floor = 0440;
// A lock file left by a dead holder is only swept once it is older than this, so that a lock file that is
// being created right now is never mistaken for an orphan.
constexpr Seconds k_orphan_lock_age{60};
// How long enforce_budget() trusts its usage estimate before it rescans the tier.
constexpr std::chrono::seconds k_usage_estimate_ttl{2};
// Expired entries are misses on open() already; the pass that deletes them in bulk runs at most this often.
constexpr std::chrono::seconds k_expiry_pass_interval{60};

bool is_flock_unsupported(int err) { return err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP || err == EINVAL; }

mode_t current_umask() { return util::process_umask(); }

std::chrono::system_clock::time_point to_time_point(const struct timespec& ts) {
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

Result<std::optional<Sha256>> read_digest_xattr(int fd) {
  char buffer[80] = {};
  ssize_t n = ::fgetxattr(fd, k_digest_xattr, buffer, sizeof buffer - 1);
  if (n < 0) {
    if (errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP) return std::optional<Sha256>{};
    return Error::from_errno(errno, "cannot read digest xattr");
  }
  auto parsed = Sha256::parse(std::string_view(buffer, static_cast<std::size_t>(n)));
  if (!parsed) return std::optional<Sha256>{};
  return std::optional<Sha256>{*parsed};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// StagingFile

StagingFile::StagingFile(int fd, std::string path, Durability durability)
    : fd_(fd), path_(std::move(path)), hasher_(std::make_unique<folder::TrailingDigest>(fd, durability)) {}

StagingFile::~StagingFile() {
  hasher_.reset();  // joins its thread before the fd it reads goes away
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
}

StagingFile::StagingFile(StagingFile&& other) noexcept
    : fd_(other.fd_),
      path_(std::move(other.path_)),
      written_(other.written_),
      hasher_(std::move(other.hasher_)),
      digest_(other.digest_) {
  other.fd_ = -1;
  other.path_.clear();
}

StagingFile& StagingFile::operator=(StagingFile&& other) noexcept {
  if (this != &other) {
    hasher_.reset();
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    written_ = other.written_;
    hasher_ = std::move(other.hasher_);
    digest_ = other.digest_;
    other.fd_ = -1;
    other.path_.clear();
  }
  return *this;
}

Result<void> StagingFile::write(const void* data, std::size_t size) {
  if (digest_) {
    // Bytes after a finished or adopted digest: hash everything again from the file.
    hasher_->reset();
    digest_.reset();
  }
  DATAVO_TRY(util::write_all(fd_, data, size, "staging file " + path_));
  written_ += Bytes{size};
  hasher_->appended(written_);
  return {};
}

Result<void> StagingFile::restart() {
  hasher_->reset();
  if (::ftruncate(fd_, 0) != 0) return Error::from_errno(errno, "cannot truncate staging file " + path_);
  if (::lseek(fd_, 0, SEEK_SET) < 0) return Error::from_errno(errno, "cannot rewind staging file " + path_);
  written_ = Bytes{0};
  digest_.reset();
  return {};
}

Result<Sha256> StagingFile::digest() {
  if (!digest_) {
    auto computed = hasher_->finish(written_);
    if (!computed) {
      return Error{computed.error().code, "cannot hash staging file " + path_ + ": " + computed.error().message};
    }
    digest_ = *computed;
  }
  return *digest_;
}

void StagingFile::mark_committed() {
  hasher_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
}

void StagingFile::adopt(Bytes size, const Sha256& digest) {
  hasher_->reset();
  written_ = size;
  digest_ = digest;
}

// ---------------------------------------------------------------------------------------------------------------
// ShardCacheTier::Impl

struct ShardCacheTier::Impl {
  std::string root, staging_dir, locks_dir, quarantine_dir, stats_file;

  // In-process lock table in front of flock: threads of this process queue here, so that flock only arbitrates
  // between processes and a filesystem without flock still gets in-process single flight.
  // Shared with every ShardLock, so that a lock may outlive the tier object that issued it.
  struct LockTable {
    std::mutex mu;
    std::condition_variable cv;
    std::unordered_map<std::string, bool> held;
  };
  std::shared_ptr<LockTable> lock_table = std::make_shared<LockTable>();

  std::mutex dirs_mu;
  std::vector<std::string> created_dirs;

  // enforce_budget()'s running estimate of the tier's usage (see there).
  std::mutex budget_mu;
  std::optional<std::uint64_t> usage_estimate;
  std::chrono::steady_clock::time_point estimate_time;
  std::chrono::steady_clock::time_point last_expiry_pass;

  Result<void> ensure_dir(const std::string& dir) {
    {
      std::lock_guard lock(dirs_mu);
      if (std::find(created_dirs.begin(), created_dirs.end(), dir) != created_dirs.end()) return {};
    }
    DATAVO_TRY(util::make_dirs(dir, k_dir_mode));
    std::lock_guard lock(dirs_mu);
    created_dirs.push_back(dir);
    return {};
  }

  std::string instance_dir(const Instance& instance) const { return root + "/" + instance.name(); }
  std::string entry_path(const ShardKey& key) const {
    std::string p;
    p.reserve(root.size() + key.instance.name().size() + 70);
    p += root;
    p += '/';
    p += key.instance.name();
    p += '/';
    p += key.hash.hex();
    p += k_entry_suffix;
    return p;
  }
  std::string sidecar_path(const ShardKey& key) const {
    return instance_dir(key.instance) + "/" + key.hash.hex() + k_sidecar_suffix;
  }
  std::string lock_path(const std::string& lock_name) const { return locks_dir + "/" + lock_name + ".lock"; }

  struct CommitOutcome {
    ShardHandle handle;
    InstallOutcome outcome;
  };
  // Shared by commit() and install_copy(); see commit() in the header for the contract.
  Result<CommitOutcome> commit_staged(ShardCacheTier& tier, StagingFile& staged, const ShardKey& key);
};

struct ShardCacheTier::ShardLock::State {
  std::shared_ptr<ShardCacheTier::Impl::LockTable> table;
  std::string name;
  std::string path;
  UniqueFd fd;  // invalid when the filesystem has no working flock
  ~State() {
    if (fd.valid()) {
      // Unlinking while still holding the lock is safe: lockers check that the inode they locked is still the
      // one at the path, and start over otherwise.
      ::unlink(path.c_str());
      fd.reset();
    }
    std::lock_guard lock(table->mu);
    table->held.erase(name);
    table->cv.notify_all();
  }
};

ShardCacheTier::ShardLock::~ShardLock() = default;
ShardCacheTier::ShardLock::ShardLock(ShardLock&&) noexcept = default;
ShardCacheTier::ShardLock& ShardCacheTier::ShardLock::operator=(ShardLock&&) noexcept = default;

// ---------------------------------------------------------------------------------------------------------------
// ShardCacheTier

Result<std::shared_ptr<ShardCacheTier>> ShardCacheTier::create(FolderTierOptions options) {
  if (options.path.empty()) return Error{ErrorCode::invalid_argument, "folder tier needs a path"};
  while (options.path.size() > 1 && options.path.back() == '/') options.path.pop_back();
  if (options.name.empty()) options.name = options.path;
  if (options.max_bytes && options.max_bytes->count() == 0) options.max_bytes.reset();
  if (!(options.low_watermark > 0.0 && options.low_watermark <= 1.0)) {
    return Error{ErrorCode::invalid_argument, "low watermark must be in (0, 1]"};
  }
  (void)current_umask();
  return std::shared_ptr<ShardCacheTier>(new ShardCacheTier(std::move(options)));
}

ShardCacheTier::ShardCacheTier(FolderTierOptions options) : options_(std::move(options)), impl_(new Impl) {
  impl_->root = options_.path;
  impl_->staging_dir = options_.path + "/.staging";
  impl_->locks_dir = options_.path + "/.locks";
  impl_->quarantine_dir = options_.path + "/.quarantine";
  impl_->stats_file = options_.path + "/.stats.json";
}

ShardCacheTier::~ShardCacheTier() = default;

std::string ShardCacheTier::entry_path(const ShardKey& key) const { return impl_->entry_path(key); }

Result<std::optional<ShardHandle>> ShardCacheTier::peek(const ShardKey& key) {
  std::string path = impl_->entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<ShardHandle>{};
    return Error::from_errno(errno, "cannot open " + path);
  }
  UniqueFd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
  return std::optional<ShardHandle>{ShardHandle(guard.release(), std::move(path), Bytes{std::uint64_t(st.st_size)})};
}

Result<std::optional<ShardHandle>> ShardCacheTier::open(const ShardKey& key) {
  std::string path = impl_->entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      counters().misses.fetch_add(1, std::memory_order_relaxed);
      return std::optional<ShardHandle>{};
    }
    return Error::from_errno(errno, "cannot open " + path);
  }
  UniqueFd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
  if (options_.max_age) {
    auto age = std::chrono::system_clock::now() - to_time_point(st.st_mtim);
    if (age > *options_.max_age) {
      // Expired: a miss, and the entry goes now rather than at the next gc.
      if (!read_only() && ::unlink(path.c_str()) == 0) {
        ::unlink(impl_->sidecar_path(key).c_str());
        counters().evictions.fetch_add(1, std::memory_order_relaxed);
      }
      counters().misses.fetch_add(1, std::memory_order_relaxed);
      return std::optional<ShardHandle>{};
    }
  }
  // The LRU clock. A file owned by another user, or a read-only mount, refuses: the hit stands regardless.
  static const struct timespec now_times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  if (!read_only() && ::futimens(fd, now_times) != 0) {
    if (errno != EPERM && errno != EACCES && errno != EROFS) {
      LOG_DEBUG("cannot bump mtime of " << path << ": " << std::strerror(errno));
    }
  }
  counters().hits.fetch_add(1, std::memory_order_relaxed);
  counters().bytes_served.fetch_add(std::uint64_t(st.st_size), std::memory_order_relaxed);
  return std::optional<ShardHandle>{ShardHandle(guard.release(), std::move(path), Bytes{std::uint64_t(st.st_size)})};
}

Result<StagingFile> ShardCacheTier::begin_staging() {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  DATAVO_TRY(impl_->ensure_dir(impl_->staging_dir));
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string path = impl_->staging_dir + "/" + util::host_name() + "." + std::to_string(::getpid()) + "." +
                       util::random_hex(8) + ".tmp";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, k_entry_mode);
    if (fd >= 0) return StagingFile(fd, std::move(path), options_.durability);
    if (errno != EEXIST) return Error::from_errno(errno, "cannot create staging file in " + impl_->staging_dir);
  }
  return Error{ErrorCode::internal, "cannot find a free staging file name in " + impl_->staging_dir};
}

Result<ShardCacheTier::Impl::CommitOutcome> ShardCacheTier::Impl::commit_staged(ShardCacheTier& tier,
                                                                                StagingFile& staged,
                                                                                const ShardKey& key) {
  Impl& impl = *this;
  const mode_t umask_bits = current_umask();
  DATAVO_TRY(impl.ensure_dir(impl.instance_dir(key.instance)));
  const std::string final_path = impl.entry_path(key);
  auto digest = staged.digest();
  if (!digest) return std::move(digest).error();
  const std::string digest_hex = digest->hex();

  // Group members must be able to read entries (and bump their mtime) whatever the writer's umask.
  mode_t mode = (k_entry_mode & ~umask_bits) | k_entry_mode_floor;
  if (::fchmod(staged.fd(), mode) != 0) return Error::from_errno(errno, "cannot chmod " + staged.path());
  bool have_xattr = ::fsetxattr(staged.fd(), k_digest_xattr, digest_hex.data(), digest_hex.size(), 0) == 0;
  if (!have_xattr) {
    if (errno != ENOTSUP && errno != EOPNOTSUPP && errno != EPERM) {
      return Error::from_errno(errno, "cannot record digest of " + staged.path());
    }
    // No user xattrs here (older tmpfs, some NFS): the digest goes in a sidecar, written before the entry so
    // that an entry never exists without its digest.
    DATAVO_TRY(util::write_file_atomic(impl.sidecar_path(key), digest_hex + "\n", mode));
  }
  // Data is made durable before the rename, so that after a crash the final name holds either nothing or the
  // whole entry. The directory is not synced: a rename lost in a crash is a miss, never a corrupt entry.
  if (tier.options().durability == Durability::fsync_before_commit && ::fdatasync(staged.fd()) != 0) {
    return Error::from_errno(errno, "cannot sync " + staged.path());
  }
  // A read-only fd on the staged inode survives the rename and becomes the caller's handle.
  UniqueFd reader(::open(staged.path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!reader.valid()) return Error::from_errno(errno, "cannot reopen " + staged.path());

  if (::renameat2(AT_FDCWD, staged.path().c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) {
      // Someone installed the same content hash first: same bytes by definition. Keep theirs.
      auto existing = tier.peek(key);
      if (existing && *existing) return CommitOutcome{std::move(**existing), InstallOutcome::already_present};
      // It vanished again (evicted at once): fall through to a plain rename.
    } else if (errno != EINVAL && errno != ENOSYS) {
      return Error::from_errno(errno, "cannot install " + final_path);
    }
    // NFS and a few others lack RENAME_NOREPLACE: rename(2) over an identical entry is equally correct.
    if (::rename(staged.path().c_str(), final_path.c_str()) != 0) {
      return Error::from_errno(errno, "cannot install " + final_path);
    }
  }
  staged.mark_committed();
  return CommitOutcome{ShardHandle(reader.release(), final_path, staged.written()), InstallOutcome::installed};
}

Result<ShardHandle> ShardCacheTier::commit(StagingFile&& staged, const ShardKey& key) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  auto outcome = impl_->commit_staged(*this, staged, key);
  if (!outcome) return std::move(outcome).error();
  if (outcome->outcome == InstallOutcome::installed) enforce_budget(&key, outcome->handle.size());
  return std::move(outcome->handle);
}

Result<bool> ShardCacheTier::contains(const ShardKey& key) {
  struct stat st {};
  std::string path = impl_->entry_path(key);
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return Error::from_errno(errno, "cannot stat " + path);
}

Result<bool> ShardCacheTier::read_into(const ShardKey& key, ByteSink& sink) {
  auto opened = open(key);
  if (!opened) return std::move(opened).error();
  if (!*opened) return false;
  const ShardHandle& handle = **opened;
  std::vector<char> buffer(1 << 20);
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(handle.fd(), buffer.data(), buffer.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read " + handle.path());
    }
    if (n == 0) break;
    DATAVO_TRY(sink.write(buffer.data(), static_cast<std::size_t>(n)));
    offset += n;
  }
  return true;
}

Result<InstallOutcome> ShardCacheTier::install_copy(const ShardKey& key, const ShardHandle& source,
                                                    const Sha256& digest) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  if (auto existing = peek(key); existing && *existing) return InstallOutcome::already_present;
  auto staged = begin_staging();
  if (!staged) return std::move(staged).error();
  DATAVO_TRY(util::copy_fd(source.fd(), staged->fd(), source.size(), "shard into " + staged->path()));
  staged->adopt(source.size(), digest);
  auto outcome = impl_->commit_staged(*this, *staged, key);
  if (!outcome) return std::move(outcome).error();
  if (outcome->outcome == InstallOutcome::installed) enforce_budget(&key, source.size());
  return outcome->outcome;
}

Result<bool> ShardCacheTier::remove(const ShardKey& key) {
  if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
  std::string path = impl_->entry_path(key);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return Error::from_errno(errno, "cannot remove " + path);
  }
  ::unlink(impl_->sidecar_path(key).c_str());
  counters().evictions.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Result<TierUsage> ShardCacheTier::usage() {
  auto scanned = folder::scan_tier(impl_->root, folder::ScanDetail::totals);
  if (!scanned) return std::move(scanned).error();
  return TierUsage{scanned->used, scanned->entries.size() ? scanned->entries.size() : scanned->entry_count};
}

Result<std::vector<EntryInfo>> ShardCacheTier::list() {
  auto scanned = folder::scan_tier(impl_->root, folder::ScanDetail::entries);
  if (!scanned) return std::move(scanned).error();
  std::vector<EntryInfo> out;
  out.reserve(scanned->entries.size());
  for (auto& e : scanned->entries) {
    auto hash = ContentHash::parse(e.hash_hex);
    if (!hash) continue;
    out.push_back(EntryInfo{e.instance, *hash, e.size, e.mtime});
  }
  std::sort(out.begin(), out.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_access > b.last_access; });
  return out;
}

Result<std::optional<Sha256>> ShardCacheTier::recorded_digest(const ShardKey& key) {
  auto handle = peek(key);
  if (!handle) return std::move(handle).error();
  if (!*handle) return std::optional<Sha256>{};
  auto from_xattr = read_digest_xattr((*handle)->fd());
  if (!from_xattr) return from_xattr;
  if (*from_xattr) return from_xattr;
  auto sidecar = util::read_file(impl_->sidecar_path(key));
  if (!sidecar) return std::optional<Sha256>{};
  std::string text = *sidecar;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  auto parsed = Sha256::parse(text);
  if (!parsed) return std::optional<Sha256>{};
  return std::optional<Sha256>{*parsed};
}

// ---------------------------------------------------------------------------------------------------------------
// Eviction, expiry and sweeping

Result<EvictionReport> ShardCacheTier::evict(DryRun dry_run, const ShardKey* keep) {
  EvictionReport report;
  if (read_only()) return report;
  auto scanned = folder::scan_tier(impl_->root, folder::ScanDetail::entries);
  if (!scanned) return std::move(scanned).error();
  auto& entries = scanned->entries;
  std::uint64_t used = scanned->used.count();
  const auto now = std::chrono::system_clock::now();
  const std::string keep_name = keep ? keep->hash.hex() : std::string();
  const std::string keep_instance = keep ? keep->instance.name() : std::string();

  auto drop = [&](const folder::ScannedEntry& e, bool expired) {
    if (dry_run == DryRun::no) {
      if (::unlink(e.path.c_str()) != 0) return;  // already gone: another process evicted it
      if (e.has_sidecar) ::unlink((e.path.substr(0, e.path.size() - 4) + k_sidecar_suffix).c_str());
      counters().evictions.fetch_add(1, std::memory_order_relaxed);
    }
    ++report.entries_evicted;
    if (expired) ++report.expired;
    report.bytes_freed += e.size;
    used -= std::min<std::uint64_t>(used, e.size.count());
  };
  std::sort(entries.begin(), entries.end(),
            [](const folder::ScannedEntry& a, const folder::ScannedEntry& b) { return a.mtime < b.mtime; });
  std::vector<bool> gone(entries.size(), false);
  if (options_.max_age) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (now - entries[i].mtime <= *options_.max_age) break;  // sorted oldest first
      if (keep && entries[i].hash_hex == keep_name && entries[i].instance == keep_instance) continue;
      drop(entries[i], true);
      gone[i] = true;
    }
  }
  if (options_.max_bytes && used > options_.max_bytes->count()) {
    const auto target = static_cast<std::uint64_t>(double(options_.max_bytes->count()) * options_.low_watermark);
    for (std::size_t i = 0; i < entries.size() && used > target; ++i) {
      if (gone[i]) continue;
      if (keep && entries[i].hash_hex == keep_name && entries[i].instance == keep_instance) continue;
      drop(entries[i], false);
    }
  }
  report.used_after = Bytes{used};
  return report;
}

void ShardCacheTier::enforce_budget(const ShardKey* just_installed, Bytes installed) {
  if (!options_.max_bytes && !options_.max_age) return;
  const auto now = std::chrono::steady_clock::now();
  {
    // A full scan costs a stat per entry (about 1 s per 100k entries), so installs far under budget skip it:
    // this process's running estimate is trusted for a short while. Other processes' installs are seen at the
    // next scan, so the budget may be overshot by what they install within that window.
    std::lock_guard lock(impl_->budget_mu);
    bool estimate_fresh = impl_->usage_estimate && now - impl_->estimate_time < k_usage_estimate_ttl;
    if (estimate_fresh) *impl_->usage_estimate += installed.count();
    bool under_budget =
        !options_.max_bytes || (estimate_fresh && *impl_->usage_estimate <= options_.max_bytes->count());
    bool expiry_due = options_.max_age && now - impl_->last_expiry_pass >= k_expiry_pass_interval;
    if (under_budget && !expiry_due) return;
  }
  if (options_.max_bytes && !options_.max_age) {
    auto totals = folder::scan_tier(impl_->root, folder::ScanDetail::totals);
    if (totals && totals->used <= *options_.max_bytes) {
      std::lock_guard lock(impl_->budget_mu);
      impl_->usage_estimate = totals->used.count();
      impl_->estimate_time = now;
      return;
    }
  }
  // One evictor at a time per tier; the others skip, since the running pass frees space for everyone.
  if (!impl_->ensure_dir(impl_->locks_dir)) return;
  UniqueFd fd(::open(impl_->lock_path("evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, k_entry_mode));
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) return;
  auto report = evict(DryRun::no, just_installed);
  if (!report) {
    counters().errors.fetch_add(1, std::memory_order_relaxed);
    LOG_WARNING("tier '" << name() << "': eviction failed: " << report.error().message);
    return;
  }
  {
    std::lock_guard lock(impl_->budget_mu);
    impl_->usage_estimate = report->used_after.count();
    impl_->estimate_time = now;
    impl_->last_expiry_pass = now;
  }
  if (report->entries_evicted > 0) {
    LOG_INFO("tier '" << name() << "': evicted " << report->entries_evicted << " entries, "
                      << report->bytes_freed.count() << " bytes");
  }
}

Result<EvictionReport> ShardCacheTier::gc(DryRun dry_run) {
  if (read_only()) return EvictionReport{};
  auto report = evict(dry_run, nullptr);
  if (!report) return report;
  auto swept = folder::sweep_leftovers(impl_->staging_dir, impl_->locks_dir, options_.stale_staging_age,
                                       k_orphan_lock_age, dry_run == DryRun::yes);
  if (!swept) return std::move(swept).error();
  report->staging_swept = swept->staging_files;
  report->locks_swept = swept->lock_files;
  return report;
}

Result<VerifyReport> ShardCacheTier::verify(Repair repair) {
  VerifyReport report;
  auto entries = list();
  if (!entries) return std::move(entries).error();
  for (const auto& e : *entries) {
    auto instance = Instance::parse(e.instance);
    if (!instance) continue;
    ShardKey key{*instance, e.hash};
    auto handle = peek(key);
    if (!handle || !*handle) continue;  // evicted meanwhile
    ++report.checked;
    auto recorded = recorded_digest(key);
    if (!recorded || !*recorded) {
      ++report.unverifiable;
      continue;
    }
    auto actual = sha256_of_fd((*handle)->fd());
    if (!actual) return std::move(actual).error();
    if (*actual == **recorded) {
      ++report.ok;
      continue;
    }
    ++report.bad;
    report.bad_paths.push_back((*handle)->path());
    LOG_WARNING("tier '" << name() << "': " << (*handle)->path() << " does not match its recorded SHA-256 "
                         << (*recorded)->hex() << " (actual " << actual->hex() << ")");
    if (repair == Repair::yes && !read_only()) {
      DATAVO_TRY(impl_->ensure_dir(impl_->quarantine_dir));
      std::string target = impl_->quarantine_dir + "/" + e.instance + "." + e.hash.hex() + ".tar";
      if (::rename((*handle)->path().c_str(), target.c_str()) != 0) {
        return Error::from_errno(errno, "cannot quarantine " + (*handle)->path());
      }
      ::unlink(impl_->sidecar_path(key).c_str());
      ++report.quarantined;
    }
  }
  return report;
}

// ---------------------------------------------------------------------------------------------------------------
// Per-shard locks

Result<ShardCacheTier::ShardLock> ShardCacheTier::lock_shard(const ShardKey& key) {
  const std::string lock_name = key.instance.name() + "." + key.hash.hex();
  ShardLock lock;
  lock.state_ = std::make_unique<ShardLock::State>();
  lock.state_->table = impl_->lock_table;
  lock.state_->name = lock_name;
  lock.state_->path = impl_->lock_path(lock_name);
  {
    auto& locks = *impl_->lock_table;
    std::unique_lock table(locks.mu);
    locks.cv.wait(table, [&] { return locks.held.count(lock_name) == 0; });
    locks.held[lock_name] = true;
  }
  // From here the State destructor releases the in-process slot on every path.
  if (read_only()) return lock;
  if (auto made = impl_->ensure_dir(impl_->locks_dir); !made) {
    log::warn_once("lockdir:" + impl_->locks_dir, "tier '" + name() + "': cannot create " + impl_->locks_dir + " (" +
                                                      made.error().message + "); single flight is per process only");
    return lock;
  }
  const std::string& path = lock.state_->path;
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, k_entry_mode));
    if (!fd.valid()) {
      log::warn_once("lockopen:" + impl_->locks_dir, "tier '" + name() + "': cannot open lock " + path + ": " +
                                                         std::strerror(errno) + "; single flight is per process only");
      return lock;
    }
    int rc;
    do {
      rc = ::flock(fd.get(), LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      if (is_flock_unsupported(errno)) {
        log::warn_once("flock:" + impl_->locks_dir, "tier '" + name() + "': flock is not supported on " +
                                                        impl_->locks_dir + " (" + std::strerror(errno) +
                                                        "); relying on atomic rename alone");
        return lock;
      }
      return Error::from_errno(errno, "cannot lock " + path);
    }
    // The holder before us may have unlinked the file after we opened it; then we hold a lock nobody else
    // will see, and must start over on the file now at the path.
    struct stat held_st {
    }, path_st{};
    if (::fstat(fd.get(), &held_st) == 0 && ::stat(path.c_str(), &path_st) == 0 && held_st.st_ino == path_st.st_ino &&
        held_st.st_dev == path_st.st_dev) {
      std::string owner = util::host_name() + " " + std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd.get(), 0) == 0) {
        ssize_t ignored = ::pwrite(fd.get(), owner.data(), owner.size(), 0);
        (void)ignored;
      }
      lock.state_->fd = std::move(fd);
      return lock;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Persisted statistics

namespace {

nlohmann::json stats_to_json(const TierStats& s) {
  return {{"hits", s.hits},
          {"misses", s.misses},
          {"promotions", s.promotions},
          {"installs", s.installs},
          {"capacity_skips", s.capacity_skips},
          {"evictions", s.evictions},
          {"errors", s.errors},
          {"bytes_served", s.bytes_served.count()},
          {"bytes_installed", s.bytes_installed.count()}};
}

TierStats stats_from_json(const nlohmann::json& j) {
  TierStats s;
  auto get = [&](const char* field) -> std::uint64_t {
    auto it = j.find(field);
    return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
  };
  s.hits = get("hits");
  s.misses = get("misses");
  s.promotions = get("promotions");
  s.installs = get("installs");
  s.capacity_skips = get("capacity_skips");
  s.evictions = get("evictions");
  s.errors = get("errors");
  s.bytes_served = Bytes{get("bytes_served")};
  s.bytes_installed = Bytes{get("bytes_installed")};
  return s;
}

// A missing or unparsable stats file counts as zero: statistics must never fail a read.
TierStats read_stats_file(const std::string& path) {
  auto text = util::read_file(path);
  if (!text) return {};
  auto parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return {};
  return stats_from_json(parsed);
}

}  // namespace

Result<TierStats> ShardCacheTier::cumulative_stats() {
  TierStats total = read_stats_file(impl_->stats_file);
  total += counters().snapshot();
  return total;
}

Result<void> ShardCacheTier::flush_stats(LockWait wait) {
  if (read_only()) return {};
  {
    // Nothing counted: touch nothing on disk (a command that failed early leaves the tier as it was).
    TierStats pending = counters().snapshot();
    if (pending.hits + pending.misses + pending.promotions + pending.installs + pending.capacity_skips +
            pending.evictions + pending.errors ==
        0) {
      return {};
    }
  }
  auto made = impl_->ensure_dir(impl_->locks_dir);
  if (!made) return made;
  UniqueFd fd(::open(impl_->lock_path(".stats").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, k_entry_mode));
  if (fd.valid()) {
    int how = wait == LockWait::skip_if_busy ? LOCK_EX | LOCK_NB : LOCK_EX;
    int rc;
    while ((rc = ::flock(fd.get(), how)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno == EWOULDBLOCK) return {};  // another process is flushing; ours go next time
  }
  TierStats delta = counters().take();
  if (delta.hits + delta.misses + delta.promotions + delta.installs + delta.capacity_skips + delta.evictions +
          delta.errors ==
      0) {
    return {};
  }
  TierStats total = read_stats_file(impl_->stats_file);
  total += delta;
  // Counters are best effort: no fsync, which would put a disk flush on the hit path every few seconds.
  return util::write_file_atomic(impl_->stats_file, stats_to_json(total).dump() + "\n", k_entry_mode, util::Sync::no);
}

Result<void> ShardCacheTier::reset_stats() {
  counters().take();
  if (read_only()) return {};
  if (::unlink(impl_->stats_file.c_str()) != 0 && errno != ENOENT) {
    return Error::from_errno(errno, "cannot reset " + impl_->stats_file);
  }
  return {};
}

}  // namespace datavo
