#include "datavo/sample_stream.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <semaphore>
#include <thread>

#include "client/growing_shard.hpp"
#include "client/order_hints.hpp"
#include "client/prefetcher.hpp"
#include "client/random.hpp"
#include "client/streamed_shard.hpp"
#include "datavo/dataset.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tar.hpp"
#include "datavo/tier_registry.hpp"
#include "net/chunk_verifying_sink.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

// Passes bytes through to the hierarchy's sink until the stream is destroyed or cancelled (either flag), so that
// its destructor does not wait for a whole download nobody will read.
class CancellableSink final : public ByteSink {
 public:
  CancellableSink(ByteSink& inner, const std::atomic<bool>& cancelled, const std::atomic<bool>& stream_cancelled)
      : inner_(inner), cancelled_(cancelled), stream_cancelled_(stream_cancelled) {}
  Result<void> write(const void* data, std::size_t size) override {
    if (cancelled_.load(std::memory_order_relaxed) || stream_cancelled_.load(std::memory_order_relaxed))
      return Error{ErrorCode::io, "download cancelled: the SampleStream was cancelled or destroyed"};
    return inner_.write(data, size);
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override { return inner_.restart(); }
  void verified_prefix(Bytes prefix, Bytes total) override { inner_.verified_prefix(prefix, total); }
  Result<void> read_back(std::uint64_t offset, void* out, std::size_t size) override {
    return inner_.read_back(offset, out, size);
  }

 private:
  ByteSink& inner_;
  const std::atomic<bool>& cancelled_;
  const std::atomic<bool>& stream_cancelled_;
};

// Reading while fetching: a get_or_fetch on a thread of its own, watched by `shard`, so that load() can hand the
// shard over once a verified prefix is published. Destruction stops the download at its next write and joins.
struct FetchThread {
  std::shared_ptr<client::GrowingShard> shard;
  std::atomic<bool> stop{false};
  util::StopToken stop_token;  // the thread's StopScope: its waits (another process's lock) and transfers end
  std::thread thread;
  ~FetchThread() {
    stop.store(true);
    // A shard whose bytes have all arrived is left to install, so that the next read of it is a hit.
    if (!shard->all_verified()) stop_token.request_stop();
    if (thread.joinable()) thread.join();
  }
};

// A shard fetched again when its bytes fail a check while a reader is on its verified prefix: once, so that a
// corrupting hop costs one more download and a lying origin still fails.
constexpr int k_refetches = 1;
// How often load() looks at the prefetcher's cancel flag while it waits for a shard's first verified chunk.
constexpr std::chrono::milliseconds k_cancel_poll{50};

// Shards fetched at once by one stream. Each fetch pays a ticket, a hash and an fsync in series, so a few in
// parallel keep a cold read busy; more would mostly hold server workers (8 by default) against other readers.
constexpr std::size_t k_max_parallel_fetches = 4;

struct LoadedShard {
  std::size_t position = 0;
  ShardKey key;
  std::string name;                                 // as in messages: "3 (1d8d….tar)"
  Bytes size;                                       // the shard's size, for the prefetch window
  std::shared_ptr<const ShardMapping> mapping;      // the installed shard; nullptr while it is `growing`
  std::shared_ptr<FetchThread> growing;             // reading while fetching: the shard's fetch, still running
  std::shared_ptr<client::StreamedShard> streamed;  // ReadMode::streamed and no tier held it
};

Result<void> check_window_options(const SampleStreamOptions& options) {
  if (!(options.prefetch_budget > 0 && options.prefetch_budget <= 0.5)) {
    return Error{ErrorCode::invalid_argument,
                 "prefetch_budget must be more than 0 and at most 0.5, not " + std::to_string(options.prefetch_budget)};
  }
  if (options.hint_step <= Milliseconds{0}) return Error{ErrorCode::invalid_argument, "hint_step must be positive"};
  if (options.read_mode == ReadMode::streamed && options.stream_window < k_min_chunk_size + k_min_chunk_size) {
    return Error{ErrorCode::invalid_argument, "stream_window must hold at least 2 chunks (" +
                                                  std::to_string((k_min_chunk_size + k_min_chunk_size).count()) +
                                                  " bytes), not " + std::to_string(options.stream_window.count())};
  }
  if (options.local_world_size && (*options.local_world_size == 0 || *options.local_world_size > options.world_size)) {
    return Error{ErrorCode::invalid_argument, "local_world_size must be from 1 to world_size (" +
                                                  std::to_string(options.world_size) + "), not " +
                                                  std::to_string(*options.local_world_size)};
  }
  return {};
}

}  // namespace

