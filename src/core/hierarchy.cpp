#include "datavo/hierarchy.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <variant>

#include "core/lease_wait.hpp"
#include "core/progress_follower.hpp"
#include "core/walk.hpp"
#include "datavo/cloud_tier.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"
#include "util/rfc3339.hpp"

namespace datavo {
namespace {

using core::CountMisses;
using core::describe;
using core::Scope;
using core::Walk;

// Persisting counters costs a lock and a small file write, so it is batched rather than paid on every hit.
constexpr std::chrono::seconds k_stats_flush_interval{2};
// A holder that keeps renewing its lease this long without uploading is not waited for any more.
constexpr std::chrono::minutes k_max_lease_wait{30};

// The topmost writable local tier: where shards land first, whose lock is the single flight, which keeps the remote
// tiers' counters and sizes the readers' prefetch budget. nullptr when there is none.
LocalTier* topmost_writable_local(const std::vector<std::shared_ptr<Tier>>& tiers) {
  for (const auto& tier : tiers) {
    if (LocalTier* local = tier->as_local(); local != nullptr && !local->read_only()) return local;
  }
  return nullptr;
}

// Whether any tier could take a fetched shard at all: capacity otherwise, before any byte moves.
Result<void> check_can_land(const Walk& walk) {
  const auto& tiers = walk.tiers();
  if (topmost_writable_local(tiers) == nullptr) {
    return Error{ErrorCode::capacity,
                 "shard " + walk.key().hash.hex() + " is not cached and no folder tier is writable"};
  }
  if (const auto& size = walk.expected().size) {
    const bool any = std::any_of(tiers.begin(), tiers.end(),
                                 [&](const std::shared_ptr<Tier>& tier) { return tier->can_hold(*size); });
    if (!any) {
      return Error{ErrorCode::capacity, "no tier can hold shard " + walk.key().hash.hex() + " of " +
                                            std::to_string(size->count()) + " bytes"};
    }
  }
  return {};
}

// Single flight (Walk::lock_single_flight) through the lock of the topmost writable local tier. While it waits,
// `observer` (may be nullptr) follows the landing of the holder when that is another process (ProgressFollower).
Result<std::unique_ptr<ShardLock>> lock_single_flight(Walk& walk, LandingObserver* observer) {
  LocalTier* local = topmost_writable_local(walk.tiers());
  if (local == nullptr) return std::unique_ptr<ShardLock>();
  std::optional<core::ProgressFollower> follower;
  if (observer != nullptr) follower.emplace(*local, walk.key(), *observer);
  return walk.lock_single_flight(*local);
}

struct LeaseWait {
  std::unique_ptr<Lease> lease;      // held: this VM fetches from the origin
  const Tier* tier = nullptr;        // the tier of the lease (asked, held or not)
  std::optional<FetchResult> found;  // another VM's upload appeared and was materialized
};

using LeaseAnswer = std::variant<LeaseWait, LeaseAttempt>;

// Asks for the lease of the key in remote tier `index`: a LeaseWait when that settles the matter (the lease is
// ours, the object turned up once it was, or the tier cannot say and is degraded), else who holds it.
Result<LeaseAnswer> ask_lease(Walk& walk, std::size_t index) {
  Tier& tier = *walk.tiers()[index];
  auto attempt = tier.coordination()->try_lease(walk.key());
  if (!attempt) {
    // An interruption says nothing about the tier: no degrading it, no fetch without a lease.
    if (attempt.error().code == ErrorCode::cancelled) return std::move(attempt).error();
    walk.degrade(tier, "lease", attempt.error());
    return LeaseAnswer{LeaseWait{nullptr, &tier, std::nullopt}};
  }
  if (!attempt->held) return LeaseAnswer{std::move(*attempt)};
  // Look once more now that the lease is ours: a holder may have uploaded the object and released the lease
  // between this VM's lookup (or last poll) and its lease; fetching it again would cost a second origin fetch.
  auto found = walk.materialize(index, CountMisses::no);
  if (found && *found) return LeaseAnswer{LeaseWait{nullptr, &tier, std::move(**found)}};  // the lease is released here
  return LeaseAnswer{LeaseWait{std::move(attempt->held), &tier, std::nullopt}};
}

// Counts the wait (lease_waits) and says so at the default level: a VM that sits waiting without a word looks hung
// (issue 16).
void warn_waiting(Tier& tier, const LeaseAttempt& holder, const std::string& hash,
                  std::chrono::system_clock::time_point now) {
  tier.counters().lease_waits.fetch_add(1, std::memory_order_relaxed);
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(holder.expires - now);
  LOG_WARNING(describe(tier) << ": " << holder.holder << " is fetching shard " << hash
                             << "; waiting for its upload instead of calling the origin (its lease expires at "
                             << util::format_rfc3339(holder.expires) << ", in " << std::max<long long>(0, left.count())
                             << " s, unless renewed)");
}

// Takes the cross-VM lease of the key in remote tier `index`, or waits for the VM that holds it. While it waits it
// polls the lease alone (one small GET, core::LeasePolls's schedule); once the lease is gone (released after the
// upload, or without one when the holder's fetch failed) or has run out, it looks for the object and, when there
// is none, asks for the lease again, taking over. A tier that cannot say is degraded and the caller fetches without
// a lease (at worst two VMs fetch the same shard). A cancellation ends the wait at once.
Result<LeaseWait> wait_for_lease(Walk& walk, std::size_t index) {
  Tier& tier = *walk.tiers()[index];
  RemoteCoordination& coordination = *tier.coordination();
  const std::string hash = walk.key().hash.hex();
  net::Clock& clock = *core::lease_wait_clock();
  const auto give_up = clock.now() + k_max_lease_wait;
  auto asked = ask_lease(walk, index);
  if (!asked) return std::move(asked).error();
  if (auto* settled = std::get_if<LeaseWait>(&*asked)) return std::move(*settled);
  LeaseAttempt holder = std::get<LeaseAttempt>(std::move(*asked));
  warn_waiting(tier, holder, hash, clock.wall_now());
  core::LeasePolls polls(coordination.renewal_period());
  for (;;) {
    if (clock.now() >= give_up) {
      LOG_WARNING(describe(tier) << ": " << holder.holder << " has held the lease of " << hash << " for "
                                 << k_max_lease_wait.count() << " min without uploading; fetching it here");
      return LeaseWait{nullptr, &tier, std::nullopt};
    }
    clock.sleep_for(polls.next());
    if (util::cancel_requested()) return util::cancelled_error("waiting for " + holder.holder + "'s upload of " + hash);
    auto seen = coordination.lease_holder(walk.key());
    if (!seen) {
      if (seen.error().code == ErrorCode::cancelled) return std::move(seen).error();
      walk.degrade(tier, "lease", seen.error());
      return LeaseWait{nullptr, &tier, std::nullopt};
    }
    if (*seen && (*seen)->expires > clock.wall_now()) {
      holder = std::move(**seen);  // still held: renewed, or taken by another VM
      continue;
    }
    auto found = walk.materialize(index, CountMisses::no);
    if (found && *found) return LeaseWait{nullptr, &tier, std::move(**found)};
    if (!found && found.error().code != ErrorCode::capacity) return std::move(found).error();
    // No object, and the lease released without one (the holder's fetch failed: take over now, not at its
    // expiry) or run out: take it, unless another waiting VM was quicker.
    asked = ask_lease(walk, index);
    if (!asked) return std::move(asked).error();
    if (auto* settled = std::get_if<LeaseWait>(&*asked)) return std::move(*settled);
    holder = std::get<LeaseAttempt>(std::move(*asked));
  }
}

// Single flight across VMs: the lease of the first writable remote tier that offers one and can hold the shard.
Result<LeaseWait> lease_or_wait(Walk& walk) {
  const auto& tiers = walk.tiers();
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    Tier& tier = *tiers[i];
    if (tier.as_local() || tier.coordination() == nullptr || !walk.impl().breaker(tier).allows()) continue;
    if (walk.expected().size && !tier.can_hold(*walk.expected().size)) continue;
    return wait_for_lease(walk, i);
  }
  return LeaseWait{};
}

// get_or_fetch's steps: the walk, then on a miss the single-flight lock, the re-check, the cross-VM lease, the fetch.
Result<FetchResult> read_or_fetch(Walk& walk, const Fetcher& fetcher, LandingObserver* observer) {
  auto found = walk.find(CountMisses::yes);
  if (!found) return std::move(found).error();
  if (*found) return std::move(**found);
  DATAVO_TRY(check_can_land(walk));
  auto locked = lock_single_flight(walk, observer);
  if (!locked) return std::move(locked).error();
  const std::unique_ptr<ShardLock> lock = std::move(*locked);
  walk.set_lock_held();
  auto rechecked = walk.find(CountMisses::no, Scope::local_tiers);
  if (!rechecked) return std::move(rechecked).error();
  if (*rechecked) return std::move(**rechecked);
  auto leased = lease_or_wait(walk);
  if (!leased) return std::move(leased).error();
  if (leased->found) return std::move(*leased->found);
  return walk.fetch(fetcher, std::move(leased->lease), leased->tier, observer, lock.get());
}

// The fastest readable local copy of the key and its digest: what backfill() uploads from.
struct LocalCopy {
  ShardHandle handle;
  Sha256 digest;
};

std::optional<LocalCopy> find_local_copy(Walk& walk) {
  for (const auto& tier : walk.tiers()) {
    LocalTier* local = tier->as_local();
    if (local == nullptr) continue;
    auto handle = local->peek(walk.key());
    if (!handle || !*handle) continue;  // a tier that cannot answer holds nothing we could upload
    auto digest = local->digest_of(walk.key(), **handle);
    if (!digest) {
      walk.degrade(*local, "read", digest.error());
      continue;
    }
    return LocalCopy{std::move(**handle), *digest};
  }
  return std::nullopt;
}

// backfill() in writable remote tier `index`. `copy` is looked for once, by the first tier that misses the key.
Result<TierBackfill> backfill_tier(Walk& walk, std::size_t index, std::optional<std::optional<LocalCopy>>& copy) {
  Tier& tier = *walk.tiers()[index];
  core::Breaker& breaker = walk.impl().breaker(tier);
  TierBackfill row{index, tier.name(), BackfillOutcome::already_present, {}};
  auto ended = [&](BackfillOutcome outcome, std::string reason) {
    row.outcome = outcome;
    row.reason = std::move(reason);
    return row;
  };
  if (!breaker.allows()) {
    // Uploaded by this process before the tier went down: held, though it cannot be asked now.
    if (walk.impl().uploads.stored(tier, walk.key())) return row;
    return ended(BackfillOutcome::skipped,
                 "tier down: skipped while its circuit breaker is open (last failure: " + breaker.last_failure() + ")");
  }
  auto held = tier.contains(walk.key());
  if (!held) {
    if (held.error().code == ErrorCode::cancelled) return std::move(held).error();
    walk.degrade(tier, "backfill lookup", held.error());
    return ended(BackfillOutcome::failed, held.error().message);
  }
  // A lookup that works says nothing of uploads (credentials may allow one and not the other): only a final outcome
  // closes the breaker or resets its count.
  if (*held) {
    breaker.succeeded();
    return row;
  }
  if (!copy) copy = find_local_copy(walk);
  if (!*copy) return ended(BackfillOutcome::skipped, "no local copy to upload from");
  const Bytes size = (*copy)->handle.size();
  if (!tier.can_hold(size)) {
    return ended(BackfillOutcome::skipped, "too small for the shard (" + std::to_string(size.count()) +
                                               " bytes; max_bytes " +
                                               std::to_string(tier.max_bytes().value_or(Bytes{}).count()) + ")");
  }
  auto installed = tier.install_copy(walk.key(), (*copy)->handle, (*copy)->digest);
  if (!installed) {
    if (installed.error().code == ErrorCode::cancelled) return std::move(installed).error();
    tier.counters().upload_failures.fetch_add(1, std::memory_order_relaxed);
    walk.degrade(tier, "backfill upload", installed.error());
    return ended(BackfillOutcome::failed, installed.error().message);
  }
  breaker.succeeded();
  walk.impl().uploads.remember_stored(tier, walk.key());
  if (*installed == InstallOutcome::already_present) return row;  // another VM stored it meanwhile
  tier.counters().uploads.fetch_add(1, std::memory_order_relaxed);
  tier.counters().bytes_installed.fetch_add(size.count(), std::memory_order_relaxed);
  return ended(BackfillOutcome::uploaded, {});
}

}  // namespace

