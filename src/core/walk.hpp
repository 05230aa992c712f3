// Walk: one call's way through the tiers of a ShardCacheHierarchy (get(), get_or_fetch(); hierarchy.hpp has the
// rules). Internal to src/core.
//
// Two words, each in its own sense:
//   - promote: copy a hit into the faster tiers above the tier that served it (counted in their `promotions`, and
//     the read is ServedFrom::promoted). A hit on a local tier is promoted by copying its file (promote()).
//   - materialize: download a hit on a remote tier into a local tier, so that the reader gets a file
//     (materialize()); the downloaded copy is then promoted like any other hit, the landing tier by the rename that
//     commits it.
//
// One staging path, land(), takes the bytes of a remote hit (materialize) and of an origin fetch (fetch()) alike:
// for each writable local tier in order (the landing tiers), begin a ShardTransaction (a tier without room for an
// expected size refuses at once), fill it from the source, verify the bytes against what the caller expects and what
// the source reports, then install: the landing tier by commit, the other tiers by copy (local) or upload (remote).
// A landing tier that fails (no room, a write or read-back error) is degraded and the next one tried; the source's
// own failure (a fetch error, bytes that do not verify) ends the landing.
//
// One way to degrade a tier, degrade(): counted in its `errors`, fed to its breaker, and reported with one WARNING
// while the breaker is closed; a cancelled request (ErrorCode::cancelled) is none of these, since a cancellation
// stops every tier at once and the command reports it. The failures of landing tiers are held until the outcome is
// known: when no landing tier can stage the shard, the call's Error names each tier's cause (staging_failed()) and no
// WARNING repeats it; otherwise they are logged as soon as a landing tier takes the bytes, or when the call ends
// (finish(), or the destructor).
//
// Thread safety: one Walk per call and thread. The Impl it shares (breakers, upload queue) is thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/breaker.hpp"
#include "core/upload_queue.hpp"
#include "datavo/hierarchy.hpp"

namespace datavo {

// The state a hierarchy keeps across calls.
struct ShardCacheHierarchy::Impl {
  std::mutex flush_mu;
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();
  // One per tier, made at construction: lookups need no lock to find theirs.
  std::unordered_map<const Tier*, std::unique_ptr<core::Breaker>> breakers;
  core::UploadQueue uploads;
  // The topmost writable local tier, which keeps the remote tiers' counters (nullptr: none can).
  LocalTier* stats_keeper = nullptr;

  core::Breaker& breaker(const Tier& tier) { return *breakers.at(&tier); }
};

namespace core {

// "tier '<name>' (<type>)", as every message of the hierarchy names a tier.
std::string describe(const Tier& tier);

// Whether a lookup counts the misses and touches the entries it finds (the first lookup of a call), or only looks
// (the re-check after waiting for the single-flight lock, which counts a hit itself).
enum class CountMisses { yes, no };
// Which tiers a walk looks in. The re-check after taking the single-flight lock only needs the local ones: what
// another process installed while we waited is in a local tier, and asking every remote tier again costs a request
// each.
enum class Scope { all_tiers, local_tiers };
// When degrade() logs its WARNING: at once, or with the outcome of the landing under way (see the top).
enum class Report { now, with_outcome };

class Source;

class Walk {
 public:
  // `expected`: what the caller knows about the bytes; bytes that do not match it are never installed.
  // REQUIRES: `tiers`, `key` and `impl` outlive the Walk.
  Walk(const std::vector<std::shared_ptr<Tier>>& tiers, const ShardKey& key, ShardCacheHierarchy::Impl& impl,
       const Expectation& expected = {});
  // Logs the held WARNINGs that finish() did not drop.
  ~Walk();
  Walk(const Walk&) = delete;
  Walk& operator=(const Walk&) = delete;

  const std::vector<std::shared_ptr<Tier>>& tiers() const { return tiers_; }
  const ShardKey& key() const { return key_; }
  const Expectation& expected() const { return expected_; }
  ShardCacheHierarchy::Impl& impl() { return impl_; }

  // The one way a tier is degraded (see the top): "<tier>: <what> failed, skipping it: <why>".
  void degrade(Tier& tier, std::string_view what, const Error& error, Report report = Report::now);
  // A remote object whose bytes do not match what they were checked against (`why`, an integrity Error): counted in
  // the tier's `errors` and `quarantined`, and deleted from a writable tier, with a WARNING.
  void drop_corrupt(Tier& remote, const Error& why);
  // The Error of a shard that no landing tier could stage: "<prefix>no folder tier could stage shard <hash>: <each
  // held cause>", with the last cause's code and errno (`code` instead, when given). The causes it names are not
  // logged when finish() sees this Error returned.
  Error staging_failed(const std::string& prefix = {}, std::optional<ErrorCode> code = std::nullopt);
  // Whether landing failures are held (see degrade()).
  bool landing_failures_held() const { return !held_.empty(); }
  // Ends the call: held WARNINGs are logged, except those named by `result`'s Error. Returns `result`.
  template <typename T>
  Result<T> finish(Result<T> result) {
    settle(result ? nullptr : &result.error());
    return result;
  }

