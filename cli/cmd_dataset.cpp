// `datavo warm`, `datavo read` and `datavo demo`: the client side of the origin protocol (docs/sample-stream.md).
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <numbers>
#include <sstream>
#include <thread>

#include "cli/cli.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tar.hpp"
#include "datavo/tier_registry.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Decimal megabytes, as "MB/s" is read by people comparing with disk and network figures.
double megabytes(std::uint64_t bytes) { return double(bytes) / 1e6; }

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

struct DatasetArgs {
  std::string dataset;
  std::vector<std::string> keys;
  std::optional<std::uint64_t> revision;
  std::optional<std::string> server;
};

void add_dataset_args(CLI::App* cmd, DatasetArgs& args) {
  cmd->add_option("dataset", args.dataset, "the dataset, <dataset>/<split> (e.g. voice_demo_v1/train)")->required();
  cmd->add_option("--key", args.keys, "a key of the key group (repeatable: --key audio.wav --key transcript.txt)")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--revision", args.revision, "pin a revision: with a cached manifest, no manifest request");
  cmd->add_option("--server", args.server, "the origin server URL (default: $DATAVO_SERVER)");
}

OriginClientOptions origin_options(const GlobalOptions& global, const DatasetArgs& args) {
  OriginClientOptions options;
  if (args.server) options.server = *args.server;
  options.instance = global.instance;
  return options;
}

// How one warmed shard was served. Only what the summary needs: the shard's ShardHandle is closed as soon as the
// shard is done, so that a warm holds at most --jobs descriptors on shards, and an entry evicted during the warm
// frees its disk space at once.
struct WarmOutcome {
  std::size_t position = 0;
  struct Served {
    std::string tier_name;
    ServedFrom source = ServedFrom::hit;
    std::uint64_t size = 0;
  };
  std::optional<Served> served;
  std::optional<Error> error;
};

// Progress of `datavo warm` on stderr: a redrawn bar on a terminal, one line per shard otherwise. The ticker
// thread (bar only) is joined by the destructor, which also ends the bar's line.
class Progress {
 public:
  enum class Style { bar, lines };

  Progress(Style style, std::size_t total) : style_(style), total_(total), started_(Clock::now()) {
    if (style_ == Style::bar) ticker_ = std::thread([this] { tick(); });
  }
  ~Progress() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (ticker_.joinable()) ticker_.join();
    if (style_ == Style::bar) {
      draw();
      std::cerr << "\n";
    }
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add_bytes(std::int64_t delta) { origin_bytes_.fetch_add(delta, std::memory_order_relaxed); }

  void shard_done(const std::string& line) {
    const std::size_t done = done_.fetch_add(1) + 1;
    if (style_ == Style::lines) {
      std::lock_guard lock(mu_);
      std::cerr << "datavo: warm: [" << done << "/" << total_ << "] " << line << std::endl;
    }
  }

 private:
  void tick() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      draw();
      // A few redraws a second keep the rate readable without flooding a slow terminal.
      wake_.wait_for(lock, std::chrono::milliseconds(250));
    }
  }

  void draw() {
    constexpr int k_width = 30;
    const std::size_t done = done_.load();
    const double elapsed = seconds_since(started_);
    const auto bytes = std::uint64_t(std::max<std::int64_t>(0, origin_bytes_.load()));
    const int filled = total_ == 0 ? k_width : int(double(k_width) * double(done) / double(total_));
    std::string bar = std::string(std::size_t(filled), '#') + std::string(std::size_t(k_width - filled), '-');
    std::string eta = "--";
    if (done > 0 && done < total_) eta = fixed(elapsed / double(done) * double(total_ - done), 0) + " s";
    if (done == total_) eta = "0 s";
    std::cerr << "\r[" << bar << "] " << done << "/" << total_ << " shards  " << human_bytes(bytes) << " fetched  "
              << human_bytes(std::uint64_t(elapsed > 0 ? double(bytes) / elapsed : 0)) << "/s  ETA " << eta << "\033[K"
              << std::flush;
  }

  const Style style_;
  const std::size_t total_;
  const Clock::time_point started_;
  std::atomic<std::size_t> done_{0};
  std::atomic<std::int64_t> origin_bytes_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread ticker_;
};

