// `datavo cache put`: installs a local file under a content hash (datavo::cache_put).
#include "cli/cli.hpp"

namespace datavo::cli {

void add_cache_put_command(CLI::App& cache, GlobalOptions& global) {
  auto args = std::make_shared<std::pair<std::string, std::string>>();
  auto* put = cache.add_subcommand("put", "install a local file under a content hash");
  put->add_option("hash", args->first, "content hash")->required();
  put->add_option("file", args->second, "file to install")->required()->check(CLI::ExistingFile);
  put->callback([&global, args] {
    InterruptOnSignal interrupt;
    CacheSession session = open_session(global);
    const ShardKey key{session.instance, require(ContentHash::parse(args->first))};
    print_install_report(global, require(cache_put(*session.cache, key, args->second)));
  });
}

}  // namespace datavo::cli
