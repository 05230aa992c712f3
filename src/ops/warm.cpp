#include "datavo/warm.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>

#include "datavo/metrics.hpp"
#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "ops/warm_setup.hpp"
#include "ops/warm_share.hpp"
#include "util/cancel.hpp"
#include "util/human.hpp"

namespace datavo {
namespace {

using Clock = std::chrono::steady_clock;

// Passes bytes through, telling the observer how many arrived from the origin.
class CountingSink final : public ByteSink {
 public:
  CountingSink(ByteSink& inner, WarmObserver& observer, const std::atomic<bool>* stop)
      : inner_(inner), observer_(observer), stop_(stop) {}
  Result<void> write(const void* data, std::size_t size) override {
    if (stop_ && stop_->load(std::memory_order_relaxed))
      return Error{ErrorCode::cancelled, "warm: download stopped by the caller"};
    DATAVO_TRY(inner_.write(data, size));
    observer_.origin_bytes(std::int64_t(size));
    counted_ += size;
    return ok();
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override {
    // Only what came through here was counted: bytes a continued download inherited were not.
    observer_.origin_bytes(-std::int64_t(counted_));
    counted_ = 0;
    return inner_.restart();
  }
  Result<void> read_back(std::uint64_t offset, void* out, std::size_t size) override {
    return inner_.read_back(offset, out, size);
  }

 private:
  ByteSink& inner_;
  WarmObserver& observer_;
  const std::atomic<bool>* stop_;
  std::uint64_t counted_ = 0;
};

bool stop_requested(const WarmRequest& request) {
  return util::cancel_requested() || (request.stop && request.stop->load(std::memory_order_relaxed));
}

Error stopped_error(std::string_view what) {
  if (util::cancel_requested()) return util::cancelled_error(what);
  return Error{ErrorCode::cancelled, std::string(what) + ": stopped by the caller"};
}

WarmShardOutcome warm_one(const ops::WarmSetup& setup, std::size_t position, WarmObserver& observer,
                          const std::atomic<bool>* stop, ops::RegionWait* region) {
  const Manifest& manifest = setup.dataset.manifest;
  WarmShardOutcome outcome;
  outcome.position = position;
  outcome.shard_index = manifest.shards[position].index;
  Fetcher origin = setup.client->shard_fetcher(manifest, position, setup.dataset.keys);
  Fetcher counted = [&origin, &observer, stop](ByteSink& sink) -> Result<Expectation> {
    CountingSink counting(sink, observer, stop);
    return origin(counting);
  };
  if (region != nullptr) counted = region->guard(position, std::move(counted));
  setup.client->remember_shard(manifest, position, setup.dataset.keys);  // for `cache ls`
  auto result = setup.cache->get_or_fetch(setup.key(position), counted);
  if (result) {
    outcome.served =
        WarmShardOutcome::Served{result->tier_name, result->source, result->handle.size(), result->found_in};
  } else {
    outcome.error = std::move(result).error();
  }
  return outcome;
}

// Warms the shards at `positions` on `jobs` threads into `outcomes` (indexed by position). A shard left to another
// member of the region (`region`; nullptr: none) or stopped by a cancellation gets no outcome.
void warm_all(const ops::WarmSetup& setup, const WarmRequest& request, WarmObserver& observer,
              const std::vector<std::size_t>& positions, ops::RegionWait* region,
              std::vector<std::optional<WarmShardOutcome>>& outcomes) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < positions.size() && !stop_requested(request); i = next++) {
      const std::size_t position = positions[i];
      WarmShardOutcome outcome = warm_one(setup, position, observer, request.stop, region);
      if (region != nullptr && outcome.error && region->deferred(position)) continue;
      // A shard stopped by an interruption is no outcome of its own: the cancellation is reported once.
      if (!outcome.error || outcome.error->code != ErrorCode::cancelled) observer.shard_done(outcome);
      outcomes[position] = std::move(outcome);
    }
  };
  // The caller's stop (WarmRequest::stop, Python's KeyboardInterrupt) must also end what a worker waits for without
  // looking at the flag, above all another process's shard lock.
  ops::CallerStop caller(request.stop);
  std::vector<std::jthread> workers;
  for (std::size_t i = 0; i < std::min(request.jobs, std::max<std::size_t>(positions.size(), 1)); ++i) {
    workers.emplace_back([&] {
      util::StopScope scope(caller.token());
      work();
    });
  }
}