// Counts the bytes of a download as they arrive, for the progress bar.
class CountingSink final : public ByteSink {
 public:
  CountingSink(ByteSink& inner, Progress& progress) : inner_(inner), progress_(progress) {}
  Result<void> write(const void* data, std::size_t size) override {
    DATAVO_TRY(inner_.write(data, size));
    progress_.add_bytes(std::int64_t(size));
    return ok();
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override {
    progress_.add_bytes(-std::int64_t(inner_.written().count()));
    return inner_.restart();
  }

 private:
  ByteSink& inner_;
  Progress& progress_;
};

struct WarmArgs {
  DatasetArgs dataset;
  std::size_t jobs = 4;
  bool dry_run = false;
  bool allow_partial = false;
};

// Where the shards of a warm are once it is done: each in the fastest tier that holds it, or nowhere.
struct WarmTruth {
  std::vector<std::uint64_t> cached;  // per tier, fastest first
  std::uint64_t nowhere = 0;
};

WarmTruth locate_all(OriginClient& client, ShardCacheHierarchy& cache, const Manifest& manifest,
                     const std::vector<std::string>& keys) {
  WarmTruth truth;
  truth.cached.assign(cache.tiers().size(), 0);
  for (std::size_t position = 0; position < manifest.shards.size(); ++position) {
    auto where = cache.locate(client.shard_key(manifest, position, keys));
    if (where && *where)
      ++truth.cached[(*where)->tier_index];
    else
      ++truth.nowhere;  // a tier that cannot answer holds nothing we could read
  }
  return truth;
}

// "only 3 of 12 shards are cached in the top tier 'local' (max_bytes 1 MiB): 9 remain cached in tier 'scratch',
// 0 are cached nowhere"
std::string describe_partial(const ShardCacheHierarchy& cache, const WarmTruth& truth, std::size_t total) {
  const Tier& top = *cache.tiers().front();
  std::string out = "only " + std::to_string(truth.cached[0]) + " of " + std::to_string(total) +
                    " shards are cached in the top tier '" + top.name() + "' after the warm" +
                    (top.max_bytes() ? " (max_bytes " + human_bytes(top.max_bytes()->count()) + ")" : "") + ": ";
  for (std::size_t i = 1; i < truth.cached.size(); ++i) {
    if (truth.cached[i] > 0)
      out += std::to_string(truth.cached[i]) + " remain cached in tier '" + cache.tiers()[i]->name() + "', ";
  }
  out += std::to_string(truth.nowhere) + (truth.nowhere == 1 ? " is" : " are") + " cached nowhere";
  return out;
}

void warm_dry_run(const GlobalOptions& global, OriginClient& client, ShardCacheHierarchy& cache,
                  const Manifest& manifest, const std::vector<std::string>& keys) {
  nlohmann::json rows = nlohmann::json::array();
  std::uint64_t cached = 0, cached_bytes = 0, to_fetch = 0;
  for (std::size_t position = 0; position < manifest.shards.size(); ++position) {
    const ShardKey key = client.shard_key(manifest, position, keys);
    std::optional<std::string> tier_name;
    std::optional<std::uint64_t> size;
    auto where = cache.locate(key);
    if (!where) {
      LOG_WARNING("shard " << manifest.shards[position].index
                           << ": cannot tell which tier holds it: " << where.error().message);
    } else if (*where) {
      tier_name = (*where)->tier_name;
      if ((*where)->size) size = (*where)->size->count();
    }
    if (tier_name) {
      ++cached;
      cached_bytes += size.value_or(0);
    } else {
      ++to_fetch;
    }
    const std::uint64_t index = manifest.shards[position].index;
    rows.push_back({{"shard_index", index},
                    {"content_hash", key.hash.hex()},
                    {"samples", manifest.shards[position].samples.size()},
                    {"tier", tier_name ? nlohmann::json(*tier_name) : nlohmann::json(nullptr)},
                    {"size_bytes", size ? nlohmann::json(*size) : nlohmann::json(nullptr)}});
    if (!global.json) {
      std::cout << "shard " << index << "  " << key.hash.hex() << "  ";
      if (!tier_name)
        std::cout << "would fetch from the origin (size unknown until fetched)\n";
      else if (size)
        std::cout << "served by tier " << *tier_name << " (" << human_bytes(*size) << ")\n";
      else
        std::cout << "served by tier " << *tier_name << " (size not known without reading it)\n";
    }
  }
  if (global.json) {
    print_json({{"dataset", manifest.name.full()},
                {"revision", manifest.revision},
                {"keys", keys},
                {"dry_run", true},
                {"shards", manifest.shards.size()},
                {"shard_list", rows},
                {"cached_shards", cached},
                {"cached_bytes", cached_bytes},
                {"shards_to_fetch", to_fetch}});
  } else {
    std::cout << manifest.shards.size() << " shards: " << cached << " cached (" << human_bytes(cached_bytes) << "), "
              << to_fetch << " to fetch from the origin (size unknown until fetched)\n";
  }
}

void cmd_warm(const GlobalOptions& global, const WarmArgs& args) {
  InterruptOnSignal interrupt;
  const auto started = Clock::now();
  const DatasetName name = require(DatasetName::parse(args.dataset.dataset));
  if (args.jobs == 0) throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, "--jobs must be at least 1"}};
  auto client = require(OriginClient::create(origin_options(global, args.dataset)));
  auto cache = require(get_default_shard_cache(global.config_path));
  const Manifest manifest = require(client->manifest(name, args.dataset.revision)).manifest;
  const std::vector<std::string> keys = require(manifest.normalize_keys(args.dataset.keys));
  if (args.dry_run) {
    warm_dry_run(global, *client, *cache, manifest, keys);
    return;
  }

  const std::size_t total = manifest.shards.size();
  std::vector<WarmOutcome> outcomes(total);
  const Progress::Style style = ::isatty(STDERR_FILENO) ? Progress::Style::bar : Progress::Style::lines;
  {
    Progress progress(style, total);
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t position = next++; position < total && !util::cancel_requested(); position = next++) {
        WarmOutcome& outcome = outcomes[position];
        outcome.position = position;
        Fetcher origin = client->shard_fetcher(manifest, position, keys);
        Fetcher counted = [&origin, &progress](ByteSink& sink) -> Result<Expectation> {
          CountingSink counting(sink, progress);
          return origin(counting);
        };
        client->remember_shard(manifest, position, keys);  // for `cache ls`
        auto result = cache->get_or_fetch(client->shard_key(manifest, position, keys), counted);
        const std::string shard = "shard " + std::to_string(manifest.shards[position].index);
        if (result) {
          progress.shard_done(shard + ": " + to_string(result->source) + ", " +
                              human_bytes(result->handle.size().count()) + " in tier " + result->tier_name);
          outcome.served = WarmOutcome::Served{result->tier_name, result->source, result->handle.size().count()};
        } else {
          // A shard stopped by an interruption is no failure of its own: main() reports the interruption once.
          if (result.error().code != ErrorCode::cancelled)
            progress.shard_done(shard + ": FAILED: " + result.error().message);
          outcome.error = std::move(result).error();
        }
      }
    };
    std::vector<std::jthread> workers;
    for (std::size_t i = 0; i < std::min(args.jobs, std::max<std::size_t>(total, 1)); ++i) workers.emplace_back(work);
  }
  // The uploads to remote tiers go on in the background: wait for them, so that the report says where the shards
  // are and what went up (a failed upload is a WARNING, not a failed warm: the shard is cached locally).
  const std::optional<UploadSummary> uploads = wait_for_uploads(*cache);
  cache->flush_stats();
  if (util::cancel_requested()) throw Fatal{k_exit_failed, util::cancelled_error("warm")};

  // Eviction may have removed shards warmed earlier in this run: what counts is where they are now.
  const WarmTruth truth = locate_all(*client, *cache, manifest, keys);
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_tier;  // tier -> (hits, promotions)
  for (const auto& tier : cache->tiers()) by_tier[tier->name()] = {0, 0};
  std::uint64_t bytes = 0, origin_shards = 0, origin_bytes = 0, failed = 0;
  for (const auto& o : outcomes) {
    if (o.error) {
      ++failed;
      // Each failure is printed once: on its progress line, or (under a bar, which has no per-shard lines) here.
      if (style == Progress::Style::bar) {
        log::write(log::Level::error,
                   "shard " + std::to_string(manifest.shards[o.position].index) + ": " + o.error->message);
      }
      continue;
    }
    const std::uint64_t size = o.served->size;
    bytes += size;
    switch (o.served->source) {
      case ServedFrom::hit: ++by_tier[o.served->tier_name].first; break;
      case ServedFrom::promoted: ++by_tier[o.served->tier_name].second; break;
      case ServedFrom::fetched:
        ++origin_shards;
        origin_bytes += size;
        break;
    }
  }
  const double seconds = seconds_since(started);
  nlohmann::json tiers = nlohmann::json::array();
  for (std::size_t i = 0; i < cache->tiers().size(); ++i) {
    const std::string& tier = cache->tiers()[i]->name();
    tiers.push_back({{"tier", tier},
                     {"hits", by_tier[tier].first},
                     {"promoted_into", by_tier[tier].second},
                     {"cached", truth.cached[i]}});
  }
  nlohmann::json report = {{"dataset", manifest.name.full()},
                           {"revision", manifest.revision},
                           {"keys", keys},
                           {"shards", total},
                           {"failed", failed},
                           {"size_bytes", bytes},
                           {"origin", {{"shards", origin_shards}, {"size_bytes", origin_bytes}}},
                           {"tiers", tiers},
                           {"not_cached", truth.nowhere},
                           {"seconds", seconds}};
  if (uploads) report["uploads"] = uploads_json(*uploads);
  if (!global.json) {
    std::cout << "warmed " << (total - failed) << " of " << total << " shards of " << manifest.name.full()
              << " revision " << manifest.revision << " (" << human_bytes(bytes) << ") in " << fixed(seconds, 2)
              << " s\n  origin: " << origin_shards << " shards, " << human_bytes(origin_bytes) << "\n";
    for (std::size_t i = 0; i < cache->tiers().size(); ++i) {
      const std::string& tier = cache->tiers()[i]->name();
      std::cout << "  tier " << tier << ": " << by_tier[tier].first << " hits, " << by_tier[tier].second
                << " promoted into it; holds " << truth.cached[i] << " of the " << total << " shards now\n";
    }
    if (truth.nowhere > 0) std::cout << "  cached nowhere: " << truth.nowhere << " shards\n";
    if (any_uploads(uploads)) std::cout << "  " << describe_uploads(*uploads) << "\n";
  }
  if (failed > 0) {
    throw Fatal{k_exit_failed,
                Error{ErrorCode::remote,
                      std::to_string(failed) + " of " + std::to_string(total) + " shards could not be warmed"},
                report};
  }
  if (truth.cached.front() < total) {
    const std::string partial = describe_partial(*cache, truth, total);
    if (!args.allow_partial) {
      throw Fatal{k_exit_failed,
                  Error{ErrorCode::capacity, partial + "; raise max_bytes or add a tier, or pass --allow-partial to "
                                                       "accept a partly warmed cache"},
                  report};
    }
    log::write(log::Level::warning, partial + " (--allow-partial)");
  }
  if (global.json) print_json(report);
}

