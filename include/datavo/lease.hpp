// Cross-machine single flight: a lease on one shard, held by the one machine of a region that fetches it from the
// origin while the others wait for its upload. A tier that can coordinate machines (a bucket that honours
// conditional writes) offers it through Tier::coordination(); the hierarchy takes and waits on leases.
//
// Thread safety: every class here is thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// A lease on one shard: while it is held, other machines wait for the object instead of calling the origin.
// Renewed in the background while held; released (deleted) on destruction.
class Lease {
 public:
  virtual ~Lease() = default;
};

struct LeaseAttempt {
  std::unique_ptr<Lease> held;                    // set when this process now holds the lease
  std::string holder;                             // otherwise who does ("<host> <pid>"), for messages
  std::chrono::system_clock::time_point expires;  // when that holder's lease runs out unless renewed
};

// Cross-machine single flight through one shared tier.
class RemoteCoordination {
 public:
  virtual ~RemoteCoordination() = default;
  // Takes the lease of `key` when it is free or its holder's has expired (a conditional create: of several
  // machines, one wins); otherwise says who holds it. An Error when the tier cannot say: the caller then fetches
  // without one.
  virtual Result<LeaseAttempt> try_lease(const ShardKey& key) = 0;
  // Who holds the lease of `key` now, read without taking it (one small request): what a machine that waits for
  // the holder's upload polls. nullopt when nobody does (released, or never taken); `held` is never set. An Error
  // when the tier cannot say.
  virtual Result<std::optional<LeaseAttempt>> lease_holder(const ShardKey& key) = 0;
  // How often a holder renews its lease. Every machine of a region shares the tier's configuration, so a waiting
  // machine paces its polls by its own.
  virtual Milliseconds renewal_period() const = 0;
};

}  // namespace datavo
