// The tier interface that every cache tier implements, and the handle through which readers hold a shard.
//
// A tier holds shards by ShardKey. Folder tiers (folder_tier.hpp) are directly readable; remote tiers (S3, GCS,
// Azure Blob, and the in-memory test double) are not, and the hierarchy materializes their hits into a folder
// tier. Contract shared by every tier:
//   - A miss is a value (false / std::nullopt), never an Error.
//   - A failure is an Error; no exception escapes a tier method.
//   - Installs are all-or-nothing: a reader never sees a partial entry under its key.
//   - Every method is safe to call from several threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/access.hpp"
#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/fetcher.hpp"
#include "datavo/lease.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

class FolderTier;

// An open, read-only local shard file. Owns its file descriptor and closes it on destruction. The bytes stay
// readable through fd() after the entry is evicted or removed, so a reader that holds a handle never fails.
// Movable, not copyable. Not thread-safe (use one handle per thread, or synchronise).
class ShardHandle {
 public:
  ShardHandle() = default;
  ShardHandle(int fd, std::string path, Bytes size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~ShardHandle();
  ShardHandle(ShardHandle&& other) noexcept;
  ShardHandle& operator=(ShardHandle&& other) noexcept;
  ShardHandle(const ShardHandle&) = delete;
  ShardHandle& operator=(const ShardHandle&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The path the entry was opened at. It may no longer exist (evicted); read through fd() instead.
  const std::string& path() const { return path_; }
  Bytes size() const { return size_; }

 private:
  int fd_ = -1;
  std::string path_;
  Bytes size_;
};

// The per-tier counters, each written once here: X(name, type, meaning). TierStats, TierCounters, their
// arithmetic, the persisted .stats.json and the CLI's JSON are all generated from this list.
#define DATAVO_TIER_STATS(X)                                                                      \
  X(hits, std::uint64_t, "lookups this tier served")                                              \
  X(misses, std::uint64_t, "lookups this tier could not serve")                                   \
  X(promotions, std::uint64_t, "entries copied into this tier from a slower tier")                \
  X(installs, std::uint64_t, "entries installed into this tier after an origin fetch")            \
  X(capacity_skips, std::uint64_t, "installs skipped because the shard is larger than max_bytes") \
  X(evictions, std::uint64_t, "entries removed by LRU, max_age or rm")                            \
  X(quarantined, std::uint64_t, "damaged entries moved aside on a hit or by verify")              \
  X(errors, std::uint64_t, "failures that were degraded to a miss or a skip")                     \
  X(uploads, std::uint64_t, "background uploads that completed (remote tiers)")                   \
  X(upload_failures, std::uint64_t, "background uploads that failed (remote tiers)")              \
  X(bytes_served, Bytes, "bytes handed to readers from this tier")                                \
  X(bytes_installed, Bytes, "bytes of promotions and installs")

namespace detail {
inline std::uint64_t stat_count(std::uint64_t value) { return value; }
inline std::uint64_t stat_count(Bytes value) { return value.count(); }
template <typename T>
T stat_from_count(std::uint64_t count) {
  return T{count};
}
}  // namespace detail

// Cumulative per-tier counters (cf. zarr's cache_info, with a typed return).
struct TierStats {
#define DATAVO_TIER_STATS_MEMBER(name, type, meaning) type name{};
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_MEMBER)
#undef DATAVO_TIER_STATS_MEMBER

  TierStats& operator+=(const TierStats& other);
  bool empty() const;  // every counter is zero
  double hit_rate() const { return hits + misses == 0 ? 0.0 : double(hits) / double(hits + misses); }
  // Calls f(name, value as a count) for every counter, in the order above.
  template <typename F>
  void for_each(F&& f) const {
#define DATAVO_TIER_STATS_VISIT(name, type, meaning) f(#name, detail::stat_count(name));
    DATAVO_TIER_STATS(DATAVO_TIER_STATS_VISIT)
#undef DATAVO_TIER_STATS_VISIT
  }
  // Sets the counter called `name` (false when there is none).
  bool set(std::string_view name, std::uint64_t count);
};

// Thread-safe counters behind TierStats.
struct TierCounters {
#define DATAVO_TIER_STATS_ATOMIC(name, type, meaning) std::atomic<std::uint64_t> name{0};
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_ATOMIC)
#undef DATAVO_TIER_STATS_ATOMIC
  TierStats snapshot() const;
  // Returns the counts and zeroes them atomically per field.
  TierStats take();
};

