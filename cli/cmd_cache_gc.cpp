// `datavo cache gc`: evicts every writable folder tier to its budget and max_age and sweeps leftover staging and
// lock files, expires a cloud tier's objects older than its max_age, sweeps the leases and check probes that killed
// processes left in a cloud tier, and says what it did with each tier (datavo::cache_gc).
#include <iostream>
#include <sstream>
#include <string>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

// "; removed 2 expired leases and 1 check probe left by killed processes", or "" when there were none.
std::string describe_leftovers(const LeftoverReport& leftovers, bool dry_run) {
  if (leftovers.expired_leases + leftovers.stale_probes == 0) return "";
  return std::string("; ") + (dry_run ? "would remove " : "removed ") +
         std::to_string(dry_run ? leftovers.expired_leases + leftovers.stale_probes : leftovers.removed) + " of " +
         std::to_string(leftovers.expired_leases) + " expired leases and " + std::to_string(leftovers.stale_probes) +
         " check probes left by killed processes";
}

std::string describe(const TierGcReport& tier, bool dry_run) {
  const EvictionReport& e = tier.eviction;
  const std::string age = tier.max_age ? format_duration(*tier.max_age) : "";
  switch (tier.policy) {
    case GcPolicy::evict: {
      std::ostringstream out;
      out << tier.tier << ": " << (dry_run ? "would evict " : "evicted ") << e.entries_evicted << " entries ("
          << e.expired << " expired), " << human_bytes(e.bytes_freed.count()) << "; swept " << e.staging_swept
          << " staging and " << e.locks_swept << " lock files; " << human_bytes(e.used_after.count()) << " in use";
      return out.str();
    }
    case GcPolicy::expire:
      return tier.tier + " (" + tier.type + "): " + (dry_run ? "would delete " : "deleted ") +
             std::to_string(e.expired) + " objects older than max_age " + age + ", " +
             human_bytes(e.bytes_freed.count()) + "; " + human_bytes(e.used_after.count()) +
             " left; its size is left to the bucket's lifecycle rules" + describe_leftovers(tier.leftovers, dry_run);
    case GcPolicy::lifecycle:
      return tier.tier + " (" + tier.type +
             "): no entry deleted: no max_age, and its size is left to the bucket's lifecycle rules (docs/config.md)" +
             describe_leftovers(tier.leftovers, dry_run);
    case GcPolicy::read_only: return tier.tier + " (" + tier.type + "): read-only, left alone";
  }
  return tier.tier;
}

void cmd_gc(const GlobalOptions& global, bool dry_run) {
  InterruptOnSignal interrupt;
  CacheSession session = open_session(global);
  const CacheGcReport report = cache_gc(*session.cache, dry_run ? DryRun::yes : DryRun::no);
  for (const auto& failure : report.failures) print_tier_error(failure);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    const EvictionReport& e = tier.eviction;
    rows.push_back({{"tier", tier.tier},
                    {"type", tier.type},
                    {"policy", to_string(tier.policy)},
                    {"max_age_seconds", tier.max_age ? nlohmann::json(tier.max_age->count()) : nlohmann::json()},
                    {"evicted", e.entries_evicted},
                    {"expired", e.expired},
                    {"freed_bytes", e.bytes_freed.count()},
                    {"staging_swept", e.staging_swept},
                    {"locks_swept", e.locks_swept},
                    {"used_bytes", e.used_after.count()},
                    {"expired_leases", tier.leftovers.expired_leases},
                    {"stale_probes", tier.leftovers.stale_probes},
                    {"leftovers_removed", tier.leftovers.removed}});
    if (!global.json) std::cout << describe(tier, dry_run) << "\n";
  }
  const nlohmann::json json = {{"dry_run", dry_run}, {"tiers", rows}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_gc_command(CLI::App& cache, GlobalOptions& global) {
  auto dry_run = std::make_shared<bool>(false);
  auto* gc = cache.add_subcommand(
      "gc",
      "evict to the budget and max_age (cloud tiers: max_age only); sweep leftover staging and lock files (cloud "
      "tiers: the leases and check probes of killed processes)");
  gc->add_flag("--dry-run", *dry_run, "report what would be removed, remove nothing");
  gc->callback([&global, dry_run] { cmd_gc(global, *dry_run); });
}

}  // namespace datavo::cli
