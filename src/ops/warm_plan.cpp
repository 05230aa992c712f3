#include "datavo/warm.hpp"
#include "ops/warm_setup.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

PlannedShard plan_one(const ops::WarmSetup& setup, std::size_t position) {
  const ManifestShard& shard = setup.dataset.manifest.shards[position];
  const ShardKey key = setup.key(position);
  PlannedShard planned{shard.index, key.hash, shard.samples.size(), std::nullopt, std::nullopt};
  auto where = setup.cache->locate(key);
  if (!where) {
    LOG_WARNING("shard " << shard.index << ": cannot tell which tier holds it: " << where.error().message);
  } else if (*where) {
    planned.tier = (*where)->tier_name;
    planned.size = (*where)->size;
  }
  return planned;
}

}  // namespace

Result<WarmPlan> plan_warm(const WarmRequest& request) {
  auto setup = ops::set_up_warm(request);
  if (!setup) return std::move(setup).error();
  WarmPlan plan;
  plan.dataset = setup->dataset.manifest.name.full();
  plan.revision = setup->dataset.manifest.revision;
  plan.keys = setup->dataset.keys;
  for (std::size_t position = 0; position < setup->dataset.manifest.shards.size(); ++position) {
    PlannedShard planned = plan_one(*setup, position);
    if (planned.tier) {
      ++plan.cached_shards;
      plan.cached_size += planned.size.value_or(Bytes{0});
    } else {
      ++plan.shards_to_fetch;
    }
    plan.shards.push_back(std::move(planned));
  }
  return plan;
}

}  // namespace datavo
