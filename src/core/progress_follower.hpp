// ProgressFollower: reading while another process fetches (docs/hierarchy.md, "Reading while fetching"). Internal
// to src/core (get_or_fetch).
//
// While a call of get_or_fetch waits for the single-flight lock of a key, the lock's holder may be another process
// of this host landing the shard. What it publishes (ShardLock::publish_staging / publish_verified, read with
// LocalTier::landing_progress) is passed to the call's LandingObserver as if it were the call's own landing: its
// staging file (opened read only, its inode checked: LocalTier::open_landing) and its verified prefix. So a reader
// starts on the holder's verified chunks instead of waiting for its install.
//
// The observer sees what it sees of a landing of its own: staging() when the holder's staging file is new to it
// (the first, or a new one after the holder restarted, failed or died and another process took over), verified()
// each time the prefix of that file grew. A prefix of one file never goes back (a published staging file is never
// truncated), so a smaller one (a holder that continued the file of one that died, reporting from 0) is not passed
// on. Records of this process are not followed (its streams share in memory), nor are records that cannot be read
// whole.
//
// Thread safety: polls on a thread of its own, every k_poll, until destroyed; the observer's calls come from that
// thread, one at a time, and end before the destructor returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "datavo/hierarchy.hpp"
#include "datavo/tier.hpp"

namespace datavo::core {

class ProgressFollower {
 public:
  static constexpr std::chrono::milliseconds k_poll{20};
  // REQUIRES: `tier`, `key` and `observer` outlive the follower.
  ProgressFollower(LocalTier& tier, const ShardKey& key, LandingObserver& observer);
  // Stops polling and joins: no call of the observer after this.
  ~ProgressFollower();
  ProgressFollower(const ProgressFollower&) = delete;
  ProgressFollower& operator=(const ProgressFollower&) = delete;

 private:
  void run();
  void poll();

  LocalTier& tier_;
  const ShardKey& key_;
  LandingObserver& observer_;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> file_;  // device and inode of the file followed
  Bytes told_;                                                   // its prefix the observer has
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace datavo::core
