// `datavo cache ...`: inspect and drive the cache hierarchy of this machine. Each subcommand is in a file of its
// own (cmd_cache_<name>.cpp).
#include "cli/cli.hpp"

namespace datavo::cli {

void add_cache_commands(CLI::App& app, GlobalOptions& global) {
  auto* cache = app.add_subcommand("cache", "inspect and drive the shard cache hierarchy");
  cache->require_subcommand(1);
  add_cache_check_command(*cache, global);
  add_cache_info_command(*cache, global);
  add_cache_fetch_command(*cache, global);
  add_cache_put_command(*cache, global);
  add_cache_ls_command(*cache, global);
  add_cache_rm_command(*cache, global);
  add_cache_gc_command(*cache, global);
  add_cache_verify_command(*cache, global);
  add_cache_stats_command(*cache, global);
}

}  // namespace datavo::cli
