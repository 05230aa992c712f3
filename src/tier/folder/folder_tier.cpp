// The folder tier's lookups: create, the hit path (open, with its verification and quarantine), and the small
// Tier operations (contains, read_into, remove, usage, list, record_of, digest_of).
#include "datavo/folder_tier.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tier/folder/internal.hpp"
#include "tier/folder/scan.hpp"
#include "tier/folder/staging.hpp"
#include "util/decimal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/temp_name.hpp"
#include "util/text.hpp"

namespace datavo {

using util::UniqueFd;

const char* to_string(VerifyOnHit verify) {
  switch (verify) {
    case VerifyOnHit::size: return "size";
    case VerifyOnHit::full: return "full";
    case VerifyOnHit::sampled: return "sampled";
  }
  return "size";
}

const char* to_string(Durability durability) {
  switch (durability) {
    case Durability::fsync_before_commit: return "fsync";
    case Durability::no_sync: return "none";
  }
  return "fsync";
}

const char* to_string(LockMechanism mechanism) {
  switch (mechanism) {
    case LockMechanism::flock: return "flock";
    case LockMechanism::exclusive_create: return "exclusive_create";
    case LockMechanism::process_only: return "process_only";
  }
  return "flock";
}

namespace folder {

mode_t entry_mode() { return (k_entry_mode & ~util::process_umask()) | k_entry_group_bits; }

std::chrono::system_clock::time_point to_time_point(const struct timespec& ts) {
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

struct timespec to_timespec(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return {time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
}

struct timespec order_hint_time(std::chrono::system_clock::time_point t) {
  struct timespec ts = to_timespec(t);
  ts.tv_nsec = ts.tv_nsec - ts.tv_nsec % 1'000'000 + k_order_hint_mark_ns;
  return ts;
}

bool is_order_hint(const struct timespec& mtime) { return mtime.tv_nsec % 1'000'000 == k_order_hint_mark_ns; }

namespace {

// Offsets below this are timestamp granularity and the probe's own latency, not a skewed clock.
constexpr std::chrono::seconds k_clock_tolerance{2};
// How long a measured offset is trusted (an NTP step may change it).
constexpr std::chrono::seconds k_clock_probe_interval{60};

// Reads one short xattr; nullopt when absent or unsupported.
Result<std::optional<std::string>> read_xattr(int fd, const char* name) {
  // Large enough for the key record: an instance name (at most 255 bytes), "/" and 64 hex digits.
  char buffer[512] = {};
  ssize_t n = ::fgetxattr(fd, name, buffer, sizeof buffer - 1);
  if (n < 0) {
    if (errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP) return std::optional<std::string>{};
    return Error::from_errno(errno, std::string("cannot read xattr ") + name);
  }
  return std::optional<std::string>{std::string(buffer, std::size_t(n))};
}

}  // namespace

std::string key_record(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex(); }

Result<EntryRecord> read_record_xattrs(int fd, XattrPart part) {
  EntryRecord record;
  auto size = read_xattr(fd, k_size_xattr);
  if (!size) return std::move(size).error();
  if (*size) {
    if (auto parsed = util::parse_decimal(**size)) record.size = Bytes{*parsed};
  }
  if (record.size) {
    // Only entries installed since keys are recorded have one; the others keep being served on their size.
    auto key = read_xattr(fd, k_key_xattr);
    if (!key) return std::move(key).error();
    record.key = std::move(*key);
  }
  if (part == XattrPart::size_only && record.size) return record;
  auto digest = read_xattr(fd, k_digest_xattr);
  if (!digest) return std::move(digest).error();
  if (*digest) {
    if (auto parsed = Sha256::parse(**digest)) record.sha256 = *parsed;
  }
  return record;
}

EntryRecord parse_sidecar(std::string_view text) {
  EntryRecord record;
  text = util::trim_right(text);
  const auto space = text.find(' ');
  if (auto digest = Sha256::parse(text.substr(0, space))) record.sha256 = *digest;
  if (space != std::string_view::npos) {
    if (auto size = util::parse_decimal(text.substr(space + 1))) record.size = Bytes{*size};
  }
  return record;
}

}  // namespace folder

// ---------------------------------------------------------------------------------------------------------------
// Impl

std::chrono::system_clock::duration FolderTier::Impl::clock_offset() {
  using std::chrono::system_clock;
  const auto steady_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const auto fresh = [&] {
    const std::int64_t at = offset_measured_at_ns.load(std::memory_order_acquire);
    return at != 0 && steady_ns() - at < std::chrono::nanoseconds(folder::k_clock_probe_interval).count();
  };
  const auto offset_of = [&] {
    return std::chrono::duration_cast<system_clock::duration>(
        std::chrono::nanoseconds(offset_ns.load(std::memory_order_relaxed)));
  };
  if (fresh()) return offset_of();  // the hit path: two atomic loads and a clock read
  std::lock_guard lock(clock_mu);
  if (fresh()) return offset_of();
  auto measured = measure_clock_offset();
  offset_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(measured).count(), std::memory_order_relaxed);
  offset_measured_at_ns.store(std::max<std::int64_t>(1, steady_ns()), std::memory_order_release);
  return measured;
}

std::chrono::system_clock::duration FolderTier::Impl::measure_clock_offset() {
  using std::chrono::system_clock;
  const auto none = system_clock::duration::zero();
  if (read_only || !ensure_dir(locks_dir)) return none;
  const std::string probe = util::temp_name_in(locks_dir, "clock");
  const auto before = system_clock::now();
  UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return none;
  struct stat st {};
  const bool stamped = ::fstat(fd.get(), &st) == 0;
  const auto after = system_clock::now();
  ::unlink(probe.c_str());
  if (!stamped) return none;
  const auto offset = folder::to_time_point(st.st_mtim) - (before + (after - before) / 2);
  if (offset <= folder::k_clock_tolerance && offset >= -folder::k_clock_tolerance) return none;
  {
    log::warn_once("clock:" + root,
                   "the clock of this host is " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(-offset).count()) +
                       " s off the clock of the filesystem of " + root +
                       "; ages in that tier are measured by the filesystem's clock");
  }
  return std::chrono::duration_cast<system_clock::duration>(offset);
}

Result<void> FolderTier::Impl::ensure_dir(const std::string& dir) {
  {
    std::lock_guard lock(dirs_mu);
    if (std::find(created_dirs.begin(), created_dirs.end(), dir) != created_dirs.end()) return {};
  }
  DATAVO_TRY(util::make_dirs(dir, folder::k_dir_mode, folder::k_dir_group_bits));
  std::lock_guard lock(dirs_mu);
  created_dirs.push_back(dir);
  return {};
}

std::string FolderTier::Impl::entry_path(const ShardKey& key) const {
  std::string p;
  p.reserve(root.size() + key.instance.name().size() + 70);
  p += root;
  p += '/';
  p += key.instance.name();
  p += '/';
  p += key.hash.hex();
  p += folder::k_entry_suffix;
  return p;
}

// ---------------------------------------------------------------------------------------------------------------
// FolderTier

Seconds default_lru_resolution(const std::optional<Seconds>& max_age) {
  constexpr Seconds k_default{10};
  return max_age ? std::min(k_default, *max_age / 10) : k_default;
}

Result<std::shared_ptr<FolderTier>> FolderTier::create(FolderTierOptions options) {
  if (options.path.empty()) return Error{ErrorCode::invalid_argument, "folder tier needs a path"};
  while (options.path.size() > 1 && options.path.back() == '/') options.path.pop_back();
  if (options.name.empty()) options.name = options.path;
  if (options.max_bytes && options.max_bytes->count() == 0) options.max_bytes.reset();
  if (!(options.low_watermark > 0.0 && options.low_watermark <= 1.0)) {
    return Error{ErrorCode::invalid_argument, "low watermark must be in (0, 1]"};
  }
  if (options.verify_sample_every == 0) {
    return Error{ErrorCode::invalid_argument, "verify_sample_every must be at least 1"};
  }
  if (options.stale_lock_age < Seconds{1}) return Error{ErrorCode::invalid_argument, "stale_lock_age must be >= 1 s"};
  if (!options.lru_resolution) options.lru_resolution = default_lru_resolution(options.max_age);
  if (*options.lru_resolution < Seconds{0}) return Error{ErrorCode::invalid_argument, "lru_resolution is negative"};
  if (options.max_age && *options.lru_resolution >= *options.max_age) {
    return Error{ErrorCode::invalid_argument, "lru_resolution must be less than max_age"};
  }
  (void)util::process_umask();
  return std::shared_ptr<FolderTier>(new FolderTier(std::move(options)));
}

FolderTier::FolderTier(FolderTierOptions options) : options_(std::move(options)), impl_(new Impl(*this)) {
  impl_->root = options_.path;
  impl_->staging_dir = options_.path + "/.staging";
  impl_->locks_dir = options_.path + "/.locks";
  impl_->quarantine_dir = options_.path + "/.quarantine";
  impl_->stats_file = options_.path + "/.stats.json";
  impl_->read_only = options_.access == Access::read_only;
}

FolderTier::~FolderTier() = default;

std::string FolderTier::entry_path(const ShardKey& key) const { return impl_->entry_path(key); }

Result<std::optional<ShardHandle>> FolderTier::open(const ShardKey& key, Touch touch) {
  std::string path = impl_->entry_path(key);
  auto miss = [&] {
    if (touch == Touch::yes) counters().misses.fetch_add(1, std::memory_order_relaxed);
    return std::optional<ShardHandle>{};
  };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return miss();
    return Error::from_errno(errno, "cannot open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
  const Bytes size{std::uint64_t(st.st_size)};
  if (options_.max_age && impl_->now() - folder::to_time_point(st.st_mtim) > *options_.max_age) {
    // Expired: a miss, and the entry goes now rather than at the next gc.
    if (!read_only() && ::unlink(path.c_str()) == 0) {
      ::unlink(impl_->sidecar_path(key).c_str());
      counters().evictions.fetch_add(1, std::memory_order_relaxed);
    }
    return miss();
  }
  const std::uint64_t inode_key = std::uint64_t(st.st_ino) * 1000003u ^ std::uint64_t(st.st_dev);
  auto checked = intact(key, path, fd.get(), inode_key, size);
  if (!checked) return std::move(checked).error();
  if (!*checked) return miss();
  if (touch == Touch::yes) touch_hit(path, fd.get(), size, st.st_mtim);
  return std::optional<ShardHandle>{ShardHandle(fd.release(), std::move(path), size)};
}

Result<bool> FolderTier::intact(const ShardKey& key, const std::string& path, int fd, std::uint64_t inode_key,
                                Bytes size) {
  // The size recorded at install, from this process's memory when it has seen the inode before. An inode
  // remembered for another key has been renamed over this entry's name: its record is read again.
  const std::size_t key_tag = std::hash<std::string_view>{}(path);
  std::optional<std::uint64_t> recorded;
  {
    std::lock_guard lock(impl_->records_mu);
    if (auto it = impl_->recorded_sizes.find(inode_key);
        it != impl_->recorded_sizes.end() && it->second.key_tag == key_tag) {
      recorded = it->second.size;
    }
  }
  const bool hash_this_hit =
      options_.verify == VerifyOnHit::full ||
      (options_.verify == VerifyOnHit::sampled &&
       impl_->hits_for_sampling.fetch_add(1, std::memory_order_relaxed) % options_.verify_sample_every == 0);
  // An entry installed without a recorded size (by an older Datavo) is remembered as such, not re-read per hit.
  constexpr std::uint64_t k_unrecorded = ~std::uint64_t{0};
  std::optional<EntryRecord> record;
  if (!recorded || hash_this_hit) {
    auto read = record_of_fd(key, fd, hash_this_hit ? RecordPart::all : RecordPart::size);
    if (!read) return std::move(read).error();
    record = *read;
    if (record->key && *record->key != folder::key_record(key)) {
      quarantine(key, path, "was installed as " + *record->key + ", not as this entry (renamed over its name?)");
      return false;
    }
    recorded = record->size ? record->size->count() : k_unrecorded;
    // Bounded: a long-lived process over a huge tier forgets and re-reads, it never grows without limit.
    constexpr std::size_t k_max_remembered = 1u << 16;
    std::lock_guard lock(impl_->records_mu);
    if (impl_->recorded_sizes.size() >= k_max_remembered) impl_->recorded_sizes.clear();
    impl_->recorded_sizes[inode_key] = Impl::Remembered{*recorded, key_tag};
  }
  if (*recorded != k_unrecorded && *recorded != size.count()) {
    quarantine(key, path,
               "has " + std::to_string(size.count()) + " bytes but " + std::to_string(*recorded) +
                   " were recorded at install");
    return false;
  }
  if (hash_this_hit && record && record->sha256) {
    auto actual = util::sha256_of_fd(fd);
    if (!actual) return std::move(actual).error();
    if (*actual != *record->sha256) {
      quarantine(key, path,
                 "has SHA-256 " + actual->hex() + " but " + record->sha256->hex() + " was recorded at install");
      return false;
    }
  }
  return true;
}

void FolderTier::touch_hit(const std::string& path, int fd, Bytes size, const struct timespec& mtime) {
  // The LRU clock. Both times are set, atime too: the kernel lets a user who may write the file but does not own
  // it (another member of a shared tier's group, docs/layout.md) set the times only to "now" for both; any other
  // combination needs ownership. Where this host's clock is off the filesystem's (the client stamps the time on
  // some shared filesystems), the filesystem's time is given explicitly, so that a host a day behind does not make
  // its hits the first to be evicted; a non-owner then falls back to "now". A read-only mount, or an entry the
  // user may not write, refuses: the hit stands regardless.
  static const struct timespec now_times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  // A fresh mtime (a future one included: a writer's clock ahead) is as good as a bump, to within lru_resolution.
  // A hinted one is where a reader that knows the order put it: a bump would undo that.
  const bool fresh =
      impl_->now() - folder::to_time_point(mtime) < *options_.lru_resolution || folder::is_order_hint(mtime);
  if (!read_only() && !fresh) {
    int bumped = -1;
    if (const auto offset = impl_->clock_offset(); offset != std::chrono::system_clock::duration::zero()) {
      const struct timespec fs_now = folder::to_timespec(std::chrono::system_clock::now() + offset);
      const struct timespec times[2] = {fs_now, fs_now};
      bumped = ::futimens(fd, times);
    }
    if (bumped != 0) bumped = ::futimens(fd, now_times);
    if (bumped != 0 && errno != EPERM && errno != EACCES && errno != EROFS) {
      LOG_DEBUG("cannot bump mtime of " << path << ": " << std::strerror(errno));
    }
  }
  counters().hits.fetch_add(1, std::memory_order_relaxed);
  counters().bytes_served.fetch_add(size.count(), std::memory_order_relaxed);
}

Result<bool> FolderTier::place(const ShardKey& key, std::chrono::system_clock::time_point as_if_read_at) {
  if (read_only()) return false;
  // The caller's clock into the filesystem's, which stamped every other mtime.
  auto at = as_if_read_at + impl_->clock_offset();
  const auto now = impl_->now();
  if (options_.max_age) at = std::max(at, now - *options_.max_age / 2);
  at = std::min(at, now);
  const struct timespec times[2] = {{0, UTIME_OMIT}, folder::order_hint_time(at)};
  const std::string path = impl_->entry_path(key);
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR || errno == EPERM || errno == EACCES || errno == EROFS) return false;
  return Error::from_errno(errno, "cannot place " + path + " in the LRU order");
}

std::optional<Bytes> FolderTier::free_space() const {
  std::string dir = impl_->root;
  for (;;) {
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) == 0) return Bytes{std::uint64_t(vfs.f_bavail) * vfs.f_frsize};
    const auto slash = dir.find_last_of('/');
    if (errno != ENOENT || slash == std::string::npos || slash == 0) return std::nullopt;
    dir.resize(slash);
  }
}

