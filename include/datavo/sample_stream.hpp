// SampleStream: iterate the samples of one key group of a dataset, shard by shard, through the cache hierarchy.
//
//   auto stream = datavo::SampleStream::from_dataset("voice_demo_v1/train", {.keys = {"audio.wav"}});
//   if (!stream) return stream.error();
//   while (true) {
//     auto sample = stream->next();
//     if (!sample) return sample.error();     // names the shard, the member and the byte offset
//     if (!*sample) break;                    // the end
//     std::span<const std::byte> wav = (*sample)->field("audio.wav");   // zero-copy: points into the shard mmap
//   }
//
// What it does:
//   - Resolves the dataset with resolve_dataset() (dataset.hpp), as `datavo warm` does: the manifest through the
//     OriginClient (a pinned revision or DATAVO_OFFLINE=1 with a warm manifest cache makes no request; otherwise one
//     (conditional) manifest request) and the key group normalized against it.
//   - Orders the shards: manifest order, or a Fisher-Yates shuffle seeded by (shuffle_seed, epoch), the same on
//     every machine and standard library. Then keeps position p of that order iff
//     p % (world_size * num_workers) == rank * num_workers + worker, so that the consumers of one (seed, epoch)
//     partition the shards exactly.
//   - Gets each shard with ShardCacheHierarchy::get_or_fetch: a hit is read in place with no request at all; a
//     miss calls OriginClient::shard_fetcher (ticket, verified download, install). Single flight across the
//     processes of a machine comes from the hierarchy.
//   - Background prefetcher threads fetch and map the next shards while the current one is read, within a window of
//     shards and of bytes (SampleStreamOptions::prefetch_shards and prefetch_budget), up to 4 of them downloading
//     at once (prefetch_shards 0: no thread, each shard is fetched when the reader reaches it). Samples are still
//     yielded in shard order.
//   - Order hints (on by default): the stream tells the local tiers when it will next need each of its shards, so
//     that LRU eviction, in every process, evicts the shard needed furthest in the future (docs/hierarchy.md,
//     "Order hints"): at the start, its shards of this epoch are placed by their place in the epoch's order; a
//     shard fetched ahead is placed at its own place, after the shards read before it; a shard read to its end is
//     placed by its place in the next epoch's order (seed, epoch + 1).
//   - ReadMode::streamed (SampleStreamOptions::read_mode): a shard no folder tier holds is read from a remote tier
//     that holds it, or else from the origin's download, through verified chunks in a bounded window, one shard at
//     a time, and no local copy is written; its samples own copies of their fields. A folder tier's hit is read as
//     below.
//   - Maps each shard read-only (mmap) and yields its samples with TarReader/SampleIterator, zero-copy. Every
//     sample is checked against the manifest: its id, its position and exactly the requested keys.
//   - With `shuffle_buffer` N > 0, draws the samples from a buffer of N instead of yielding them in order (see
//     SampleStreamOptions::shuffle_buffer for the order and the memory it holds).
//
// Errors: from_dataset() fails for bad options, an unknown dataset, revision or key (the errors of dataset.hpp), an
// unreachable server (after the transport's retries) and offline without a cached manifest. next() returns the first
// failure of the shard it reached (a fetch, the mapping or the tar reader, whose messages name the shard, member and
// byte offset); the failure is sticky. No exception escapes.
//
// Thread safety: one thread at a time calls next() of a SampleStream (it is movable, not copyable); stats() and
// cancel() may be called from any thread, also while another one is inside next().
// A SampleView is an independent value: it may be moved to and read from any thread, and it keeps its shard's
// mapping alive after the stream and the cache entry are gone (an evicted entry stays readable through the map).
// Destroying a stream stops the prefetcher (downloads in progress are cancelled at their next chunk) and joins its
// threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// The bytes samples point into: a shard file mapped read-only into memory (unmapped when the last shared_ptr
// goes), or a block of memory it owns (a streamed sample's copy of its fields, ReadMode::streamed). Immutable;
// thread-safe.
class ShardMapping {
 public:
  // Maps the whole file open as `handle`. `name` is used in error messages (e.g. "3 (1d8d….tar)"). An empty
  // file maps to an empty span. io error when mmap fails.
  static Result<std::shared_ptr<const ShardMapping>> map(const ShardHandle& handle, std::string name);
  // Maps `total` bytes of a file that is still being written up to that size (a staging file: reading while
  // fetching), shared, so that bytes written after the map show through it. REQUIRES of the reader: touch only bytes
  // the file already holds (a page past its end faults).
  static Result<std::shared_ptr<const ShardMapping>> map_growing(const ShardHandle& handle, Bytes total,
                                                                 std::string name);
  // Owns `bytes` (of shard `name`).
  static std::shared_ptr<const ShardMapping> own(std::vector<std::byte> bytes, std::string name);
  ~ShardMapping();
  ShardMapping(const ShardMapping&) = delete;
  ShardMapping& operator=(const ShardMapping&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  const std::string& name() const { return name_; }

 private:
  ShardMapping(void* data, std::size_t size, std::string name) : data_(data), size_(size), name_(std::move(name)) {}
  ShardMapping(std::vector<std::byte> owned, std::string name)
      : data_(owned.data()), size_(owned.size()), name_(std::move(name)), owned_(std::move(owned)) {}
  void* data_ = nullptr;  // mapped, unless it is owned_'s
  std::size_t size_ = 0;
  std::string name_;
  std::vector<std::byte> owned_;
};

// One field of a sample: the member "<id>.<key>" of the shard.
struct SampleFieldView {
  std::string key;                  // e.g. "audio.wav"
  std::span<const std::byte> data;  // into SampleView::mapping: valid as long as the SampleView (or a copy) lives
};

// One sample. Holds its shard's mapping (streamed: its own block), so `fields[i].data` stays valid while this value
// (or a copy) exists.
struct SampleView {
  std::string id;
  std::vector<SampleFieldView> fields;  // the requested keys, sorted bytewise
  std::uint64_t shard_index = 0;        // the manifest's shard index
  std::shared_ptr<const ShardMapping> mapping;

