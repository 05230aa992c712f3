// `datavo cache stats`: the cumulative per-tier counters of every process (datavo::cache_stats).
#include <cstdio>
#include <iomanip>
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

// Every counter of include/datavo/tier.hpp under its own name, plus the hit rate.
nlohmann::json stats_json(const TierStats& s) {
  nlohmann::json out = nlohmann::json::object();
  s.for_each([&out](const char* name, std::uint64_t count) { out[name] = count; });
  out["hit_rate"] = s.hit_rate();
  return out;
}

void print_table(const std::vector<TierInfo>& tiers) {
  std::cout << std::left << std::setw(16) << "tier" << std::right << std::setw(9) << "hits" << std::setw(9) << "misses"
            << std::setw(9) << "hit rate" << std::setw(11) << "promotions" << std::setw(9) << "installs" << std::setw(9)
            << "skips" << std::setw(10) << "evictions" << std::setw(8) << "errors" << std::setw(12) << "served"
            << std::setw(12) << "installed"
            << "\n";
  for (const auto& t : tiers) {
    char rate[16];
    std::snprintf(rate, sizeof rate, "%.1f%%", 100.0 * t.stats.hit_rate());
    std::cout << std::left << std::setw(16) << t.name << std::right << std::setw(9) << t.stats.hits << std::setw(9)
              << t.stats.misses << std::setw(9) << rate << std::setw(11) << t.stats.promotions << std::setw(9)
              << t.stats.installs << std::setw(9) << t.stats.capacity_skips << std::setw(10) << t.stats.evictions
              << std::setw(8) << t.stats.errors << std::setw(12) << human_bytes(t.stats.bytes_served.count())
              << std::setw(12) << human_bytes(t.stats.bytes_installed.count()) << "\n";
  }
}

void cmd_stats(const GlobalOptions& global, bool reset) {
  CacheSession session = open_session(global);
  const CacheStatsReport report = require(cache_stats(*session.cache, reset ? ResetStats::yes : ResetStats::no));
  if (!global.json) return print_table(report.tiers);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : report.tiers)
    rows.push_back({{"tier", t.name}, {"type", t.type}, {"stats", stats_json(t.stats)}});
  print_json({{"tiers", rows}});
}

}  // namespace

void add_cache_stats_command(CLI::App& cache, GlobalOptions& global) {
  auto reset = std::make_shared<bool>(false);
  auto* stats = cache.add_subcommand("stats", "cumulative per-tier counters of every process");
  stats->add_flag("--reset", *reset, "zero the counters first");
  stats->callback([&global, reset] { cmd_stats(global, *reset); });
}

}  // namespace datavo::cli
