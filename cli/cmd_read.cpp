// `datavo read`: iterates the samples of a key group through the cache with a SampleStream and reports samples,
// bytes, rates and how each tier served the shards.
#include <chrono>
#include <iostream>
#include <map>

#include "cli/cli.hpp"
#include "datavo/metrics.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tier_config.hpp"
#include "util/cancel.hpp"
#include "util/human.hpp"

namespace datavo::cli {
namespace {

struct ReadArgs {
  DatasetArgs dataset;
  std::optional<std::uint64_t> limit;
  std::size_t prefetch = SampleStreamOptions{}.prefetch_shards;
  double prefetch_budget = SampleStreamOptions{}.prefetch_budget;
  OrderHints order_hints = SampleStreamOptions{}.order_hints;
  std::uint64_t hint_step_ms = std::uint64_t(SampleStreamOptions{}.hint_step.count());
  std::size_t rank = 0, world_size = 1, worker = 0, num_workers = 1;
  std::optional<std::size_t> local_world_size;
  bool shuffle = false;
  std::uint64_t seed = 0, epoch = 0;
  std::size_t shuffle_buffer = 0;
  std::optional<std::string> metrics_textfile;
  ReadWhileFetching read_while_fetching = SampleStreamOptions{}.read_while_fetching;
  bool digest = false;
  bool stream = false;
  std::string stream_window = format_byte_size(SampleStreamOptions{}.stream_window);
};

// The SHA-256 of the samples read, in order: each id, then each field's key and bytes, with their lengths.
class SampleChecksum {
 public:
  void add(const SampleView& sample) {
    put(std::as_bytes(std::span(sample.id)));
    for (const auto& f : sample.fields) {
      put(std::as_bytes(std::span(f.key)));
      put(f.data);
    }
  }
  std::string hex() { return hasher_.finish().hex(); }

