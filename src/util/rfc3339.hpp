// RFC 3339 timestamps (and HTTP dates) ("2024-05-01T12:00:00Z", "2024-05-01T14:30:00.123+02:30"), the form in which
// cloud services write times: AWS credential expirations and listings, Google's expireTime, OAuth answers. Thread
// safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace datavo::util {

// The instant `text` names: YYYY-MM-DD, 'T' (or 't'), hh:mm:ss, an optional fraction of a second ('.' and at least
// one digit; dropped: the result has whole seconds), then 'Z' ('z') or a +hh:mm / -hh:mm offset. nullopt for
// anything else, including out-of-range fields (month 13, hour 24, minute 60; second 60, a leap second, is read as
// the next second, as timegm does).
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// The instant an HTTP date names (RFC 9110's IMF-fixdate, the RFC 1123 form: "Sun, 06 Nov 1994 08:49:37 GMT"), as
// Azure writes Last-Modified in its listings. The weekday is not checked against the date. nullopt for anything
// else, including the obsolete RFC 850 and asctime forms and out-of-range fields.
std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text);

// `when` as "YYYY-MM-DDThh:mm:ssZ" (UTC, whole seconds), for messages.
std::string format_rfc3339(std::chrono::system_clock::time_point when);

}  // namespace datavo::util