// Every shard of the warm, the region's share first (see warm.hpp): the workers, then the wait for the region, then
// the origin for what the region did not provide in time. The outcomes in manifest order (none for a shard not
// started because of a cancellation).
std::vector<WarmShardOutcome> warm_every_shard(const ops::WarmSetup& setup, const WarmRequest& request,
                                               WarmObserver& observer, ops::RegionWait& region) {
  const std::size_t total = setup.dataset.manifest.shards.size();
  std::vector<std::optional<WarmShardOutcome>> outcomes(total);
  std::vector<std::size_t> every(total);
  for (std::size_t i = 0; i < total; ++i) every[i] = i;
  // Its only error is a cancellation, which warm() reports once the uploads are waited for; so is wait()'s.
  if (!region.look_at_tier()) return {};
  warm_all(setup, request, observer, every, &region, outcomes);
  if (!stop_requested(request)) {
    if (const std::size_t deferred = region.deferred_count(); deferred > 0)
      observer.waiting_for_region(deferred, region.time_left());
    auto missing = region.wait(
        [&](WarmShardOutcome outcome) {
          observer.shard_done(outcome);
          outcomes[outcome.position] = std::move(outcome);
        },
        [&] { return stop_requested(request); });
    if (missing) {
      warm_all(setup, request, observer, *missing, nullptr, outcomes);
      region.fetched_after_wait(missing->size());
    }
  }
  std::vector<WarmShardOutcome> done;
  for (auto& outcome : outcomes)
    if (outcome) done.push_back(std::move(*outcome));
  return done;
}

// Where the shards of a warm are once it is done: how many have their fastest copy in each tier, how many are in
// none, and how many each folder tier holds (the remote tiers' come from the backfill).
struct ShardPlacement {
  std::vector<std::uint64_t> fastest_in;    // per tier, fastest first
  std::vector<std::uint64_t> held_locally;  // per tier: for folder tiers, 0 for the others
  std::uint64_t nowhere = 0;
};

ShardPlacement place_all(const ops::WarmSetup& setup) {
  const auto& tiers = setup.cache->tiers();
  ShardPlacement placement;
  placement.fastest_in.assign(tiers.size(), 0);
  placement.held_locally.assign(tiers.size(), 0);
  for (std::size_t position = 0; position < setup.dataset.manifest.shards.size(); ++position) {
    const ShardKey key = setup.key(position);
    auto where = setup.cache->locate(key);
    if (where && *where)
      ++placement.fastest_in[(*where)->tier_index];
    else
      ++placement.nowhere;  // a tier that cannot answer holds nothing we could read
    for (std::size_t i = 0; i < tiers.size(); ++i) {
      LocalTier* local = tiers[i]->as_local();
      if (local == nullptr) continue;
      auto handle = local->peek(key);
      if (handle && *handle) ++placement.held_locally[i];
    }
  }
  return placement;
}

// Backfill (see warm.hpp): ShardCacheHierarchy::backfill of every shard on `jobs` threads. Per shard, one row per
// writable remote tier; none when a cancellation stopped it first.
std::vector<std::vector<TierBackfill>> backfill_all(const ops::WarmSetup& setup, const WarmRequest& request) {
  const std::size_t total = setup.dataset.manifest.shards.size();
  std::vector<std::vector<TierBackfill>> rows(total);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t position = next++; position < total && !stop_requested(request); position = next++) {
      auto done = setup.cache->backfill(setup.key(position));
      if (done) rows[position] = std::move(*done);
    }
  };
  std::vector<std::jthread> workers;
  for (std::size_t i = 0; i < std::min(request.jobs, std::max<std::size_t>(total, 1)); ++i) workers.emplace_back(work);
  return rows;
}

// The uploads into every tier so far, to tell this warm's uploads from earlier ones (not the tiers' `uploads`
// counters: flushing the stats hands those to the stats file).
std::vector<std::uint64_t> upload_counts(const ShardCacheHierarchy& cache) {
  std::vector<std::uint64_t> out;
  for (const auto& tier : cache.tiers()) out.push_back(cache.uploads_into(*tier));
  return out;
}

bool writable_remote(Tier& tier) { return tier.as_local() == nullptr && !tier.read_only(); }

