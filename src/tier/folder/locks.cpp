#include "tier/folder/locks.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "tier/folder/internal.hpp"
#include "util/cancel.hpp"
#include "util/decimal.hpp"
#include "util/flock.hpp"
#include "util/log.hpp"
#include "util/temp_name.hpp"
#include "util/text.hpp"

namespace datavo::folder {
namespace {

// A waiter on an O_EXCL lock polls this often at first, backing off to k_max_poll: short waits (most are a
// local fetch) end quickly, long ones (a multi-GiB download) cost a few stats a second.
constexpr std::chrono::milliseconds k_first_poll{20};
constexpr std::chrono::milliseconds k_max_poll{250};
// How often a thread waiting for the in-process slot looks whether it must stop (a release wakes it at once).
constexpr std::chrono::milliseconds k_slot_poll{50};

struct Owner {
  std::string host;
  std::uint64_t pid = 0;
  std::string boot;
};

// "<host> <pid> <boot id>\n" (lock_owner_line); fields that are missing or unreadable stay empty or 0.
Owner parse_owner(std::string_view text) {
  Owner owner;
  const std::size_t a = text.find(' ');
  if (a == std::string_view::npos) return owner;
  owner.host = std::string(text.substr(0, a));
  const std::size_t b = text.find(' ', a + 1);
  const std::string_view pid = text.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1);
  owner.pid = util::parse_decimal(pid).value_or(0);
  if (b != std::string_view::npos) owner.boot = std::string(util::trim_right(text.substr(b + 1)));
  return owner;
}

std::string read_small(int fd) {
  char buffer[512] = {};
  ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  return n > 0 ? std::string(buffer, std::size_t(n)) : std::string();
}

// Whether the O_EXCL lock file open as `fd` (stat `st`) belongs to a holder that is gone.
bool holder_is_gone(int fd, const struct stat& st, const ExclusiveLockOptions& options) {
  const std::chrono::seconds stale_age = options.stale_age;
  const auto age = std::chrono::system_clock::now() + options.clock_offset - to_time_point(st.st_mtim);
  if (age > stale_age) return true;  // no heartbeat for too long: dead, hung, or on a host that went away
  const Owner owner = parse_owner(read_small(fd));
  if (owner.host.empty()) {
    // Being written right now (created, owner line not yet there): give the creator a moment.
    return age > std::chrono::seconds(2);
  }
  return owner.host == util::host_name() && !boot_id().empty() && owner.boot == boot_id() &&
         !util::process_alive(pid_t(owner.pid));
}

}  // namespace

bool is_flock_unsupported(int err) { return err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP || err == EINVAL; }

const std::string& boot_id() {
  static const std::string id = [] {
    auto text = util::read_file("/proc/sys/kernel/random/boot_id");
    return text ? std::string(util::trim_right(*text)) : std::string();
  }();
  return id;
}

std::string lock_owner_line() {
  return util::host_name() + " " + std::to_string(::getpid()) + " " + (boot_id().empty() ? "-" : boot_id()) + "\n";
}