struct SampleStream::Impl {
  std::shared_ptr<OriginClient> client;
  std::shared_ptr<ShardCacheHierarchy> cache;
  Manifest manifest;
  std::vector<std::string> keys;
  std::vector<std::size_t> positions;
  std::vector<std::uint64_t> shard_indices;

  mutable std::mutex stats_mu;  // the prefetcher thread records how shards were served
  SampleStreamStats stats;      // guarded by stats_mu

  // Consumer state.
  std::optional<LoadedShard> current;
  std::optional<SampleIterator> samples;                  // over current->mapping
  std::optional<client::GrowingSamples> growing_samples;  // over current->growing instead
  std::size_t sample_in_shard = 0;
  std::optional<Error> error;
  std::atomic<bool> cancel_requested{false};  // set by cancel(), from any thread
  std::optional<client::OrderHints> hints;    // with OrderHints::on
  ReadMode read_mode = ReadMode::cached;
  Bytes stream_window;
  client::StreamCounters stream_counters;

  // Places `key` in the local tiers' LRU order at `when` (order hints); counts the tiers that took it.
  void place(const ShardKey& key, std::chrono::system_clock::time_point when) {
    const std::size_t placed = cache->place(key, when);
    std::lock_guard lock(stats_mu);
    stats.hints_placed += placed;
  }
  void place_own_shards();
  void start_prefetcher(const SampleStreamOptions& options);

  // The sample shuffle buffer (options.shuffle_buffer); unused when its capacity is 0.
  std::size_t shuffle_capacity = 0;
  std::vector<SampleView> shuffle_buffer;
  bool shards_done = false;  // read_in_order() returned the end
  client::SplitMix64 shuffle_random{0};

  ReadWhileFetching read_while_fetching = ReadWhileFetching::on;
  // Reading while fetching: the downloads in flight, at most k_max_parallel_fetches (their threads outlive load()).
  std::counting_semaphore<> fetch_slots{static_cast<std::ptrdiff_t>(k_max_parallel_fetches)};

  // Last: destroyed (cancelled and joined) before anything its loader uses.
  std::unique_ptr<client::Prefetcher<LoadedShard>> prefetcher;

  // The fetch threads of the shards being read or prefetched use every member: they are joined first.
  ~Impl() {
    prefetcher.reset();
    growing_samples.reset();
    current.reset();
  }

