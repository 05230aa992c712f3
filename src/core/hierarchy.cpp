#include "datavo/hierarchy.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/breaker.hpp"
#include "core/upload_queue.hpp"
#include "datavo/cloud_tier.hpp"
#include "tier/folder/locks.hpp"
#include "tier/folder/staging.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

// Persisting counters costs a lock and a small file write, so it is batched rather than paid on every hit.
constexpr std::chrono::seconds k_stats_flush_interval{2};
// A VM waiting for another VM's upload polls the bucket with this backoff; each poll is one GET.
constexpr std::chrono::milliseconds k_first_lease_poll{250};
constexpr std::chrono::milliseconds k_max_lease_poll{5000};
// A holder that keeps renewing its lease this long without uploading is not waited for any more.
constexpr std::chrono::minutes k_max_lease_wait{30};

enum class CountMisses { yes, no };
// Which tiers a walk looks in. The re-check after taking the single-flight lock only needs the local ones: what
// another process installed while we waited is in a folder tier, and asking every remote tier again costs a
// request each.
enum class Scope { all_tiers, folder_tiers };

using folder::ShardLock;
using folder::StagingFile;

std::string describe(const Tier& tier) { return "tier '" + tier.name() + "' (" + std::string(tier.type()) + ")"; }

void warn_capacity_skip(Tier& tier, Bytes size) {
  tier.counters().capacity_skips.fetch_add(1, std::memory_order_relaxed);
  LOG_WARNING(describe(tier) << " is too small for a shard of " << size.count() << " bytes (max_bytes "
                             << tier.max_bytes().value_or(Bytes{}).count() << "); skipped");
}

// Whether `dir`'s filesystem has room for `size` more bytes. Unknown counts as room: the write will tell.
bool has_room(const std::string& dir, Bytes size) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return true;
  return std::uint64_t(vfs.f_bavail) * vfs.f_frsize >= size.count();
}

// Wraps the staging sink so that a local write failure (disk full) can be told apart from a fetch failure.
class RecordingSink final : public ByteSink, public PositionalSink {
 public:
  explicit RecordingSink(ByteSink& inner) : inner_(inner) {}
  Result<void> write(const void* data, std::size_t size) override { return record(inner_.write(data, size)); }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override { return record(inner_.restart()); }
  PositionalSink* positional() override {
    positional_ = inner_.positional();
    return positional_ ? this : nullptr;
  }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    return record(positional_->write_at(offset, data, size));
  }
  Result<void> prefix_complete(Bytes size) override { return record(positional_->prefix_complete(size)); }

  std::optional<Error> local_error() const {
    std::lock_guard lock(mu_);
    return local_error_;
  }

 private:
  Result<void> record(Result<void> result) {
    if (!result) {
      std::lock_guard lock(mu_);
      local_error_ = result.error();
    }
    return result;
  }
  ByteSink& inner_;
  PositionalSink* positional_ = nullptr;
  mutable std::mutex mu_;  // positional writes come from several threads
  std::optional<Error> local_error_;
};

Result<ShardHandle> reopen_readonly(const std::string& path, Bytes size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "cannot reopen " + path);
  return ShardHandle(fd, path, size);
}

