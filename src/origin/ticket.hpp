// Stream tickets of origin protocol v1 (docs/protocol.md, "POST /v1/stream-tickets" and "GET <ticket url>"): the
// fields a ticket authorises, their canonical signing string, the HMAC-SHA256 signature under the store secret,
// and the ticket URL that carries them.
//
// Thread safety: value types and reentrant functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"

namespace datavo::origin {

// What a ticket authorises: one key group of one shard of one revision, until expires_at.
struct TicketFields {
  std::string content_hash;  // 64 lowercase hex
  std::string dataset;
  std::string split;
  std::uint64_t revision = 0;
  std::uint64_t shard_index = 0;
  std::vector<std::string> keys;  // sorted bytewise and de-duplicated (REQUIRES for every function below)
  std::int64_t expires_at = 0;    // Unix seconds
};

// The signed string: "v1\n" content_hash "\n" dataset "\n" split "\n" revision "\n" shard_index "\n"
// keys joined by "," "\n" expires_at (numbers in decimal).
std::string canonical_ticket_string(const TicketFields& fields);

// The lowercase hex HMAC-SHA256 of canonical_ticket_string(fields) under `secret`.
std::string sign_ticket(std::string_view secret, const TicketFields& fields);

// Whether `signature` is sign_ticket(secret, fields). Compares in constant time (for a signature of the right
// length), so that a forger learns nothing from the response time.
bool verify_ticket_signature(std::string_view secret, const TicketFields& fields, std::string_view signature);

// The ticket URL, relative to the server's base URL:
//   /v1/shards/<content_hash>.tar?dataset=D&split=S&rev=R&shard=N&keys=K1,K2&exp=E&sig=SIG
// Names are validated names (docs/protocol.md), so no percent-encoding is needed; it is applied anyway.
std::string ticket_url(const TicketFields& fields, std::string_view signature);

// A ticket read back from a shard request. `content_hash` comes from the URL path.
struct ParsedTicket {
  TicketFields fields;
  std::string signature;
};

// Reads the query parameters of a ticket URL through `param` (the decoded value of a parameter, or nullopt when
// absent). invalid_argument, naming the parameter, when one is missing or malformed (a number that is not
// decimal, an empty or unsorted key list, a name that fails validation). The signature is not checked here.
Result<ParsedTicket> parse_ticket(std::string_view content_hash,
                                  const std::function<std::optional<std::string>(std::string_view)>& param);

}  // namespace datavo::origin