void FolderTier::quarantine(const ShardKey& key, const std::string& path, const std::string& problem) {
  counters().quarantined.fetch_add(1, std::memory_order_relaxed);
  if (read_only()) {
    log::warn_once("damaged:" + path, "tier '" + name() + "': " + path + " " + problem +
                                          "; treated as a miss (the tier is read-only, so it stays where it is)");
    return;
  }
  std::string target = impl_->quarantine_dir + "/" + key.instance.name() + "." + key.hash.hex() + "." +
                       util::random_hex(4) + folder::k_entry_suffix;
  if (auto made = impl_->ensure_dir(impl_->quarantine_dir); !made || ::rename(path.c_str(), target.c_str()) != 0) {
    // Cannot move it aside: remove it, so that the good copy can be installed in its place.
    target.clear();
    ::unlink(path.c_str());
  }
  ::unlink(impl_->sidecar_path(key).c_str());
  LOG_WARNING("tier '" << name() << "': " << path << " " << problem << "; "
                       << (target.empty() ? "removed it" : "quarantined it as " + target)
                       << "; reading from the next tier");
}

Result<bool> FolderTier::contains(const ShardKey& key) {
  struct stat st {};
  std::string path = impl_->entry_path(key);
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return Error::from_errno(errno, "cannot stat " + path);
}