Result<ShardHandle> duplicate(const ShardHandle& handle) {
  int fd = ::fcntl(handle.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::from_errno(errno, "cannot duplicate the descriptor of " + handle.path());
  return ShardHandle(fd, handle.path(), handle.size());
}

// Checks the staged bytes against what the caller expected and what the fetcher (or a remote tier's metadata)
// reported. Returns their SHA-256 (needed for the entry's record even when nobody expects one); integrity when
// they are not the right bytes, the staging tier's own error when it cannot read them back.
Result<Sha256> verify_fetched(const ShardKey& key, StagingFile& staged, const Expectation& expected,
                              const Expectation& reported, const char* source) {
  Expectation want = expected;
  if (reported.size) {
    if (want.size && *want.size != *reported.size) {
      return Error{ErrorCode::integrity, std::string(source) + " for " + key.hash.hex() + " reports " +
                                             std::to_string(reported.size->count()) + " bytes but " +
                                             std::to_string(want.size->count()) + " were expected"};
    }
    want.size = reported.size;
  }
  if (reported.sha256) {
    if (want.sha256 && *want.sha256 != *reported.sha256) {
      return Error{ErrorCode::integrity, std::string(source) + " for " + key.hash.hex() + " reports SHA-256 " +
                                             reported.sha256->hex() + " but " + want.sha256->hex() + " was expected"};
    }
    want.sha256 = reported.sha256;
  }
  if (want.size && staged.written() != *want.size) {
    return Error{ErrorCode::integrity, "shard " + key.hash.hex() + " from the " + source + " has " +
                                           std::to_string(staged.written().count()) + " bytes, expected " +
                                           std::to_string(want.size->count()) + "; discarded"};
  }
  auto digest = staged.digest();
  if (!digest) return std::move(digest).error();
  if (want.sha256 && *digest != *want.sha256) {
    return Error{ErrorCode::integrity, "shard " + key.hash.hex() + " from the " + source + " has SHA-256 " +
                                           digest->hex() + ", expected " + want.sha256->hex() + "; discarded"};
  }
  return *digest;
}

}  // namespace

const char* to_string(ServedFrom source) {
  switch (source) {
    case ServedFrom::hit: return "hit";
    case ServedFrom::promoted: return "promoted";
    case ServedFrom::fetched: return "fetched";
  }
  return "hit";
}

struct ShardCacheHierarchy::Impl {
  std::mutex flush_mu;
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();
  // One per tier, made at construction: lookups need no lock to find theirs.
  std::unordered_map<const Tier*, std::unique_ptr<core::Breaker>> breakers;
  core::UploadQueue uploads;

  core::Breaker& breaker(const Tier& tier) { return *breakers.at(&tier); }
  // A failure degraded to a miss or a skip: counted, logged while the breaker is closed, fed to the breaker.
  void degrade(Tier& tier, const char* what, const Error& error) {
    tier.counters().errors.fetch_add(1, std::memory_order_relaxed);
    core::Breaker& b = breaker(tier);
    if (!b.open()) LOG_WARNING(describe(tier) << ": " << what << " failed, skipping it: " << error.message);
    b.failed(error.message);
  }
};

Result<std::shared_ptr<ShardCacheHierarchy>> ShardCacheHierarchy::create(std::vector<std::shared_ptr<Tier>> tiers) {
  if (tiers.empty()) return Error{ErrorCode::config, "a cache hierarchy needs at least one tier"};
  bool has_folder = false;
  for (const auto& tier : tiers) {
    if (!tier) return Error{ErrorCode::invalid_argument, "a cache hierarchy tier is null"};
    has_folder = has_folder || tier->supports_direct_read();
  }
  if (!has_folder) {
    return Error{ErrorCode::config,
                 "a cache hierarchy needs at least one folder tier: it is the local landing zone that remote hits "
                 "are materialized into"};
  }
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (tiers[i] == tiers[j]) return Error{ErrorCode::invalid_argument, "a tier appears twice in a hierarchy"};
    }
  }
  return std::shared_ptr<ShardCacheHierarchy>(new ShardCacheHierarchy(std::move(tiers)));
}

ShardCacheHierarchy::ShardCacheHierarchy(std::vector<std::shared_ptr<Tier>> tiers)
    : tiers_(std::move(tiers)), impl_(new Impl) {
  for (const auto& tier : tiers_) impl_->breakers.emplace(tier.get(), std::make_unique<core::Breaker>(describe(*tier)));
}

ShardCacheHierarchy::~ShardCacheHierarchy() {
  const UploadSummary left = impl_->uploads.flush(k_destructor_upload_bound);
  if (left.pending > 0) {
    LOG_WARNING(left.pending << " upload(s) to remote tiers did not finish within "
                             << k_destructor_upload_bound.count() / 1000 << " s and are abandoned");
  }
  flush_stats();
}

void ShardCacheHierarchy::flush_stats() { flush_folder_stats(FolderTier::LockWait::block); }

UploadSummary ShardCacheHierarchy::flush_uploads(Milliseconds bound) { return impl_->uploads.flush(bound); }

