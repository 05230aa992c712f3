#include "core/walk.hpp"

#include <algorithm>
#include <mutex>
#include <variant>

#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo::core {

std::string describe(const Tier& tier) { return "tier '" + tier.name() + "' (" + std::string(tier.type()) + ")"; }

// Where the bytes of a landing come from: the origin (the caller's fetcher) or a hit on a remote tier. What the
// landing does is the same for both; what a failure of the source means is each source's.
class Source {
 public:
  virtual ~Source() = default;
  // For messages: "fetcher", "remote tier".
  virtual const char* name() const = 0;
  // How the bytes serve the read once installed.
  virtual ServedFrom how() const = 0;
  // Whether a partial download that a writer that died left behind is worth continuing.
  virtual Resume resume() const = 0;
  // Who watches the landing (LandingObserver); nullptr: nobody.
  virtual LandingObserver* observer() const { return nullptr; }
  // The single-flight lock held for the landing, which publishes its progress to other processes; nullptr: none.
  virtual ShardLock* progress_lock() const { return nullptr; }
  // Writes the bytes into `sink` and returns what they must be; nullopt when the source does not have them.
  virtual Result<std::optional<Expectation>> fill(ByteSink& sink) = 0;
  // The bytes arrived and verified: `size` of them.
  virtual void arrived(Bytes /*size*/) {}
  // The source failed (its own error, or integrity: bytes that do not verify). An Error fails the call; nullopt
  // degrades the source to a miss.
  virtual Result<std::optional<FetchResult>> failed(Error error) = 0;
  // No landing tier could stage the bytes.
  virtual Result<std::optional<FetchResult>> unlanded() = 0;
  // The bytes landed but no local tier accepted them.
  virtual Error not_installed(Error error) { return error; }
};

namespace {

// The staging transaction as the source sees it: every call goes through, and a failed write, restart or
// positional write is remembered as the landing tier's failure (its disk is full or broken), so that it can be told
// apart from a failure of the source itself (the origin or the remote tier).
//
// It also passes the verified prefix that the source reports on to the observer of the landing and, through the
// single-flight lock (ShardLock::publish_verified), to the waiters of other processes; from the first prefix the
// observer got on, it refuses to restart the download (such a source fails instead, a source error, not the landing
// tier's): the reader of this process follows one file from its first byte. A restart otherwise begins a new
// staging file (ShardTransaction::restart() never truncates one that a reader may have mapped), which announce()
// names to both again.
class LandingSink final : public ByteSink, public PositionalSink {
 public:
  LandingSink(ShardTransaction& staged, LandingObserver* observer, ShardLock* lock)
      : staged_(staged), observer_(observer), lock_(lock) {}
  // Tells the observer and the lock's waiters which staging file the bytes go to (none of it verified yet).
  Result<void> announce() {
    if (observer_ == nullptr && lock_ == nullptr) return {};
    auto reading = staged_.open_staged();
    if (!reading) return record(std::move(reading).error());
    if (lock_ != nullptr) lock_->publish_staging(*reading);
    if (observer_ != nullptr) observer_->staging(std::move(*reading));
    return {};
  }
  Result<void> write(const void* data, std::size_t size) override { return record(staged_.write(data, size)); }
  Bytes written() const override { return staged_.written(); }
  Result<void> restart() override {
    if (reported_) {
      return Error{ErrorCode::integrity,
                   "cannot restart a download whose verified bytes may be read already; "
                   "the shard is fetched again into a new staging file"};
    }
    reading_.reset();
    DATAVO_TRY(record(staged_.restart()));
    return announce();
  }
  Result<void> read_back(std::uint64_t offset, void* out, std::size_t size) override {
    if (!reading_) {
      auto opened = staged_.open_staged();
      if (!opened) return std::move(opened).error();
      reading_.emplace(std::move(*opened));
    }
    return util::pread_all(reading_->fd(), out, size, static_cast<off_t>(offset), "the staging file");
  }
  void verified_prefix(Bytes prefix, Bytes total) override {
    if (prefix.count() == 0) return;
    if (lock_ != nullptr) lock_->publish_verified(prefix, total);
    if (observer_ == nullptr) return;
    reported_ = true;
    observer_->verified(prefix, total);
  }
  PositionalSink* positional() override {
    positional_ = staged_.positional();
    return positional_ ? this : nullptr;
  }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    return record(positional_->write_at(offset, data, size));
  }
  Result<void> prefix_complete(Bytes size) override { return record(positional_->prefix_complete(size)); }

