// `datavo cache gc`: evicts every writable folder tier to its budget and max_age and sweeps leftover staging and
// lock files (datavo::cache_gc).
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

void cmd_gc(const GlobalOptions& global, bool dry_run) {
  CacheSession session = open_session(global);
  const CacheGcReport report = cache_gc(*session.cache, dry_run ? DryRun::yes : DryRun::no);
  for (const auto& failure : report.failures) print_tier_error(failure);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    const EvictionReport& e = tier.eviction;
    rows.push_back({{"tier", tier.tier},
                    {"evicted", e.entries_evicted},
                    {"expired", e.expired},
                    {"freed_bytes", e.bytes_freed.count()},
                    {"staging_swept", e.staging_swept},
                    {"locks_swept", e.locks_swept},
                    {"used_bytes", e.used_after.count()}});
    if (global.json) continue;
    std::cout << tier.tier << ": " << (dry_run ? "would evict " : "evicted ") << e.entries_evicted << " entries ("
              << e.expired << " expired), " << human_bytes(e.bytes_freed.count()) << "; swept " << e.staging_swept
              << " staging and " << e.locks_swept << " lock files; " << human_bytes(e.used_after.count())
              << " in use\n";
  }
  const nlohmann::json json = {{"dry_run", dry_run}, {"tiers", rows}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_gc_command(CLI::App& cache, GlobalOptions& global) {
  auto dry_run = std::make_shared<bool>(false);
  auto* gc = cache.add_subcommand("gc", "evict to the budget and max_age; sweep leftover staging and lock files");
  gc->add_flag("--dry-run", *dry_run, "report what would be removed, remove nothing");
  gc->callback([&global, dry_run] { cmd_gc(global, *dry_run); });
}

}  // namespace datavo::cli
