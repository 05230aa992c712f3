// A Fetcher that downloads a URL with libcurl: http://, https:// and file://.
//
// Transient failures (connection reset, 5xx, 429, a short body, a stall past the low-speed window) are retried
// with exponential backoff and jitter, honouring Retry-After, and resumed with a Range request when the server
// supports it (otherwise restarted from scratch). Permanent failures (other 4xx) fail at once with the status in
// the message. URLs are logged with their query string and credentials redacted.
#pragma once

#include <optional>
#include <string>

#include "datavo/fetcher.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo {

// What the fetcher does with a sink that already holds bytes (a download a killed process left half-done):
// start over, or continue with a Range request. Continue only when the caller checks the whole shard against a
// known SHA-256 afterwards (Expectation::sha256): nothing says those bytes are a prefix of what the URL serves now.
enum class PartialDownload { restart, continue_verified };

// The returned fetcher reports the Content-Length as the expected size when the server sends one. `bearer_token`,
// when set, is sent as "Authorization: Bearer <token>" (never logged).
Fetcher make_url_fetcher(std::string url, TransportOptions options = {},
                         std::optional<std::string> bearer_token = std::nullopt,
                         PartialDownload partial = PartialDownload::restart);

}  // namespace datavo