  // The landing tier's failure, when one of its writes failed.
  std::optional<Error> landing_failure() const {
    std::lock_guard lock(mu_);
    return failure_;
  }

 private:
  Result<void> record(Result<void> result) {
    if (!result) {
      std::lock_guard lock(mu_);
      failure_ = result.error();
    }
    return result;
  }
  ShardTransaction& staged_;
  LandingObserver* const observer_;
  ShardLock* const lock_;               // the single-flight lock, which publishes the progress; may be nullptr
  bool reported_ = false;               // a verified prefix went to the observer
  std::optional<ShardHandle> reading_;  // the staging file, opened for read_back()
  PositionalSink* positional_ = nullptr;
  mutable std::mutex mu_;  // positional writes come from several threads
  std::optional<Error> failure_;
};

// Checks the staged bytes against what the caller expected and what the source reported. Returns their SHA-256
// (needed for the entry's record even when nobody expects one); integrity when they are not the right bytes, the
// landing tier's own error when it cannot read them back.
Result<Sha256> verify_staged(const ShardKey& key, ShardTransaction& staged, const Expectation& expected,
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

// Which side an attempt to land the bytes in one tier failed on.
enum class Side { source, landing };
struct Failure {
  Side side;
  Error error;
};
// What one attempt to land the bytes in one tier gave: their digest, nullopt when the source does not have them,
// or a Failure.
using Attempt = std::variant<std::optional<Sha256>, Failure>;

// Fills `staged` from `source` and verifies it. A continued download that does not verify is fetched once more from
// its first byte: the bytes of a writer that died need not be a prefix of what the source serves now.
Attempt fill_and_verify(Source& source, ShardTransaction& staged, const ShardKey& key, const Expectation& expected) {
  LandingSink sink(staged, source.observer(), source.progress_lock());
  if (auto announced = sink.announce(); !announced) return Failure{Side::landing, announced.error()};
  auto reported = source.fill(sink);
  Result<Sha256> verified = Error{ErrorCode::internal, "not filled"};
  if (reported && *reported) verified = verify_staged(key, staged, expected, **reported, source.name());
  if (reported && *reported && !verified && verified.error().code == ErrorCode::integrity &&
      staged.resumed_from().count() > 0) {
    LOG_INFO("shard " << key.hash.hex() << ": the continued download does not verify (" << verified.error().message
                      << "); fetching it again from its first byte");
    if (auto restarted = sink.restart(); !restarted) return Failure{Side::landing, restarted.error()};
    reported = source.fill(sink);
    if (reported && *reported) verified = verify_staged(key, staged, expected, **reported, source.name());
  }
  if (!reported) {
    if (auto local = sink.landing_failure()) return Failure{Side::landing, *local};
    return Failure{Side::source, reported.error()};
  }
  if (!*reported) return std::optional<Sha256>{};
  // A digest that cannot be read back is the landing tier's failure; bytes that are not the right ones the source's.
  if (!verified) {
    return Failure{verified.error().code == ErrorCode::integrity ? Side::source : Side::landing, verified.error()};
  }
  return std::optional<Sha256>{*verified};
}

// The origin: the caller's fetcher, called on a miss everywhere.
class OriginSource final : public Source {
 public:
  OriginSource(Walk& walk, const Fetcher& fetcher, LandingObserver* observer, ShardLock* lock)
      : walk_(walk), fetcher_(fetcher), observer_(observer), lock_(lock) {}
  const char* name() const override { return "fetcher"; }
  ServedFrom how() const override { return ServedFrom::fetched; }
  Resume resume() const override { return Resume::partial; }
  LandingObserver* observer() const override { return observer_; }
  ShardLock* progress_lock() const override { return lock_; }
  Result<std::optional<Expectation>> fill(ByteSink& sink) override {
    auto reported = fetcher_(sink);
    if (!reported) return std::move(reported).error();
    return std::optional<Expectation>{*reported};
  }
  Result<std::optional<FetchResult>> failed(Error error) override { return error; }
  Result<std::optional<FetchResult>> unlanded() override { return walk_.staging_failed(); }

 private:
  Walk& walk_;
  const Fetcher& fetcher_;
  LandingObserver* const observer_;
  ShardLock* const lock_;
};

// A remote tier, whose read_into() is the lookup and the download at once (a miss is its 404).
class RemoteHitSource final : public Source {
 public:
  RemoteHitSource(Walk& walk, std::size_t index, CountMisses count_misses)
      : walk_(walk), remote_(*walk.tiers()[index]), count_misses_(count_misses) {}
  const char* name() const override { return "remote tier"; }
  ServedFrom how() const override { return ServedFrom::promoted; }
  Resume resume() const override { return Resume::no; }
  Result<std::optional<Expectation>> fill(ByteSink& sink) override {
    auto read = remote_.read_into(walk_.key(), sink);
    if (!read) return std::move(read).error();
    answered_ = true;
    walk_.impl().breaker(remote_).succeeded();
    if (!*read && count_misses_ == CountMisses::yes) remote_.counters().misses.fetch_add(1, std::memory_order_relaxed);
    return read;
  }
  void arrived(Bytes size) override {
    remote_.counters().hits.fetch_add(1, std::memory_order_relaxed);
    remote_.counters().bytes_served.fetch_add(size.count(), std::memory_order_relaxed);
  }
  Result<std::optional<FetchResult>> failed(Error error) override {
    if (error.code == ErrorCode::integrity) {
      walk_.drop_corrupt(remote_, error);
    } else {
      walk_.degrade(remote_, "download", error);
    }
    return std::optional<FetchResult>{};
  }
  Result<std::optional<FetchResult>> unlanded() override {
    // Nowhere to land a hit: say so only if it is one.
    if (!answered_) {
      auto held = remote_.contains(walk_.key());
      if (!held || !*held) return std::optional<FetchResult>{};
    }
    if (!walk_.landing_failures_held()) {
      return Error{ErrorCode::capacity, no_landing_zone() + "no writable folder tier above it"};
    }
    return walk_.staging_failed(no_landing_zone(), ErrorCode::capacity);
  }
  Error not_installed(Error error) override { return Error{ErrorCode::capacity, no_landing_zone() + error.message}; }

 private:
  std::string no_landing_zone() const {
    return "remote hit for " + walk_.key().hash.hex() + " on " + describe(remote_) + " has no local landing zone: ";
  }
  Walk& walk_;
  Tier& remote_;
  const CountMisses count_misses_;
  bool answered_ = false;  // read_into() said hit or miss
};

}  // namespace

