// A Fetcher that downloads a URL with libcurl: http://, https:// and file://.
//
// Transient failures (connection reset, 5xx, 429, a short body, a stall past the low-speed window) are retried
// with exponential backoff and jitter, honouring Retry-After, and resumed with a Range request when the server
// supports it (otherwise restarted from scratch). Permanent failures (other 4xx) fail at once with the status in
// the message. URLs are logged with their query string and credentials redacted.
#pragma once

#include <optional>
#include <string>

#include "datavo/hierarchy.hpp"
#include "datavo/units.hpp"

namespace datavo {

struct TransportOptions {
  Milliseconds connect_timeout{10'000};
  // A transfer slower than 1 byte/s over this window counts as stalled and is retried.
  Seconds stall_timeout{30};
  int max_attempts = 5;
  Milliseconds initial_backoff{200};
  Milliseconds max_backoff{10'000};
  // Sent as "Authorization: Bearer <token>"; never logged.
  std::optional<std::string> bearer_token;
};

// $DATAVO_STALL_TIMEOUT: nullopt when unset or empty; invalid_argument naming the variable unless it is a whole
// number of seconds from 1 to 86400.
Result<std::optional<Seconds>> stall_timeout_from_env();

// The returned fetcher reports the Content-Length as the expected size when the server sends one.
Fetcher make_url_fetcher(std::string url, TransportOptions options = {});

}  // namespace datavo
