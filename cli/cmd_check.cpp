// `datavo cache check`: probes each tier once (as sccache's check()) and says what works, what does not and why.
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tier_registry.hpp"

namespace datavo::cli {
namespace {

void cmd_check(const GlobalOptions& global) {
  const CacheConfig config = require(resolve_config(global.config_path));
  auto cache = require(build_hierarchy(config));
  nlohmann::json rows = nlohmann::json::array();
  std::size_t unusable = 0;
  for (const auto& tier : cache->tiers()) {
    const CheckReport report = tier->check();
    const bool usable = tier->read_only() ? report.readable : report.readable && report.writable;
    if (!usable) ++unusable;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& step : report.steps) {
      steps.push_back({{"step", step.name}, {"ok", step.ok}, {"detail", step.detail}});
    }
    rows.push_back({{"tier", tier->name()},
                    {"type", tier->type()},
                    {"location", tier->location()},
                    {"readable", report.readable},
                    {"writable", report.writable},
                    {"read_only", tier->read_only()},
                    {"ok", usable},
                    {"steps", steps},
                    {"warnings", report.warnings}});
    if (!global.json) {
      std::cout << tier->name() << " [" << tier->type() << "] " << tier->location() << ": "
                << (usable ? "ok" : "NOT USABLE") << (tier->read_only() ? " (read-only)" : "") << "\n";
      for (const auto& step : report.steps) {
        std::cout << "  " << (step.ok ? "ok  " : "FAIL") << " " << step.name << ": " << step.detail << "\n";
      }
      for (const auto& warning : report.warnings) std::cout << "  WARNING: " << warning << "\n";
    }
  }
  const nlohmann::json report = {{"tiers", rows}, {"ok", unusable == 0}};
  if (unusable > 0) {
    // The one failure report of docs/cli.md: main() prints `report` with its "error" added, once.
    throw Fatal{k_exit_failed,
                Error{ErrorCode::remote, std::to_string(unusable) + " of " + std::to_string(cache->tiers().size()) +
                                             " tiers cannot be read or written; see above"},
                report};
  }
  if (global.json) print_json(report);
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
