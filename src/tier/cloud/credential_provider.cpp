#include "tier/cloud/credential_provider.hpp"

#include <algorithm>

#include "util/log.hpp"
#include "util/rfc3339.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;

constexpr WallClock::duration k_max_refresh_margin = 5min;

}  // namespace

WallClock::duration refresh_margin(WallClock::duration lifetime) {
  if (lifetime <= WallClock::duration::zero()) return WallClock::duration::zero();
  return std::min(k_max_refresh_margin, lifetime / 2);
}

Error expired_credential(std::string_view what, WallClock::time_point expired_at, WallClock::time_point now) {
  const auto ago = std::chrono::duration_cast<std::chrono::seconds>(now - expired_at).count();
  return Error{ErrorCode::permission_denied, std::string(what) + ": the credentials it gave expired at " +
                                                 util::format_rfc3339(expired_at) + ", " + std::to_string(ago) +
                                                 " s ago; refusing them (renew them at their source)"};
}

void log_kept_credential(std::string_view what, const Error& failure) {
  LOG_WARNING(what << ": refreshing the credentials ahead of their expiry failed (" << failure.message
                   << "); using the current ones until they expire");
}

}  // namespace datavo::cloud