  // The data of `key`; an empty span when the sample has no such field.
  std::span<const std::byte> field(std::string_view key) const;
};

// Order of the shards before they are split among consumers.
enum class ShardOrder { manifest, shuffled };
// Whether a stream tells the local tiers when it will next need each shard (docs/hierarchy.md, "Order hints").
enum class OrderHints { off, on };
// Whether a stream reads the samples of a shard it fetches from the origin while the shard arrives
// (docs/hierarchy.md, "Reading while fetching").
enum class ReadWhileFetching { off, on };
// How a stream reads a shard that no folder tier holds (docs/hierarchy.md, "Streamed reads"):
//   cached:   fetch it into the cache hierarchy (verified, installed), then map it: the default.
//   streamed: read its samples straight from the fastest remote tier that holds it, or else from the origin's
//             download, through verified chunks, in a window of memory (SampleStreamOptions::stream_window), and
//             write no local copy (no tier, no staging file). For shuffle-once passes and shards bigger than any
//             folder tier. The hierarchy is still asked first (ShardCacheHierarchy::locate, which never fetches or
//             promotes): a folder tier's hit is read as in the cached mode.
enum class ReadMode { cached, streamed };

struct SampleStreamOptions {
  std::vector<std::string> keys;          // required: the key group to read (any order; de-duplicated)
  std::optional<std::uint64_t> revision;  // nullopt: the latest revision

  // The cache: `cache` when set, else the hierarchy of `cache_config_path` (resolution order of config.hpp).
  std::shared_ptr<ShardCacheHierarchy> cache;
  std::optional<std::string> cache_config_path;

  // The origin: server, token, manifest cache directory, offline mode, instance and transport (see
  // OriginClientOptions; empty fields come from the environment). Ignored when `client` is set.
  OriginClientOptions origin;
  std::shared_ptr<OriginClient> client;

  // Data-parallel split: this consumer reads the shards at positions p with
  // p % (world_size * num_workers) == rank * num_workers + worker. REQUIRES: rank < world_size,
  // worker < num_workers (invalid_argument otherwise).
  std::size_t rank = 0;
  std::size_t world_size = 1;
  std::size_t worker = 0;
  std::size_t num_workers = 1;

  ShardOrder order = ShardOrder::manifest;
  std::uint64_t shuffle_seed = 0;
  std::uint64_t epoch = 0;

  // The prefetch window: the shards fetched ahead of the one being read (up to 4 of them concurrently) are at most
  // `prefetch_shards`, and at most prefetch_budget * C / (local_world_size * num_workers) bytes by the sizes of the
  // shards fetched so far, C being ShardCacheHierarchy::landing_capacity() (the top writable folder tier's
  // max_bytes, else its free space; no byte bound when unknown): every consumer that shares this machine's tiers
  // takes its share of one budget. One shard ahead is always allowed. 0 shards: no prefetcher thread.
  // REQUIRES: 0 < prefetch_budget <= 0.5, so that with order hints a prefetched shard never makes the tier evict a
  // shard read before it (the tier evicts to 90% of max_bytes, furthest next use first; docs/hierarchy.md).
  std::size_t prefetch_shards = 8;
  double prefetch_budget = 0.1;
  // The ranks of this job on this machine (torchrun's LOCAL_WORLD_SIZE), which share its tiers; nullopt:
  // world_size, as if every rank were here. REQUIRES: 1 <= local_world_size <= world_size.
  std::optional<std::size_t> local_world_size;