LockMechanism probe_lock_mechanism(const std::string& locks_dir, std::string* why) {
  const std::string path = util::temp_name_in(locks_dir, "probe");
  util::UniqueFd first(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!first.valid()) {
    *why = "cannot create a probe file in " + locks_dir + ": " + std::strerror(errno);
    return LockMechanism::process_only;
  }
  util::UniqueFd second(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ::unlink(path.c_str());
  if (!second.valid()) {
    *why = "cannot reopen the probe file: " + std::string(std::strerror(errno));
    return LockMechanism::exclusive_create;
  }
  if (::flock(first.get(), LOCK_EX | LOCK_NB) != 0) {
    *why = "flock fails there (" + std::string(std::strerror(errno)) + ")";
    return LockMechanism::exclusive_create;
  }
  if (::flock(second.get(), LOCK_EX | LOCK_NB) == 0) {
    // HF hub #4306: some NFS and FUSE mounts accept every flock, which then excludes nobody.
    *why = "flock succeeds twice on one file there, so it excludes nobody";
    return LockMechanism::exclusive_create;
  }
  if (errno != EWOULDBLOCK) {
    *why = "flock fails there (" + std::string(std::strerror(errno)) + ")";
    return LockMechanism::exclusive_create;
  }
  return LockMechanism::flock;
}

Result<util::UniqueFd> acquire_exclusive_lock_file(const std::string& path, const ExclusiveLockOptions& options) {
  auto poll = k_first_poll;
  for (;;) {
    util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.mode));
    if (fd.valid()) {
      ::fchmod(fd.get(), options.mode);  // the umask must not lock other group members out
      const std::string owner = lock_owner_line();
      DATAVO_TRY(util::write_all(fd.get(), owner.data(), owner.size(), path));
      return fd;
    }
    if (errno != EEXIST) return Error::from_errno(errno, "cannot create lock file " + path);
    util::UniqueFd held(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (held.valid() && ::fstat(held.get(), &st) == 0 && holder_is_gone(held.get(), st, options)) {
      // Claim the stale file by renaming it aside: of several waiters only one rename succeeds.
      const std::string aside = path + ".stale." + util::random_hex(4);
      if (::rename(path.c_str(), aside.c_str()) == 0) {
        struct stat moved {};
        if (::stat(aside.c_str(), &moved) == 0 && moved.st_ino == st.st_ino && moved.st_dev == st.st_dev) {
          LOG_INFO("took over the stale lock " << path << " (holder gone: " << read_small(held.get()) << ")");
          ::unlink(aside.c_str());
        } else if (::renameat2(AT_FDCWD, aside.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
          // A new holder had replaced the stale file in between; it can no longer be put back. Correctness
          // never depended on the lock: at worst two processes fetch the same shard.
          ::unlink(aside.c_str());
        }
      }
      continue;
    }
    DATAVO_TRY(util::sleep_unless_cancelled(Milliseconds(poll.count()), "waiting for the lock " + path));
    poll = std::min(k_max_poll, poll * 2);
  }
}

void release_exclusive_lock_file(const std::string& path, int fd) {
  struct stat held {
  }, at_path{};
  if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &at_path) == 0 && held.st_ino == at_path.st_ino &&
      held.st_dev == at_path.st_dev) {
    ::unlink(path.c_str());
  }
}

Heartbeat::Heartbeat(std::chrono::milliseconds interval) : interval_(interval), thread_([this] { run(); }) {}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Heartbeat::add(int fd) {
  std::lock_guard lock(mu_);
  fds_.push_back(fd);
}

void Heartbeat::remove(int fd) {
  std::lock_guard lock(mu_);
  fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
}

void Heartbeat::run() {
  static const struct timespec now_times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, interval_);
    if (stopping_) break;
    for (int fd : fds_) ::futimens(fd, now_times);
  }
}

HeldLock::HeldLock(std::shared_ptr<LockTable> table, std::string name, std::string path)
    : table_(std::move(table)), name_(std::move(name)), path_(std::move(path)) {}

Result<void> HeldLock::take_slot() {
  std::unique_lock lock(table_->mu);
  while (!table_->cv.wait_for(lock, k_slot_poll, [&] { return table_->held.count(name_) == 0; })) {
    if (util::must_stop()) return util::stopped_error("waiting for the lock " + path_ + " (held by this process)");
  }
  table_->held[name_] = true;
  slot_taken_ = true;
  return {};
}

HeldLock::~HeldLock() {
  if (fd_.valid()) {
    // Ours, or a holder's that died: a record outlives nobody who may trust it.
    ::unlink(progress_record_path(path_).c_str());
    progress_fd_.reset();
    if (mechanism_ == LockMechanism::exclusive_create) {
      if (heartbeat_) heartbeat_->remove(fd_.get());
      release_exclusive_lock_file(path_, fd_.get());
    } else {
      // Unlinking while still holding the flock is safe: lockers check that the inode they locked is still the
      // one at the path, and start over otherwise.
      ::unlink(path_.c_str());
    }
    fd_.reset();
  }
  if (!slot_taken_) return;
  std::lock_guard lock(table_->mu);
  table_->held.erase(name_);
  table_->cv.notify_all();
}

void HeldLock::publish_staging(const ShardHandle& staged) {
  struct stat st {};
  if (!fd_.valid() || ::fstat(staged.fd(), &st) != 0) return;
  progress_ = LandingProgress{
      staged.path(), std::uint64_t(st.st_dev), std::uint64_t(st.st_ino), std::uint64_t(::getpid()), Bytes{0}, Bytes{0}};
  write_progress();
}

void HeldLock::publish_verified(Bytes prefix, Bytes total) {
  if (!fd_.valid() || progress_.inode == 0) return;
  progress_.verified = prefix;
  progress_.total = total;
  write_progress();
}

void HeldLock::write_progress() {
  const std::string record = encode_progress(progress_);
  if (!progress_fd_.valid()) {
    progress_fd_ = util::UniqueFd(::open(progress_record_path(path_).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664));
    if (!progress_fd_.valid()) {
      LOG_DEBUG("cannot write the progress record of " << path_ << ": " << std::strerror(errno));
      return;
    }
    ::fchmod(progress_fd_.get(), 0664);
  }
  if (record.size() <= k_progress_record_size)
    (void)util::pwrite_all(progress_fd_.get(), record.data(), record.size(), 0, path_);
}