// The row of writable remote tier `index` from the backfill's outcomes; `uploads` is how many uploads into the tier
// the warm made (during it and by the backfill).
WarmTierUploads tier_uploads(const std::vector<std::vector<TierBackfill>>& backfills, std::size_t index,
                             std::uint64_t uploads) {
  WarmTierUploads row;
  std::uint64_t present = 0;
  for (const auto& shard : backfills) {
    for (const auto& tier : shard) {
      if (tier.tier_index != index) continue;
      switch (tier.outcome) {
        case BackfillOutcome::already_present: ++present; break;
        case BackfillOutcome::uploaded: ++row.uploaded; break;
        case BackfillOutcome::failed:
          ++row.failed;
          row.failed_reason = tier.reason;
          break;
        case BackfillOutcome::skipped:
          ++row.skipped;
          row.skipped_reason = tier.reason;
          break;
      }
    }
  }
  // What the backfill found present was uploaded by this warm's reads, or there before.
  const std::uint64_t during = std::min(present, uploads - std::min(uploads, row.uploaded));
  row.uploaded += during;
  row.already_present = present - during;
  return row;
}

// "only 3 of 12 shards are cached in the top tier 'local' after the warm (max_bytes 1.0 MiB): 9 remain cached in
// tier 'scratch', 0 are cached nowhere"
std::string describe_partial(const ShardCacheHierarchy& cache, const ShardPlacement& placement, std::size_t total) {
  const Tier& top = *cache.tiers().front();
  std::string out = "only " + std::to_string(placement.fastest_in[0]) + " of " + std::to_string(total) +
                    " shards are cached in the top tier '" + top.name() + "' after the warm" +
                    (top.max_bytes() ? " (max_bytes " + util::human_bytes(*top.max_bytes()) + ")" : "") + ": ";
  for (std::size_t i = 1; i < placement.fastest_in.size(); ++i) {
    if (placement.fastest_in[i] > 0)
      out += std::to_string(placement.fastest_in[i]) + " remain cached in tier '" + cache.tiers()[i]->name() + "', ";
  }
  out += std::to_string(placement.nowhere) + (placement.nowhere == 1 ? " is" : " are") + " cached nowhere";
  return out;
}

// The counts of the report from the outcomes, where the shards are now, and the backfill.
void tally(WarmReport& report, const ShardCacheHierarchy& cache, const std::vector<WarmShardOutcome>& outcomes,
           const ShardPlacement& placement) {
  std::map<std::string, WarmTierReport> by_tier;
  for (const auto& tier : cache.tiers()) by_tier[tier->name()].tier = tier->name();
  for (const auto& outcome : outcomes) {
    if (outcome.error) {
      ++report.failed;
      report.failures.push_back(WarmShardFailure{outcome.shard_index, *outcome.error});
      continue;
    }
    report.size += outcome.served->size;
    switch (outcome.served->source) {
      case ServedFrom::hit: ++by_tier[outcome.served->tier].hits; break;
      case ServedFrom::promoted:
        // A hit of the slower tier it came from (a bucket, also after waiting on another VM's lease) and a
        // promotion into the tier it is in now.
        if (auto found = by_tier.find(outcome.served->found_in); found != by_tier.end()) ++found->second.hits;
        ++by_tier[outcome.served->tier].promoted_into;
        break;
      case ServedFrom::fetched:
        ++report.origin_shards;
        report.origin_size += outcome.served->size;
        break;
    }
  }
  for (std::size_t i = 0; i < cache.tiers().size(); ++i) {
    WarmTierReport row = by_tier[cache.tiers()[i]->name()];
    row.cached = placement.fastest_in[i];
    if (cache.tiers()[i]->as_local() != nullptr) row.held = placement.held_locally[i];
    report.tiers.push_back(std::move(row));
  }
  report.not_cached = placement.nowhere;
}

// The backfill's rows into the report: each writable remote tier's `uploads` and `held`, and their sum (see
// WarmReport::uploads; `queued` is what the upload queue counted during the warm, before the backfill).
void tally_uploads(WarmReport& report, const ShardCacheHierarchy& cache,
                   const std::vector<std::vector<TierBackfill>>& backfills, const std::vector<std::uint64_t>& before,
                   const UploadSummary& queued) {
  const std::vector<std::uint64_t> after = upload_counts(cache);
  UploadSummary sum;
  sum.already_present = queued.already_present;
  sum.pending = queued.pending;
  for (std::size_t i = 0; i < cache.tiers().size(); ++i) {
    if (!writable_remote(*cache.tiers()[i])) continue;
    WarmTierUploads row = tier_uploads(backfills, i, after[i] - before[i]);
    sum.uploaded += row.uploaded;
    sum.failed += row.failed;
    sum.skipped += row.skipped;
    report.tiers[i].held = row.uploaded + row.already_present;
    report.tiers[i].uploads = std::move(row);
  }
  report.uploads = sum;
}