  // Order hints (see the top of this file). A shard needed d shards from the start of this epoch's order of all
  // shards (every consumer's) is placed as if it had last been read d * hint_step before the stream began: set
  // hint_step to about the time the whole job takes per shard, so that the job's shards mix with other readers'
  // LRU entries by time (docs/hierarchy.md). Every consumer of a job must use the same step. REQUIRES: > 0.
  OrderHints order_hints = OrderHints::on;
  Milliseconds hint_step{100};

  // The sample shuffle buffer: 0 (the default) yields the samples of each shard in their order in the shard. N > 0
  // first fills a buffer with this consumer's next N samples, then yields a sample drawn uniformly from the buffer
  // and refills its place with the next one read, until the shards are done and the buffer is drained. So every
  // sample still comes exactly once per pass, and batches mix samples of up to N / (samples per shard) shards.
  // Seeded by (shuffle_seed, epoch) and this consumer's (rank, worker): the same on every machine, a new order per
  // epoch; independent of `order`. The first sample waits for the first N to be read.
  // Memory: at most N SampleViews (an id, the field spans, a shared_ptr; about 100 bytes plus the id and the keys
  // each), and they keep mapped every shard that one of them comes from: at most min(N, shards of this consumer)
  // mappings, plus the shard being read and those prefetched. Mappings are read-only file pages (the page cache,
  // which the kernel may reclaim), not the process's own memory.
  std::size_t shuffle_buffer = 0;

  // Reading while fetching (on by default): a shard that this stream fetches from the origin is handed to next() as
  // soon as its first chunk is verified against the ticket's chunk digests, and its samples come out of the staging
  // file as the chunks that hold them (and the header after them) are verified; the install is unchanged. A shard
  // whose bytes fail a check is fetched once more into a new staging file and the stream goes on where it was; no
  // sample from unverified bytes is handed out. Without chunk digests (an origin from before them), and for hits,
  // the shard is read once installed, as with `off`. Each shard is fetched on a thread of its own, at most 4 at
  // once per stream. The streams of one process reading the same shard at once follow the one that fetches it;
  // other processes (single-flight waiters) still wait for the install.
  ReadWhileFetching read_while_fetching = ReadWhileFetching::on;