namespace {

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

constexpr std::string_view k_progress_magic = "datavo-progress 1 ";

}  // namespace

std::string progress_record_path(const std::string& lock_path) { return lock_path + ".progress"; }

std::string encode_progress(const LandingProgress& p) {
  const std::string fields = util::host_name() + " " + std::to_string(p.holder) + " " + std::to_string(p.device) + " " +
                             std::to_string(p.inode) + " " + std::to_string(p.verified.count()) + " " +
                             std::to_string(p.total.count());
  std::string record = std::string(k_progress_magic) + fields + " " + std::to_string(fnv1a(fields + "\n" + p.path)) +
                       "\n" + p.path + "\n";
  if (record.size() < k_progress_record_size) record.resize(k_progress_record_size, '\0');
  return record;
}

std::optional<LandingProgress> decode_progress(std::string_view record) {
  if (record.substr(0, k_progress_magic.size()) != k_progress_magic) return std::nullopt;
  record.remove_prefix(k_progress_magic.size());
  const std::size_t line_end = record.find('\n');
  if (line_end == std::string_view::npos) return std::nullopt;
  const std::size_t path_end = record.find('\n', line_end + 1);
  if (path_end == std::string_view::npos) return std::nullopt;
  const std::string_view line = record.substr(0, line_end);
  const std::string_view path = record.substr(line_end + 1, path_end - line_end - 1);
  const std::size_t sum_at = line.rfind(' ');
  if (sum_at == std::string_view::npos) return std::nullopt;
  const std::string_view fields = line.substr(0, sum_at);
  const auto sum = util::parse_decimal(line.substr(sum_at + 1));
  if (!sum || *sum != fnv1a(std::string(fields) + "\n" + std::string(path))) return std::nullopt;
  std::vector<std::string_view> parts;
  for (std::string_view rest = fields;;) {
    const std::size_t space = rest.find(' ');
    parts.push_back(rest.substr(0, space));
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  if (parts.size() != 6 || parts[0] != util::host_name()) return std::nullopt;
  std::uint64_t values[5] = {};
  for (std::size_t i = 0; i < 5; ++i) {
    const auto value = util::parse_decimal(parts[i + 1]);
    if (!value) return std::nullopt;
    values[i] = *value;
  }
  return LandingProgress{std::string(path), values[1], values[2], values[0], Bytes{values[3]}, Bytes{values[4]}};
}

void HeldLock::hold(util::UniqueFd fd, LockMechanism mechanism, std::shared_ptr<Heartbeat> heartbeat) {
  fd_ = std::move(fd);
  mechanism_ = mechanism;
  heartbeat_ = std::move(heartbeat);
  if (heartbeat_) heartbeat_->add(fd_.get());
}

Result<FlockFile> acquire_flock_file(const std::string& path, mode_t mode) {
  for (;;) {
    // Whether this call created the lock file: if flock then fails, the file is ours to remove.
    bool created = true;
    util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (!fd.valid() && errno == EEXIST) {
      created = false;
      fd = util::UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode));
    }
    if (!fd.valid()) {
      return FlockFile{
          {}, "cannot open lock " + path + ": " + std::strerror(errno) + "; single flight is per process only"};
    }
    ::fchmod(fd.get(), mode);  // ours or not: a creator with umask 077 must not lock the group out
    if (auto locked = util::flock_exclusive(fd.get(), path); !locked) {
      // A stopped waiter leaves the file where it is: another process holds it (even a file we created: it may
      // have locked it first).
      if (locked.error().code == ErrorCode::cancelled) return std::move(locked).error();
      const int err = locked.error().sys_errno;
      // Nobody holds a file we have just created; a process that opened it meanwhile re-checks the inode.
      if (created) ::unlink(path.c_str());
      if (is_flock_unsupported(err)) {
        const std::string dir = path.substr(0, path.rfind('/'));
        return FlockFile{
            {}, "flock stopped working on " + dir + " (" + std::strerror(err) + "); relying on atomic rename alone"};
      }
      return std::move(locked).error();
    }
    // The holder before us may have unlinked the file after we opened it; then we hold a lock nobody else
    // will see, and must start over on the file now at the path.
    struct stat held_st {
    }, path_st{};
    if (::fstat(fd.get(), &held_st) == 0 && ::stat(path.c_str(), &path_st) == 0 && held_st.st_ino == path_st.st_ino &&
        held_st.st_dev == path_st.st_dev) {
      const std::string owner = lock_owner_line();
      if (::ftruncate(fd.get(), 0) == 0) (void)util::pwrite_all(fd.get(), owner.data(), owner.size(), 0, path);
      return FlockFile{std::move(fd), {}};
    }
  }
}

}  // namespace datavo::folder