const char* to_string(BackfillOutcome outcome) {
  switch (outcome) {
    case BackfillOutcome::already_present: return "already_present";
    case BackfillOutcome::uploaded: return "uploaded";
    case BackfillOutcome::failed: return "failed";
    case BackfillOutcome::skipped: return "skipped";
  }
  return "failed";
}

const char* to_string(ServedFrom source) {
  switch (source) {
    case ServedFrom::hit: return "hit";
    case ServedFrom::promoted: return "promoted";
    case ServedFrom::fetched: return "fetched";
  }
  return "hit";
}

Result<std::shared_ptr<ShardCacheHierarchy>> ShardCacheHierarchy::create(std::vector<std::shared_ptr<Tier>> tiers) {
  if (tiers.empty()) return Error{ErrorCode::config, "a cache hierarchy needs at least one tier"};
  bool has_local = false;
  for (const auto& tier : tiers) {
    if (!tier) return Error{ErrorCode::invalid_argument, "a cache hierarchy tier is null"};
    has_local = has_local || tier->as_local() != nullptr;
  }
  if (!has_local) {
    return Error{ErrorCode::config,
                 "a cache hierarchy needs at least one folder tier: it is the local landing zone that remote hits "
                 "are materialized into"};
  }
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (tiers[i] == tiers[j]) return Error{ErrorCode::invalid_argument, "a tier appears twice in a hierarchy"};
      // Names key the stats, the breakers' log lines and every cache command's --tier, as in shards.yaml.
      if (tiers[i]->name() == tiers[j]->name()) {
        return Error{ErrorCode::config, "duplicate tier name \"" + tiers[i]->name() + "\" (tiers " + std::to_string(j) +
                                            " and " + std::to_string(i) + "): give each tier its own name"};
      }
    }
  }
  return std::shared_ptr<ShardCacheHierarchy>(new ShardCacheHierarchy(std::move(tiers)));
}

