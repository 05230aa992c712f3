#include "datavo/sample_stream.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "client/order_hints.hpp"
#include "client/prefetcher.hpp"
#include "client/random.hpp"
#include "client/streamed_shard.hpp"
#include "datavo/dataset.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tar.hpp"
#include "datavo/tier_registry.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

// Passes bytes through to the hierarchy's sink until the stream is destroyed, so that its destructor does not
// wait for a whole download nobody will read.
class CancellableSink final : public ByteSink {
 public:
  CancellableSink(ByteSink& inner, const std::atomic<bool>& cancelled) : inner_(inner), cancelled_(cancelled) {}
  Result<void> write(const void* data, std::size_t size) override {
    if (cancelled_.load(std::memory_order_relaxed))
      return Error{ErrorCode::io, "download cancelled: the SampleStream was cancelled or destroyed"};
    return inner_.write(data, size);
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override { return inner_.restart(); }

 private:
  ByteSink& inner_;
  const std::atomic<bool>& cancelled_;
};

// Shards fetched at once by one stream. Each fetch pays a ticket, a hash and an fsync in series, so a few in
// parallel keep a cold read busy; more would mostly hold server workers (8 by default) against other readers.
constexpr std::size_t k_max_parallel_fetches = 4;

struct LoadedShard {
  std::size_t position = 0;
  ShardKey key;
  std::shared_ptr<const ShardMapping> mapping;      // nullptr when streamed
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
  std::optional<SampleIterator> samples;  // over current->mapping
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

  // Last: destroyed (cancelled and joined) before anything its loader uses.
  std::unique_ptr<client::Prefetcher<LoadedShard>> prefetcher;

  // A streamed shard's download thread uses the cancel flag and the counters declared after `current`.
  ~Impl() { current.reset(); }

  Result<LoadedShard> load(std::size_t ordinal, const std::atomic<bool>& cancelled);
  Result<LoadedShard> stream(std::size_t position, const ShardKey& key);
  void record(const ShardKey& key, const FetchResult& result);
  Result<std::optional<SampleView>> next();
  Result<std::optional<SampleView>> read_in_order();
  Result<std::optional<SampleView>> draw_from_buffer();
  Error fail(Error e) {
    error = e;
    return e;
  }
  std::string shard_name(std::size_t position, const ShardKey& key) const {
    return std::to_string(manifest.shards[position].index) + " (" + key.hash.hex() + ".tar)";
  }
};

Result<LoadedShard> SampleStream::Impl::load(std::size_t ordinal, const std::atomic<bool>& cancelled) {
  const std::size_t position = positions[ordinal];
  const ShardKey key = client->shard_key(manifest, position, keys);
  Fetcher origin = client->shard_fetcher(manifest, position, keys);
  Fetcher fetcher = [&origin, &cancelled](ByteSink& sink) -> Result<Expectation> {
    CancellableSink guarded(sink, cancelled);
    return origin(guarded);
  };
  // Streamed: the hierarchy is asked without fetching; a hit is read as in the cached mode.
  std::optional<Result<FetchResult>> looked_up;
  if (read_mode == ReadMode::streamed) {
    auto lookup = cache->get(key);
    if (lookup && !*lookup) return stream(position, key);
    looked_up = lookup ? Result<FetchResult>(std::move(**lookup)) : Result<FetchResult>(std::move(lookup).error());
  }
  client->remember_shard(manifest, position, keys);  // which dataset and shard the entry is, for `cache ls`
  // The key is known from the manifest alone: a hit never calls the fetcher, so it costs no request.
  auto result = looked_up ? std::move(*looked_up) : cache->get_or_fetch(key, fetcher);
  if (!result) {
    Error e = std::move(result).error();
    e.message =
        "shard " + std::to_string(manifest.shards[position].index) + " of " + manifest.name.full() + ": " + e.message;
    return e;
  }
  record(key, *result);
  // A shard just landed looks read now; its place is after the shards read before it (a hit has it already).
  if (hints && result->source != ServedFrom::hit) place(key, hints->before_use(position));
  auto mapping = ShardMapping::map(result->handle, shard_name(position, key));
  if (!mapping) return std::move(mapping).error();
  return LoadedShard{position, key, std::move(*mapping), nullptr};
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
  return LoadedShard{position, key, nullptr, std::move(shard)};
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

Result<std::optional<SampleView>> SampleStream::Impl::read_in_order() {
  if (error) return *error;
  const auto cancelled_error = [&] {
    return Error{ErrorCode::cancelled, "SampleStream of " + manifest.name.full() + ": cancelled"};
  };
  if (cancel_requested.load(std::memory_order_relaxed)) return fail(cancelled_error());
  for (;;) {
    if (!current) {
      const auto wait_started = std::chrono::steady_clock::now();
      auto shard = prefetcher->next();
      const auto waited = std::chrono::steady_clock::now() - wait_started;
      {
        std::lock_guard lock(stats_mu);
        stats.shard_wait += std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
        if (stats.shards > 0)
          stats.shard_wait_after_first += std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
      }
      if (!shard) {
        Error e = std::move(shard).error();
        // After cancel() a failed load (a download cut short, say) is the cancellation's doing.
        return fail(cancel_requested.load() ? cancelled_error() : std::move(e));
      }
      if (!*shard) return std::optional<SampleView>{};
      current = std::move(**shard);
      if (current->mapping) samples.emplace(current->mapping->bytes(), current->mapping->name());
      sample_in_shard = 0;
      std::lock_guard lock(stats_mu);
      ++stats.shards;
    }
    const ManifestShard& expected = manifest.shards[current->position];
    const std::string& name = current->streamed ? current->streamed->name() : current->mapping->name();
    auto sample = current->streamed ? current->streamed->next() : samples->next();
    // The tar reader's message already names the shard, the member and the byte offset.
    if (!sample) return fail(std::move(sample).error());
    if (*sample == nullptr) {
      if (sample_in_shard != expected.samples.size()) {
        return fail(Error{ErrorCode::integrity, "shard " + name + ": the tar holds " + std::to_string(sample_in_shard) +
                                                    " samples, the manifest lists " +
                                                    std::to_string(expected.samples.size())});
      }
      if (hints) place(current->key, hints->after_use(current->position));
      samples.reset();
      current.reset();
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
    view.mapping = current->streamed ? current->streamed->block() : current->mapping;
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
      k_max_parallel_fetches,
      [](const LoadedShard& shard) { return Bytes{shard.mapping ? shard.mapping->bytes().size() : 0}; });
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
