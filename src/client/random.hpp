// The client's one pseudo-random generator, for the shard order (shard_order.cpp) and the sample shuffle buffer
// (sample_stream.cpp). Internal to src/client.
//
// splitmix64 (Steele, Lea, Flood 2014) with an unbiased bounded draw, rather than std::mt19937_64 with a
// std::uniform_int_distribution, whose results differ between standard libraries: every machine of a job must
// compute the same order from the same seed. Not for cryptography. Not thread-safe (a value per user).
#pragma once

#include <cstdint>

namespace datavo::client {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), without modulo bias. REQUIRES: bound > 0.
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

// A generator seeded by (seed, epoch): two seeds that differ only in the epoch give unrelated sequences. `stream`
// separates the generators of different uses (and consumers) of one (seed, epoch).
inline SplitMix64 seeded_generator(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream = 0) {
  SplitMix64 mixer(seed);
  const std::uint64_t state = mixer.next() ^ SplitMix64(epoch ^ 0x5DEECE66DULL).next();
  if (stream == 0) return SplitMix64(state);
  return SplitMix64(state ^ SplitMix64(stream).next());
}

}  // namespace datavo::client
