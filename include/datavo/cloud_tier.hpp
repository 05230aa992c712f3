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

#include "datavo/access.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/tier.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo {

// Hedged reads (docs/config.md, "Hedged reads"): a ranged GET of an entry (a part of a large object, or the
// whole of a small one) that has gone `after` without receiving a byte (before its first byte, or stalled
// mid-body) is sent a second time, for the whole range; the first complete answer is used and the other request is
// abandoned. A transfer that is flowing, however slowly, is never hedged. At most `max_fraction` of the ranged
// GETs are hedged. On by default for every cloud tier; `hedge: false` turns it off per tier.
enum class Hedging { off, on };
struct HedgePolicy {
  Hedging mode = Hedging::on;
  // A fixed delay; nullopt: the `percentile`-th percentile of the time to first byte (from the request to its
  // first body byte) of the tier's recent ranged GETs, at least k_hedge_floor, and k_hedge_default_after until
  // there are k_hedge_min_samples of them.
  std::optional<Milliseconds> after;
  int percentile = 95;  // 50..99
  // Hedges per ranged GET, over the life of the process: at most one plus this fraction of the GETs made.
  double max_fraction = 0.05;
};
inline constexpr Milliseconds k_hedge_floor{50};
inline constexpr Milliseconds k_hedge_default_after{1000};
inline constexpr std::size_t k_hedge_min_samples = 16;

struct CloudTierOptions {
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
  // `datavo cache gc` deletes the objects last modified longer ago than this (sizes are left to the bucket's
  // lifecycle rules). Reads do not check it: an object is served until gc (or a lifecycle rule) removes it.
  std::optional<Seconds> max_age;
  HedgePolicy hedge;
  TransportOptions transport;
};

// The smallest part_size any of the three services accepts for a multipart part (S3: 5 MiB).
inline constexpr Bytes k_min_part_size = MiB(5);
inline constexpr std::size_t k_max_concurrency = 64;

}  // namespace datavo