Walk::Walk(const std::vector<std::shared_ptr<Tier>>& tiers, const ShardKey& key, ShardCacheHierarchy::Impl& impl,
           const Expectation& expected)
    : tiers_(tiers), key_(key), impl_(impl), expected_(expected) {}

Walk::~Walk() { settle(nullptr); }

// So that the next read (of any VM) fetches good bytes.
void Walk::drop_corrupt(Tier& remote, const Error& why) {
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

void Walk::degrade(Tier& tier, std::string_view what, const Error& error, Report report) {
  // A cancellation (SIGINT, a stopped caller) stops requests to every tier at once and says nothing about this one:
  // no error counted, nothing for the breaker, no line. The command reports the interruption.
  const bool cancelled = error.code == ErrorCode::cancelled;
  std::string text = describe(tier) + ": " + std::string(what) + " failed, skipping it: " + error.message;
  bool warn = false;
  if (!cancelled) {
    tier.counters().errors.fetch_add(1, std::memory_order_relaxed);
    Breaker& breaker = impl_.breaker(tier);
    warn = !breaker.open();
    breaker.failed(error.message);
  }
  if (report == Report::now) {
    if (warn) LOG_WARNING(text);
    return;
  }
  std::erase_if(held_, [&tier](const Held& held) { return held.tier == &tier; });
  held_.push_back(Held{&tier, std::move(text), warn, error});
}

Error Walk::staging_failed(const std::string& prefix, std::optional<ErrorCode> code) {
  // Causes named by an earlier Error of this call, which was not returned after all, are named again.
  for (auto& earlier : named_) {
    const bool superseded =
        std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.tier == earlier.tier; });
    if (!superseded) held_.insert(held_.begin(), std::move(earlier));
  }
  std::string message = prefix + "no folder tier could stage shard " + key_.hash.hex();
  for (std::size_t i = 0; i < held_.size(); ++i) message += (i == 0 ? ": " : "; ") + held_[i].text;
  const Error* last = held_.empty() ? nullptr : &held_.back().error;
  Error error{code.value_or(last ? last->code : ErrorCode::io), std::move(message), last ? last->sys_errno : 0};
  named_ = std::move(held_);
  held_.clear();
  named_message_ = error.message;
  return error;
}

