// RFC 3986 percent-encoding, the one every request builder uses (S3's UriEncode() for SigV4, Azure's blob paths
// and query values, GCS's object names, form bodies of token requests), and its decoding.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace datavo::util {

// What percent_encode does with '/': object names that are paths keep it.
enum class Slash { encode, keep };

// Every byte of `text` except the unreserved characters A-Z a-z 0-9 - . _ ~ (and '/' with Slash::keep) as %XX,
// with upper-case hex digits. UTF-8 is encoded byte by byte.
std::string percent_encode(std::string_view text, Slash slash = Slash::encode);

// What percent_decode does with '+': a form (application/x-www-form-urlencoded) or a query string read as S3 and
// Azure read it means a space by it; a URL path does not.
enum class Plus { literal, space };

// `text` with every %XX escape (hex digits of either case) decoded once. nullopt when a '%' is not followed by
// two hex digits.
std::optional<std::string> percent_decode(std::string_view text, Plus plus = Plus::literal);

}  // namespace datavo::util
