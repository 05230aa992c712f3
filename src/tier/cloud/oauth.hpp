// The OAuth 2.0 pieces that the GCS and Azure token requests share: form-encoded request bodies and the parsing of
// token responses (RFC 6749 section 5.1, and the variants of Azure's managed identity endpoints).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/result.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::cloud {

// application/x-www-form-urlencoded: name=value pairs, percent-encoded, joined by '&'.
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

// The token of a token response: the string `token_field` ("access_token", or "accessToken" for the Azure CLI
// and IAM Credentials), the expiry from "expires_in" (seconds from `now`, a number or a numeric string) or else
// "expires_on" (Unix seconds, likewise). Errors (ErrorCode::remote) name `what` and the missing field, never a
// value.
Result<AccessToken> parse_token_response(std::string_view body, WallClock::time_point now, std::string_view what,
                                         std::string_view token_field = "access_token");

}  // namespace datavo::cloud
