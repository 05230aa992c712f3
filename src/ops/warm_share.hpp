// RegionWait: a region's share in one warm (datavo/warm.hpp, "A region's share"). It decides which shards warm()
// defers while the region's coordinating tier is down. Once the workers are done, it waits for the region: it
// uploads this VM's own share and reads the deferred shards once their owners have uploaded them. Internal to
// warm().
//
// Thread safety: guard()'s fetchers and deferred() are called from the worker threads, several at once; the
// constructor, wait() and report() from warm()'s thread, after the workers have finished.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "datavo/fetcher.hpp"
#include "datavo/warm.hpp"
#include "ops/warm_setup.hpp"

namespace datavo::ops {

class RegionWait {
 public:
  // `setup` must outlive this object. With `share` nullopt nothing is deferred and wait() returns at once.
  RegionWait(const WarmSetup& setup, std::optional<RegionShare> share);

  // Asks the coordinating tier once, before the workers start (one small request): when it cannot answer, the
  // outage is seen from the start, and every shard of another member is deferred without a request. Without it a
  // short outage would end while each VM's first requests are still being retried, and the leases taken then would
  // let a VM fetch a shard that its owner fetched during the outage. An Error only for a cancellation.
  Result<void> look_at_tier();

  // The fetcher warm() gives the hierarchy for the shard at `position`: `origin` itself when the shard is this VM's
  // (or there is no share, or no tier coordinates). For a shard of another member, a fetcher that asks the
  // coordinating tier who holds the shard's lease first (one small request, made only on a full miss): the origin
  // is called when a live lease is held (the hierarchy takes it before calling the fetcher); when the tier cannot
  // answer or nobody holds it (the hierarchy could not take it), the shard is deferred (deferred(position) is true
  // from then on) and the fetcher fails with `remote` instead of calling the origin. Once the outage is seen
  // (outage_seen()) every shard of another member is deferred without a request: its owner may hold it from the
  // outage and not have uploaded it yet. A cancellation is passed on.
  Fetcher guard(std::size_t position, Fetcher origin);
  bool deferred(std::size_t position) const;
  bool outage_seen() const;

  // Waits for the region (see warm.hpp), polling with backoff (250 ms doubling to 2 s), until the own share is in
  // every writable remote tier and every deferred shard has been read from one, or RegionShare::wait has passed
  // since the outage was first seen (since this call when it was not). Calls `arrived` for each deferred shard
  // read from a remote tier. Returns the positions of the deferred shards still missing (manifest order), for
  // warm() to fetch from the origin; an Error only for a cancellation (util/cancel.hpp, or `stop` answering true).
  Result<std::vector<std::size_t>> wait(const std::function<void(WarmShardOutcome)>& arrived,
                                        const std::function<bool()>& stop);

  // The shards deferred so far, and how long wait() would wait for them from now (zero when it would not wait).
  std::size_t deferred_count() const;
  Seconds time_left() const;

  // Counts `fetched` shards as fetched from the origin after the wait.
  void fetched_after_wait(std::size_t fetched) { fetched_after_wait_ += fetched; }
  // nullopt without a share.
  std::optional<WarmShareReport> report() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Deferrals;  // the positions deferred and when the outage was first seen, behind a mutex

  // When wait() gives up: RegionShare::wait after the outage was first seen, or after `unless_seen` when it was not.
  Clock::time_point deadline(Clock::time_point unless_seen) const;
  // Records the outage (once, with a WARNING): from now on other members' shards are deferred.
  void note_down(const Error& why);
  // Backfills the own shards not yet known to be in every writable remote tier; true when they all are.
  Result<bool> upload_own_share(std::vector<bool>& confirmed);
  // Reads the deferred shards still pending from the remote tiers; removes those read from `pending`.
  Result<void> read_arrived(std::vector<std::size_t>& pending, const std::function<void(WarmShardOutcome)>& arrived);

  const WarmSetup& setup_;
  std::optional<RegionShare> share_;
  Tier* coordinating_ = nullptr;  // the first writable remote tier that offers leases; nullptr: none
  std::shared_ptr<Deferrals> deferrals_;
  std::uint64_t from_region_ = 0;
  std::uint64_t fetched_after_wait_ = 0;
  std::chrono::duration<double> waited_{0};
};

}  // namespace datavo::ops