void ShardCacheHierarchy::flush_folder_stats(FolderTier::LockWait wait) {
  for (const auto& tier : tiers_) {
    if (auto* folder = tier->as_folder()) {
      if (auto flushed = folder->flush_stats(wait); !flushed) {
        LOG_DEBUG(describe(*tier) << ": cannot persist statistics: " << flushed.error().message);
      }
    }
  }
}

namespace {

// The walk and the installs, shared by get() and get_or_fetch(). Holds no state beyond one call.
class Walk {
 public:
  // `expected`: what the caller knows about the bytes; a remote hit that does not match it is not installed.
  Walk(const std::vector<std::shared_ptr<Tier>>& tiers, const ShardKey& key, ShardCacheHierarchy::Impl& impl,
       const Expectation& expected = {})
      : tiers_(tiers), key_(key), impl_(impl), expected_(expected) {}

  // Finds the key in the first tier that has it and promotes it upward. nullopt on a miss everywhere. A remote
  // tier is asked once: its read_into() is the lookup and the download (a miss is its 404).
  Result<std::optional<FetchResult>> find(CountMisses count_misses, Scope scope = Scope::all_tiers) {
    std::optional<Error> no_landing_zone;
    for (std::size_t i = 0; i < tiers_.size(); ++i) {
      Tier& tier = *tiers_[i];
      if (!impl_.breaker(tier).allows()) continue;
      if (FolderTier* folder = tier.as_folder()) {
        auto opened = folder->open(key_, count_misses == CountMisses::yes ? Touch::yes : Touch::no);
        if (!opened) {
          impl_.degrade(tier, "lookup", opened.error());
          continue;
        }
        impl_.breaker(tier).succeeded();
        if (!*opened) continue;
        if (count_misses == CountMisses::no) {
          // The re-check after waiting for the lock: count the hit now, as open() would have.
          tier.counters().hits.fetch_add(1, std::memory_order_relaxed);
          tier.counters().bytes_served.fetch_add((*opened)->size().count(), std::memory_order_relaxed);
        }
        if (i == 0)
          return std::optional<FetchResult>{FetchResult{std::move(**opened), tier.name(), i, ServedFrom::hit}};
        return promote_local(i, std::move(**opened));
      }
      if (scope == Scope::folder_tiers) continue;
      auto materialized = materialize_remote(i, count_misses);
      if (!materialized) {
        // No landing zone above this remote hit: a slower folder tier may still hold the shard locally.
        if (materialized.error().code != ErrorCode::capacity) return std::move(materialized).error();
        if (!no_landing_zone) no_landing_zone = std::move(materialized).error();
        continue;
      }
      if (*materialized) return materialized;
    }
    if (no_landing_zone) return std::move(*no_landing_zone);
    return std::optional<FetchResult>{};
  }

  // Called once the caller holds the per-shard lock, so that a remote hit does not take it a second time.
  void set_lock_held() { lock_held_ = true; }

