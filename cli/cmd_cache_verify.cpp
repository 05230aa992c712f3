// `datavo cache verify`: re-hashes the entries of every folder tier against their recorded SHA-256
// (datavo::cache_verify); --repair quarantines bad ones.
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

void cmd_verify(const GlobalOptions& global, bool repair) {
  CacheSession session = open_session(global);
  const CacheVerifyReport report = cache_verify(*session.cache, repair ? Repair::yes : Repair::no);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    const VerifyReport& v = tier.verify;
    rows.push_back({{"tier", tier.tier},
                    {"checked", v.checked},
                    {"ok", v.ok},
                    {"bad", v.bad},
                    {"unverifiable", v.unverifiable},
                    {"quarantined", v.quarantined},
                    {"bad_paths", v.bad_paths}});
    if (global.json) continue;
    std::cout << tier.tier << ": " << v.checked << " checked, " << v.ok << " ok, " << v.bad << " bad, "
              << v.unverifiable << " without a recorded digest, " << v.quarantined << " quarantined\n";
    for (const auto& p : v.bad_paths) std::cout << "  bad: " << p << "\n";
  }
  nlohmann::json not_verified = nlohmann::json::array();
  for (const auto& tier : report.not_verified) {
    not_verified.push_back({{"tier", tier.tier}, {"type", tier.type}, {"why", tier.why}});
    if (!global.json) std::cout << tier.tier << " (" << tier.type << "): " << tier.why << "\n";
  }
  const nlohmann::json json = {{"repair", repair}, {"tiers", rows}, {"not_verified", not_verified}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_verify_command(CLI::App& cache, GlobalOptions& global) {
  auto repair = std::make_shared<bool>(false);
  auto* verify = cache.add_subcommand("verify", "re-hash entries against their recorded SHA-256");
  verify->add_flag("--repair", *repair, "move bad entries to .quarantine/");
  verify->callback([&global, repair] { cmd_verify(global, *repair); });
}

}  // namespace datavo::cli