  Result<LoadedShard> load(std::size_t ordinal, const std::atomic<bool>& cancelled);
  // get_or_fetch of the shard at `position`, mapped; `observer` watches the landing (reading while fetching), and
  // with it a shard whose bytes fail a check is fetched again (k_refetches).
  Result<std::shared_ptr<const ShardMapping>> fetch_and_map(
      std::size_t position, const ShardKey& key, const std::atomic<bool>& cancelled, LandingObserver* observer,
      std::optional<Result<FetchResult>> looked_up = std::nullopt);
  Result<LoadedShard> load_growing(std::size_t position, const ShardKey& key, const std::atomic<bool>& cancelled);
  // The fetch thread of load_growing: one download slot, fetch_and_map, the outcome told to the GrowingShard.
  void run_fetch(std::size_t position, const ShardKey& key, FetchThread& job);
  // ReadMode::streamed: a shard no tier holds, read from its download.
  Result<LoadedShard> stream(std::size_t position, const ShardKey& key);
  // ReadMode::streamed: a shard that the remote tier `tier_index` holds (and no faster tier), read from that tier
  // through the chunk digests the tier recorded with it, else those of the origin's ticket. nullopt when neither can
  // be had (an object without them, and the origin unreachable or a ticket without them): the caller then reads the
  // shard in the cached mode, saying why.
  std::optional<LoadedShard> stream_from_tier(std::size_t position, const ShardKey& key, std::size_t tier_index);
  // The chunk digests `tier` recorded with the shard's object, as a ticket without a URL, when there are some that
  // the stream window holds 2 chunks of; nullopt otherwise (saying why at INFO when some were not used).
  std::optional<StreamTicket> tier_chunk_list(std::size_t position, const ShardKey& key, Tier& tier);
  Result<LoadedShard> load_streamed(std::size_t position, const ShardKey& key, const std::atomic<bool>& cancelled);
  void record(const ShardKey& key, const FetchResult& result);
  Result<std::optional<SampleView>> next();
  Result<std::optional<SampleView>> read_in_order();
  Result<std::optional<SampleView>> draw_from_buffer();
  // A sample read out of the staging file of the shard being read (reading while fetching).
  void count_before_install() {
    std::lock_guard lock(stats_mu);
    if (!current_counted_before_install) ++stats.shards_read_while_fetching;
    current_counted_before_install = true;
    ++stats.samples_before_install;
  }
  bool current_counted_before_install = false;
  // Makes `shard` the current one, its samples read by a SampleIterator or, while it arrives, GrowingSamples.
  void open_shard(LoadedShard shard);
  // Waits for the prefetcher's next shard (counted in shard_wait) and opens it; false after the last one.
  Result<bool> open_next_shard();
  Error fail(Error e) {
    error = e;
    return e;
  }
  std::string shard_name(std::size_t position, const ShardKey& key) const {
    return std::to_string(manifest.shards[position].index) + " (" + key.hash.hex() + ".tar)";
  }
  // A shard read from its mapping, or from a window (ReadMode::streamed: its size is not known up front).
  LoadedShard mapped(std::size_t position, const ShardKey& key, std::shared_ptr<const ShardMapping> mapping) const {
    const Bytes size{mapping->bytes().size()};
    return LoadedShard{position, key, shard_name(position, key), size, std::move(mapping), nullptr, nullptr};
  }
  LoadedShard windowed(std::size_t position, const ShardKey& key, std::shared_ptr<client::StreamedShard> shard) const {
    return LoadedShard{position, key, shard_name(position, key), Bytes{0}, nullptr, nullptr, std::move(shard)};
  }
};

Result<LoadedShard> SampleStream::Impl::load(std::size_t ordinal, const std::atomic<bool>& cancelled) {
  const std::size_t position = positions[ordinal];
  const ShardKey key = client->shard_key(manifest, position, keys);
  if (read_mode == ReadMode::streamed) return load_streamed(position, key, cancelled);
  if (read_while_fetching == ReadWhileFetching::on) return load_growing(position, key, cancelled);
  auto mapping = fetch_and_map(position, key, cancelled, nullptr);
  if (!mapping) return std::move(mapping).error();
  return mapped(position, key, std::move(*mapping));
}

// Streamed: the hierarchy is asked without fetching. A local tier's hit is read as in the cached mode; a remote
// tier's is streamed from it, so that no local copy is written.
Result<LoadedShard> SampleStream::Impl::load_streamed(std::size_t position, const ShardKey& key,
                                                      const std::atomic<bool>& cancelled) {
  auto where = cache->locate(key, ShardCacheHierarchy::LocateMode::read);
  if (where && !*where) return stream(position, key);
  if (where && cache->tiers()[(*where)->tier_index]->as_local() == nullptr) {
    if (auto streamed = stream_from_tier(position, key, (*where)->tier_index)) return std::move(*streamed);
  }
  // A local hit, a remote one that cannot be streamed, or a lookup that failed: the cached mode's walk decides.
  auto lookup = cache->get(key);
  if (lookup && !*lookup) return stream(position, key);  // evicted since it was located
  auto looked_up = lookup ? Result<FetchResult>(std::move(**lookup)) : Result<FetchResult>(std::move(lookup).error());
  auto mapping = fetch_and_map(position, key, cancelled, nullptr, std::move(looked_up));
  if (!mapping) return std::move(mapping).error();
  return mapped(position, key, std::move(*mapping));
}

