// `datavo cache info`: the config used and each tier, fastest first (datavo::cache_info), like `ccache -p`.
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

nlohmann::json tier_json(const TierDescription& tier) {
  const TierInfo& t = tier.info;
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& setting : tier.settings)
    settings.push_back({{"setting", setting.name}, {"value", setting.value}, {"origin", setting.origin}});
  nlohmann::json out = {
      {"tier", t.name},        {"type", t.type},     {"path", t.location},       {"max_bytes", nullptr},
      {"used_bytes", nullptr}, {"entries", nullptr}, {"read_only", t.read_only}, {"lock_mechanism", nullptr},
      {"settings", settings}};
  if (t.max_bytes) out["max_bytes"] = t.max_bytes->count();
  if (t.usage) out["used_bytes"] = t.usage->used.count();
  if (t.usage) out["entries"] = t.usage->entries;
  if (tier.lock_mechanism) out["lock_mechanism"] = to_string(*tier.lock_mechanism);
  return out;
}

void print_json_report(const CacheInfoReport& report) {
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& c : report.skipped) skipped.push_back({{"path", c.path}, {"reason", c.reason}});
  nlohmann::json tiers = nlohmann::json::array();
  for (const auto& tier : report.tiers) tiers.push_back(tier_json(tier));
  print_json({{"config",
               {{"path", report.config_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.config_path)},
                {"source", to_string(report.config_source)},
                {"skipped", skipped},
                {"warnings", report.warnings}}},
              {"instance", report.instance},
              {"tiers", tiers}});
}

void print_tier_text(std::size_t number, const TierDescription& tier) {
  const TierInfo& t = tier.info;
  std::cout << "  " << number << ". " << t.name << " [" << t.type << (t.read_only ? ", read-only" : "") << "] "
            << t.location << "\n     capacity " << (t.max_bytes ? human_bytes(t.max_bytes->count()) : "unbounded");
  if (t.usage)
    std::cout << ", used " << human_bytes(t.usage->used.count()) << ", " << t.usage->entries << " entries";
  else
    std::cout << ", usage unknown";
  std::cout << "\n";
  if (t.type == "folder") {
    std::cout << "     lock mechanism: "
              << (tier.lock_mechanism ? to_string(*tier.lock_mechanism)
                                      : "not probed yet (the tier directory does not exist)")
              << "\n";
  }
  // Like `ccache -p`: every effective setting and where its value came from.
  std::size_t width = 0;
  for (const auto& setting : tier.settings) width = std::max(width, setting.name.size() + 3 + setting.value.size());
  for (const auto& setting : tier.settings) {
    const std::string text = setting.name + " = " + setting.value;
    std::cout << "     " << text << std::string(width - text.size() + 2, ' ') << "(" << setting.origin << ")\n";
  }
}

void print_text_report(const CacheInfoReport& report) {
  if (report.config_path.empty())
    std::cout << "config: built-in default\n";
  else
    std::cout << "config: " << report.config_path << " (" << to_string(report.config_source) << ")\n";
  for (const auto& c : report.skipped) std::cout << "  skipped " << c.path << ": " << c.reason << "\n";
  for (const auto& w : report.warnings) std::cout << "  warning: " << w << "\n";
  std::cout << "instance: " << report.instance << "\n";
  std::cout << "tiers, fastest first:\n";
  for (std::size_t i = 0; i < report.tiers.size(); ++i) print_tier_text(i + 1, report.tiers[i]);
}

}  // namespace

void add_cache_info_command(CLI::App& cache, GlobalOptions& global) {
  cache.add_subcommand("info", "show the config used and each tier, fastest first")->callback([&global] {
    const CacheInfoReport report = cache_info(open_session(global));
    if (global.json)
      print_json_report(report);
    else
      print_text_report(report);
  });
}

}  // namespace datavo::cli