void Walk::settle(const Error* returned) {
  const bool named_by_returned = returned != nullptr && !named_.empty() && returned->message == named_message_;
  for (const auto& held : named_) {
    if (held.warn && !named_by_returned) LOG_WARNING(held.text);
  }
  for (const auto& held : held_) {
    if (held.warn) LOG_WARNING(held.text);
  }
  named_.clear();
  named_message_.clear();
  held_.clear();
}

Result<std::optional<FetchResult>> Walk::find(CountMisses count_misses, Scope scope) {
  std::optional<Error> no_landing_zone;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    Tier& tier = *tiers_[i];
    if (!impl_.breaker(tier).allows()) continue;
    if (LocalTier* local = tier.as_local()) {
      auto opened = local->open(key_, count_misses == CountMisses::yes ? Touch::yes : Touch::no);
      if (!opened) {
        degrade(tier, "lookup", opened.error());
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
        return std::optional<FetchResult>{
            FetchResult{std::move(**opened), tier.name(), i, ServedFrom::hit, tier.name()}};
      return promote(i, std::move(**opened));
    }
    if (scope == Scope::local_tiers) continue;
    auto materialized = materialize(i, count_misses);
    if (!materialized) {
      // No landing zone above this remote hit: a slower local tier may still hold the shard.
      if (materialized.error().code != ErrorCode::capacity) return std::move(materialized).error();
      if (!no_landing_zone) no_landing_zone = std::move(materialized).error();
      continue;
    }
    if (*materialized) return materialized;
  }
  if (no_landing_zone) return std::move(*no_landing_zone);
  return std::optional<FetchResult>{};
}

Result<std::unique_ptr<ShardLock>> Walk::lock_single_flight(LocalTier& local) {
  auto locked = local.lock_shard(key_);
  if (locked) return std::move(*locked);
  if (locked.error().code == ErrorCode::cancelled) return std::move(locked).error();
  degrade(local, "locking", locked.error());
  return std::unique_ptr<ShardLock>();
}

Result<std::optional<FetchResult>> Walk::lock_and_recheck(std::size_t remote_index, std::unique_ptr<ShardLock>& lock) {
  for (std::size_t landing = 0; landing < remote_index; ++landing) {
    LocalTier* local = tiers_[landing]->as_local();
    if (!local || local->read_only()) continue;
    // Single flight for remote hits too: the blob's network cost is paid once per shard per machine. The lock lives
    // in the topmost writable local tier, as for origin fetches; a waiter finds the materialized copy.
    auto locked = lock_single_flight(*local);
    if (!locked) return std::move(locked).error();
    lock = std::move(*locked);
    for (std::size_t j = 0; j < remote_index; ++j) {
      LocalTier* above = tiers_[j]->as_local();
      if (!above) continue;
      auto handle = above->peek(key_);
      if (handle && *handle) {
        above->counters().hits.fetch_add(1, std::memory_order_relaxed);
        above->counters().bytes_served.fetch_add((*handle)->size().count(), std::memory_order_relaxed);
        return std::optional<FetchResult>{
            FetchResult{std::move(**handle), above->name(), j, ServedFrom::hit, above->name()}};
      }
    }
    break;
  }
  return std::optional<FetchResult>{};
}