struct ReadArgs {
  DatasetArgs dataset;
  std::optional<std::uint64_t> limit;
  std::size_t prefetch = 2;
  std::size_t rank = 0, world_size = 1, worker = 0, num_workers = 1;
  bool shuffle = false;
  std::uint64_t seed = 0, epoch = 0;
};

void cmd_read(const GlobalOptions& global, const ReadArgs& args) {
  InterruptOnSignal interrupt;
  const auto started = Clock::now();
  SampleStreamOptions options;
  options.keys = args.dataset.keys;
  options.revision = args.dataset.revision;
  options.cache_config_path = global.config_path;
  options.client = require(OriginClient::create(origin_options(global, args.dataset)));
  options.rank = args.rank;
  options.world_size = args.world_size;
  options.worker = args.worker;
  options.num_workers = args.num_workers;
  options.order = args.shuffle ? ShardOrder::shuffled : ShardOrder::manifest;
  options.shuffle_seed = args.seed;
  options.epoch = args.epoch;
  options.prefetch_shards = args.prefetch;
  auto client = options.client;
  SampleStream stream = require(SampleStream::from_dataset(args.dataset.dataset, std::move(options)));
  for (std::uint64_t taken = 0; !args.limit || taken < *args.limit; ++taken) {
    if (util::cancel_requested()) throw Fatal{k_exit_failed, util::cancelled_error("read")};
    auto sample = require(stream.next());
    if (!sample) break;
  }
  const double seconds = seconds_since(started);
  const SampleStreamStats stats = stream.stats();
  const OriginRequestCounts requests = client->requests();
  const double samples_per_second = seconds > 0 ? double(stats.samples) / seconds : 0;
  const double mb_per_second = seconds > 0 ? megabytes(stats.field_bytes.count()) / seconds : 0;
  if (global.json) {
    nlohmann::json tiers = nlohmann::json::array();
    for (const auto& t : stats.tiers)
      tiers.push_back({{"tier", t.tier}, {"hits", t.hits}, {"misses", t.misses}, {"promotions", t.promotions}});
    print_json({{"dataset", stream.manifest().name.full()},
                {"revision", stream.manifest().revision},
                {"keys", stream.keys()},
                {"samples", stats.samples},
                {"field_bytes", stats.field_bytes.count()},
                {"shards", stats.shards},
                {"seconds", seconds},
                {"samples_per_second", samples_per_second},
                {"mb_per_second", mb_per_second},
                {"tiers", tiers},
                {"origin", {{"shards", stats.origin_fetches}, {"size_bytes", stats.origin_bytes.count()}}},
                {"requests",
                 {{"manifest", requests.manifest},
                  {"not_modified", requests.not_modified},
                  {"ticket", requests.ticket},
                  {"shard", requests.shard}}}});
    return;
  }
  std::cout << "read " << stats.samples << " samples (" << human_bytes(stats.field_bytes.count()) << ") from "
            << stats.shards << " shards of " << stream.manifest().name.full() << " revision "
            << stream.manifest().revision << " in " << fixed(seconds, 2) << " s: " << fixed(samples_per_second, 0)
            << " samples/s, " << fixed(mb_per_second, 1) << " MB/s\n";
  for (const auto& t : stats.tiers) {
    std::cout << "  tier " << t.tier << ": " << t.hits << " hits, " << t.misses << " misses, " << t.promotions
              << " promotions\n";
  }
  std::cout << "  origin: " << stats.origin_fetches << " shards fetched (" << human_bytes(stats.origin_bytes.count())
            << "); requests: " << requests.manifest << " manifest (" << requests.not_modified << " not modified), "
            << requests.ticket << " ticket, " << requests.shard << " shard\n";
}