ShardCacheHierarchy::ShardCacheHierarchy(std::vector<std::shared_ptr<Tier>> tiers)
    : tiers_(std::move(tiers)), impl_(new Impl) {
  for (const auto& tier : tiers_) impl_->breakers.emplace(tier.get(), std::make_unique<core::Breaker>(describe(*tier)));
  impl_->stats_keeper = topmost_writable_local(tiers_);
  if (impl_->stats_keeper == nullptr) return;
  for (const auto& tier : tiers_) {
    if (tier->as_local() == nullptr && !impl_->stats_keeper->keep_stats_of(tier)) {
      impl_->stats_keeper = nullptr;
      return;
    }
  }
}

const char* to_string(StatsScope scope) {
  switch (scope) {
    case StatsScope::every_process: return "every_process";
    case StatsScope::this_machine: return "this_machine";
    case StatsScope::this_process: return "this_process";
  }
  return "?";
}

ShardCacheHierarchy::~ShardCacheHierarchy() {
  const UploadSummary left = impl_->uploads.flush(k_destructor_upload_bound);
  if (left.pending > 0) {
    LOG_WARNING(left.pending << " upload(s) to remote tiers did not finish within "
                             << k_destructor_upload_bound.count() / 1000 << " s and are abandoned");
  }
  flush_stats();
}