Result<std::optional<Expectation>> FolderTier::read_into(const ShardKey& key, ByteSink& sink) {
  auto opened = open(key);
  if (!opened) return std::move(opened).error();
  if (!*opened) return std::optional<Expectation>{};
  const ShardHandle& handle = **opened;
  auto record = record_of_fd(key, handle.fd(), RecordPart::all);
  if (!record) return std::move(record).error();
  if (sink.written().count() > 0) DATAVO_TRY(sink.restart());
  DATAVO_TRY(util::read_chunks(handle.fd(), 0, std::nullopt, handle.path(), [&sink](std::span<const char> chunk) {
    return sink.write(chunk.data(), chunk.size());
  }));
  return std::optional<Expectation>{Expectation{record->size.value_or(handle.size()), record->sha256}};
}

CheckReport FolderTier::check() {
  CheckReport report;
  auto step = [&report](std::string name, bool ok, std::string detail) {
    report.steps.push_back(CheckStep{std::move(name), ok, std::move(detail)});
    return ok;
  };
  auto listed = folder::scan_tier(impl_->root, folder::ScanDetail::totals);
  report.readable =
      step("read", bool(listed),
           listed ? "listed " + std::to_string(listed->entry_count) + " entries" : listed.error().message);
  if (read_only()) return report;
  auto staged = impl_->new_staging(
      ShardKey{Instance::local(), compute_content_hash(ShardIdentity{"datavo-check", "1", 0, {}, {}})});
  if (!step("write", bool(staged), staged ? "created " + staged->path() : staged.error().message)) return report;
  const std::string probe = "datavo cache check\n";
  auto written = staged->write(probe.data(), probe.size());
  auto synced = written ? staged->sync() : Result<void>(written.error());
  auto digest = synced ? staged->digest() : Result<Sha256>(synced.error());
  Sha256Hasher expected;
  expected.update(probe.data(), probe.size());
  const bool round_trip = digest && *digest == expected.finish();
  step("sync and read back", round_trip,
       round_trip ? "the probe's bytes came back"
       : !digest  ? digest.error().message
                  : "the probe came back with other bytes");
  // The probe is removed when `staged` goes: a staging file never becomes an entry here.
  report.writable = round_trip;
  step("locks", lock_mechanism() != LockMechanism::process_only,
       std::string("per-shard locks use ") + to_string(lock_mechanism()));
  return report;
}

