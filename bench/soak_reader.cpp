// One reader of the soak run (bench/soak.py): a long-lived process that reads Zipf-distributed shards through the
// cache hierarchy of a shards.yaml, as a data loader would, until SIGTERM (or until it is SIGKILLed by the soak).
//
//   datavo_soak_reader --config shards.yaml --manifest FILE --trace FILE --seed N [--zipf-s 1.0]
//
// The manifest has one shard a line: "<content hash> <sha256> <size> <url>". Each read is
// ShardCacheHierarchy::get_or_fetch with the URL fetcher (continuing a dead writer's partial download, verified);
// the bytes of the handle are then hashed and compared with the manifest. Each finished read appends one line to
// the trace, in one write(2) so that a SIGKILL never leaves half a line:
//   "<steady ns> <shard index> <hit|promoted|fetched|error> <ok|wrong|-> <pid> <open fds>"
// where the open descriptors are counted between two reads (after the last one's handle is closed), so that a
// descriptor leaked by a read shows as growth, not the ones a read holds while it runs.
// Exit: 0 after SIGTERM, 2 on bad arguments.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tier_registry.hpp"
#include "datavo/url_fetcher.hpp"
#include "util/fs.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop = true; }

struct Shard {
  datavo::ContentHash hash = *datavo::ContentHash::parse(std::string(64, '0'));
  datavo::Sha256 sha256;
  std::uint64_t size = 0;
  std::string url;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "datavo_soak_reader: " << why
            << "\nusage: datavo_soak_reader --config F --manifest F --trace F --seed N [--zipf-s S]\n";
  std::exit(2);
}

// Open descriptors of this process (less the one opendir holds while counting).
int open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return -1;
  int n = 0;
  while (struct dirent* d = ::readdir(dir)) n += d->d_name[0] != '.';
  ::closedir(dir);
  return n - 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace datavo;
  std::string config_path, manifest_path, trace_path;
  std::uint64_t seed = 1;
  double zipf_s = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--config") {
      config_path = value;
    } else if (flag == "--manifest") {
      manifest_path = value;
    } else if (flag == "--trace") {
      trace_path = value;
    } else if (flag == "--seed") {
      seed = std::stoull(value);
    } else if (flag == "--zipf-s") {
      zipf_s = std::stod(value);
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (config_path.empty() || manifest_path.empty() || trace_path.empty()) usage("missing a flag");

  std::vector<Shard> shards;
  std::ifstream manifest(manifest_path);  // closed below, before the reads
  for (std::string line; std::getline(manifest, line);) {
    std::istringstream in(line);
    std::string hash, sha;
    Shard shard;
    if (!(in >> hash >> sha >> shard.size >> shard.url)) continue;
    auto parsed_hash = ContentHash::parse(hash);
    auto parsed_sha = Sha256::parse(sha);
    if (!parsed_hash || !parsed_sha) usage("bad manifest line: " + line);
    shard.hash = *parsed_hash;  // NOLINT: a parsed value, checked above
    shard.sha256 = *parsed_sha;
    shards.push_back(std::move(shard));
  }
  manifest.close();
  if (shards.empty()) usage("empty manifest " + manifest_path);

  auto config = load_config_file(config_path);
  if (!config) usage(config.error().message);
  auto hierarchy = build_hierarchy(*config);
  if (!hierarchy) usage(hierarchy.error().message);
  int trace = ::open(trace_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (trace < 0) usage("cannot open " + trace_path);
  std::signal(SIGTERM, on_term);

  // Zipf(s) over the shard indices: P(i) proportional to 1 / (i + 1)^s.
  std::vector<double> weights(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) weights[i] = 1.0 / std::pow(double(i + 1), zipf_s);
  std::discrete_distribution<std::size_t> zipf(weights.begin(), weights.end());
  std::mt19937_64 rng(seed);

  while (!g_stop) {
    const int fds = open_fds();
    const std::size_t index = zipf(rng);
    const Shard& shard = shards[index];
    const ShardKey key{Instance::local(), shard.hash};
    Fetcher fetcher = make_url_fetcher(shard.url, {}, std::nullopt, PartialDownload::continue_verified);
    std::string source = "error", verdict = "-";
    {
      auto result = (*hierarchy)->get_or_fetch(key, fetcher, Expectation{Bytes{shard.size}, shard.sha256});
      if (result) {
        source = to_string(result->source);
        auto actual = util::sha256_of_fd(result->handle.fd());
        verdict = actual && *actual == shard.sha256 ? "ok" : "wrong";
      } else {
        std::cerr << "datavo_soak_reader: " << result.error().message << "\n";
      }
    }
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    char line[160];
    const int n = std::snprintf(line, sizeof line, "%lld %zu %s %s %d %d\n",
                                static_cast<long long>(std::chrono::nanoseconds(now).count()), index, source.c_str(),
                                verdict.c_str(), int(::getpid()), fds);
    if (n > 0 && ::write(trace, line, std::size_t(n)) != n) std::cerr << "datavo_soak_reader: cannot write trace\n";
  }
  ::close(trace);
  return 0;
}
