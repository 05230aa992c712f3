// Fixtures for the tests of shards.yaml and the tier registry: an environment seam with fixed variables, and a
// folder tier's TierConfig. Header-only; no state.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "datavo/folder_tier.hpp"
#include "datavo/tier_config.hpp"

namespace datavo::shardtest {

// A ConfigEnvironment whose variables are `vars` only, and whose system-wide shards.yaml does not exist.
inline ConfigEnvironment env_with(std::map<std::string, std::string> vars) {
  ConfigEnvironment env;
  env.getenv = [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  env.system_path = "/nonexistent/shards.yaml";
  return env;
}

// A folder tier named `name` at `path`, with every other setting at its default.
inline TierConfig folder_config(const std::string& name, const std::string& path) {
  TierConfig c;
  c.name = name;
  c.type = "folder";
  FolderTierOptions options;
  options.path = path;
  c.backend = options;
  return c;
}

}  // namespace datavo::shardtest