struct TierUsage {
  Bytes used;                 // every byte under the tier (all instances, staging and sidecars included)
  std::uint64_t entries = 0;  // committed entries, all instances
};

struct EntryInfo {
  std::string instance;
  ContentHash hash;
  Bytes size;
  std::chrono::system_clock::time_point last_access;  // mtime for folder tiers
};

// Whether a write to an existing key replaces it. Content-addressed entries never need replacing.
enum class InstallOutcome { installed, already_present };

// One probe of `datavo cache check`.
struct CheckStep {
  std::string name;  // "credentials", "put", "get", "conditional put", "delete", "write", ...
  bool ok = false;
  std::string detail;  // what happened; why not, when it failed
};
struct CheckReport {
  std::vector<CheckStep> steps;
  bool readable = false;
  bool writable = false;
  std::vector<std::string> warnings;  // works, but not fully (e.g. conditional writes ignored)
};

// When an upload to a remote tier runs: after the local install, in the hierarchy's bounded background queue
// (the reader gets its local path at once), or before get_or_fetch() returns.
enum class UploadMode { background, sync };
const char* to_string(UploadMode mode);

class Tier {
 public:
  virtual ~Tier() = default;

  virtual const std::string& name() const = 0;
  // "folder", "memory", "s3", "gcs" or "azure_blob".
  virtual std::string_view type() const = 0;
  // The capacity; std::nullopt means unbounded.
  virtual std::optional<Bytes> max_bytes() const = 0;
  // True only for tiers whose entries are local files (folder tiers).
  virtual bool supports_direct_read() const = 0;
  // A read-only tier serves hits and is never written to or evicted from.
  virtual bool read_only() const = 0;
  // A human-readable location (a directory, a bucket URL) for `datavo cache info`.
  virtual std::string location() const = 0;

  // Whether a shard of `size` bytes could be installed here at all (writable and within max_bytes).
  bool can_hold(Bytes size) const;

  // Whether the tier holds `key`, without reading it (a HEAD request for remote tiers).
  virtual Result<bool> contains(const ShardKey& key) = 0;
  // Copies the entry for `key` into `sink` and returns what the tier recorded about its bytes (size, SHA-256), so
  // that the caller can check them before installing them anywhere; nullopt on a miss. For a remote tier this is
  // the lookup: one request, whose 404 is the miss. The sink may be restarted and written positionally.
  virtual Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) = 0;
  // Stores the bytes readable from `source` under `key`. `digest` is their SHA-256, already verified.
  virtual Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) = 0;
  // Removes the entry; false when there was none.
  virtual Result<bool> remove(const ShardKey& key) = 0;
  virtual Result<TierUsage> usage() = 0;
  // Every entry of every instance.
  virtual Result<std::vector<EntryInfo>> list() = 0;

  // This process's counters for this tier.
  TierCounters& counters() { return counters_; }
  const TierCounters& counters() const { return counters_; }

  // The folder tier behind this tier, or nullptr when it is not one.
  virtual FolderTier* as_folder() { return nullptr; }
  // How the hierarchy installs into this tier: remote tiers upload in the background unless configured
  // `upload: sync`; local tiers are always written before the read returns.
  virtual UploadMode upload_mode() const { return UploadMode::sync; }
  // Cross-VM single flight (leases in a bucket), or nullptr when the tier offers none.
  virtual RemoteCoordination* coordination() { return nullptr; }
  // Probes whether the tier can be read and written (`datavo cache check`), leaving nothing behind.
  virtual CheckReport check() = 0;

 private:
  TierCounters counters_;
};

}  // namespace datavo