// --- demo -------------------------------------------------------------------------------------------------------

enum class Keep { no, yes };

// A temporary directory tree, removed on destruction unless kept.
class DemoDir {
 public:
  explicit DemoDir(Keep keep) : keep_(keep) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/datavo-demo-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Fatal{k_exit_failed, Error::from_errno(errno, "cannot create a temporary directory " + pattern)};
    path_ = pattern;
  }
  ~DemoDir() {
    if (keep_ == Keep::yes) {
      std::cerr << "datavo: demo: kept " << path_ << "\n";
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  DemoDir(const DemoDir&) = delete;
  DemoDir& operator=(const DemoDir&) = delete;
  std::string sub(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  Keep keep_;
  std::string path_;
};

constexpr std::uint32_t k_sample_rate = 16'000;

void put_u16(std::string& out, std::uint16_t v) {
  out += char(v & 0xff);
  out += char(v >> 8);
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out += char((v >> shift) & 0xff);
}

// A 16 kHz mono 16-bit PCM WAV: a tone with a short fade in and out, plus a little deterministic noise.
std::string synthetic_wav(std::uint32_t frames, double frequency, std::uint32_t seed) {
  std::string out;
  out.reserve(44 + std::size_t(frames) * 2);
  out += "RIFF";
  put_u32(out, 36 + frames * 2);
  out += "WAVEfmt ";
  put_u32(out, 16);
  put_u16(out, 1);  // PCM
  put_u16(out, 1);  // mono
  put_u32(out, k_sample_rate);
  put_u32(out, k_sample_rate * 2);
  put_u16(out, 2);
  put_u16(out, 16);
  out += "data";
  put_u32(out, frames * 2);
  std::uint32_t noise = seed * 2654435761u + 1;
  const double fade = 0.02 * k_sample_rate;
  for (std::uint32_t i = 0; i < frames; ++i) {
    noise = noise * 1664525u + 1013904223u;
    const double envelope = std::min({1.0, double(i) / fade, double(frames - i) / fade});
    const double t = double(i) / k_sample_rate;
    const double value = 0.3 * envelope * std::sin(2 * std::numbers::pi * frequency * t) +
                         0.02 * (double(noise >> 8) / 16777216.0 - 0.5);
    put_u16(out, std::uint16_t(std::int16_t(std::lround(value * 32767))));
  }
  return out;
}

bool looks_like_wav(std::span<const std::byte> data) {
  if (data.size() < 44) return false;
  const auto* p = reinterpret_cast<const char*>(data.data());
  return std::string_view(p, 4) == "RIFF" && std::string_view(p + 8, 8) == "WAVEfmt ";
}

struct DemoArgs {
  std::size_t samples = 2000;
  std::size_t samples_per_shard = 200;
  bool keep = false;
};

struct PassReport {
  double seconds = 0;
  std::uint64_t samples = 0;
  std::uint64_t valid_wavs = 0;
  std::uint64_t bytes = 0;
  std::uint64_t origin_shards = 0;
  std::uint64_t manifest_requests = 0, not_modified = 0, ticket_requests = 0, shard_requests = 0;
};

PassReport demo_pass(const std::string& server, const std::string& manifest_dir,
                     const std::shared_ptr<ShardCacheHierarchy>& cache) {
  OriginClientOptions origin;
  origin.server = server;
  origin.manifest_cache_dir = manifest_dir;
  origin.offline = Offline::no;
  origin.token = "";
  auto client = require(OriginClient::create(origin));
  const OriginMetrics before = require(client->metrics());
  const auto started = Clock::now();
  SampleStreamOptions options;
  options.keys = {"audio.wav", "transcript.txt"};
  options.cache = cache;
  options.client = client;
  SampleStream stream = require(SampleStream::from_dataset("voice_demo_v1/train", std::move(options)));
  PassReport report;
  for (;;) {
    auto sample = require(stream.next());
    if (!sample) break;
    if (looks_like_wav(sample->field("audio.wav"))) ++report.valid_wavs;
  }
  report.seconds = seconds_since(started);
  const OriginMetrics after = require(client->metrics());
  const SampleStreamStats stats = stream.stats();
  report.samples = stats.samples;
  report.bytes = stats.field_bytes.count();
  report.origin_shards = stats.origin_fetches;
  report.manifest_requests = after.requests_for("manifest") - before.requests_for("manifest");
  report.not_modified = after.requests_for("manifest", "304") - before.requests_for("manifest", "304");
  report.ticket_requests = after.requests_for("ticket") - before.requests_for("ticket");
  report.shard_requests = after.requests_for("shard") - before.requests_for("shard");
  return report;
}

void cmd_demo(const GlobalOptions& global, const DemoArgs& args) {
  InterruptOnSignal interrupt;
  if (args.samples == 0 || args.samples_per_shard == 0)
    throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, "--samples and --samples-per-shard must be >= 1"}};
  DemoDir dir(args.keep ? Keep::yes : Keep::no);
  const std::string source = dir.sub("source");
  if (std::error_code error; !std::filesystem::create_directories(source, error))
    throw Fatal{k_exit_failed, Error{ErrorCode::io, "cannot create " + source + ": " + error.message()}};
  // WebDataset tars rather than one file per member: on a busy disk, thousands of small creates and unlinks
  // would cost more than the whole read.
  constexpr std::size_t k_samples_per_source_tar = 500;
  std::uint64_t generated = 0;
  for (std::size_t first = 0; first < args.samples; first += k_samples_per_source_tar) {
    const std::string path = source + "/part-" + std::to_string(first / k_samples_per_source_tar) + ".tar";
    std::ofstream out(path, std::ios::binary);
    TarWriter writer([&out, &path](std::span<const std::byte> bytes) -> Result<void> {
      out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      if (!out) return Error{ErrorCode::io, "cannot write " + path};
      return ok();
    });
    for (std::size_t i = first; i < std::min(args.samples, first + k_samples_per_source_tar); ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "utt_%06zu", i);
      // 0.5 to 1 s, and a pitch between 150 and 750 Hz, varied but reproducible.
      const auto frames = std::uint32_t(k_sample_rate / 2 + (i * 7919) % (k_sample_rate / 2 + 1));
      const double frequency = 150.0 + double((i * 37) % 600);
      const std::string wav = synthetic_wav(frames, frequency, std::uint32_t(i));
      const std::string text = "synthetic utterance " + std::to_string(i) + ": a " + fixed(frequency, 0) +
                               " hertz tone lasting " + fixed(double(frames) / k_sample_rate, 2) + " seconds\n";
      require(writer.add_member(std::string(id) + ".audio.wav", std::as_bytes(std::span(wav.data(), wav.size()))));
      require(
          writer.add_member(std::string(id) + ".transcript.txt", std::as_bytes(std::span(text.data(), text.size()))));
      generated += wav.size() + text.size();
    }
    require(writer.finish());
    out.close();
    if (!out) throw Fatal{k_exit_failed, Error{ErrorCode::io, "cannot write " + path}};
  }
  PackOptions pack;
  pack.source = source;
  pack.store = dir.sub("store");
  pack.dataset = "voice_demo_v1/train";
  pack.samples_per_shard = args.samples_per_shard;
  const PackReport packed = require(pack_dataset(pack));

  OriginServerOptions serve;
  serve.store = pack.store;
  serve.log_requests = false;
  auto server = require(OriginServer::start(serve));

  FolderTierOptions tier;
  tier.path = dir.sub("cache");
  tier.name = "demo-cache";
  tier.durability = Durability::no_sync;  // a throwaway cache: crash safety buys nothing here
  auto folder = require(FolderTier::create(tier));
  auto cache = require(ShardCacheHierarchy::create({folder}));
  const std::string manifests = dir.sub("manifests");

  if (!global.json) {
    std::cout << "datavo demo: " << args.samples << " synthetic utterances (audio.wav + transcript.txt, "
              << human_bytes(generated) << ") packed into " << packed.total_shards << " shards\n"
              << "  origin " << server->base_url() << " serving " << pack.store << "\n"
              << "  cache  " << tier.path << " (fresh)\n\n"
              << std::flush;
  }
  const PassReport cold = demo_pass(server->base_url(), manifests, cache);
  const PassReport warm = demo_pass(server->base_url(), manifests, cache);
  server->stop();

  if (global.json) {
    auto pass_json = [](const PassReport& p) {
      return nlohmann::json{{"seconds", p.seconds},
                            {"samples", p.samples},
                            {"valid_wavs", p.valid_wavs},
                            {"field_bytes", p.bytes},
                            {"samples_per_second", p.seconds > 0 ? double(p.samples) / p.seconds : 0},
                            {"mb_per_second", p.seconds > 0 ? megabytes(p.bytes) / p.seconds : 0},
                            {"origin_shards", p.origin_shards},
                            {"requests",
                             {{"manifest", p.manifest_requests},
                              {"not_modified", p.not_modified},
                              {"ticket", p.ticket_requests},
                              {"shard", p.shard_requests}}}};
    };
    print_json({{"samples", args.samples},
                {"shards", packed.total_shards},
                {"cold", pass_json(cold)},
                {"warm", pass_json(warm)}});
  } else {
    auto row = [](const std::string& label, const std::string& a, const std::string& b) {
      std::cout << "  " << std::left << std::setw(24) << label << std::right << std::setw(12) << a << std::setw(12) << b
                << "\n";
    };
    row("", "cold pass", "warm pass");
    row("time", fixed(cold.seconds, 2) + " s", fixed(warm.seconds, 2) + " s");
    row("samples", std::to_string(cold.samples), std::to_string(warm.samples));
    row("samples/s", fixed(double(cold.samples) / cold.seconds, 0), fixed(double(warm.samples) / warm.seconds, 0));
    row("MB/s", fixed(megabytes(cold.bytes) / cold.seconds, 1), fixed(megabytes(warm.bytes) / warm.seconds, 1));
    row("manifest requests", std::to_string(cold.manifest_requests),
        std::to_string(warm.manifest_requests) + (warm.not_modified > 0 ? " (304)" : ""));
    row("ticket requests", std::to_string(cold.ticket_requests), std::to_string(warm.ticket_requests));
    row("shard requests", std::to_string(cold.shard_requests), std::to_string(warm.shard_requests));
    row("shards from the origin", std::to_string(cold.origin_shards), std::to_string(warm.origin_shards));
    std::cout << "\n(request counts from the origin's /v1/metrics; the warm pass reads every shard from the local "
                 "cache and only revalidates the manifest)\n";
  }
  const std::uint64_t expected = args.samples;
  if (cold.samples != expected || warm.samples != expected || cold.valid_wavs != expected ||
      warm.valid_wavs != expected) {
    throw Fatal{k_exit_failed, Error{ErrorCode::internal,
                                     "demo: expected " + std::to_string(expected) + " valid samples in each pass"}};
  }
  if (warm.shard_requests != 0 || warm.ticket_requests != 0) {
    throw Fatal{k_exit_failed, Error{ErrorCode::internal, "demo: the warm pass went to the origin for shards"}};
  }
}

}  // namespace