 private:
  void put(std::span<const std::byte> bytes) {
    const std::uint64_t size = bytes.size();
    hasher_.update(&size, sizeof size);
    hasher_.update(bytes.data(), bytes.size());
  }
  Sha256Hasher hasher_;
};

SampleStreamOptions stream_options(const GlobalOptions& global, const ReadArgs& args) {
  SampleStreamOptions options;
  options.keys = args.dataset.keys;
  options.revision = args.dataset.revision;
  options.cache_config_path = global.config_path;
  options.client = require(OriginClient::create(origin_options(global, args.dataset.server)));
  options.rank = args.rank;
  options.world_size = args.world_size;
  options.worker = args.worker;
  options.num_workers = args.num_workers;
  options.local_world_size = args.local_world_size;
  options.order = args.shuffle ? ShardOrder::shuffled : ShardOrder::manifest;
  options.shuffle_seed = args.seed;
  options.epoch = args.epoch;
  options.prefetch_shards = args.prefetch;
  options.prefetch_budget = args.prefetch_budget;
  options.order_hints = args.order_hints;
  options.hint_step = Milliseconds{args.hint_step_ms};
  options.shuffle_buffer = args.shuffle_buffer;
  options.read_while_fetching = args.read_while_fetching;
  options.read_mode = args.stream ? ReadMode::streamed : ReadMode::cached;
  options.stream_window = require(parse_byte_size(args.stream_window));
  return options;
}

// How long the read took, and its first sample (from the command's start, the manifest included).
struct ReadTimes {
  double seconds = 0;
  std::optional<double> first_sample_seconds;
};

void print_json_report(const SampleStream& stream, const OriginRequestCounts& requests, const ReadTimes& times,
                       const std::optional<std::string>& digest) {
  const double seconds = times.seconds;
  const SampleStreamStats stats = stream.stats();
  nlohmann::json tiers = nlohmann::json::array();
  for (const auto& t : stats.tiers)
    tiers.push_back({{"tier", t.tier},
                     {"hits", t.hits},
                     {"misses", t.misses},
                     {"promotions", t.promotions},
                     {"served_bytes", t.served_bytes.count()}});
  print_json({{"dataset", stream.manifest().name.full()},
              {"revision", stream.manifest().revision},
              {"keys", stream.keys()},
              {"samples", stats.samples},
              {"field_bytes", stats.field_bytes.count()},
              {"shards", stats.shards},
              {"shard_indices", stream.shard_indices()},
              {"seconds", seconds},
              {"samples_per_second", seconds > 0 ? double(stats.samples) / seconds : 0},
              {"mb_per_second", seconds > 0 ? megabytes(stats.field_bytes) / seconds : 0},
              {"tiers", tiers},
              {"origin", {{"shards", stats.origin_fetches}, {"size_bytes", stats.origin_bytes.count()}}},
              {"shard_wait_seconds", std::chrono::duration<double>(stats.shard_wait).count()},
              {"shard_wait_after_first_seconds", std::chrono::duration<double>(stats.shard_wait_after_first).count()},
              {"prefetch",
               {{"max_shards", stats.max_prefetched},
                {"max_bytes", stats.max_prefetched_bytes.count()},
                {"window_bytes", stats.prefetch_window_bytes ? nlohmann::json(stats.prefetch_window_bytes->count())
                                                             : nlohmann::json(nullptr)}}},
              {"hints_placed", stats.hints_placed},
              {"max_shuffle_buffered", stats.max_shuffle_buffered},
              {"read_while_fetching",
               {{"samples_before_install", stats.samples_before_install},
                {"shards", stats.shards_read_while_fetching},
                {"refetches", stats.refetches}}},
              {"samples_sha256", digest ? nlohmann::json(*digest) : nlohmann::json(nullptr)},
              {"first_sample_seconds",
               times.first_sample_seconds ? nlohmann::json(*times.first_sample_seconds) : nlohmann::json(nullptr)},
              {"streamed",
               {{"shards", stats.streamed_shards},
                {"size_bytes", stats.streamed_bytes.count()},
                {"max_buffered_bytes", stats.max_stream_buffered.count()}}},
              {"requests",
               {{"manifest", requests.manifest},
                {"not_modified", requests.not_modified},
                {"ticket", requests.ticket},
                {"shard", requests.shard}}}});
}

void print_text_report(const SampleStream& stream, const OriginRequestCounts& requests, double seconds,
                       const std::optional<std::string>& digest) {
  const SampleStreamStats stats = stream.stats();
  const double samples_per_second = seconds > 0 ? double(stats.samples) / seconds : 0;
  const double mb_per_second = seconds > 0 ? megabytes(stats.field_bytes) / seconds : 0;
  std::cout << "read " << stats.samples << " samples (" << human_bytes(stats.field_bytes.count()) << ") from "
            << stats.shards << " shards of " << stream.manifest().name.full() << " revision "
            << stream.manifest().revision << " in " << util::fixed_point(seconds, 2)
            << " s: " << util::fixed_point(samples_per_second, 0) << " samples/s, "
            << util::fixed_point(mb_per_second, 1) << " MB/s\n";
  for (const auto& t : stats.tiers) {
    std::cout << "  tier " << t.tier << ": " << t.hits << " hits, " << t.misses << " misses, " << t.promotions
              << " promotions\n";
  }
  std::cout << "  origin: " << stats.origin_fetches << " shards fetched (" << human_bytes(stats.origin_bytes.count())
            << "); requests: " << requests.manifest << " manifest (" << requests.not_modified << " not modified), "
            << requests.ticket << " ticket, " << requests.shard << " shard\n";
  if (stats.streamed_shards > 0) {
    std::cout << "  streamed: " << stats.streamed_shards << " shards (" << human_bytes(stats.streamed_bytes.count())
              << ", nothing written to disk), at most " << human_bytes(stats.max_stream_buffered.count())
              << " in the window\n";
  }
  if (digest) std::cout << "  samples_sha256: " << *digest << "\n";
}

void cmd_read(const GlobalOptions& global, const ReadArgs& args) {
  InterruptOnSignal interrupt;
  const auto started = std::chrono::steady_clock::now();
  SampleStreamOptions options = stream_options(global, args);
  const std::shared_ptr<OriginClient> client = options.client;
  std::unique_ptr<MetricsTextfile> textfile;
  if (args.metrics_textfile) {
    // The stream's hierarchy, made here so that the textfile shows its counters.
    options.cache = require(get_default_shard_cache(global.config_path));
    textfile = require(MetricsTextfile::start(options.cache, *args.metrics_textfile));
  }
  const std::shared_ptr<ShardCacheHierarchy> cache = options.cache;
  SampleStream stream = require(SampleStream::from_dataset(args.dataset.dataset, std::move(options)));
  SampleChecksum checksum;
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  ReadTimes times;
  for (std::uint64_t taken = 0; !args.limit || taken < *args.limit; ++taken) {
    if (util::cancel_requested()) throw Fatal{k_exit_failed, util::cancelled_error("read")};
    auto next = stream.next();
    if (!next) {
      // How far the read got: the samples before a failure were whole and verified.
      Error e = std::move(next).error();
      e.message += " (after " + std::to_string(taken) + " samples)";
      throw Fatal{exit_code_for(e), std::move(e)};
    }
    auto& sample = *next;
    if (!sample) break;
    if (!times.first_sample_seconds) times.first_sample_seconds = since_start();
    if (args.digest) checksum.add(*sample);
  }
  const std::optional<std::string> digest = args.digest ? std::optional(checksum.hex()) : std::nullopt;
  times.seconds = since_start();
  const double seconds = times.seconds;
  if (textfile) {
    // Its last write shows the uploads of this read: wait for them first, as the hierarchy would at exit.
    cache->flush_uploads(ShardCacheHierarchy::k_destructor_upload_bound);
    textfile.reset();
  }
  if (global.json)
    print_json_report(stream, client->requests(), times, digest);
  else
    print_text_report(stream, client->requests(), seconds, digest);
}

}  // namespace

void add_read_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<ReadArgs>();
  auto* read = app.add_subcommand("read",
                                  "iterate the samples of a key group through the cache and report samples, bytes, "
                                  "samples/s, MB/s and the hits and misses of each tier");
  add_dataset_args(read, args->dataset);
  read->add_option("--limit", args->limit, "stop after N samples");
  read->add_option("--prefetch", args->prefetch, "at most N shards fetched ahead of the one being read (default 8)");
  read->add_option(
          "--prefetch-budget", args->prefetch_budget,
          "the bytes fetched ahead, as a fraction of the top folder tier's max_bytes (else free space), "
          "shared by the --local-world-size x --num-workers readers of this machine (default 0.1, at most 0.5)")
      ->check(CLI::Range(0.0, 0.5));
  const std::map<std::string, OrderHints> hint_modes{{"on", OrderHints::on}, {"off", OrderHints::off}};
  read->add_option("--order-hints", args->order_hints,
                   "on: place each shard in the local tiers' LRU order by when it is next needed (default on)")
      ->transform(CLI::CheckedTransformer(hint_modes, CLI::ignore_case));
  read->add_option("--hint-step", args->hint_step_ms,
                   "milliseconds an order hint counts per shard of distance (default 100; the same for every reader "
                   "of a job)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{86'400'000}));
  read->add_option("--rank", args->rank, "this process's rank (default 0)");
  read->add_option("--world-size", args->world_size, "number of ranks (default 1)");
  read->add_option("--worker", args->worker, "this worker within the rank (default 0)");
  read->add_option("--num-workers", args->num_workers, "workers per rank (default 1)");
  read->add_option("--local-world-size", args->local_world_size,
                   "ranks on this machine, sharing its tiers and the prefetch budget (default: --world-size)");
  read->add_flag("--shuffle", args->shuffle, "shuffle the shard order by --seed and --epoch");
  read->add_option("--seed", args->seed, "shuffle seed (default 0)");
  read->add_option("--epoch", args->epoch, "epoch: a new shard order per epoch (default 0)");
  add_metrics_textfile_option(read, args->metrics_textfile);
  read->add_option("--shuffle-buffer", args->shuffle_buffer,
                   "draw samples at random from a buffer of N, seeded by --seed and --epoch (default 0: in order)");
  const std::map<std::string, ReadWhileFetching> fetching_modes{{"on", ReadWhileFetching::on},
                                                                {"off", ReadWhileFetching::off}};
  read->add_option("--read-while-fetching", args->read_while_fetching,
                   "on: read a shard fetched from the origin chunk by chunk as its chunks are verified, before it is "
                   "installed (default on)")
      ->transform(CLI::CheckedTransformer(fetching_modes, CLI::ignore_case));
  read->add_flag("--digest", args->digest,
                 "report samples_sha256: the SHA-256 of every sample's id, keys and bytes, in order");
  read->add_flag("--stream", args->stream,
                 "streamed read mode: read the shards no folder tier holds straight from a remote tier or the origin "
                 "through verified chunks, one at a time, and write no local copy (docs/hierarchy.md, \"Streamed "
                 "reads\")");
  read->add_option("--stream-window", args->stream_window,
                   "with --stream: the most bytes of a shard held in memory, at least 2 of the origin's chunks "
                   "(default 16 MiB; e.g. 64MiB)");
  read->callback([&global, args] { cmd_read(global, *args); });
}

}  // namespace datavo::cli