Result<std::shared_ptr<const ShardMapping>> SampleStream::Impl::fetch_and_map(
    std::size_t position, const ShardKey& key, const std::atomic<bool>& cancelled, LandingObserver* observer,
    std::optional<Result<FetchResult>> looked_up) {
  Fetcher origin = client->shard_fetcher(manifest, position, keys);
  Fetcher fetcher = [&origin, &cancelled, this](ByteSink& sink) -> Result<Expectation> {
    CancellableSink guarded(sink, cancelled, cancel_requested);
    return origin(guarded);
  };
  client->remember_shard(manifest, position, keys);  // which dataset and shard the entry is, for `cache ls`
  // The key is known from the manifest alone: a hit never calls the fetcher, so it costs no request.
  auto result = looked_up ? std::move(*looked_up) : cache->get_or_fetch(key, fetcher, {}, observer);
  for (int again = 0; observer != nullptr && again < k_refetches && !result &&
                      result.error().code == ErrorCode::integrity && !cancelled.load() && !cancel_requested.load();
       ++again) {
    LOG_WARNING("shard " << manifest.shards[position].index << " of " << manifest.name.full() << ": "
                         << result.error().message << "; fetching it again");
    {
      std::lock_guard lock(stats_mu);
      ++stats.refetches;
    }
    result = cache->get_or_fetch(key, fetcher, {}, observer);
  }
  if (!result) {
    Error e = std::move(result).error();
    e.message =
        "shard " + std::to_string(manifest.shards[position].index) + " of " + manifest.name.full() + ": " + e.message;
    return e;
  }
  record(key, *result);
  // A shard just landed looks read now; its place is after the shards read before it (a hit has it already).
  if (hints && result->source != ServedFrom::hit) place(key, hints->before_use(position));
  return ShardMapping::map(result->handle, shard_name(position, key));
}

void SampleStream::Impl::run_fetch(std::size_t position, const ShardKey& key, FetchThread& job) {
  util::StopScope scope(job.stop_token);
  // A slot, unless the stream stops first.
  while (!fetch_slots.try_acquire_for(k_cancel_poll)) {
    if (job.stop.load() || cancel_requested.load()) {
      job.shard->fail(Error{ErrorCode::cancelled, "shard " + shard_name(position, key) + ": fetch stopped"});
      return;
    }
  }
  // Another stream of this process fetching the same shard leads: this one follows it while it waits for the lock.
  job.shard->join_flight();
  auto mapping = fetch_and_map(position, key, job.stop, job.shard.get());
  fetch_slots.release();
  if (mapping) {
    job.shard->complete(std::move(*mapping));
  } else {
    job.shard->fail(std::move(mapping).error());
  }
  job.shard->leave_flight();
}

Result<LoadedShard> SampleStream::Impl::load_growing(std::size_t position, const ShardKey& key,
                                                     const std::atomic<bool>& cancelled) {
  auto job = std::make_shared<FetchThread>();
  job->shard =
      std::make_shared<client::GrowingShard>(shard_name(position, key), key.instance.name() + "/" + key.hash.hex());
  job->thread = std::thread([this, position, key, raw = job.get()] { run_fetch(position, key, *raw); });
  // Until the first verified prefix, or the end of the fetch (a hit, a shard without chunk digests, a failure).
  for (;;) {
    auto seen = job->shard->wait_beyond_for(0, k_cancel_poll);
    if (cancelled.load()) return Error{ErrorCode::cancelled, "cancelled"};  // job's destructor stops the download
    if (!seen) continue;
    if (!*seen) return std::move(*seen).error();
    const client::GrowingView& view = **seen;
    if (view.complete) return mapped(position, key, view.mapping);
    const Bytes size{view.mapping->bytes().size()};
    return LoadedShard{position, key, shard_name(position, key), size, nullptr, std::move(job), nullptr};
  }
}

// ReadMode::streamed: a shard no tier holds, read from its download.
Result<LoadedShard> SampleStream::Impl::stream(std::size_t position, const ShardKey& key) {
  {
    std::lock_guard lock(stats_mu);
    for (auto& tier : stats.tiers) ++tier.misses;
    ++stats.streamed_shards;
  }
  auto source = [this, position](const OriginClient::TicketSink& sink_for) {
    return client->fetch_shard(manifest, position, keys, sink_for);
  };
  auto shard = std::make_shared<client::StreamedShard>(source, shard_name(position, key), stream_window,
                                                       cancel_requested, stream_counters);
  return windowed(position, key, std::move(shard));
}

