// The scalar value parsers of config.hpp: byte sizes and durations.
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "datavo/config.hpp"

namespace datavo {
namespace {

constexpr const char* k_size_expectation =
    "expected an integer or <n><unit> with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
constexpr const char* k_duration_expectation = "expected <n><unit> with s, m, h, d or w, e.g. 30d or 12h";

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

enum class Number { ok, empty, overflow };

// Reads the leading run of digits of `text` into `out` and removes it from `text`.
Number take_digits(std::string_view& text, std::uint64_t& out) {
  out = 0;
  std::size_t i = 0;
  bool overflow = false;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (out > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) overflow = true;
    if (!overflow) out = out * 10 + digit;
  }
  if (i == 0) return Number::empty;
  text.remove_prefix(i);
  return overflow ? Number::overflow : Number::ok;
}

Error invalid_size(std::string_view text, std::string_view why) {
  return Error{ErrorCode::invalid_argument, "invalid size \"" + std::string(text) + "\" (" + std::string(why) + ")"};
}

Error invalid_duration(std::string_view text, std::string_view why) {
  return Error{ErrorCode::invalid_argument,
               "invalid duration \"" + std::string(text) + "\" (" + std::string(why) + ")"};
}

}  // namespace

Result<Bytes> parse_byte_size(std::string_view text) {
  std::string_view rest = trim(text);
  if (!rest.empty() && rest.front() == '-') return invalid_size(text, "must not be negative");
  std::uint64_t count = 0;
  switch (take_digits(rest, count)) {
    case Number::empty: return invalid_size(text, k_size_expectation);
    case Number::overflow: return invalid_size(text, "too large");
    case Number::ok: break;
  }
  if (!rest.empty() && rest.front() == '.') {
    // Whole bytes only: a fraction would be rounded somewhere, and "1.5TB" is better written "1536GB".
    return invalid_size(text, "fractions are not supported; use a smaller unit, e.g. 1536MiB for 1.5GiB");
  }
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::string unit = lower(rest);
  unsigned shift = 0;
  if (unit.empty() || unit == "b")
    shift = 0;
  else if (unit == "kb" || unit == "kib")
    shift = 10;
  else if (unit == "mb" || unit == "mib")
    shift = 20;
  else if (unit == "gb" || unit == "gib")
    shift = 30;
  else if (unit == "tb" || unit == "tib")
    shift = 40;
  else
    return invalid_size(text, k_size_expectation);
  if (shift > 0 && count > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    return invalid_size(text, "too large");
  }
  return Bytes{count << shift};
}

Result<Seconds> parse_duration(std::string_view text) {
  std::string_view rest = trim(text);
  if (!rest.empty() && rest.front() == '-') return invalid_duration(text, "must not be negative");
  std::uint64_t count = 0;
  switch (take_digits(rest, count)) {
    case Number::empty: return invalid_duration(text, k_duration_expectation);
    case Number::overflow: return invalid_duration(text, "too large");
    case Number::ok: break;
  }
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  // Lower case only: "M" could be read as months.
  std::uint64_t unit_seconds = 0;
  if (rest == "s")
    unit_seconds = 1;
  else if (rest == "m")
    unit_seconds = 60;
  else if (rest == "h")
    unit_seconds = 3600;
  else if (rest == "d")
    unit_seconds = 86400;
  else if (rest == "w")
    unit_seconds = 7 * 86400;
  else
    return invalid_duration(text, k_duration_expectation);
  constexpr auto k_max = static_cast<std::uint64_t>(std::numeric_limits<Seconds::rep>::max());
  if (count > k_max / unit_seconds) return invalid_duration(text, "too large");
  return Seconds{static_cast<Seconds::rep>(count * unit_seconds)};
}

std::string format_byte_size(Bytes size) {
  static constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
  const std::uint64_t count = size.count();
  if (count == 0) return "0 B";
  int unit = -1;
  while (unit < 3 && (count >> (10 * (unit + 2))) << (10 * (unit + 2)) == count) ++unit;
  if (unit < 0) return std::to_string(count) + " B";
  return std::to_string(count >> (10 * (unit + 1))) + " " + k_units[unit];
}

std::string format_duration(Seconds duration) {
  const auto s = static_cast<std::uint64_t>(duration.count());
  if (s != 0 && s % 604800 == 0) return std::to_string(s / 604800) + "w";
  if (s != 0 && s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s != 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s != 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace datavo
