// Base64 (RFC 4648): the standard alphabet with padding (section 4: S3 checksums, Azure keys and MD5s) and the
// URL-safe one without padding (section 5: JSON Web Tokens). Over OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "datavo/result.hpp"

namespace datavo::util {

std::string base64_encode(std::string_view bytes);
// invalid_argument unless `text` is standard base64 with padding (surrounding whitespace is not accepted).
Result<std::string> base64_decode(std::string_view text);

std::string base64url_encode(std::string_view bytes);
// Accepts the text with or without '=' padding.
Result<std::string> base64url_decode(std::string_view text);

}  // namespace datavo::util