std::optional<StreamTicket> SampleStream::Impl::tier_chunk_list(std::size_t position, const ShardKey& key, Tier& tier) {
  auto recorded = tier.recorded_digests(key);
  std::string why;
  if (!recorded) {
    why = recorded.error().message;
  } else if (!*recorded) {
    return std::nullopt;
  } else if ((*recorded)->chunks.chunk_size.count() > stream_window.count() / 2) {
    why = "its chunks of " + std::to_string((*recorded)->chunks.chunk_size.count()) +
          " bytes do not fit the window twice";
  }
  if (!why.empty()) {
    LOG_INFO("shard " << shard_name(position, key) << ": the chunk digests tier '" << tier.name()
                      << "' recorded are not used (" << why << "); asking the origin for its ticket's");
    return std::nullopt;
  }
  RecordedDigests& digests = **recorded;
  return StreamTicket{key.hash, digests.size, digests.sha256, "", 0, std::move(digests.chunks)};
}

std::optional<LoadedShard> SampleStream::Impl::stream_from_tier(std::size_t position, const ShardKey& key,
                                                                std::size_t tier_index) {
  Tier& tier = *cache->tiers()[tier_index];
  // The object's bytes are checked against the chunk digests the tier recorded with it (the trust of a cached read
  // of that object, and no request to the origin), else against the origin's ticket's (docs/protocol.md, "Where a
  // cloud tier's chunk list lives").
  std::optional<StreamTicket> ticket = tier_chunk_list(position, key, tier);
  const std::string whose = ticket ? "the object's" : "the ticket's";
  std::string why;
  if (!ticket) {
    auto requested = client->request_ticket(manifest, position, keys);
    if (!requested) {
      why = "no ticket from the origin: " + requested.error().message;
    } else if (requested->content_hash != key.hash) {
      why = "the origin's ticket names content hash " + requested->content_hash.hex();
    } else if (!requested->chunks) {
      why = "the origin's ticket carries no chunk digests";
    } else {
      ticket = std::move(*requested);
    }
  }
  if (!why.empty()) {
    LOG_WARNING("shard " << shard_name(position, key) << ": tier '" << tier.name()
                         << "' holds it, but without chunk digests to check its bytes by (" << why
                         << ") it cannot be streamed: reading it in the cached mode, through a local copy");
    return std::nullopt;
  }
  {
    std::lock_guard lock(stats_mu);
    ++stats.streamed_shards;
  }
  // The tier's bytes first; should its read fail (a chunk that does not match, the object gone, the tier down: the
  // hierarchy deals with the tier and says so), the origin's download goes on from the last verified chunk. The
  // stream's figures count the source that served the shard: the tier's hit, or a miss of every tier.
  auto source = [this, position, key, tier_index, ticket = std::move(*ticket), whose,
                 from_tier = true](const OriginClient::TicketSink& sink_for) mutable -> Result<Expectation> {
    if (from_tier) {
      auto sink = sink_for(ticket);
      if (!sink) return std::move(sink).error();
      net::ChunkVerifyingSink verifying(**sink, *ticket.chunks, ticket.size, "content hash " + key.hash.hex(), whose);
      auto read = cache->read_from(tier_index, key, verifying);
      if (read && *read) {
        std::lock_guard lock(stats_mu);
        for (std::size_t i = 0; i < tier_index; ++i) ++stats.tiers[i].misses;
        ++stats.tiers[tier_index].hits;
        stats.tiers[tier_index].served_bytes += ticket.size;
        return Expectation{ticket.size, ticket.sha256};
      }
      if (!read && read.error().code == ErrorCode::cancelled) return std::move(read).error();
      LOG_INFO("streamed read of shard " << shard_name(position, key) << " from tier '"
                                         << cache->tiers()[tier_index]->name()
                                         << "': " << (read ? std::string("the object is gone") : read.error().message)
                                         << "; going on with the origin's download from the last verified chunk");
      from_tier = false;
      std::lock_guard lock(stats_mu);
      for (auto& tier_stats : stats.tiers) ++tier_stats.misses;
    }
    return client->fetch_shard(manifest, position, keys, sink_for);
  };
  auto shard = std::make_shared<client::StreamedShard>(source, shard_name(position, key), stream_window,
                                                       cancel_requested, stream_counters);
  return windowed(position, key, std::move(shard));
}

