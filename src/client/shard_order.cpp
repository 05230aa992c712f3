#include <limits>
#include <numeric>

#include "client/random.hpp"
#include "datavo/sample_stream.hpp"

namespace datavo {

std::vector<std::size_t> epoch_order(std::size_t shard_count, ShardOrder order, std::uint64_t shuffle_seed,
                                     std::uint64_t epoch) {
  std::vector<std::size_t> positions(shard_count);
  std::iota(positions.begin(), positions.end(), std::size_t{0});
  if (order == ShardOrder::shuffled && shard_count > 1) {
    client::SplitMix64 random = client::seeded_generator(shuffle_seed, epoch);
    for (std::size_t i = shard_count - 1; i > 0; --i) {
      const auto j = static_cast<std::size_t>(random.below(std::uint64_t(i) + 1));
      std::swap(positions[i], positions[j]);
    }
  }
  return positions;
}

Result<std::vector<std::size_t>> assign_shards(std::size_t shard_count, const SampleStreamOptions& options) {
  if (options.world_size == 0) return Error{ErrorCode::invalid_argument, "world_size must be at least 1"};
  if (options.num_workers == 0) return Error{ErrorCode::invalid_argument, "num_workers must be at least 1"};
  if (options.rank >= options.world_size) {
    return Error{ErrorCode::invalid_argument, "rank " + std::to_string(options.rank) + " is not below world_size " +
                                                  std::to_string(options.world_size)};
  }
  if (options.worker >= options.num_workers) {
    return Error{ErrorCode::invalid_argument, "worker " + std::to_string(options.worker) +
                                                  " is not below num_workers " + std::to_string(options.num_workers)};
  }
  if (options.world_size > std::numeric_limits<std::size_t>::max() / options.num_workers)
    return Error{ErrorCode::invalid_argument, "world_size * num_workers overflows"};
  const std::vector<std::size_t> order = epoch_order(shard_count, options.order, options.shuffle_seed, options.epoch);
  const std::size_t consumers = options.world_size * options.num_workers;
  const std::size_t me = options.rank * options.num_workers + options.worker;
  std::vector<std::size_t> mine;
  for (std::size_t p = me; p < order.size(); p += consumers) mine.push_back(order[p]);
  return mine;
}

}  // namespace datavo
