// UploadQueue: the hierarchy's bounded background queue of uploads to remote tiers. A read that installed a shard
// locally returns at once; the upload of its bytes to the region's bucket goes on here, from a descriptor of its
// own on the committed entry (which stays readable if the entry is evicted meanwhile). A failed upload is a
// WARNING and a count, never a failed read. Internal to the hierarchy.
//
// Bounds: k_workers uploads run at once; push() blocks while k_max_pending jobs wait, so that a fast reader
// cannot pile up descriptors and memory behind a slow bucket.
//
// Cancellation (util/cancel.hpp): no upload starts after it; the one under way stops at its next chunk and aborts
// what it began; every job's lease, queued or under way, is released (util::CleanupScope), and the job counts as
// failed.
//
// Thread safety: all methods are thread-safe. The destructor waits for the jobs under way and drops the rest
// (counted as failed, their leases released): call flush() first to wait for them, with a bound.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "datavo/cloud_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tier.hpp"

namespace datavo::core {

class UploadQueue {
 public:
  static constexpr std::size_t k_workers = 2;
  static constexpr std::size_t k_max_pending = 16;

  struct Job {
    std::shared_ptr<Tier> tier;
    ShardKey key;
    ShardHandle source;
    Sha256 digest;
    std::unique_ptr<Lease> lease;  // released once the upload is done (the other VMs then find the object)
  };

  UploadQueue() = default;
  ~UploadQueue();
  UploadQueue(const UploadQueue&) = delete;
  UploadQueue& operator=(const UploadQueue&) = delete;

  // Queues `job`, starting the workers at first use. Blocks while the queue is full.
  void push(Job job);
  // Waits until every job pushed so far has finished, or `bound` has passed (then `pending` says how many have
  // not). Returns the totals since this queue was made.
  UploadSummary flush(std::chrono::milliseconds bound);
  UploadSummary summary();

  // Runs one upload now, on the caller's thread (upload: sync), and counts it like a queued one.
  void run(Job job);
  // Counts an outcome of ShardCacheHierarchy::backfill() into `tier`, which uploads on its own.
  void count(const Tier& tier, BackfillOutcome outcome);
  // The uploads into `tier` that stored its object (queued, run() and counted backfills) since this queue was made.
  std::uint64_t uploaded_into(const Tier& tier);
  // Whether an upload of `key` to `tier` by this queue (or one remembered by remember_stored()) succeeded: then the
  // tier holds the shard without asking it, which backfill() needs when the tier has gone down since. At most
  // k_max_remembered keys are remembered, then none more (a key not remembered is asked for, or skipped).
  bool stored(const Tier& tier, const ShardKey& key);
  void remember_stored(const Tier& tier, const ShardKey& key);
  static constexpr std::size_t k_max_remembered = 1 << 18;  // at most about 40 MiB

 private:
  void work();
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;                                  // guarded by mu_
  std::size_t running_ = 0;                               // guarded by mu_
  bool stopping_ = false;                                 // guarded by mu_
  UploadSummary totals_;                                  // guarded by mu_ (pending unused)
  std::map<const Tier*, std::uint64_t> uploaded_into_;    // guarded by mu_
  std::set<std::pair<const Tier*, std::string>> stored_;  // guarded by mu_: "<instance>/<hash>" per tier
  std::vector<std::thread> workers_;
};

}  // namespace datavo::core