void SampleStream::Impl::record(const ShardKey& key, const FetchResult& result) {
  const auto& tiers = cache->tiers();
  // Which tier held the shard. A promotion reports the tier it was copied into, so look below it for the source.
  std::optional<std::size_t> hit_tier;
  if (result.source == ServedFrom::hit) hit_tier = result.tier_index;
  if (result.source == ServedFrom::promoted) {
    for (std::size_t i = result.tier_index + 1; i < tiers.size() && !hit_tier; ++i)
      if (auto held = tiers[i]->contains(key); held && *held) hit_tier = i;
  }
  std::lock_guard lock(stats_mu);
  const std::size_t missed_until = hit_tier ? *hit_tier : tiers.size();
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    if (i < missed_until) ++stats.tiers[i].misses;
    if (hit_tier && i == *hit_tier) {
      ++stats.tiers[i].hits;
      stats.tiers[i].served_bytes += result.handle.size();
    }
  }
  if (result.source == ServedFrom::promoted) ++stats.tiers[result.tier_index].promotions;
  if (result.source == ServedFrom::fetched) {
    ++stats.origin_fetches;
    stats.origin_bytes += result.handle.size();
  }
}

Result<std::optional<SampleView>> SampleStream::Impl::next() {
  auto sample = shuffle_capacity == 0 ? read_in_order() : draw_from_buffer();
  if (!sample || !*sample) return sample;
  Bytes bytes;
  for (const auto& f : (*sample)->fields) bytes += Bytes{f.data.size()};
  std::lock_guard lock(stats_mu);
  ++stats.samples;
  stats.field_bytes += bytes;
  stats.shuffle_buffered = shuffle_buffer.size();
  return sample;
}

Result<std::optional<SampleView>> SampleStream::Impl::draw_from_buffer() {
  while (!shards_done && shuffle_buffer.size() < shuffle_capacity) {
    auto sample = read_in_order();
    if (!sample) return std::move(sample).error();
    if (!*sample) {
      shards_done = true;
      break;
    }
    shuffle_buffer.push_back(std::move(**sample));
    std::lock_guard lock(stats_mu);
    stats.max_shuffle_buffered = std::max(stats.max_shuffle_buffered, shuffle_buffer.size());
  }
  if (shuffle_buffer.empty()) return std::optional<SampleView>{};
  const auto drawn = static_cast<std::size_t>(shuffle_random.below(shuffle_buffer.size()));
  std::swap(shuffle_buffer[drawn], shuffle_buffer.back());
  SampleView view = std::move(shuffle_buffer.back());
  shuffle_buffer.pop_back();
  return std::optional<SampleView>{std::move(view)};
}

void SampleStream::Impl::open_shard(LoadedShard shard) {
  current = std::move(shard);
  if (current->growing) {
    growing_samples.emplace(current->growing->shard, current->name, &cancel_requested);
  } else if (current->mapping) {  // a streamed shard yields its samples itself
    samples.emplace(current->mapping->bytes(), current->name);
  }
  sample_in_shard = 0;
  current_counted_before_install = false;
  std::lock_guard lock(stats_mu);
  ++stats.shards;
}

Result<bool> SampleStream::Impl::open_next_shard() {
  const auto wait_started = std::chrono::steady_clock::now();
  auto shard = prefetcher->next();
  const auto waited = std::chrono::steady_clock::now() - wait_started;
  {
    std::lock_guard lock(stats_mu);
    stats.shard_wait += std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
    if (stats.shards > 0) stats.shard_wait_after_first += std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
  }
  if (!shard) return std::move(shard).error();
  if (!*shard) return false;
  open_shard(std::move(**shard));
  return true;
}