Result<std::optional<FetchResult>> Walk::materialize(std::size_t remote_index, CountMisses count_misses) {
  std::unique_ptr<ShardLock> lock;
  if (!lock_held_) {
    auto found = lock_and_recheck(remote_index, lock);
    if (!found || *found) return found;
  }
  RemoteHitSource source(*this, remote_index, count_misses);
  auto landed = land(source, remote_index, nullptr, nullptr);
  if (landed && *landed) (*landed)->found_in = tiers_[remote_index]->name();
  return landed;
}

Result<FetchResult> Walk::fetch(const Fetcher& fetcher, std::unique_ptr<Lease> lease, const Tier* lease_tier,
                                LandingObserver* observer, ShardLock* lock) {
  OriginSource source(*this, fetcher, observer, lock);
  auto landed = land(source, tiers_.size(), std::move(lease), lease_tier);
  if (!landed) return std::move(landed).error();
  if (!*landed) return Error{ErrorCode::internal, "the fetcher's bytes for " + key_.hash.hex() + " went nowhere"};
  return std::move(**landed);
}

Result<std::optional<FetchResult>> Walk::land(Source& source, std::size_t end, std::unique_ptr<Lease> lease,
                                              const Tier* lease_tier) {
  for (std::size_t i = 0; i < end; ++i) {
    LocalTier* landing = tiers_[i]->as_local();
    if (landing == nullptr || landing->read_only()) continue;
    auto staged = landing->begin(key_, expected_.size, lock_held_ ? source.resume() : Resume::no);
    if (!staged) {
      degrade(*landing, "staging", staged.error(), Report::with_outcome);
      continue;
    }
    Attempt attempt = fill_and_verify(source, **staged, key_, expected_);
    if (auto* failure = std::get_if<Failure>(&attempt)) {
      if (failure->side == Side::source) return source.failed(std::move(failure->error));
      // The landing tier's disk, not the source, failed: its staged bytes go, and the next tier is tried.
      degrade(*landing, "staging", failure->error, Report::with_outcome);
      continue;
    }
    const auto& digest = std::get<std::optional<Sha256>>(attempt);
    if (!digest) return std::optional<FetchResult>{};
    // The bytes landed: the landing tiers skipped on the way are reported now, before what the install reports.
    settle(nullptr);
    source.arrived((*staged)->written());
    auto installed = install(*landing, std::move(*staged), *digest, end, source.how(), std::move(lease), lease_tier);
    if (!installed) return source.not_installed(std::move(installed).error());
    return std::optional<FetchResult>{std::move(*installed)};
  }
  return source.unlanded();
}

