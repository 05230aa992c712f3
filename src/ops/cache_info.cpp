#include <sys/stat.h>

#include "datavo/operations.hpp"

namespace datavo {
namespace {

// The effective settings of the tier called `name`, empty when the config has none for it.
std::vector<TierSetting> settings_of(const CacheConfig& config, const std::string& name) {
  for (const auto& tier : config.tiers)
    if (tier.name == name) return tier.settings;
  return {};
}

// Probed on first use, which creates .locks/: a tier that does not exist yet is not created to be described.
std::optional<LockMechanism> lock_mechanism_of(Tier& tier) {
  FolderTier* folder = tier.as_folder();
  struct stat st {};
  if (folder == nullptr || ::stat(folder->location().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return folder->lock_mechanism();
}

}  // namespace

CacheInfoReport cache_info(const CacheSession& session) {
  CacheInfoReport report;
  report.config_path = session.config.path;
  report.config_source = session.config.source;
  report.skipped = session.config.skipped;
  report.warnings = session.config.warnings;
  report.instance = session.instance.name();
  std::vector<TierInfo> infos = session.cache->cache_info();
  for (std::size_t i = 0; i < infos.size(); ++i) {
    TierDescription tier;
    tier.lock_mechanism = lock_mechanism_of(*session.cache->tiers()[i]);
    tier.settings = settings_of(session.config, infos[i].name);
    tier.info = std::move(infos[i]);
    report.tiers.push_back(std::move(tier));
  }
  return report;
}

}  // namespace datavo
