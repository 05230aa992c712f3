// RFC 3986 percent-encoding, the one every request builder uses (S3's UriEncode() for SigV4, Azure's blob paths
// and query values, GCS's object names, form bodies of token requests).
#pragma once

#include <string>
#include <string_view>

namespace datavo::util {

// What percent_encode does with '/': object names that are paths keep it.
enum class Slash { encode, keep };

// Every byte of `text` except the unreserved characters A-Z a-z 0-9 - . _ ~ (and '/' with Slash::keep) as %XX,
// with upper-case hex digits. UTF-8 is encoded byte by byte.
std::string percent_encode(std::string_view text, Slash slash = Slash::encode);

}  // namespace datavo::util
