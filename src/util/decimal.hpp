// Strict parsing of unsigned decimal numbers, as they appear in headers, metadata and records: digits only (no
// sign, no space), no overflow.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace datavo::util {

// The value of `text`, or nullopt when it is empty, holds anything but the digits 0-9, or exceeds 2^64 - 1.
inline std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace datavo::util
