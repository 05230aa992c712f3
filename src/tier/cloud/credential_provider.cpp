#include "tier/cloud/credential_provider.hpp"

#include <algorithm>

#include "util/log.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;

constexpr WallClock::duration k_max_refresh_margin = 5min;

}  // namespace

WallClock::duration refresh_margin(WallClock::duration lifetime) {
  if (lifetime <= WallClock::duration::zero()) return WallClock::duration::zero();
  return std::min(k_max_refresh_margin, lifetime / 2);
}

void log_kept_credential(std::string_view what, const Error& failure) {
  LOG_WARNING(what << ": refreshing the credentials ahead of their expiry failed (" << failure.message
                   << "); using the current ones until they expire");
}

}  // namespace datavo::cloud