Result<bool> FolderTier::remove(const ShardKey& key) {
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

Result<TierUsage> FolderTier::usage() {
  auto scanned = folder::scan_tier(impl_->root, folder::ScanDetail::totals);
  if (!scanned) return std::move(scanned).error();
  return TierUsage{scanned->used, scanned->entries.size() ? scanned->entries.size() : scanned->entry_count};
}

Result<std::vector<EntryInfo>> FolderTier::list() {
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

Result<std::optional<EntryRecord>> FolderTier::record_of(const ShardKey& key) {
  const std::string path = impl_->entry_path(key);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<EntryRecord>{};
    return Error::from_errno(errno, "cannot open " + path);
  }
  auto record = record_of_fd(key, fd.get(), RecordPart::all);
  if (!record) return std::move(record).error();
  return std::optional<EntryRecord>{*record};
}

Result<Sha256> FolderTier::digest_of(const ShardKey& key, const ShardHandle& entry) {
  auto record = record_of_fd(key, entry.fd(), RecordPart::all);
  // An entry without a readable record still has bytes: its digest is theirs.
  if (record && record->sha256) return *record->sha256;
  return util::sha256_of_fd(entry.fd());
}

Result<EntryRecord> FolderTier::record_of_fd(const ShardKey& key, int fd, RecordPart part) {
  auto record =
      folder::read_record_xattrs(fd, part == RecordPart::size ? folder::XattrPart::size_only : folder::XattrPart::both);
  if (!record) return record;
  if (record->sha256 || (part == RecordPart::size && record->size)) return record;
  // No xattrs (or an entry from before sizes were recorded): the sidecar, where there is one.
  auto sidecar = util::read_file(impl_->sidecar_path(key), std::size_t{256});
  if (!sidecar) return record;
  EntryRecord from_sidecar = folder::parse_sidecar(*sidecar);
  if (!from_sidecar.size) from_sidecar.size = record->size;
  return from_sidecar;
}

}  // namespace datavo
