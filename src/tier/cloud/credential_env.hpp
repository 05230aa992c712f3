// The environment seam of the cloud credential providers (S3's aws_*.hpp, gcs/google_credentials.hpp,
// azure/azure_credentials.hpp): the environment variables, the home directory and the clock they read. Tests give
// their own, so that no provider depends on the real environment or waits on the real clock; from_process() is
// the real one.
//
// Thread safety: a value; its functions may be called from any thread (getenv and the clock must allow that).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/http_client.hpp"

namespace datavo::cloud {

using WallClock = std::chrono::system_clock;

struct CredentialEnv {
  // The value of an environment variable, nullopt when unset. nullptr: no variable is set.
  std::function<std::optional<std::string>(const std::string& name)> getenv;
  // The user's home directory (for ~/.aws and ~/.config/gcloud), "" when unknown.
  std::string home;
  // Wall time for expiries and request dates, and the sleeps of retries. nullptr: net::system_clock().
  std::shared_ptr<net::Clock> clock;

  // ::getenv, $HOME (else the passwd entry), the system clock.
  static CredentialEnv from_process();

  // getenv(name), with an empty value treated as unset (as the cloud SDKs do).
  std::optional<std::string> get(const std::string& name) const;
  // clock, or the system clock; never nullptr.
  std::shared_ptr<net::Clock> clock_or_system() const;
  WallClock::time_point now() const;
  // `path` with a leading "~" (alone or before '/') replaced by the home directory; unchanged without one.
  std::string expand_home(const std::string& path) const;
};

}  // namespace datavo::cloud
