#include "ops/warm_share.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo {

Result<RegionShare> RegionShare::parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error{ErrorCode::invalid_argument,
                 "share '" + std::string(text) + "': " + std::string(why) + " (expected I/N, e.g. 3/8: member I of N)"};
  };
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return bad("no '/'");
  auto number = [](std::string_view digits) -> std::optional<std::size_t> {
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return value;
  };
  const auto index = number(text.substr(0, slash));
  const auto count = number(text.substr(slash + 1));
  if (!index || !count) return bad("I and N must be whole numbers");
  if (*count == 0) return bad("N must be at least 1");
  if (*index >= *count) return bad("I must be below N (members are numbered from 0)");
  RegionShare share;
  share.index = *index;
  share.count = *count;
  return share;
}

namespace ops {
namespace {

constexpr Milliseconds k_first_poll{250};
constexpr Milliseconds k_longest_poll{2000};

Tier* coordinating_tier(const ShardCacheHierarchy& cache) {
  for (const auto& tier : cache.tiers()) {
    if (tier->as_local() == nullptr && !tier->read_only() && tier->coordination() != nullptr) return tier.get();
  }
  return nullptr;
}

bool held_everywhere(const std::vector<TierBackfill>& rows) {
  return std::all_of(rows.begin(), rows.end(), [](const TierBackfill& row) {
    return row.outcome == BackfillOutcome::already_present || row.outcome == BackfillOutcome::uploaded;
  });
}

}  // namespace

struct RegionWait::Deferrals {
  mutable std::mutex mu;
  std::vector<bool> deferred;              // guarded by mu; per position
  std::optional<Clock::time_point> first;  // guarded by mu
};

RegionWait::RegionWait(const WarmSetup& setup, std::optional<RegionShare> share)
    : setup_(setup), share_(share), deferrals_(std::make_shared<Deferrals>()) {
  if (share_) coordinating_ = coordinating_tier(*setup_.cache);
  deferrals_->deferred.assign(setup_.dataset.manifest.shards.size(), false);
}

void RegionWait::note_down(const Error& why) {
  {
    std::lock_guard lock(deferrals_->mu);
    if (deferrals_->first) return;
    deferrals_->first = Clock::now();
  }
  LOG_WARNING("tier '" << coordinating_->name() << "' cannot be reached (" << why.message
                       << "): leaving the shards of the region's other members to them (share " << share_->index << "/"
                       << share_->count << "), and waiting up to " << share_->wait.count()
                       << " s for their uploads once this VM's share is fetched");
}

Result<void> RegionWait::look_at_tier() {
  if (!share_ || coordinating_ == nullptr || setup_.dataset.manifest.shards.empty()) return ok();
  auto lease = coordinating_->coordination()->lease_holder(setup_.key(0));
  if (lease) return ok();
  if (lease.error().code == ErrorCode::cancelled) return std::move(lease).error();
  note_down(lease.error());
  return ok();
}

Fetcher RegionWait::guard(std::size_t position, Fetcher origin) {
  if (!share_ || coordinating_ == nullptr || share_->owns(position)) return origin;
  const ShardKey key = setup_.key(position);
  return [this, position, key, origin = std::move(origin)](ByteSink& sink) -> Result<Expectation> {
    // Called on a full miss. With the tier up the hierarchy took the shard's lease before calling this, so the
    // lease is live and this VM is the one of the region that fetches it. With no live lease the hierarchy could not
    // take one (the tier was down, or it is coming back now): nobody can know who fetches, and the owner's fetch is
    // the one the region pays for. Once this VM has seen that, every later shard of another member is left to its
    // owner too, also when the tier is back: the owner may hold it from the outage, not uploaded yet.
    std::optional<Error> down;
    if (!outage_seen()) {
      auto lease = coordinating_->coordination()->lease_holder(key);
      if (lease && *lease && (*lease)->expires > std::chrono::system_clock::now()) return origin(sink);
      if (!lease && lease.error().code == ErrorCode::cancelled) return std::move(lease).error();
      down = lease ? Error{ErrorCode::remote, "it answers again, but the shard's lease could not be taken"}
                   : std::move(lease).error();
    }
    if (down) note_down(*down);
    {
      std::lock_guard lock(deferrals_->mu);
      deferrals_->deferred[position] = true;
    }
    return Error{ErrorCode::remote, "left to member " + std::to_string(position % share_->count) +
                                        " of the region: tier '" + coordinating_->name() + "' was down"};
  };
}

bool RegionWait::outage_seen() const {
  std::lock_guard lock(deferrals_->mu);
  return deferrals_->first.has_value();
}

bool RegionWait::deferred(std::size_t position) const {
  std::lock_guard lock(deferrals_->mu);
  return deferrals_->deferred[position];
}

std::size_t RegionWait::deferred_count() const {
  std::lock_guard lock(deferrals_->mu);
  return std::size_t(std::count(deferrals_->deferred.begin(), deferrals_->deferred.end(), true));
}

RegionWait::Clock::time_point RegionWait::deadline(Clock::time_point unless_seen) const {
  std::lock_guard lock(deferrals_->mu);
  return deferrals_->first.value_or(unless_seen) + share_->wait;
}

Seconds RegionWait::time_left() const {
  if (!share_ || coordinating_ == nullptr) return Seconds{0};
  const auto now = Clock::now();
  return std::max(Seconds{0}, std::chrono::ceil<Seconds>(deadline(now) - now));
}

Result<bool> RegionWait::upload_own_share(std::vector<bool>& confirmed) {
  bool all = true;
  for (std::size_t position = 0; position < confirmed.size(); ++position) {
    if (confirmed[position] || !share_->owns(position)) continue;
    auto rows = setup_.cache->backfill(setup_.key(position));
    if (!rows) return std::move(rows).error();
    confirmed[position] = held_everywhere(*rows);
    all = all && confirmed[position];
  }
  return all;
}

Result<void> RegionWait::read_arrived(std::vector<std::size_t>& pending,
                                      const std::function<void(WarmShardOutcome)>& arrived) {
  std::vector<std::size_t> still;
  for (const std::size_t position : pending) {
    auto found = setup_.cache->get(setup_.key(position));
    if (!found && found.error().code == ErrorCode::cancelled) return std::move(found).error();
    if (!found || !*found) {
      still.push_back(position);  // not uploaded yet, or the tier still down (a WARNING from the hierarchy)
      continue;
    }
    WarmShardOutcome outcome;
    outcome.position = position;
    outcome.shard_index = setup_.dataset.manifest.shards[position].index;
    outcome.served =
        WarmShardOutcome::Served{(*found)->tier_name, (*found)->source, (*found)->handle.size(), (*found)->found_in};
    ++from_region_;
    arrived(std::move(outcome));
  }
  pending = std::move(still);
  return ok();
}

Result<std::vector<std::size_t>> RegionWait::wait(const std::function<void(WarmShardOutcome)>& arrived,
                                                  const std::function<bool()>& stop) {
  if (!share_ || coordinating_ == nullptr) return std::vector<std::size_t>{};
  const auto started = Clock::now();
  std::vector<std::size_t> pending;
  {
    std::lock_guard lock(deferrals_->mu);
    for (std::size_t position = 0; position < deferrals_->deferred.size(); ++position)
      if (deferrals_->deferred[position]) pending.push_back(position);
  }
  const auto until = deadline(started);
  std::vector<bool> confirmed(setup_.dataset.manifest.shards.size(), false);
  Milliseconds poll = k_first_poll;
  for (;;) {
    auto own_uploaded = upload_own_share(confirmed);
    if (!own_uploaded) return std::move(own_uploaded).error();
    DATAVO_TRY(read_arrived(pending, arrived));
    if ((pending.empty() && *own_uploaded) || Clock::now() >= until) break;
    const auto left = std::chrono::duration_cast<Milliseconds>(until - Clock::now());
    // Short slices, so that a caller's stop request (which is not the process-wide cancellation) ends the wait soon.
    for (auto slept = Milliseconds{0}; slept < std::min(poll, left) && !stop(); slept += Milliseconds{50})
      DATAVO_TRY(util::sleep_unless_cancelled(Milliseconds{50}, "waiting for the region's uploads"));
    if (stop()) return Error{ErrorCode::cancelled, "warm: waiting for the region's uploads: stopped by the caller"};
    poll = std::min(poll * 2, k_longest_poll);
  }
  waited_ = Clock::now() - started;
  if (!pending.empty()) {
    LOG_WARNING("waited " << share_->wait.count() << " s for the region's other members: " << pending.size()
                          << " shard(s) of their shares are still not in tier '" << coordinating_->name()
                          << "'; fetching them from the origin");
  }
  return pending;
}

std::optional<WarmShareReport> RegionWait::report() const {
  if (!share_) return std::nullopt;
  WarmShareReport out;
  out.share = *share_;
  out.deferred = deferred_count();
  out.from_region = from_region_;
  out.fetched_after_wait = fetched_after_wait_;
  out.waited = waited_;
  return out;
}

}  // namespace ops
}  // namespace datavo