Result<FetchResult> Walk::install(LocalTier& landing, std::unique_ptr<ShardTransaction> staged, const Sha256& digest,
                                  std::size_t end, ServedFrom how, std::unique_ptr<Lease> lease,
                                  const Tier* lease_tier) {
  const Bytes size = staged->written();
  std::optional<FetchResult> top;
  std::optional<ShardHandle> source;  // a readable copy of the bytes, for the tiers installed by copy
  std::size_t landing_index = 0;
  while (tiers_[landing_index].get() != &landing) ++landing_index;
  // The landing tier first: its install is a rename, not a copy, and then every other tier copies from it.
  if (landing.can_hold(size)) {
    auto committed = staged->commit();
    if (committed) {
      count_install(landing, size, how);
      // A second descriptor on the committed inode: immune to the entry being evicted right away.
      if (auto dup = committed->duplicate()) source = std::move(*dup);
      top = FetchResult{std::move(*committed), landing.name(), landing_index, how};
    } else if (committed.error().code == ErrorCode::cancelled) {
      return std::move(committed).error();  // stopped waiting for the tier's budget: no other tier either
    } else {
      degrade(landing, "install", committed.error());
    }
  } else {
    warn_capacity_skip(landing, size);
  }
  if (!source) {
    auto reopened = staged->open_staged();
    if (!reopened) return std::move(reopened).error();
    source = std::move(*reopened);
  }
  for (std::size_t i = 0; i < end; ++i) {
    if (i == landing_index) continue;
    Tier& tier = *tiers_[i];
    if (tier.read_only()) continue;
    if (!impl_.breaker(tier).allows()) {
      if (tier.as_local() == nullptr) tier.counters().upload_skips.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (!tier.can_hold(size)) {
      warn_capacity_skip(tier, size);
      continue;
    }
    install_into(i, *source, digest, how, &tier == lease_tier ? std::move(lease) : nullptr, "install");
    if (LocalTier* local = tier.as_local(); local && (!top || i < top->tier_index)) {
      auto handle = local->peek(key_);
      if (handle && *handle) top = FetchResult{std::move(**handle), tier.name(), i, how};
    }
  }
  if (!top) {
    return Error{ErrorCode::capacity, "no folder tier accepted shard " + key_.hash.hex() + " (" +
                                          std::to_string(size.count()) + " bytes); see the warnings above"};
  }
  return std::move(*top);
}

void Walk::count_install(Tier& tier, Bytes size, ServedFrom how) {
  auto& c = tier.counters();
  (how == ServedFrom::promoted ? c.promotions : c.installs).fetch_add(1, std::memory_order_relaxed);
  c.bytes_installed.fetch_add(size.count(), std::memory_order_relaxed);
}

void Walk::warn_capacity_skip(Tier& tier, Bytes size) {
  tier.counters().capacity_skips.fetch_add(1, std::memory_order_relaxed);
  LOG_WARNING(describe(tier) << " is too small for a shard of " << size.count() << " bytes (max_bytes "
                             << tier.max_bytes().value_or(Bytes{}).count() << "); skipped");
}

void Walk::install_into(std::size_t index, const ShardHandle& source, const Sha256& digest, ServedFrom how,
                        std::unique_ptr<Lease> lease, const char* what) {
  const std::shared_ptr<Tier>& tier = tiers_[index];
  if (tier->as_local() == nullptr) {
    auto own = source.duplicate();
    if (!own) {
      degrade(*tier, what, own.error());
      return;
    }
    UploadQueue::Job job{tier, key_, std::move(*own), digest, std::move(lease)};
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
    degrade(*tier, what, installed.error());
    return;
  }
  impl_.breaker(*tier).succeeded();
  if (*installed == InstallOutcome::installed) count_install(*tier, source.size(), how);
}

Result<std::optional<FetchResult>> Walk::promote(std::size_t hit_index, ShardHandle hit) {
  LocalTier& hit_tier = *tiers_[hit_index]->as_local();
  auto digest = hit_tier.digest_of(key_, hit);
  if (!digest) {
    degrade(hit_tier, "read", digest.error());
    return std::optional<FetchResult>{
        FetchResult{std::move(hit), hit_tier.name(), hit_index, ServedFrom::hit, hit_tier.name()}};
  }
  std::optional<FetchResult> top;
  for (std::size_t i = 0; i < hit_index; ++i) {
    Tier& tier = *tiers_[i];
    if (tier.read_only()) continue;
    if (!impl_.breaker(tier).allows()) {
      if (tier.as_local() == nullptr) tier.counters().upload_skips.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (!tier.can_hold(hit.size())) {
      warn_capacity_skip(tier, hit.size());
      continue;
    }
    install_into(i, hit, *digest, ServedFrom::promoted, nullptr, "promotion");
    if (LocalTier* local = tier.as_local(); local && !top) {
      auto handle = local->peek(key_);
      if (handle && *handle)
        top = FetchResult{std::move(**handle), tier.name(), i, ServedFrom::promoted, hit_tier.name()};
    }
  }
  // Every faster tier refused: the slower local hit still serves the read.
  if (!top)
    return std::optional<FetchResult>{
        FetchResult{std::move(hit), hit_tier.name(), hit_index, ServedFrom::hit, hit_tier.name()}};
  return top;
}

}  // namespace datavo::core