// "tier 'region' holds 2 of the 8 shards: 6 skipped (tier down: ...)", for each writable remote tier that misses
// shards, joined by "; "; empty when none does.
std::string describe_missing_uploads(const WarmReport& report) {
  std::string out;
  for (const auto& tier : report.tiers) {
    if (!tier.uploads || tier.uploads->failed + tier.uploads->skipped == 0) continue;
    const WarmTierUploads& up = *tier.uploads;
    if (!out.empty()) out += "; ";
    out += "tier '" + tier.tier + "' holds " + std::to_string(tier.held.value_or(0)) + " of the " +
           std::to_string(report.shards) + " shards:";
    if (up.failed > 0) out += " " + std::to_string(up.failed) + " failed (" + up.failed_reason.value_or("") + ")";
    if (up.failed > 0 && up.skipped > 0) out += ",";
    if (up.skipped > 0) out += " " + std::to_string(up.skipped) + " skipped (" + up.skipped_reason.value_or("") + ")";
  }
  return out;
}

std::optional<Error> outcome_of(WarmReport& report, const ShardCacheHierarchy& cache, const ShardPlacement& placement,
                                AllowPartial allow_partial) {
  if (report.failed > 0) {
    return Error{ErrorCode::remote, std::to_string(report.failed) + " of " + std::to_string(report.shards) +
                                        " shards could not be warmed"};
  }
  if (placement.fastest_in.front() < report.shards) {
    report.partial = describe_partial(cache, placement, report.shards);
    if (allow_partial == AllowPartial::no) {
      return Error{ErrorCode::capacity, *report.partial +
                                            "; raise max_bytes or add a tier, or pass --allow-partial to accept a "
                                            "partly warmed cache"};
    }
  }
  const std::string missing = describe_missing_uploads(report);
  if (missing.empty()) return std::nullopt;
  report.partial = report.partial ? *report.partial + "; " + missing : missing;
  if (allow_partial == AllowPartial::yes) return std::nullopt;
  return Error{ErrorCode::remote, missing +
                                      "; run warm again once the tier works (it uploads the missing shards from the "
                                      "local copy), or pass --allow-partial to accept it"};
}

}  // namespace

Result<WarmReport> warm(const WarmRequest& request) {
  const auto started = Clock::now();
  auto setup = ops::set_up_warm(request);
  if (!setup) return std::move(setup).error();
  std::unique_ptr<MetricsTextfile> textfile;  // its last write, at the end of this call, follows the uploads
  if (request.metrics_textfile) {
    auto started_file = MetricsTextfile::start(setup->cache, *request.metrics_textfile);
    if (!started_file) return std::move(started_file).error();
    textfile = std::move(*started_file);
  }
  WarmObserver silent;
  WarmObserver& observer = request.observer ? *request.observer : silent;
  const Manifest& manifest = setup->dataset.manifest;
  const std::vector<std::uint64_t> uploads_before = upload_counts(*setup->cache);
  const UploadSummary queued_before = setup->cache->flush_uploads(Milliseconds{0});  // the totals so far, no wait
  observer.started(manifest.shards.size());
  ops::RegionWait region(*setup, request.share);
  const std::vector<WarmShardOutcome> outcomes = warm_every_shard(*setup, request, observer, region);
  observer.finished();

  // The uploads to remote tiers go on in the background: wait for them, then backfill what is still missing, so
  // that the report says where the shards are and what went up.
  const std::optional<UploadSummary> queued = wait_for_uploads(*setup->cache);
  std::vector<std::vector<TierBackfill>> backfills;
  if (queued && !stop_requested(request)) backfills = backfill_all(*setup, request);
  setup->cache->flush_stats();
  if (stop_requested(request)) return stopped_error("warm");

  WarmReport report;
  report.dataset = manifest.name.full();
  report.revision = manifest.revision;
  report.keys = setup->dataset.keys;
  report.shards = manifest.shards.size();
  // Eviction may have removed shards warmed earlier in this run: what counts is where they are now.
  const ShardPlacement placement = place_all(*setup);
  tally(report, *setup->cache, outcomes, placement);
  if (queued) {
    UploadSummary during = *queued;
    during.already_present -= queued_before.already_present;
    tally_uploads(report, *setup->cache, backfills, uploads_before, during);
  }
  report.share = region.report();
  report.elapsed = Clock::now() - started;
  report.error = outcome_of(report, *setup->cache, placement, request.allow_partial);
  return report;
}

}  // namespace datavo
