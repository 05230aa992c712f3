// Hedged ranged reads of a cloud tier (docs/config.md, "Hedged reads"; issue 19): a ranged GET that has gone a
// deadline without receiving a byte is sent a second time, the first complete answer is used, and the other request
// is abandoned. Three parts, each usable on its own:
//   - HedgeDeadline: how long a GET may be silent. A fixed delay, or a percentile (p95 by default) of the time to
//     first byte (request to first body byte) of the tier's last k_hedge_window ranged GETs, never under
//     k_hedge_floor, and k_hedge_default_after until k_hedge_min_samples were seen. A GET that lost to its hedge
//     before its first byte counts with the time it had waited when it lost (its first byte took at least that).
//   - HedgeBudget: how many hedges. A token bucket: every ranged GET earns max_fraction of a hedge, a hedge spends
//     one, the bucket starts with one (a process may hedge its first stall) and holds at most k_hedge_burst. Over
//     any run, hedges <= 1 + max_fraction * GETs.
//   - HedgedReader: the race. The first request runs on a thread of its own and writes in place, into the sink
//     of the caller (the region of the range it owns); the hedge writes into a buffer of its own. The deadline is
//     on silence, not on the whole transfer: it runs from the request until its first byte, then from each byte
//     to the next, so that a transfer that is flowing, however slowly, is never hedged (a slow link is not cured
//     by a second request on the same link), and both a late first byte and a stall mid-body are. The hedge asks
//     for the whole range again, whatever the first request had received. A GET is hedged at most once: the
//     decision is taken the first time its silence reaches the deadline. The first success wins, under one lock:
//     when the hedge wins, the first request is fenced off (it can write nothing more: its next write fails) and
//     stopped, and the sink is restarted and given the hedge's bytes whole; when the first wins, the hedge's
//     buffer is dropped. So the sink never holds bytes of two answers. The loser is stopped through a
//     util::StopToken (the transport ends its transfer: a curl abort from the progress callback, within a second
//     while it waits, at its next write while bytes arrive) and its thread is joined later, by the next read or by
//     the reader's destructor, so that the winner is not held up by it. A first request that is retrying after a
//     failed attempt when its deadline comes (the transport's backoff after a 503, a 429 or a reset) is not
//     hedged: its server answered, it is not slow but failing or throttling, and a second request would add load
//     where Retry-After asked for less. A failed attempt does not end the race while the other may still
//     succeed; when both fail, the first's Error is returned.
//
// Thread safety: every method may be called from several threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "datavo/cloud_tier.hpp"
#include "datavo/tier.hpp"
#include "tier/cloud/blob_backend.hpp"

namespace datavo::cloud {

// The ranged GETs the deadline is estimated from.
inline constexpr std::size_t k_hedge_window = 256;
// The most hedges the budget saves up: a burst of stalls after a long quiet run is not all hedged.
inline constexpr double k_hedge_burst = 10.0;

class HedgeDeadline {
 public:
  explicit HedgeDeadline(const HedgePolicy& policy) : fixed_(policy.after), percentile_(policy.percentile) {}
  // One ranged GET received its first body byte `first_byte` after its request.
  void record(Milliseconds first_byte);
  // How long a ranged GET may go without receiving a byte (before its first, or between two) before it is hedged.
  Milliseconds current() const;

 private:
  const std::optional<Milliseconds> fixed_;
  const int percentile_;
  mutable std::mutex mu_;
  std::vector<Milliseconds> window_;  // a ring of at most k_hedge_window samples; guarded by mu_
  std::size_t next_ = 0;              // guarded by mu_
};

class HedgeBudget {
 public:
  explicit HedgeBudget(double max_fraction) : fraction_(max_fraction) {}
  // One ranged GET was made.
  void earn();
  // Takes one hedge; false when the budget has none.
  bool try_spend();

 private:
  const double fraction_;
  std::mutex mu_;
  double tokens_ = 1.0;  // guarded by mu_
};

class HedgedReader {
 public:
  // `counters` (the tier's) count hedges_sent and hedges_won; REQUIRES: they outlive the reader.
  HedgedReader(const HedgePolicy& policy, std::shared_ptr<BlobBackend> backend, TierCounters& counters);
  // Stops the requests that lost and waits for their threads.
  ~HedgedReader();
  HedgedReader(const HedgedReader&) = delete;
  HedgedReader& operator=(const HedgedReader&) = delete;

  // BlobBackend::get of `range` of `name`, hedged (see the top of this file); with Hedging::off, that get itself.
  // REQUIRES: `sink` holds nothing of this range yet, and its restart() discards what it received so that the
  // next write goes to the range's first byte again (an OffsetSink, or an appending sink at its start).
  Result<std::optional<ObjectInfo>> get(const std::string& name, ByteRange range, const std::string* pin,
                                        ByteSink& sink);

  const HedgeDeadline& deadline() const { return deadline_; }

 private:
  struct Race;
  struct Straggler {
    std::thread thread;
    std::shared_ptr<Race> race;      // what the thread uses
    const std::atomic<bool>* ended;  // in *race: set as the thread's last act
  };
  // Joins `thread` when it has ended, else keeps it (a request that lost) until a later call or the destructor.
  void keep_or_join(std::thread thread, const std::shared_ptr<Race>& race, const std::atomic<bool>& ended);
  // Waits until the first request of `race` is done (false) or has been silent for the deadline (true).
  bool wait_for_silence(Race& race, std::unique_lock<std::mutex>& lock);
  Result<std::optional<ObjectInfo>> settle(Race& race, ByteSink& sink, bool hedged);

  const HedgePolicy policy_;
  const std::shared_ptr<BlobBackend> backend_;
  TierCounters& counters_;
  HedgeDeadline deadline_;
  HedgeBudget budget_;
  std::mutex stragglers_mu_;
  std::vector<Straggler> stragglers_;  // guarded by stragglers_mu_
};

}  // namespace datavo::cloud