  // Looks the key up in remote tier `hit_index` by downloading it through the staging area of the topmost
  // writable folder tier above it, then installs it into the tiers above. nullopt on a miss, and when the object
  // does not match its metadata (it is then deleted from the tier, when writable).
  Result<std::optional<FetchResult>> materialize_remote(std::size_t hit_index, CountMisses count_misses) {
    Tier& remote = *tiers_[hit_index];
    // Single flight for remote hits too: the blob's network cost is paid once per shard per machine. The lock
    // lives in the topmost writable folder tier, as for origin fetches; a waiter finds the materialized copy.
    std::optional<ShardLock> lock;
    for (std::size_t landing = 0; landing < hit_index && !lock_held_; ++landing) {
      FolderTier* folder = tiers_[landing]->as_folder();
      if (!folder || folder->read_only()) continue;
      if (auto locked = folder->lock_shard(key_)) {
        lock = std::move(*locked);
      } else {
        impl_.degrade(*folder, "locking", locked.error());
      }
      for (std::size_t j = 0; j < hit_index; ++j) {
        FolderTier* above = tiers_[j]->as_folder();
        if (!above) continue;
        auto handle = above->peek(key_);
        if (handle && *handle) {
          above->counters().hits.fetch_add(1, std::memory_order_relaxed);
          above->counters().bytes_served.fetch_add((*handle)->size().count(), std::memory_order_relaxed);
          return std::optional<FetchResult>{FetchResult{std::move(**handle), above->name(), j, ServedFrom::hit}};
        }
      }
      break;
    }
    for (std::size_t landing = 0; landing < hit_index; ++landing) {
      FolderTier* folder = tiers_[landing]->as_folder();
      if (!folder || folder->read_only()) continue;
      auto staged = folder->begin_staging(key_);
      if (!staged) {
        impl_.degrade(*folder, "staging", staged.error());
        continue;
      }
      RecordingSink sink(*staged);
      auto read = remote.read_into(key_, sink);
      if (!read) {
        if (auto local = sink.local_error()) {
          impl_.degrade(*folder, "staging", *local);
          continue;  // this landing zone is full or broken: try the next one
        }
        impl_.degrade(remote, "download", read.error());
        return std::optional<FetchResult>{};
      }
      impl_.breaker(remote).succeeded();
      if (!*read) {
        if (count_misses == CountMisses::yes) remote.counters().misses.fetch_add(1, std::memory_order_relaxed);
        return std::optional<FetchResult>{};
      }
      auto verified = verify_fetched(key_, *staged, expected_, **read, "remote tier");
      if (!verified) {
        if (verified.error().code != ErrorCode::integrity) {
          impl_.degrade(*folder, "staging", verified.error());
          continue;  // the landing zone cannot read back what it just wrote: try the next one
        }
        drop_corrupt_remote(remote, verified.error());
        return std::optional<FetchResult>{};
      }
      remote.counters().hits.fetch_add(1, std::memory_order_relaxed);
      remote.counters().bytes_served.fetch_add(staged->written().count(), std::memory_order_relaxed);
      // Install into the tiers above the hit: the landing tier by rename, the rest by copy (or upload).
      std::vector<std::shared_ptr<Tier>> above(tiers_.begin(), tiers_.begin() + long(hit_index));
      Walk upper(above, key_, impl_);
      auto installed = upper.install_fetched(*folder, std::move(*staged), ServedFrom::promoted, nullptr);
      if (!installed) {
        return Error{ErrorCode::capacity, "remote hit for " + key_.hash.hex() + " on " + describe(remote) +
                                              " has no local landing zone: " + installed.error().message};
      }
      return std::optional<FetchResult>{std::move(*installed)};
    }
    // Nowhere to land a hit: say so only if it is one.
    auto held = remote.contains(key_);
    if (!held || !*held) return std::optional<FetchResult>{};
    return Error{ErrorCode::capacity, "remote hit for " + key_.hash.hex() + " on " + describe(remote) +
                                          " has no local landing zone: no writable folder tier above it"};
  }

