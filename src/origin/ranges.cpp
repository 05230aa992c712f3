#include "origin/ranges.hpp"

#include <algorithm>
#include <optional>

#include "util/decimal.hpp"
#include "util/text.hpp"

namespace datavo::origin {
namespace {

// Longer numbers (2^64 has 20 digits) are not byte positions of any shard: the header is ignored.
constexpr std::size_t k_max_position_digits = 19;

std::optional<std::uint64_t> position(std::string_view text) {
  if (text.size() > k_max_position_digits) return std::nullopt;
  return util::parse_decimal(text);
}

}  // namespace

RangeOutcome parse_range(std::string_view header, std::uint64_t size, ByteRange& out) {
  constexpr std::string_view prefix = "bytes=";
  if (!header.starts_with(prefix)) return RangeOutcome::whole;
  header.remove_prefix(prefix.size());
  const auto dash = header.find('-');
  if (dash == std::string_view::npos || header.find(',') != std::string_view::npos) return RangeOutcome::whole;
  const std::string_view lhs = header.substr(0, dash);
  const std::string_view rhs = header.substr(dash + 1);
  if (lhs.empty()) {
    const auto suffix = position(rhs);
    if (!suffix) return RangeOutcome::whole;
    if (*suffix == 0 || size == 0) return RangeOutcome::unsatisfiable;
    out.first = size - std::min(*suffix, size);
    out.last = size - 1;
    return RangeOutcome::partial;
  }
  const auto first = position(lhs);
  if (!first) return RangeOutcome::whole;
  std::optional<std::uint64_t> last;
  if (!rhs.empty()) {
    last = position(rhs);
    if (!last || *last < *first) return RangeOutcome::whole;
  }
  if (*first >= size) return RangeOutcome::unsatisfiable;
  out.first = *first;
  out.last = last ? std::min(*last, size - 1) : size - 1;
  return RangeOutcome::partial;
}

bool etag_matches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const auto comma = header.find(',');
    std::string_view tag = util::trim(header.substr(0, comma));
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace datavo::origin
