// What every cloud tier (S3, GCS, Azure Blob) shares: its options as shards.yaml gives them, and the names of its
// objects. The remote-tier layer that implements them is internal (src/tier/cloud/); each backend's header
// declares only its options and its factory (s3_tier.hpp, gcs_tier.hpp, azure_blob_tier.hpp).
//
// Object names (docs/config.md, "Cloud tiers"):
//   [<prefix>/]<instance>/<content_hash>.tar          an entry
//   [<prefix>/]<instance>/.leases/<content_hash>      a lease: the VM fetching that shard from the origin
// with object metadata datavo-sha256 (hex) and datavo-size (decimal).
//
// Thread safety: values only.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "datavo/content_hash.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo {

struct RemoteTierOptions {
  std::string name;
  // Normalised: no leading or trailing '/', no "..", "//" or control characters (the config loader refuses them).
  std::optional<std::string> prefix;
  // Informational: shards larger than this are not stored here (the bucket's lifecycle rules evict, not us).
  std::optional<Bytes> max_bytes;
  Access access = Access::read_write;
  // Objects above part_size are read with parallel ranged GETs and written as multipart (or block) uploads of
  // parts of this size (GCS: resumable above 8 MiB even when part_size is larger, in one chunk then).
  Bytes part_size = MiB(16);
  std::size_t concurrency = 8;
  UploadMode upload = UploadMode::background;
  // Cross-VM single flight: a full miss takes a lease object in the bucket before calling the origin, so that
  // one VM per region fetches a shard. Needs a server that honours conditional writes.
  bool single_flight = true;
  // A lease not renewed for this long is taken over by a waiting VM; its holder renews it every third of it.
  Seconds lease_duration{60};
  TransportOptions transport;
};

// A lease on one shard in a bucket: while it is held, other VMs wait for the object instead of calling the origin.
// Renewed in the background while held; released (deleted) on destruction. Thread-safe.
class Lease {
 public:
  virtual ~Lease() = default;
};

struct LeaseAttempt {
  std::unique_ptr<Lease> held;                    // set when this process now holds the lease
  std::string holder;                             // otherwise who does ("<host> <pid>"), for messages
  std::chrono::system_clock::time_point expires;  // when that holder's lease runs out unless renewed
};

// Cross-VM single flight through one bucket (Tier::coordination()). Thread-safe.
class RemoteCoordination {
 public:
  virtual ~RemoteCoordination() = default;
  // Takes the lease of `key` when it is free or its holder's has expired (a conditional create: of several VMs,
  // one wins); otherwise says who holds it. An Error when the bucket cannot say: the caller then fetches without.
  virtual Result<LeaseAttempt> try_lease(const ShardKey& key) = 0;
};

// The smallest part_size any of the three services accepts for a multipart part (S3: 5 MiB).
inline constexpr Bytes k_min_part_size = MiB(5);
inline constexpr std::size_t k_max_concurrency = 64;

}  // namespace datavo