Result<std::optional<SampleView>> SampleStream::Impl::read_in_order() {
  if (error) return *error;
  const auto cancelled_error = [&] {
    return Error{ErrorCode::cancelled, "SampleStream of " + manifest.name.full() + ": cancelled"};
  };
  if (cancel_requested.load(std::memory_order_relaxed)) return fail(cancelled_error());
  for (;;) {
    if (!current) {
      auto opened = open_next_shard();
      // After cancel() a failed load (a download cut short, say) is the cancellation's doing.
      if (!opened) return fail(cancel_requested.load() ? cancelled_error() : std::move(opened).error());
      if (!*opened) return std::optional<SampleView>{};
    }
    const ManifestShard& expected = manifest.shards[current->position];
    const std::string& name = current->name;
    auto sample = current->streamed ? current->streamed->next()
                  : growing_samples ? growing_samples->next()
                                    : samples->next();
    // The tar reader's message already names the shard, the member and the byte offset. After cancel() a failed
    // read (a download cut short, say) is the cancellation's doing.
    if (!sample) return fail(cancel_requested.load() ? cancelled_error() : std::move(sample).error());
    if (*sample == nullptr) {
      if (sample_in_shard != expected.samples.size()) {
        return fail(Error{ErrorCode::integrity, "shard " + name + ": the tar holds " + std::to_string(sample_in_shard) +
                                                    " samples, the manifest lists " +
                                                    std::to_string(expected.samples.size())});
      }
      const ShardKey key = current->key;
      const std::size_t position = current->position;
      // Read while fetching, the shard may still be installing: reset() joins its fetch, so that the install and
      // its order hint come before this one.
      samples.reset();
      growing_samples.reset();
      current.reset();
      if (hints) place(key, hints->after_use(position));
      continue;
    }
    const Sample& s = **sample;
    if (sample_in_shard >= expected.samples.size() || s.id != expected.samples[sample_in_shard]) {
      return fail(Error{ErrorCode::integrity,
                        "shard " + name + ": sample " + std::to_string(sample_in_shard) + " is '" + std::string(s.id) +
                            "', the manifest lists " +
                            (sample_in_shard < expected.samples.size() ? "'" + expected.samples[sample_in_shard] + "'"
                                                                       : std::string("no more samples"))});
    }
    SampleView view;
    view.id = std::string(s.id);
    view.shard_index = expected.index;
    view.mapping = current->streamed ? current->streamed->block()
                   : growing_samples ? growing_samples->mapping()
                                     : current->mapping;
    view.fields.reserve(s.fields.size());
    for (const auto& f : s.fields) view.fields.push_back(SampleFieldView{std::string(f.key), f.data});
    std::sort(view.fields.begin(), view.fields.end(),
              [](const SampleFieldView& a, const SampleFieldView& b) { return a.key < b.key; });
    const bool same_keys = std::equal(view.fields.begin(), view.fields.end(), keys.begin(), keys.end(),
                                      [](const SampleFieldView& f, const std::string& k) { return f.key == k; });
    if (!same_keys) {
      std::string got;
      for (const auto& f : view.fields) got += (got.empty() ? "" : ", ") + f.key;
      std::string want;
      for (const auto& k : keys) want += (want.empty() ? "" : ", ") + k;
      return fail(Error{ErrorCode::integrity, "shard " + name + ": sample '" + view.id + "' has keys [" + got +
                                                  "], expected [" + want + "]"});
    }
    ++sample_in_shard;
    if (growing_samples && growing_samples->before_install()) count_before_install();
    return std::optional<SampleView>{std::move(view)};
  }
}

Result<SampleStream> SampleStream::from_dataset(std::string_view dataset, SampleStreamOptions options) {
  auto name = parse_dataset_request(dataset, options.keys);
  if (!name) return std::move(name).error();
  // Bad consumer options fail before any I/O.
  DATAVO_TRY(assign_shards(0, options));
  DATAVO_TRY(check_window_options(options));

  auto impl = std::make_unique<Impl>();
  if (options.client) {
    impl->client = std::move(options.client);
  } else {
    auto client = OriginClient::create(std::move(options.origin));
    if (!client) return std::move(client).error();
    impl->client = std::move(*client);
  }
  if (options.cache) {
    impl->cache = std::move(options.cache);
  } else {
    auto cache = get_default_shard_cache(options.cache_config_path);
    if (!cache) return std::move(cache).error();
    impl->cache = std::move(*cache);
  }
  auto resolved = resolve_dataset(*impl->client, *name, std::move(options.keys), options.revision);
  if (!resolved) return std::move(resolved).error();
  impl->manifest = std::move(resolved->manifest);
  impl->keys = std::move(resolved->keys);
  auto positions = assign_shards(impl->manifest.shards.size(), options);
  if (!positions) return std::move(positions).error();
  impl->positions = std::move(*positions);
  for (std::size_t p : impl->positions) impl->shard_indices.push_back(impl->manifest.shards[p].index);
  impl->shuffle_capacity = options.shuffle_buffer;
  impl->read_while_fetching = options.read_while_fetching;
  impl->read_mode = options.read_mode;
  impl->stream_window = options.stream_window;
  std::size_t my_samples = 0;
  for (std::size_t p : impl->positions) my_samples += impl->manifest.shards[p].samples.size();
  // Never more than this consumer's samples: a buffer larger than the pass simply holds all of it.
  impl->shuffle_buffer.reserve(std::min(options.shuffle_buffer, my_samples));
  // Each consumer draws from its own sequence, so that two workers' buffers do not pick the same slots in step.
  impl->shuffle_random = client::seeded_generator(options.shuffle_seed, options.epoch,
                                                  1 + options.rank * options.num_workers + options.worker);
  for (const auto& tier : impl->cache->tiers())
    impl->stats.tiers.push_back(TierReadStats{tier->name(), 0, 0, 0, Bytes{0}});
  LOG_INFO("reading " << impl->manifest.name.full() << " revision " << impl->manifest.revision << " (manifest "
                      << to_string(resolved->source) << "): " << impl->positions.size() << " of "
                      << impl->manifest.shards.size() << " shards, prefetching " << options.prefetch_shards
                      << (options.shuffle_buffer ? ", shuffle buffer of " + std::to_string(options.shuffle_buffer)
                                                 : std::string()));

  if (options.order_hints == OrderHints::on) {
    const std::size_t n = impl->manifest.shards.size();
    impl->hints.emplace(epoch_order(n, options.order, options.shuffle_seed, options.epoch),
                        epoch_order(n, options.order, options.shuffle_seed, options.epoch + 1), options.hint_step,
                        std::chrono::system_clock::now());
    impl->place_own_shards();
  }
  impl->start_prefetcher(options);
  return SampleStream(std::move(impl));
}