void ShardCacheHierarchy::flush_stats() { flush_local_stats(LockWait::block); }

UploadSummary ShardCacheHierarchy::flush_uploads(Milliseconds bound) { return impl_->uploads.flush(bound); }

std::uint64_t ShardCacheHierarchy::uploads_into(const Tier& tier) const { return impl_->uploads.uploaded_into(tier); }

void ShardCacheHierarchy::flush_local_stats(LockWait wait) {
  for (const auto& tier : tiers_) {
    if (LocalTier* local = tier->as_local()) {
      if (auto flushed = local->flush_stats(wait); !flushed) {
        LOG_DEBUG(describe(*tier) << ": cannot persist statistics: " << flushed.error().message);
      }
    }
  }
}

std::size_t ShardCacheHierarchy::place(const ShardKey& key, std::chrono::system_clock::time_point as_if_read_at) {
  std::size_t placed = 0;
  for (const auto& tier : tiers_) {
    LocalTier* local = tier->as_local();
    if (local == nullptr || local->read_only()) continue;
    auto done = local->place(key, as_if_read_at);
    if (!done) {
      // Advisory: the entry keeps its place, and the reader is not disturbed; but an unexpected failure is counted.
      tier->counters().errors.fetch_add(1, std::memory_order_relaxed);
      LOG_DEBUG(describe(*tier) << ": " << done.error().message);
    } else if (*done) {
      ++placed;
    }
  }
  return placed;
}

std::optional<Bytes> ShardCacheHierarchy::landing_capacity() const {
  const LocalTier* local = topmost_writable_local(tiers_);
  if (local == nullptr) return std::nullopt;
  if (auto bound = local->max_bytes()) return bound;
  return local->free_space();
}

