// `datavo cache stats`: the cumulative per-tier counters (datavo::cache_stats), as a table, JSON or the Prometheus
// text format (datavo/metrics.hpp).
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>

#include "cli/cli.hpp"
#include "datavo/metrics.hpp"

namespace datavo::cli {
namespace {

enum class StatsFormat { text, json, prometheus };

// Every counter of include/datavo/tier.hpp under its own name (null when the tier cannot keep it), plus the hit
// rate.
nlohmann::json stats_json(const TierInfo& t) {
  nlohmann::json out = nlohmann::json::object();
  t.stats.for_each_stat([&](TierStat stat, const char* name, std::uint64_t count) {
    out[name] = t.kept.contains(stat) ? nlohmann::json(count) : nlohmann::json(nullptr);
  });
  out["hit_rate"] = t.stats.hit_rate();
  return out;
}

std::vector<std::string> not_kept(const TierInfo& t) {
  std::vector<std::string> out;
  t.stats.for_each_stat([&](TierStat stat, const char* name, std::uint64_t) {
    if (!t.kept.contains(stat)) out.emplace_back(name);
  });
  return out;
}

// Whose counters a row shows, for the lines under the table.
std::string scope_text(const TierInfo& t) {
  switch (t.scope) {
    case StatsScope::every_process: return "every process that used it";
    case StatsScope::this_machine: return "this machine's processes, kept in tier '" + t.kept_in + "'";
    case StatsScope::this_process: return "this process only (no writable folder tier keeps them)";
  }
  return "?";
}

// A counter the tier cannot keep shows as "-", not as a zero.
std::string cell(const TierInfo& t, TierStat stat, std::uint64_t count) {
  return t.kept.contains(stat) ? std::to_string(count) : "-";
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
    const TierStats& s = t.stats;
    std::cout << std::left << std::setw(16) << t.name << std::right << std::setw(9) << s.hits << std::setw(9)
              << s.misses << std::setw(9) << rate << std::setw(11) << s.promotions << std::setw(9) << s.installs
              << std::setw(9) << s.capacity_skips << std::setw(10) << cell(t, TierStat::evictions, s.evictions)
              << std::setw(8) << s.errors << std::setw(12) << human_bytes(s.bytes_served.count()) << std::setw(12)
              << human_bytes(s.bytes_installed.count()) << "\n";
  }
  for (const auto& t : tiers) {
    if (t.scope == StatsScope::every_process) continue;
    const TierStats& s = t.stats;
    std::cout << "tier " << t.name << " (" << t.type << "): counters of " << scope_text(t) << "; uploads " << s.uploads
              << " uploaded, " << s.uploads_present << " already there, " << s.upload_failures << " failed, "
              << s.upload_skips << " skipped; " << s.lease_waits << " lease waits; " << s.hedges_sent
              << " hedged reads, " << s.hedges_won << " won by the hedge";
    const auto missing = not_kept(t);
    if (!missing.empty()) {
      std::cout << "; not kept: ";
      for (std::size_t i = 0; i < missing.size(); ++i) std::cout << (i ? ", " : "") << missing[i];
      std::cout << " (\"-\": the service does them, no process sees them)";
    }
    std::cout << "\n";
  }
}

void cmd_stats(const GlobalOptions& global, bool reset, StatsFormat format) {
  CacheSession session = open_session(global);
  const CacheStatsReport report = require(cache_stats(*session.cache, reset ? ResetStats::yes : ResetStats::no));
  if (format == StatsFormat::prometheus) {
    std::cout << render_prometheus(tier_metrics(report.tiers));
    return;
  }
  if (format == StatsFormat::text && !global.json) return print_table(report.tiers);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : report.tiers) {
    rows.push_back({{"tier", t.name},
                    {"type", t.type},
                    {"scope", to_string(t.scope)},
                    {"kept_in", t.kept_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.kept_in)},
                    {"not_kept", not_kept(t)},
                    {"breaker_open", t.breaker_open},
                    {"stats", stats_json(t)}});
  }
  print_json({{"tiers", rows}});
}

}  // namespace

void add_cache_stats_command(CLI::App& cache, GlobalOptions& global) {
  auto reset = std::make_shared<bool>(false);
  auto format = std::make_shared<StatsFormat>(StatsFormat::text);
  auto* stats = cache.add_subcommand("stats", "cumulative per-tier counters of every process");
  stats->add_flag("--reset", *reset, "zero the counters first");
  const std::map<std::string, StatsFormat> formats{
      {"text", StatsFormat::text}, {"json", StatsFormat::json}, {"prometheus", StatsFormat::prometheus}};
  stats
      ->add_option("--format", *format,
                   "text (default; --json gives json), json, or prometheus: the text exposition format 0.0.4")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case));
  stats->callback([&global, reset, format] { cmd_stats(global, *reset, *format); });
}

}  // namespace datavo::cli
