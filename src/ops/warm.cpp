#include "datavo/warm.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "datavo/metrics.hpp"
#include "datavo/operations.hpp"
#include "ops/warm_setup.hpp"
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
    return ok();
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override {
    observer_.origin_bytes(-std::int64_t(inner_.written().count()));
    return inner_.restart();
  }

 private:
  ByteSink& inner_;
  WarmObserver& observer_;
  const std::atomic<bool>* stop_;
};

bool stop_requested(const WarmRequest& request) {
  return util::cancel_requested() || (request.stop && request.stop->load(std::memory_order_relaxed));
}

Error stopped_error(std::string_view what) {
  if (util::cancel_requested()) return util::cancelled_error(what);
  return Error{ErrorCode::cancelled, std::string(what) + ": stopped by the caller"};
}

WarmShardOutcome warm_one(const ops::WarmSetup& setup, std::size_t position, WarmObserver& observer,
                          const std::atomic<bool>* stop) {
  const Manifest& manifest = setup.dataset.manifest;
  WarmShardOutcome outcome;
  outcome.position = position;
  outcome.shard_index = manifest.shards[position].index;
  Fetcher origin = setup.client->shard_fetcher(manifest, position, setup.dataset.keys);
  Fetcher counted = [&origin, &observer, stop](ByteSink& sink) -> Result<Expectation> {
    CountingSink counting(sink, observer, stop);
    return origin(counting);
  };
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

// Warms every shard on `jobs` threads; the outcomes in manifest order (none for a shard not started because of a
// cancellation).
std::vector<WarmShardOutcome> warm_all(const ops::WarmSetup& setup, const WarmRequest& request,
                                       WarmObserver& observer) {
  const std::size_t total = setup.dataset.manifest.shards.size();
  std::vector<std::optional<WarmShardOutcome>> outcomes(total);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t position = next++; position < total && !stop_requested(request); position = next++) {
      WarmShardOutcome outcome = warm_one(setup, position, observer, request.stop);
      // A shard stopped by an interruption is no outcome of its own: the cancellation is reported once.
      if (!outcome.error || outcome.error->code != ErrorCode::cancelled) observer.shard_done(outcome);
      outcomes[position] = std::move(outcome);
    }
  };
  {
    std::vector<std::jthread> workers;
    for (std::size_t i = 0; i < std::min(request.jobs, std::max<std::size_t>(total, 1)); ++i)
      workers.emplace_back(work);
  }
  std::vector<WarmShardOutcome> done;
  for (auto& outcome : outcomes)
    if (outcome) done.push_back(std::move(*outcome));
  return done;
}

// Where the shards of a warm are once it is done: how many have their fastest copy in each tier, and how many are
// in none.
struct ShardPlacement {
  std::vector<std::uint64_t> fastest_in;  // per tier, fastest first
  std::uint64_t nowhere = 0;
};

ShardPlacement place_all(const ops::WarmSetup& setup) {
  ShardPlacement placement;
  placement.fastest_in.assign(setup.cache->tiers().size(), 0);
  for (std::size_t position = 0; position < setup.dataset.manifest.shards.size(); ++position) {
    auto where = setup.cache->locate(setup.key(position));
    if (where && *where)
      ++placement.fastest_in[(*where)->tier_index];
    else
      ++placement.nowhere;  // a tier that cannot answer holds nothing we could read
  }
  return placement;
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

// The counts of the report from the outcomes and where the shards are now.
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
    report.tiers.push_back(std::move(row));
  }
  report.not_cached = placement.nowhere;
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
  return std::nullopt;
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
  observer.started(manifest.shards.size());
  const std::vector<WarmShardOutcome> outcomes = warm_all(*setup, request, observer);
  observer.finished();

  WarmReport report;
  // The uploads to remote tiers go on in the background: wait for them, so that the report says where the shards
  // are and what went up.
  report.uploads = wait_for_uploads(*setup->cache);
  setup->cache->flush_stats();
  if (stop_requested(request)) return stopped_error("warm");

  report.dataset = manifest.name.full();
  report.revision = manifest.revision;
  report.keys = setup->dataset.keys;
  report.shards = manifest.shards.size();
  // Eviction may have removed shards warmed earlier in this run: what counts is where they are now.
  const ShardPlacement placement = place_all(*setup);
  tally(report, *setup->cache, outcomes, placement);
  report.elapsed = Clock::now() - started;
  report.error = outcome_of(report, *setup->cache, placement, request.allow_partial);
  return report;
}

}  // namespace datavo
