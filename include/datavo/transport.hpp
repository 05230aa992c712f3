// TransportOptions: the retry, timeout and backoff policy of Datavo's one HTTP transport (src/net/http_client.hpp),
// used by the URL fetcher, the origin client and the cloud tiers. Values only; thread-safe to copy.
#pragma once

#include <optional>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

struct TransportOptions {
  Milliseconds connect_timeout{10'000};
  // A transfer slower than 1 byte/s over this window counts as stalled and is retried.
  Seconds stall_timeout{30};
  int max_attempts = 5;
  Milliseconds initial_backoff{200};
  Milliseconds max_backoff{10'000};
};

// $DATAVO_STALL_TIMEOUT: nullopt when unset or empty; invalid_argument naming the variable unless it is a whole
// number of seconds from 1 to 86400.
Result<std::optional<Seconds>> stall_timeout_from_env();

}  // namespace datavo