Result<std::optional<ShardCacheHierarchy::Location>> ShardCacheHierarchy::locate(const ShardKey& key, LocateMode mode) {
  std::optional<Error> first_error;
  Walk walk(tiers_, key, *impl_);
  auto failed = [&](Tier& tier, const Error& error) {
    if (mode == LocateMode::read) {
      walk.degrade(tier, "lookup", error);
    } else if (!first_error) {
      first_error = error;
    }
  };
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    Tier& tier = *tiers_[i];
    if (mode == LocateMode::read && !impl_->breaker(tier).allows()) continue;
    if (LocalTier* local = tier.as_local()) {
      auto handle = local->peek(key);
      if (!handle) {
        failed(tier, handle.error());
        continue;
      }
      if (mode == LocateMode::read) impl_->breaker(tier).succeeded();
      if (*handle) return std::optional<Location>{Location{i, tier.name(), (*handle)->size()}};
      continue;
    }
    auto held = tier.contains(key);
    if (!held) {
      failed(tier, held.error());
      continue;
    }
    // A HEAD that finds the object says nothing of whether it can be read: the read that follows (read_from) gives
    // the breaker its verdict. Otherwise a bucket whose HEADs work and GETs fail would never be skipped.
    if (*held) return std::optional<Location>{Location{i, tier.name(), std::nullopt}};
    if (mode == LocateMode::read) impl_->breaker(tier).succeeded();
  }
  if (first_error) return std::move(*first_error);
  return std::optional<Location>{};
}

Result<std::optional<Expectation>> ShardCacheHierarchy::read_from(std::size_t tier_index, const ShardKey& key,
                                                                  ByteSink& sink) {
  Tier& tier = *tiers_.at(tier_index);
  core::Breaker& breaker = impl_->breaker(tier);
  Walk walk(tiers_, key, *impl_);
  auto read = tier.read_into(key, sink);
  if (!read) {
    if (read.error().code == ErrorCode::integrity) {
      walk.drop_corrupt(tier, read.error());
    } else {
      walk.degrade(tier, "streamed read", read.error());
    }
    return read;
  }
  breaker.succeeded();
  if (*read) {
    tier.counters().hits.fetch_add(1, std::memory_order_relaxed);
    tier.counters().bytes_served.fetch_add(sink.written().count(), std::memory_order_relaxed);
  } else {
    tier.counters().misses.fetch_add(1, std::memory_order_relaxed);
  }
  maybe_flush_stats();
  return read;
}

Result<std::optional<FetchResult>> ShardCacheHierarchy::get(const ShardKey& key) {
  Walk walk(tiers_, key, *impl_);
  auto found = walk.finish(walk.find(CountMisses::yes));
  maybe_flush_stats();
  return found;
}

Result<FetchResult> ShardCacheHierarchy::get_or_fetch(const ShardKey& key, const Fetcher& fetcher,
                                                      const Expectation& expected, LandingObserver* observer) {
  Walk walk(tiers_, key, *impl_, expected);
  auto result = walk.finish(read_or_fetch(walk, fetcher, observer));
  maybe_flush_stats();
  return result;
}

Result<std::vector<TierBackfill>> ShardCacheHierarchy::backfill(const ShardKey& key) {
  Walk walk(tiers_, key, *impl_);
  std::optional<std::optional<LocalCopy>> copy;
  std::vector<TierBackfill> rows;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->as_local() != nullptr || tiers_[i]->read_only()) continue;
    if (util::cancel_requested()) return util::cancelled_error("backfill of shard " + key.hash.hex());
    auto row = backfill_tier(walk, i, copy);
    if (!row) return std::move(row).error();
    impl_->uploads.count(*tiers_[i], row->outcome);
    rows.push_back(std::move(*row));
  }
  return rows;
}

std::vector<TierInfo> ShardCacheHierarchy::cache_info(MeasureUsage measure) {
  std::vector<TierInfo> out;
  for (const auto& tier : tiers_) {
    TierInfo info;
    info.name = tier->name();
    info.type = std::string(tier->type());
    info.location = tier->location();
    info.max_bytes = tier->max_bytes();
    info.read_only = tier->read_only();
    info.kept = tier->kept_stats();
    info.breaker_open = impl_->breaker(*tier).open();
    info.stats = tier->counters().snapshot();
    if (LocalTier* local = tier->as_local()) {
      if (measure == MeasureUsage::yes) {
        if (auto usage = tier->usage()) info.usage = *usage;
      }
      if (auto cumulative = local->cumulative_stats()) info.stats = *cumulative;
      info.scope = StatsScope::every_process;
    } else if (LocalTier* keeper = impl_->stats_keeper) {
      if (auto kept = keeper->kept_stats_of(*tier); kept && *kept) {
        info.stats = **kept;
        info.scope = StatsScope::this_machine;
        info.kept_in = keeper->name();
      }
    }
    // A counter the tier cannot keep reads zero, whatever a stats file from elsewhere said.
    info.stats.for_each_stat([&info](TierStat stat, const char* name, std::uint64_t) {
      if (!info.kept.contains(stat)) info.stats.set(name, 0);
    });
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
  flush_local_stats(LockWait::skip_if_busy);
}

}  // namespace datavo