  // The read mode (see ReadMode). In the streamed mode:
  //   - a shard no folder tier holds is read with at most `stream_window` bytes of it in memory: the
  //     download waits (backpressure) while the window is full, and the bytes of every sample handed out are freed.
  //     Each sample handed out owns a copy of its fields (SampleView::mapping is a block of its own), so it stays
  //     valid after the window moves on.
  //   - only bytes whose chunk matched the ticket's chunk digest (docs/protocol.md, "Chunk digests") reach the tar
  //     reader: a corrupt chunk k ends the shard with an integrity Error naming chunk k, and no sample with a byte
  //     in chunk k or later is handed out. The whole shard's size and SHA-256 are still checked: a mismatch is an
  //     Error after the shard's last sample.
  //   - REQUIRES: stream_window >= 2 chunks of the ticket (the origin's are 4 MiB; an Error names both sizes),
  //     and a window that holds each sample, the first member of the next one and the chunk being verified (a
  //     sample too large for it is an Error naming the shard, the sample's byte offset and the window).
  //   - where the bytes come from: the fastest remote tier that holds the shard (Tier::read_into, one request; the
  //     origin's ticket is asked for its chunk digests, which bind the tier's bytes to the content hash), else the
  //     origin. A remote tier's read that fails (a chunk that does not match, the object gone, the tier down) is a
  //     WARNING, and the origin's download goes on from the last verified chunk (Range).
  //   - a ticket without chunk digests (an origin from before them) is an unsupported Error for a shard no tier
  //     holds: it cannot be streamed with bounded memory; read it in the cached mode. A remote tier's shard whose
  //     digests cannot be had (that ticket, or none: the origin unreachable) is read in the cached mode instead,
  //     through a local copy, with a WARNING that says why.
  //   - one shard at a time: no shard is fetched ahead (prefetch_shards and prefetch_budget are unused), so the
  //     memory is one window plus the samples held (the shuffle buffer's included, as copies).
  //   - a cut transfer resumes with Range and a stalled one times out as every download does (the transport's
  //     retries, then an Error).
  //   - the memory: a ring of min(stream_window, shard size) bytes, all of it resident while a shard streams.
  ReadMode read_mode = ReadMode::cached;
  Bytes stream_window = MiB(16);
};

// How the shards of one tier were served, as seen by this stream.
struct TierReadStats {
  std::string tier;
  std::uint64_t hits = 0;        // shards this tier held when asked
  std::uint64_t misses = 0;      // shards it did not hold (served by a slower tier or the origin)
  std::uint64_t promotions = 0;  // shards copied into it from a slower tier and read from it (the topmost copy)
  Bytes served_bytes;            // bytes of the shards it held (its hits, promoted ones included; the origin's are
                                 // SampleStreamStats::origin_bytes)
};

struct SampleStreamStats {
  std::uint64_t samples = 0;         // samples yielded by next() (read from shards: these plus shuffle_buffered)
  std::uint64_t shards = 0;          // shards opened by next() so far
  Bytes field_bytes;                 // payload bytes of the fields yielded
  std::uint64_t origin_fetches = 0;  // shards this stream fetched from the origin
  Bytes origin_bytes;
  std::vector<TierReadStats> tiers;            // fastest first
  std::size_t max_prefetched = 0;              // peak count of shards fetched ahead (never above prefetch_shards)
  Bytes max_prefetched_bytes;                  // peak bytes of shards fetched ahead and waiting to be read
  std::optional<Bytes> prefetch_window_bytes;  // the byte bound of the prefetch window; nullopt: none
  std::uint64_t hints_placed = 0;              // order hints that a local tier took (ShardCacheHierarchy::place)
  // How long next() waited for the next shard to arrive, in total: the stream's input stall. Near zero when the
  // cache and the prefetcher keep ahead of the reader; most of the run when the origin is the bottleneck.
  std::chrono::nanoseconds shard_wait{0};
  // The same, less the wait for the first shard (which nothing can prefetch): the stall once the stream is going.
  std::chrono::nanoseconds shard_wait_after_first{0};
  // Reading while fetching: samples read out of a shard's staging file before it was installed, and the shards
  // read so (some of whose samples came before their install).
  std::uint64_t samples_before_install = 0;
  std::uint64_t shards_read_while_fetching = 0;
  // Shards fetched again after their bytes failed a check while being read (reading while fetching).
  std::uint64_t refetches = 0;
  std::size_t shuffle_buffered = 0;      // samples read from shards and held in the shuffle buffer now
  std::size_t max_shuffle_buffered = 0;  // its peak (never above SampleStreamOptions::shuffle_buffer)
  // ReadMode::streamed: shards read through a window (from a remote tier, which counts a hit in `tiers`, or from the
  // origin, which counts a miss of every tier), the bytes taken into the windows, and the peak bytes one window held
  // (never above SampleStreamOptions::stream_window).
  std::uint64_t streamed_shards = 0;
  Bytes streamed_bytes;
  Bytes max_stream_buffered;
};

class SampleStream {
 public:
  // See the top of this file. `dataset` is "<dataset>/<split>".
  static Result<SampleStream> from_dataset(std::string_view dataset, SampleStreamOptions options);

  SampleStream(SampleStream&&) noexcept;
  SampleStream& operator=(SampleStream&&) noexcept;
  ~SampleStream();

  // The next sample; std::nullopt after the last one of this consumer's shards. REQUIRES (for every method): the
  // stream was not moved from.
  Result<std::optional<SampleView>> next();

  // Stops the stream, from any thread: downloads in progress are cancelled at their next chunk, no shard is started,
  // and next() (one blocked waiting for a shard included) returns a cancelled Error from then on, sticky. For a
  // consumer that reads on another thread and must stop it without waiting for a fetch; the stream must still
  // outlive that thread's next(). Idempotent.
  void cancel();

  const Manifest& manifest() const;
  // The normalized key group.
  const std::vector<std::string>& keys() const;
  // This consumer's shards: manifest shard indices, in reading order.
  const std::vector<std::uint64_t>& shard_indices() const;
  SampleStreamStats stats() const;

 private:
  struct Impl;
  explicit SampleStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The order of all `shard_count` shards in `epoch` (positions into manifest.shards), before they are split among
// consumers: manifest order, or the Fisher-Yates shuffle seeded by (shuffle_seed, epoch).
std::vector<std::size_t> epoch_order(std::size_t shard_count, ShardOrder order, std::uint64_t shuffle_seed,
                                     std::uint64_t epoch);

// The positions (into manifest.shards) that consumer (rank, worker) reads, in order; see SampleStreamOptions.
// invalid_argument for an out-of-range rank or worker or a zero world_size / num_workers.
Result<std::vector<std::size_t>> assign_shards(std::size_t shard_count, const SampleStreamOptions& options);

}  // namespace datavo
