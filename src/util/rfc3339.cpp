#include "util/rfc3339.hpp"

#include <time.h>

#include "util/decimal.hpp"

namespace datavo::util {
namespace {

// The two- or four-digit field at `at`, when it is digits only and at most `max`.
std::optional<int> field(std::string_view text, std::size_t at, std::size_t size, int min, int max) {
  const auto value = parse_decimal(text.substr(at, size));
  if (!value || *value < std::uint64_t(min) || *value > std::uint64_t(max)) return std::nullopt;
  return int(*value);
}

// The offset of "+hh:mm", "-hh:mm" or "Z" from UTC; nullopt when `zone` is none of them.
std::optional<std::chrono::seconds> zone_offset(std::string_view zone) {
  if (zone == "Z" || zone == "z") return std::chrono::seconds{0};
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') return std::nullopt;
  const auto hours = field(zone, 1, 2, 0, 23), minutes = field(zone, 4, 2, 0, 59);
  if (!hours || !minutes) return std::nullopt;
  const std::chrono::seconds offset = std::chrono::hours{*hours} + std::chrono::minutes{*minutes};
  return zone[0] == '-' ? -offset : offset;
}

// The UTC time of calendar fields already range-checked (month 1-12); nullopt when timegm refuses them.
std::optional<std::chrono::system_clock::time_point> utc_time(int year, int month, int day, int hour, int minute,
                                                              int second) {
  struct tm utc {};
  utc.tm_year = year - 1900;
  utc.tm_mon = month - 1;
  utc.tm_mday = day;
  utc.tm_hour = hour;
  utc.tm_min = minute;
  utc.tm_sec = second;
  const time_t seconds = ::timegm(&utc);
  if (seconds == time_t(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(seconds);
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':')
    return std::nullopt;
  const auto year = field(text, 0, 4, 0, 9999), month = field(text, 5, 2, 1, 12), day = field(text, 8, 2, 1, 31);
  const auto hour = field(text, 11, 2, 0, 23), minute = field(text, 14, 2, 0, 59), second = field(text, 17, 2, 0, 60);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  std::size_t at = 19;
  if (text[at] == '.') {
    const std::size_t digits = ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == digits) return std::nullopt;
  }
  const auto offset = zone_offset(text.substr(at));
  if (!offset) return std::nullopt;
  const auto time = utc_time(*year, *month, *day, *hour, *minute, *second);
  if (!time) return std::nullopt;
  return *time - *offset;
}

std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text) {
  static constexpr std::string_view k_months = "JanFebMarAprMayJunJulAugSepOctNovDec";
  if (text.size() != 29 || text[3] != ',' || text[4] != ' ' || text[7] != ' ' || text[11] != ' ' || text[16] != ' ' ||
      text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT")
    return std::nullopt;
  const std::size_t month = k_months.find(text.substr(8, 3));
  if (month == std::string_view::npos || month % 3 != 0) return std::nullopt;
  const auto year = field(text, 12, 4, 0, 9999), day = field(text, 5, 2, 1, 31);
  const auto hour = field(text, 17, 2, 0, 23), minute = field(text, 20, 2, 0, 59), second = field(text, 23, 2, 0, 60);
  if (!year || !day || !hour || !minute || !second) return std::nullopt;
  return utc_time(*year, int(month / 3) + 1, *day, *hour, *minute, *second);
}

std::string format_rfc3339(std::chrono::system_clock::time_point when) {
  const time_t seconds = std::chrono::system_clock::to_time_t(when);
  struct tm utc {};
  ::gmtime_r(&seconds, &utc);
  char buffer[32];
  const std::size_t size = std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(buffer, size);
}

}  // namespace datavo::util