namespace datavo {

LockMechanism FolderTier::lock_mechanism() {
  std::call_once(impl_->lock_probe_once, [this] {
    if (read_only()) {
      impl_->lock_mechanism = LockMechanism::process_only;
      return;
    }
    if (auto made = impl_->ensure_dir(impl_->locks_dir); !made) {
      log::warn_once("lockdir:" + impl_->locks_dir, "tier '" + name() + "': cannot create " + impl_->locks_dir + " (" +
                                                        made.error().message + "); single flight is per process only");
      impl_->lock_mechanism = LockMechanism::process_only;
      return;
    }
    std::string why;
    LockMechanism mechanism = folder::probe_lock_mechanism(impl_->locks_dir, &why);
    if (mechanism != LockMechanism::flock) {
      log::warn_once("flock:" + impl_->locks_dir,
                     "tier '" + name() + "': " + why + "; per-shard locks use " +
                         (mechanism == LockMechanism::exclusive_create ? "O_EXCL lock files with a heartbeat instead"
                                                                       : "this process only"));
    }
    impl_->lock_mechanism = mechanism;
  });
  return impl_->lock_mechanism.load();
}

Result<void> FolderTier::Impl::hold_exclusive(folder::HeldLock& lock) {
  const Seconds stale_age = self.options_.stale_lock_age;
  folder::ExclusiveLockOptions options{folder::entry_mode(), stale_age, clock_offset()};
  auto fd = folder::acquire_exclusive_lock_file(lock.path(), options);
  if (!fd) {
    if (fd.error().code == ErrorCode::cancelled) return std::move(fd).error();
    log::warn_once("lockopen:" + locks_dir,
                   "tier '" + self.name() + "': " + fd.error().message + "; single flight is per process only");
    return {};
  }
  std::shared_ptr<folder::Heartbeat> renewer;
  {
    std::lock_guard guard(heartbeat_mu);
    if (!heartbeat) {
      auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(stale_age) / 4;
      heartbeat = std::make_shared<folder::Heartbeat>(std::max(interval, std::chrono::milliseconds(100)));
    }
    renewer = heartbeat;
  }
  lock.hold(std::move(*fd), LockMechanism::exclusive_create, std::move(renewer));
  return {};
}

Result<void> FolderTier::Impl::hold_flock(folder::HeldLock& lock) {
  auto locked = folder::acquire_flock_file(lock.path(), folder::entry_mode());
  if (!locked) return std::move(locked).error();
  if (!locked->fd.valid()) {
    log::warn_once("flock:" + locks_dir, "tier '" + self.name() + "': " + locked->unusable);
    return {};
  }
  lock.hold(std::move(locked->fd), LockMechanism::flock);
  return {};
}

Result<std::unique_ptr<ShardLock>> FolderTier::lock_shard(const ShardKey& key) {
  const std::string lock_name = key.instance.name() + "." + key.hash.hex();
  // From here the lock's destructor releases the in-process slot on every path.
  auto lock = std::make_unique<folder::HeldLock>(impl_->lock_table, lock_name, impl_->lock_path(lock_name));
  DATAVO_TRY(lock->take_slot());
  switch (lock_mechanism()) {
    case LockMechanism::process_only: break;
    case LockMechanism::exclusive_create: DATAVO_TRY(impl_->hold_exclusive(*lock)); break;
    case LockMechanism::flock: DATAVO_TRY(impl_->hold_flock(*lock)); break;
  }
  return std::unique_ptr<ShardLock>(std::move(lock));
}

std::optional<LandingProgress> FolderTier::landing_progress(const ShardKey& key) {
  const std::string path = folder::progress_record_path(impl_->lock_path(key.instance.name() + "." + key.hash.hex()));
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string record(folder::k_progress_record_size, '\0');
  const ssize_t n = ::pread(fd.get(), record.data(), record.size(), 0);
  if (n <= 0) return std::nullopt;
  record.resize(std::size_t(n));
  auto progress = folder::decode_progress(record);
  if (!progress || progress->holder == std::uint64_t(::getpid())) return std::nullopt;
  return progress;
}

std::optional<ShardHandle> FolderTier::open_landing(const LandingProgress& progress) {
  util::UniqueFd fd(::open(progress.path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  if (std::uint64_t(st.st_dev) != progress.device || std::uint64_t(st.st_ino) != progress.inode) return std::nullopt;
  return ShardHandle(fd.release(), progress.path, Bytes{std::uint64_t(st.st_size)});
}

}  // namespace datavo
