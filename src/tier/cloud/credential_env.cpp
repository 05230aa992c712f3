#include "tier/cloud/credential_env.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace datavo::cloud {

CredentialEnv CredentialEnv::from_process() {
  CredentialEnv env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    env.home = home;
  } else {
    std::vector<char> buffer(16384);
    struct passwd entry {};
    struct passwd* found = nullptr;
    if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir)
      env.home = found->pw_dir;
  }
  env.clock = net::system_clock();
  return env;
}

std::optional<std::string> CredentialEnv::get(const std::string& name) const {
  if (!getenv) return std::nullopt;
  auto value = getenv(name);
  if (!value || value->empty()) return std::nullopt;
  return value;
}

std::shared_ptr<net::Clock> CredentialEnv::clock_or_system() const { return clock ? clock : net::system_clock(); }

WallClock::time_point CredentialEnv::now() const { return clock_or_system()->wall_now(); }

std::string CredentialEnv::expand_home(const std::string& path) const {
  if (!home.empty() && (path == "~" || path.starts_with("~/"))) return home + path.substr(1);
  return path;
}

}  // namespace datavo::cloud