// The consumers of a job each place their own shards of this epoch: together, every shard the epoch reads. Those
// the tiers do not hold cost a failed lookup each.
void SampleStream::Impl::place_own_shards() {
  for (std::size_t position : positions)
    place(client->shard_key(manifest, position, keys), hints->before_use(position));
}

void SampleStream::Impl::start_prefetcher(const SampleStreamOptions& options) {
  // Streamed: one shard at a time, so that the memory is one window (see SampleStreamOptions::read_mode).
  client::Prefetcher<LoadedShard>::Window window{read_mode == ReadMode::streamed ? 0 : options.prefetch_shards,
                                                 std::nullopt};
  if (auto capacity = cache->landing_capacity(); capacity && read_mode == ReadMode::cached) {
    const std::size_t sharing = options.local_world_size.value_or(options.world_size) * options.num_workers;
    const double share = options.prefetch_budget / double(sharing);
    window.bytes = Bytes{static_cast<std::uint64_t>(double(capacity->count()) * share)};
  }
  stats.prefetch_window_bytes = window.bytes;
  prefetcher = std::make_unique<client::Prefetcher<LoadedShard>>(
      positions.size(), window,
      [this](std::size_t ordinal, const std::atomic<bool>& cancelled) { return load(ordinal, cancelled); },
      k_max_parallel_fetches, [](const LoadedShard& shard) { return shard.size; });
}

SampleStream::SampleStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SampleStream::SampleStream(SampleStream&&) noexcept = default;
SampleStream& SampleStream::operator=(SampleStream&&) noexcept = default;
SampleStream::~SampleStream() = default;

Result<std::optional<SampleView>> SampleStream::next() { return impl_->next(); }

void SampleStream::cancel() {
  impl_->cancel_requested.store(true);
  impl_->prefetcher->cancel();
}
const Manifest& SampleStream::manifest() const { return impl_->manifest; }
const std::vector<std::string>& SampleStream::keys() const { return impl_->keys; }
const std::vector<std::uint64_t>& SampleStream::shard_indices() const { return impl_->shard_indices; }

SampleStreamStats SampleStream::stats() const {
  SampleStreamStats copy;
  {
    std::lock_guard lock(impl_->stats_mu);
    copy = impl_->stats;
  }
  copy.max_prefetched = impl_->prefetcher->max_ahead();
  copy.max_prefetched_bytes = impl_->prefetcher->max_ahead_bytes();
  copy.streamed_bytes = Bytes{impl_->stream_counters.bytes.load(std::memory_order_relaxed)};
  copy.max_stream_buffered = Bytes{impl_->stream_counters.max_buffered.load(std::memory_order_relaxed)};
  return copy;
}

}  // namespace datavo