  // Installs the verified staged bytes into every tier that can hold them; returns the topmost copy. `how` is
  // fetched for origin bytes and promoted for bytes materialized from a remote tier. `lease` (the cross-VM
  // lease of `lease_tier`) is released after the upload to that tier, or at the end when there is none.
  Result<FetchResult> install_fetched(FolderTier& staging_tier, StagingFile staged, ServedFrom how,
                                      std::unique_ptr<Lease> lease, const Tier* lease_tier = nullptr) {
    const Bytes size = staged.written();
    auto digest = staged.digest();
    if (!digest) return std::move(digest).error();
    std::optional<FetchResult> top;
    std::optional<ShardHandle> source;  // a readable copy of the bytes, for the tiers installed by copy
    const std::string staged_path = staged.path();

    // The staging tier first: its install is a rename, not a copy, and then every other tier copies from it.
    std::size_t staging_index = 0;
    while (tiers_[staging_index].get() != &staging_tier) ++staging_index;
    if (staging_tier.can_hold(size)) {
      auto committed = staging_tier.commit(std::move(staged), key_);
      if (committed) {
        count_install(staging_tier, size, how);
        // A second descriptor on the committed inode: immune to the entry being evicted right away.
        if (auto dup = duplicate(*committed)) source = std::move(*dup);
        top = FetchResult{std::move(*committed), staging_tier.name(), staging_index, how};
      } else {
        impl_.degrade(staging_tier, "install", committed.error());
      }
    } else if (!staging_tier.read_only()) {
      warn_capacity_skip(staging_tier, size);
    }
    if (!source) {
      auto reopened = reopen_readonly(staged_path, size);
      if (!reopened) return std::move(reopened).error();
      source = std::move(*reopened);
    }

    for (std::size_t i = 0; i < tiers_.size(); ++i) {
      if (i == staging_index) continue;
      Tier& tier = *tiers_[i];
      if (tier.read_only() || !impl_.breaker(tier).allows()) continue;
      if (!tier.can_hold(size)) {
        warn_capacity_skip(tier, size);
        continue;
      }
      std::unique_ptr<Lease> tier_lease = &tier == lease_tier ? std::move(lease) : nullptr;
      install_into(tiers_[i], *source, *digest, how, std::move(tier_lease), "install");
      if (tier.as_folder() && (!top || i < top->tier_index)) {
        auto handle = tier.as_folder()->peek(key_);
        if (handle && *handle) top = FetchResult{std::move(**handle), tier.name(), i, how};
      }
    }
    if (!top) {
      return Error{ErrorCode::capacity, "no folder tier accepted shard " + key_.hash.hex() + " (" +
                                            std::to_string(size.count()) + " bytes); see the warnings above"};
    }
    return std::move(*top);
  }

 private:
  void count_install(Tier& tier, Bytes size, ServedFrom how) {
    auto& c = tier.counters();
    (how == ServedFrom::promoted ? c.promotions : c.installs).fetch_add(1, std::memory_order_relaxed);
    c.bytes_installed.fetch_add(size.count(), std::memory_order_relaxed);
  }

