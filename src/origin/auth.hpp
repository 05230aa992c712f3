// The bearer token of the origin server (docs/protocol.md, "Authentication").
//
// Thread safety: pure function.
#pragma once

#include <string_view>

namespace datavo::origin {

// Whether an Authorization header value is "Bearer <token>": the scheme matched case-insensitively, the token
// exactly and in constant time (for a presented token of the right length).
bool bearer_token_matches(std::string_view authorization, std::string_view token);

}  // namespace datavo::origin