void add_dataset_commands(CLI::App& app, GlobalOptions& global) {
  auto warm_args = std::make_shared<WarmArgs>();
  auto* warm = app.add_subcommand("warm", "fill the cache hierarchy with every shard of a key group");
  warm->footer(
      "On a terminal, warm draws a progress bar on stderr (shards, bytes fetched from the origin, rate, ETA);\n"
      "otherwise it logs one line per shard. --json prints a summary: shards, bytes fetched from the origin,\n"
      "shards served per tier, seconds.\n"
      "\n"
      "After warming, warm looks every shard up again. When the top tier does not hold them all (it is too small,\n"
      "or eviction removed shards warmed earlier in the run), it says how many remain cached in which tier and\n"
      "how many are cached nowhere, and exits 1; --allow-partial makes that a WARNING with exit 0.\n"
      "\n"
      "--dry-run fetches nothing and asks the origin for the manifest only. For each shard it prints the tier\n"
      "that would serve it (looked up without reading it) and, for shards in a folder tier, their size. The\n"
      "size of a shard still to fetch is reported as unknown: the manifest carries no sizes, and learning\n"
      "them would take one ticket request per shard.");
  add_dataset_args(warm, warm_args->dataset);
  warm->add_option("--jobs", warm_args->jobs, "shards fetched in parallel (default 4)");
  warm->add_flag("--dry-run", warm_args->dry_run, "list what would be fetched and which tier holds what");
  warm->add_flag("--allow-partial", warm_args->allow_partial,
                 "exit 0 with a WARNING when the top tier cannot hold every shard (default: exit 1)");
  warm->callback([&global, warm_args] { cmd_warm(global, *warm_args); });

  auto read_args = std::make_shared<ReadArgs>();
  auto* read = app.add_subcommand("read",
                                  "iterate the samples of a key group through the cache and report samples, bytes, "
                                  "samples/s, MB/s and the hits and misses of each tier");
  add_dataset_args(read, read_args->dataset);
  read->add_option("--limit", read_args->limit, "stop after N samples");
  read->add_option("--prefetch", read_args->prefetch, "shards fetched ahead of the one being read (default 2)");
  read->add_option("--rank", read_args->rank, "this process's rank (default 0)");
  read->add_option("--world-size", read_args->world_size, "number of ranks (default 1)");
  read->add_option("--worker", read_args->worker, "this worker within the rank (default 0)");
  read->add_option("--num-workers", read_args->num_workers, "workers per rank (default 1)");
  read->add_flag("--shuffle", read_args->shuffle, "shuffle the shard order by --seed and --epoch");
  read->add_option("--seed", read_args->seed, "shuffle seed (default 0)");
  read->add_option("--epoch", read_args->epoch, "epoch: a new shard order per epoch (default 0)");
  read->callback([&global, read_args] { cmd_read(global, *read_args); });

  auto demo_args = std::make_shared<DemoArgs>();
  auto* demo = app.add_subcommand(
      "demo",
      "the main job: generate a synthetic speech dataset, pack it, serve it on loopback and read it twice through "
      "a fresh cache; prints the cold and the warm pass side by side");
  demo->add_option("--samples", demo_args->samples, "utterances to generate (default 2000)");
  demo->add_option("--samples-per-shard", demo_args->samples_per_shard, "samples per shard (default 200)");
  demo->add_flag("--keep", demo_args->keep, "keep the temporary directory (printed on exit)");
  demo->callback([&global, demo_args] { cmd_demo(global, *demo_args); });
}

}  // namespace datavo::cli
