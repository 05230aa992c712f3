// `datavo cache fetch`: gets a shard through the hierarchy, downloading a URL on a miss (datavo::cache_fetch).
#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

struct FetchArgs {
  std::string hash, url, sha256;
  std::optional<std::uint64_t> size;
};

void cmd_fetch(const GlobalOptions& global, const FetchArgs& args) {
  InterruptOnSignal interrupt;
  CacheSession session = open_session(global);
  const ShardKey key{session.instance, require(ContentHash::parse(args.hash))};
  Expectation expected;
  if (!args.sha256.empty()) expected.sha256 = require(Sha256::parse(args.sha256));
  if (args.size) expected.size = Bytes{*args.size};
  const CacheFetchRequest request{key, args.url, expected, std::nullopt, TransportOptions{}};
  print_install_report(global, require(cache_fetch(*session.cache, request)));
}

}  // namespace

void add_cache_fetch_command(CLI::App& cache, GlobalOptions& global) {
  auto args = std::make_shared<FetchArgs>();
  auto* fetch = cache.add_subcommand("fetch", "get a shard through the hierarchy, fetching URL on a miss");
  fetch->add_option("hash", args->hash, "content hash (64 lowercase hex)")->required();
  fetch->add_option("--url", args->url, "http(s):// or file:// URL of the shard")->required();
  fetch->add_option("--sha256", args->sha256, "expected SHA-256 of the bytes");
  fetch->add_option("--size", args->size, "expected size in bytes");
  fetch->callback([&global, args] { cmd_fetch(global, *args); });
}

}  // namespace datavo::cli
