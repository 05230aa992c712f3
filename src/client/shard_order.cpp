#include <limits>
#include <numeric>

#include "datavo/sample_stream.hpp"

namespace datavo {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): our own generator and Fisher-Yates rather than std::shuffle with
// std::mt19937_64, whose distribution step differs between standard libraries: every machine of a job must
// compute the same order.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) without modulo bias. REQUIRES: bound > 0.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const std::uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace

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
  std::vector<std::size_t> order(shard_count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (options.order == ShardOrder::shuffled && shard_count > 1) {
    // Two seeds that differ only in the epoch must give unrelated orders: mix both into one state.
    SplitMix64 mixer(options.shuffle_seed);
    SplitMix64 random(mixer.next() ^ SplitMix64(options.epoch ^ 0x5DEECE66DULL).next());
    for (std::size_t i = shard_count - 1; i > 0; --i) {
      const auto j = static_cast<std::size_t>(random.below(std::uint64_t(i) + 1));
      std::swap(order[i], order[j]);
    }
  }
  const std::size_t consumers = options.world_size * options.num_workers;
  const std::size_t me = options.rank * options.num_workers + options.worker;
  std::vector<std::size_t> mine;
  for (std::size_t p = me; p < order.size(); p += consumers) mine.push_back(order[p]);
  return mine;
}

}  // namespace datavo