  // Copies `source` into `tier`: now for local tiers and `upload: sync`, else through the background queue.
  void install_into(const std::shared_ptr<Tier>& tier, const ShardHandle& source, const Sha256& digest, ServedFrom how,
                    std::unique_ptr<Lease> lease, const char* what) {
    if (tier->as_folder() == nullptr) {
      auto own = duplicate(source);
      if (!own) {
        impl_.degrade(*tier, what, own.error());
        return;
      }
      core::UploadQueue::Job job{tier, key_, std::move(*own), digest, std::move(lease)};
      if (tier->upload_mode() == UploadMode::background)
        impl_.uploads.push(std::move(job));
      else
        impl_.uploads.run(std::move(job));
      (how == ServedFrom::promoted ? tier->counters().promotions : tier->counters().installs)
          .fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto installed = tier->install_copy(key_, source, digest);
    if (!installed) {
      impl_.degrade(*tier, what, installed.error());
      return;
    }
    impl_.breaker(*tier).succeeded();
    if (*installed == InstallOutcome::installed) count_install(*tier, source.size(), how);
  }

  // A remote object whose bytes do not match its metadata: never installed, and removed from its tier so that
  // the next read (of any VM) refetches good bytes.
  void drop_corrupt_remote(Tier& remote, const Error& why) {
    remote.counters().errors.fetch_add(1, std::memory_order_relaxed);
    remote.counters().quarantined.fetch_add(1, std::memory_order_relaxed);
    if (remote.read_only()) {
      LOG_WARNING(describe(remote) << ": " << why.message << "; the tier is read-only, so the object stays");
      return;
    }
    auto removed = remote.remove(key_);
    LOG_WARNING(describe(remote) << ": " << why.message << "; "
                                 << (removed ? "deleted the object" : "cannot delete it: " + removed.error().message)
                                 << ", reading from the next tier");
  }

  // Copies a hit on folder tier `hit_index` into every faster tier that can hold it.
  Result<std::optional<FetchResult>> promote_local(std::size_t hit_index, ShardHandle hit) {
    Tier& hit_tier = *tiers_[hit_index];
    auto record = hit_tier.as_folder()->record_of(key_);
    Sha256 sha;
    if (record && *record && (*record)->sha256) {
      sha = *(*record)->sha256;
    } else {
      auto computed = util::sha256_of_fd(hit.fd());
      if (!computed) {
        impl_.degrade(hit_tier, "read", computed.error());
        return std::optional<FetchResult>{FetchResult{std::move(hit), hit_tier.name(), hit_index, ServedFrom::hit}};
      }
      sha = *computed;
    }
    std::optional<FetchResult> top;
    for (std::size_t i = 0; i < hit_index; ++i) {
      Tier& tier = *tiers_[i];
      if (tier.read_only() || !impl_.breaker(tier).allows()) continue;
      if (!tier.can_hold(hit.size())) {
        warn_capacity_skip(tier, hit.size());
        continue;
      }
      install_into(tiers_[i], hit, sha, ServedFrom::promoted, nullptr, "promotion");
      if (!top && tier.as_folder()) {
        auto handle = tier.as_folder()->peek(key_);
        if (handle && *handle) top = FetchResult{std::move(**handle), tier.name(), i, ServedFrom::promoted};
      }
    }
    // Every faster tier refused: the slower folder hit still serves the read.
    if (!top)
      return std::optional<FetchResult>{FetchResult{std::move(hit), hit_tier.name(), hit_index, ServedFrom::hit}};
    return top;
  }

  const std::vector<std::shared_ptr<Tier>>& tiers_;
  const ShardKey& key_;
  ShardCacheHierarchy::Impl& impl_;
  const Expectation expected_;
  bool lock_held_ = false;
};

struct LeaseWait {
  std::unique_ptr<Lease> lease;      // held: this VM fetches from the origin
  std::optional<FetchResult> found;  // another VM's upload appeared and was materialized
};

// Takes the cross-VM lease of `key` in remote tier `tier_index`, or waits for the VM that holds it: polls the
// tier for the object with backoff until it appears, asking for the lease again after each poll, so that it
// takes over as soon as the holder's lease is released without the object or runs out. A tier
// that cannot say is degraded and the caller fetches without a lease (at worst two VMs fetch the same shard).
Result<LeaseWait> wait_for_lease(Walk& walk, const std::vector<std::shared_ptr<Tier>>& tiers, std::size_t tier_index,
                                 ShardCacheHierarchy::Impl& impl, const ShardKey& key) {
  Tier& tier = *tiers[tier_index];
  RemoteCoordination& coordination = *tier.coordination();
  const auto give_up = std::chrono::steady_clock::now() + k_max_lease_wait;
  auto poll = k_first_lease_poll;
  bool told = false;
  for (;;) {
    auto attempt = coordination.try_lease(key);
    if (!attempt) {
      impl.degrade(tier, "lease", attempt.error());
      return LeaseWait{};
    }
    if (attempt->held) {
      // Look once more now that the lease is ours: a holder may have uploaded the object and released the lease
      // between this VM's lookup (or last poll) and its lease; fetching it again would cost a second origin fetch.
      auto found = walk.materialize_remote(tier_index, CountMisses::no);
      if (found && *found) return LeaseWait{nullptr, std::move(**found)};  // the lease is released here
      return LeaseWait{std::move(attempt->held), std::nullopt};
    }
    if (!told) {
      LOG_INFO(describe(tier) << ": " << attempt->holder << " is fetching shard " << key.hash.hex()
                              << "; waiting for its upload instead of calling the origin");
      told = true;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      LOG_WARNING(describe(tier) << ": " << attempt->holder << " has held the lease of " << key.hash.hex() << " for "
                                 << k_max_lease_wait.count() << " min without uploading; fetching it here");
      return LeaseWait{};
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(k_max_lease_poll, poll * 3 / 2);
    auto found = walk.materialize_remote(tier_index, CountMisses::no);
    if (found && *found) return LeaseWait{nullptr, std::move(**found)};
    if (!found && found.error().code != ErrorCode::capacity) return std::move(found).error();
    // No object yet: the next try_lease() says whether the holder still holds it, released it without an
    // object (its fetch failed: take over now, not at its expiry) or let it expire.
  }
}

}  // namespace

Result<std::optional<ShardCacheHierarchy::Location>> ShardCacheHierarchy::locate(const ShardKey& key) {
  std::optional<Error> first_error;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    Tier& tier = *tiers_[i];
    if (FolderTier* folder = tier.as_folder()) {
      auto handle = folder->peek(key);
      if (!handle) {
        if (!first_error) first_error = handle.error();
        continue;
      }
      if (*handle) return std::optional<Location>{Location{i, tier.name(), (*handle)->size()}};
      continue;
    }
    auto held = tier.contains(key);
    if (!held) {
      if (!first_error) first_error = held.error();
      continue;
    }
    if (*held) return std::optional<Location>{Location{i, tier.name(), std::nullopt}};
  }
  if (first_error) return std::move(*first_error);
  return std::optional<Location>{};
}

Result<std::optional<FetchResult>> ShardCacheHierarchy::get(const ShardKey& key) {
  auto found = Walk(tiers_, key, *impl_).find(CountMisses::yes);
  maybe_flush_stats();
  return found;
}

Result<FetchResult> ShardCacheHierarchy::get_or_fetch(const ShardKey& key, const Fetcher& fetcher,
                                                      const Expectation& expected) {
  Walk walk(tiers_, key, *impl_, expected);
  auto found = walk.find(CountMisses::yes);
  if (!found) return std::move(found).error();
  if (*found) {
    maybe_flush_stats();
    return std::move(**found);
  }

  // Writable folder tiers, fastest first: the candidates for staging.
  std::vector<FolderTier*> staging_candidates;
  for (const auto& tier : tiers_) {
    if (auto* folder = tier->as_folder(); folder && !folder->read_only()) staging_candidates.push_back(folder);
  }
  if (staging_candidates.empty()) {
    return Error{ErrorCode::capacity, "shard " + key.hash.hex() + " is not cached and no folder tier is writable"};
  }
  if (expected.size) {
    bool any = false;
    for (const auto& tier : tiers_) any = any || tier->can_hold(*expected.size);
    if (!any) {
      return Error{ErrorCode::capacity, "no tier can hold shard " + key.hash.hex() + " of " +
                                            std::to_string(expected.size->count()) + " bytes"};
    }
  }

  // Single flight: one fetch per key across the threads and processes of this machine.
  std::optional<ShardLock> lock;
  if (auto locked = staging_candidates.front()->lock_shard(key)) {
    lock = std::move(*locked);
  } else {
    impl_->degrade(*staging_candidates.front(), "locking", locked.error());
  }
  walk.set_lock_held();
  auto rechecked = walk.find(CountMisses::no, Scope::folder_tiers);
  if (!rechecked) return std::move(rechecked).error();
  if (*rechecked) {
    maybe_flush_stats();
    return std::move(**rechecked);
  }

  // Single flight across VMs: the lease of the first writable remote tier that offers one.
  std::unique_ptr<Lease> lease;
  const Tier* lease_tier = nullptr;
  for (std::size_t i = 0; i < tiers_.size() && !lease_tier; ++i) {
    Tier& tier = *tiers_[i];
    if (tier.as_folder() || tier.coordination() == nullptr || !impl_->breaker(tier).allows()) continue;
    if (expected.size && !tier.can_hold(*expected.size)) continue;
    lease_tier = &tier;
    auto waited = wait_for_lease(walk, tiers_, i, *impl_, key);
    if (!waited) return std::move(waited).error();
    if (waited->found) {
      maybe_flush_stats();
      return std::move(*waited->found);
    }
    lease = std::move(waited->lease);
  }

  // A staging tier that fails is skipped for the next one, counted in its `errors` and warned about, as every
  // degraded tier is. The warnings wait for the outcome: when no tier can stage the shard, the call's Error names
  // every cause, and the warnings would only say the same thing a second time.
  std::optional<Error> last_error;
  std::vector<std::string> skipped;  // "tier 'a' (folder): <why>", one per staging tier skipped
  auto skip = [&](FolderTier& tier, const Error& error, const std::string& why) {
    tier.counters().errors.fetch_add(1, std::memory_order_relaxed);
    impl_->breaker(tier).failed(why);
    skipped.push_back(describe(tier) + ": " + why);
    last_error = error;
  };
  auto warn_skipped = [&] {
    for (const auto& why : skipped) LOG_WARNING(why);
    skipped.clear();
  };
  for (FolderTier* staging_tier : staging_candidates) {
    if (expected.size && !has_room(staging_tier->location(), *expected.size)) {
      const std::string why =
          "has no room on its filesystem for " + std::to_string(expected.size->count()) + " bytes; staging elsewhere";
      skip(*staging_tier, Error{ErrorCode::no_space, why}, why);
      continue;
    }
    // A download of this shard that a killed process left half-done is continued rather than started over.
    auto adopted = staging_tier->adopt_partial(key);
    if (!adopted) impl_->degrade(*staging_tier, "staging", adopted.error());
    auto staged = adopted && *adopted ? Result<StagingFile>(std::move(**adopted)) : staging_tier->begin_staging(key);
    if (!staged) {
      skip(*staging_tier, staged.error(), "staging failed, skipping it: " + staged.error().message);
      continue;
    }
    RecordingSink sink(*staged);
    auto reported = fetcher(sink);
    Result<Sha256> verified = Error{ErrorCode::internal, "not fetched"};
    if (reported) verified = verify_fetched(key, *staged, expected, *reported, "fetcher");
    if (reported && !verified && verified.error().code == ErrorCode::integrity && staged->resumed_from().count() > 0) {
      // The bytes of a dead writer may not be a prefix of what the origin serves now: a continued download
      // that does not verify is fetched once more from its first byte.
      LOG_INFO("shard " << key.hash.hex() << ": the continued download does not verify (" << verified.error().message
                        << "); fetching it again from its first byte");
      DATAVO_TRY(staged->restart());
      reported = fetcher(sink);
      if (reported) verified = verify_fetched(key, *staged, expected, *reported, "fetcher");
    }
    if (!reported) {
      if (auto local = sink.local_error()) {
        // The tier's disk, not the origin, failed: discard the partial file and stage in the next tier.
        skip(*staging_tier, *local, "staging failed, skipping it: " + local->message);
        continue;
      }
      warn_skipped();
      return std::move(reported).error();
    }
    if (!verified) {
      if (verified.error().code == ErrorCode::integrity) {
        warn_skipped();
        return std::move(verified).error();
      }
      // Reading the staged bytes back failed: the tier's disk, not the origin. Stage in the next tier.
      skip(*staging_tier, verified.error(), "staging failed, skipping it: " + verified.error().message);
      continue;
    }
    warn_skipped();
    auto installed =
        walk.install_fetched(*staging_tier, std::move(*staged), ServedFrom::fetched, std::move(lease), lease_tier);
    maybe_flush_stats();
    return installed;
  }
  std::string causes;
  for (const auto& why : skipped) causes += (causes.empty() ? ": " : "; ") + why;
  return Error{last_error ? last_error->code : ErrorCode::io,
               "no folder tier could stage shard " + key.hash.hex() + causes, last_error ? last_error->sys_errno : 0};
}

std::vector<TierInfo> ShardCacheHierarchy::cache_info() {
  std::vector<TierInfo> out;
  for (const auto& tier : tiers_) {
    TierInfo info;
    info.name = tier->name();
    info.type = std::string(tier->type());
    info.location = tier->location();
    info.max_bytes = tier->max_bytes();
    info.read_only = tier->read_only();
    if (auto* folder = tier->as_folder()) {
      if (auto usage = tier->usage()) info.usage = *usage;
      auto cumulative = folder->cumulative_stats();
      info.stats = cumulative ? *cumulative : tier->counters().snapshot();
    } else {
      info.stats = tier->counters().snapshot();
    }
    out.push_back(std::move(info));
  }
  return out;
}

void ShardCacheHierarchy::maybe_flush_stats() {
  auto now = std::chrono::steady_clock::now();
  {
    std::unique_lock lock(impl_->flush_mu, std::try_to_lock);
    if (!lock || now - impl_->last_flush < k_stats_flush_interval) return;
    impl_->last_flush = now;
  }
  flush_folder_stats(FolderTier::LockWait::skip_if_busy);
}

}  // namespace datavo
