#include "datavo/demo.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/sample_stream.hpp"
#include "ops/demo/synthetic_speech.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* k_dataset = "voice_demo_v1/train";

// The demo's temporary directory: removed on destruction unless kept (then handed to `on_kept`).
class DemoDirectory {
 public:
  static Result<std::unique_ptr<DemoDirectory>> create(const DemoRequest& request) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/datavo-demo-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      return Error::from_errno(errno, "cannot create a temporary directory " + pattern);
    return std::unique_ptr<DemoDirectory>(new DemoDirectory(std::move(pattern), request));
  }
  ~DemoDirectory() {
    if (keep_ == KeepDirectory::yes) {
      if (on_kept_) on_kept_(path_);
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  DemoDirectory(const DemoDirectory&) = delete;
  DemoDirectory& operator=(const DemoDirectory&) = delete;

  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  DemoDirectory(std::string path, const DemoRequest& request)
      : path_(std::move(path)), keep_(request.keep), on_kept_(request.on_kept) {}

  std::string path_;
  KeepDirectory keep_;
  std::function<void(const std::string&)> on_kept_;
};

// The requests the origin's /v1/metrics counted between two snapshots.
DemoRequests requests_between(const OriginMetrics& before, const OriginMetrics& after) {
  return DemoRequests{after.requests_for("manifest") - before.requests_for("manifest"),
                      after.requests_for("manifest", "304") - before.requests_for("manifest", "304"),
                      after.requests_for("ticket") - before.requests_for("ticket"),
                      after.requests_for("shard") - before.requests_for("shard")};
}

// Reads every sample once through `cache`, as a training job would.
Result<DemoPass> read_pass(const std::string& server, const std::string& manifest_dir,
                           const std::shared_ptr<ShardCacheHierarchy>& cache) {
  OriginClientOptions origin;
  origin.server = server;
  origin.manifest_cache_dir = manifest_dir;
  origin.offline = Offline::no;
  origin.token = "";
  auto client = OriginClient::create(origin);
  if (!client) return std::move(client).error();
  auto before = (*client)->metrics();
  if (!before) return std::move(before).error();
  const auto started = Clock::now();
  SampleStreamOptions options;
  options.keys = {"audio.wav", "transcript.txt"};
  options.cache = cache;
  options.client = *client;
  auto stream = SampleStream::from_dataset(k_dataset, std::move(options));
  if (!stream) return std::move(stream).error();
  DemoPass pass;
  for (;;) {
    auto sample = stream->next();
    if (!sample) return std::move(sample).error();
    if (!*sample) break;
    if (demo::looks_like_wav((*sample)->field("audio.wav"))) ++pass.valid_wavs;
  }
  pass.elapsed = Clock::now() - started;
  auto after = (*client)->metrics();
  if (!after) return std::move(after).error();
  const SampleStreamStats stats = stream->stats();
  pass.samples = stats.samples;
  pass.field_bytes = stats.field_bytes;
  pass.origin_shards = stats.origin_fetches;
  pass.requests = requests_between(*before, *after);
  return pass;
}

// Generates the dataset and packs it into the store; fills `setup` but for what serving tells.
Result<void> make_dataset(const DemoRequest& request, const DemoDirectory& directory, DemoSetup& setup) {
  const std::string source = directory.sub("source");
  DATAVO_TRY(util::make_dirs(source, 0755));
  auto generated = demo::write_synthetic_speech(source, request.samples);
  if (!generated) return std::move(generated).error();
  PackOptions pack;
  pack.source = source;
  pack.store = directory.sub("store");
  pack.dataset = k_dataset;
  pack.samples_per_shard = request.samples_per_shard;
  auto packed = pack_dataset(pack);
  if (!packed) return std::move(packed).error();
  setup.samples = request.samples;
  setup.generated = *generated;
  setup.shards = packed->total_shards;
  setup.store = pack.store;
  return ok();
}

Result<std::shared_ptr<ShardCacheHierarchy>> fresh_cache(const std::string& path) {
  FolderTierOptions tier;
  tier.path = path;
  tier.name = "demo-cache";
  tier.durability = Durability::no_sync;  // a throwaway cache: crash safety buys nothing here
  auto folder = FolderTier::create(tier);
  if (!folder) return std::move(folder).error();
  return ShardCacheHierarchy::create({*folder});
}

// What the two passes must show: every sample a valid WAV, and a warm pass that asked the origin for no shard.
std::optional<Error> check(const DemoReport& report) {
  const std::uint64_t expected = report.setup.samples;
  for (const DemoPass* pass : {&report.cold, &report.warm}) {
    if (pass->samples != expected || pass->valid_wavs != expected) {
      return Error{ErrorCode::internal, "demo: expected " + std::to_string(expected) + " valid samples in each pass"};
    }
  }
  if (report.warm.requests.shard != 0 || report.warm.requests.ticket != 0)
    return Error{ErrorCode::internal, "demo: the warm pass went to the origin for shards"};
  return std::nullopt;
}

}  // namespace

Result<DemoReport> run_demo(const DemoRequest& request) {
  if (request.samples == 0 || request.samples_per_shard == 0)
    return Error{ErrorCode::invalid_argument, "demo: samples and samples_per_shard must be at least 1"};
  auto directory = DemoDirectory::create(request);
  if (!directory) return std::move(directory).error();
  DemoReport report;
  DATAVO_TRY(make_dataset(request, **directory, report.setup));
  OriginServerOptions serve;
  serve.store = report.setup.store;
  serve.log_requests = false;
  auto server = OriginServer::start(serve);
  if (!server) return std::move(server).error();
  report.setup.origin_url = (*server)->base_url();
  report.setup.cache_dir = (*directory)->sub("cache");
  auto cache = fresh_cache(report.setup.cache_dir);
  if (!cache) return std::move(cache).error();
  if (request.on_ready) request.on_ready(report.setup);

  const std::string manifests = (*directory)->sub("manifests");
  for (DemoPass* pass : {&report.cold, &report.warm}) {
    auto done = read_pass(report.setup.origin_url, manifests, *cache);
    if (!done) return std::move(done).error();
    *pass = *done;
  }
  (*server)->stop();
  report.error = check(report);
  return report;
}

}  // namespace datavo
