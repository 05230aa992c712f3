// `datavo cache check`: probes each tier once (datavo::cache_check) and says what works, what does not and why.
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

nlohmann::json tier_json(const TierCheckReport& tier) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& step : tier.check.steps)
    steps.push_back({{"step", step.name}, {"ok", step.ok}, {"detail", step.detail}});
  return {{"tier", tier.tier},
          {"type", tier.type},
          {"location", tier.location},
          {"readable", tier.check.readable},
          {"writable", tier.check.writable},
          {"read_only", tier.read_only},
          {"ok", tier.usable},
          {"steps", steps},
          {"warnings", tier.check.warnings}};
}

void print_tier(const TierCheckReport& tier) {
  std::cout << tier.tier << " [" << tier.type << "] " << tier.location << ": " << (tier.usable ? "ok" : "NOT USABLE")
            << (tier.read_only ? " (read-only)" : "") << "\n";
  for (const auto& step : tier.check.steps)
    std::cout << "  " << (step.ok ? "ok  " : "FAIL") << " " << step.name << ": " << step.detail << "\n";
  for (const auto& warning : tier.check.warnings) std::cout << "  WARNING: " << warning << "\n";
}

void cmd_check(const GlobalOptions& global) {
  // A check stopped by a signal still removes its probe object (BlobTier::check).
  InterruptOnSignal interrupt;
  const CacheConfig config = require(resolve_config(global.config_path));
  auto cache = require(build_hierarchy(config));
  const CacheCheckReport report = cache_check(*cache);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    rows.push_back(tier_json(tier));
    if (!global.json) print_tier(tier);
  }
  const nlohmann::json json = {{"tiers", rows}, {"ok", report.ok}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_check_command(CLI::App& cache, GlobalOptions& global) {
  cache
      .add_subcommand("check",
                      "probe every tier once: credentials, put, get, a conditional put (which must be refused) and "
                      "delete of a probe object for cloud tiers; write, sync, read back for folder tiers")
      ->callback([&global] { cmd_check(global); });
}

}  // namespace datavo::cli
