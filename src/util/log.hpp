// Process-wide logging to stderr, levelled by $DATAVO_LOG_LEVEL (error, warning, info, debug, in any case; default
// warning; an unknown value is said once on stderr) or set_log_level(). Formatting is skipped when the level is
// disabled. Thread-safe: one line per call.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace datavo::log {

enum class Level { error = 0, warning = 1, info = 2, debug = 3 };

Level level();
void set_level(Level level);
// Parses "error", "warning"/"warn", "info", "debug", ASCII case-insensitively; false when unknown.
bool parse_level(std::string_view text, Level& out);
bool enabled(Level level);
void write(Level level, std::string_view message);
// Logs `message` at WARNING only the first time `once_key` is seen in this process.
void warn_once(const std::string& once_key, std::string_view message);

// Replaces query strings and user:password@ in URLs with "<redacted>".
std::string redact_url(std::string_view url);

}  // namespace datavo::log

#define DATAVO_LOG(lvl, expr)                                                \
  do {                                                                       \
    if (::datavo::log::enabled(::datavo::log::Level::lvl)) {                 \
      std::ostringstream datavo_log_os_;                                     \
      datavo_log_os_ << expr;                                                \
      ::datavo::log::write(::datavo::log::Level::lvl, datavo_log_os_.str()); \
    }                                                                        \
  } while (false)
#define LOG_ERROR(expr) DATAVO_LOG(error, expr)
#define LOG_WARNING(expr) DATAVO_LOG(warning, expr)
#define LOG_INFO(expr) DATAVO_LOG(info, expr)
#define LOG_DEBUG(expr) DATAVO_LOG(debug, expr)