  // Finds the key in the first tier that has it and promotes it upward; nullopt on a miss everywhere. A remote tier
  // is asked once: its read_into() is the lookup and the download (a miss is its 404).
  Result<std::optional<FetchResult>> find(CountMisses count_misses, Scope scope = Scope::all_tiers);
  // Looks the key up in remote tier `remote_index` by landing its bytes in the writable local tiers above it, then
  // installs them into the tiers above. nullopt on a miss, and when the object does not match its metadata or the
  // caller's expectation (it is then deleted from the tier, when writable). capacity when nowhere above can take a
  // hit.
  Result<std::optional<FetchResult>> materialize(std::size_t remote_index, CountMisses count_misses);
  // Takes the single-flight lock of the key in `local`, one fetch per key across the threads and processes of this
  // machine. nullptr when it cannot be taken (the tier is degraded: at worst two fetches of one shard); cancelled
  // when the wait is (a reader that stopped waiting says nothing about the tier).
  Result<std::unique_ptr<ShardLock>> lock_single_flight(LocalTier& local);
  // The caller holds the single-flight lock of the key: materialize() does not take it again, and a landing may
  // continue a download that a writer that died left behind.
  void set_lock_held() { lock_held_ = true; }
  // Calls `fetcher` through land() and installs the bytes into every tier. `lease` (the cross-VM lease of
  // `lease_tier`) is released after the upload to that tier, or at the end when there is none. `observer` (may be
  // nullptr) is told of each staging file and of its verified prefix (LandingObserver), and so is `lock` (the
  // single-flight lock held for the call, may be nullptr), which publishes them to the waiters of other processes.
  Result<FetchResult> fetch(const Fetcher& fetcher, std::unique_ptr<Lease> lease, const Tier* lease_tier,
                            LandingObserver* observer = nullptr, ShardLock* lock = nullptr);

 private:
  struct Held {
    const Tier* tier;
    std::string text;  // "<tier>: <what> failed, skipping it: <why>"
    bool warn;         // its breaker was closed
    Error error;
  };
  void settle(const Error* returned);
  // The one staging path (see the top): lands the bytes of `source` in the first writable local tier before `end`
  // that can stage them, then installs them into the tiers before `end` (`lease` as fetch() says). nullopt when the
  // source does not have the shard or failed in a way that degrades it to a miss; otherwise what `source` makes of
  // its failure, of no landing tier staging the bytes, or of none accepting them.
  Result<std::optional<FetchResult>> land(Source& source, std::size_t end, std::unique_ptr<Lease> lease,
                                          const Tier* lease_tier);
  // The single-flight lock of a remote hit, in the topmost writable local tier above it, and the re-check of the
  // local tiers above once it is held: a hit there (another thread or process materialized it) is returned.
  Result<std::optional<FetchResult>> lock_and_recheck(std::size_t remote_index, std::unique_ptr<ShardLock>& lock);
  // Installs the verified bytes of `staged` (in `landing`) into every tier before `end` that can hold them and
  // returns the topmost copy: `landing` by commit, the others by copy or upload.
  Result<FetchResult> install(LocalTier& landing, std::unique_ptr<ShardTransaction> staged, const Sha256& digest,
                              std::size_t end, ServedFrom how, std::unique_ptr<Lease> lease, const Tier* lease_tier);
  // Copies `source` into tier `index`: now for local tiers and `upload: sync`, else through the background queue.
  void install_into(std::size_t index, const ShardHandle& source, const Sha256& digest, ServedFrom how,
                    std::unique_ptr<Lease> lease, const char* what);
  // Promotes a hit on local tier `hit_index` into every faster tier that can hold it.
  Result<std::optional<FetchResult>> promote(std::size_t hit_index, ShardHandle hit);
  void count_install(Tier& tier, Bytes size, ServedFrom how);
  void warn_capacity_skip(Tier& tier, Bytes size);

  const std::vector<std::shared_ptr<Tier>>& tiers_;
  const ShardKey& key_;
  ShardCacheHierarchy::Impl& impl_;
  const Expectation expected_;
  bool lock_held_ = false;
  std::vector<Held> held_;     // landing failures whose outcome is not known yet, one per tier
  std::vector<Held> named_;    // named by the last staging_failed() Error
  std::string named_message_;  // that Error's message
};

}  // namespace core
}  // namespace datavo
