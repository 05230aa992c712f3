// The value syntax of tier_config.hpp: byte sizes, durations, and paths with ~ and $VAR.
#include "datavo/tier_config.hpp"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "util/text.hpp"

namespace datavo {
namespace {

constexpr const char* k_size_expectation =
    "expected an integer or <n><unit> with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
constexpr const char* k_duration_expectation = "expected <n><unit> with s, m, h, d or w, e.g. 30d or 12h";

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_variable_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

enum class DigitRun { ok, empty, overflow };

// Reads the leading run of digits of `text` into `out` and removes it from `text`.
DigitRun take_digits(std::string_view& text, std::uint64_t& out) {
  out = 0;
  std::size_t i = 0;
  bool overflow = false;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (out > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) overflow = true;
    if (!overflow) out = out * 10 + digit;
  }
  if (i == 0) return DigitRun::empty;
  text.remove_prefix(i);
  return overflow ? DigitRun::overflow : DigitRun::ok;
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
  std::string_view rest = util::trim(text);
  if (!rest.empty() && rest.front() == '-') return invalid_size(text, "must not be negative");
  std::uint64_t count = 0;
  switch (take_digits(rest, count)) {
    case DigitRun::empty: return invalid_size(text, k_size_expectation);
    case DigitRun::overflow: return invalid_size(text, "too large");
    case DigitRun::ok: break;
  }
  if (!rest.empty() && rest.front() == '.') {
    // Whole bytes only: a fraction would be rounded somewhere, and "1.5TB" is better written "1536GB".
    return invalid_size(text, "fractions are not supported; use a smaller unit, e.g. 1536MiB for 1.5GiB");
  }
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::string unit = util::to_lower(rest);
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
  std::string_view rest = util::trim(text);
  if (!rest.empty() && rest.front() == '-') return invalid_duration(text, "must not be negative");
  std::uint64_t count = 0;
  switch (take_digits(rest, count)) {
    case DigitRun::empty: return invalid_duration(text, k_duration_expectation);
    case DigitRun::overflow: return invalid_duration(text, "too large");
    case DigitRun::ok: break;
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

std::optional<std::string> ConfigEnvironment::get(const std::string& name) const {
  if (getenv) return getenv(name);
  const char* value = ::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

ConfigEnvironment ConfigEnvironment::process() {
  ConfigEnvironment env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = ::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  return env;
}

Result<std::string> expand_path(std::string_view text, const ConfigEnvironment& env) {
  auto lookup = [&env](const std::string& name) { return env.get(name); };
  std::string out;
  std::size_t i = 0;
  if (!text.empty() && text.front() == '~') {
    if (text.size() > 1 && text[1] != '/') {
      return Error{ErrorCode::invalid_argument,
                   "\"" + std::string(text) + "\": ~user is not supported; write the home directory out"};
    }
    auto home = lookup("HOME");
    if (!home || home->empty()) {
      return Error{ErrorCode::invalid_argument,
                   "\"" + std::string(text) + "\": cannot expand ~: environment variable HOME is not set"};
    }
    out = *home;
    i = 1;
  }
  while (i < text.size()) {
    char c = text[i];
    if (c != '$') {
      out += c;
      ++i;
      continue;
    }
    std::string name;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      std::size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        return Error{ErrorCode::invalid_argument, "\"" + std::string(text) + "\": unterminated ${"};
      }
      name = std::string(text.substr(i + 2, close - i - 2));
      bool valid = !name.empty() && is_name_start(name.front());
      for (char n : name) valid = valid && is_variable_name_char(n);
      if (!valid) {
        return Error{ErrorCode::invalid_argument,
                     "\"" + std::string(text) + "\": invalid variable name \"" + name + "\" in ${...}"};
      }
      i = close + 1;
    } else if (i + 1 < text.size() && is_name_start(text[i + 1])) {
      std::size_t end = i + 1;
      while (end < text.size() && is_variable_name_char(text[end])) ++end;
      name = std::string(text.substr(i + 1, end - i - 1));
      i = end;
    } else {
      // As in the shell, a '$' that starts no variable name is a literal '$'.
      out += c;
      ++i;
      continue;
    }
    auto value = lookup(name);
    if (!value) {
      return Error{ErrorCode::invalid_argument,
                   "\"" + std::string(text) + "\": environment variable " + name + " is not set"};
    }
    out += *value;
  }
  return out;
}

}  // namespace datavo
