// OrderHints: a SampleStream's order hints (docs/hierarchy.md, "Order hints"), turned into places in the LRU order
// of the local tiers (ShardCacheHierarchy::place).
//
// The scale: in this epoch's order of all N shards (every consumer's, before the split), the shard at place u is
// needed u shards after the start of the epoch; the shard at place v of the next epoch's order, N + v shards after
// it. A shard needed d shards after the start is placed as if it had last been read at anchor - d * step, the
// anchor being when the stream began. So the further its next use, the older it looks, and LRU by mtime evicts the
// shard needed furthest in the future first: Belady's rule, followed by every process that evicts. The places of
// one stream form one consistent order; those of the consumers of one job agree as far as their anchors do (the
// skew of their start times, over `step`, in shards).
//
// Thread safety: immutable after construction; the methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "datavo/units.hpp"

namespace datavo::client {

class OrderHints {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  // `this_epoch` and `next_epoch` are the orders of all shards (positions into the manifest, each a permutation of
  // 0..N-1; epoch_order()). REQUIRES: both of one size; step > 0.
  OrderHints(const std::vector<std::size_t>& this_epoch, const std::vector<std::size_t>& next_epoch, Milliseconds step,
             TimePoint anchor);

  // The place of manifest shard `position` while it is still to be read in this epoch.
  TimePoint before_use(std::size_t position) const;
  // Its place once this epoch has read it: by its place in the next epoch's order.
  TimePoint after_use(std::size_t position) const;

 private:
  TimePoint at_distance(std::size_t shards) const;
  std::vector<std::size_t> this_place_;  // by manifest position: its place in this epoch's order
  std::vector<std::size_t> next_place_;  // and in the next epoch's
  Milliseconds step_;
  TimePoint anchor_;
};

}  // namespace datavo::client
