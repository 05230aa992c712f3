// Where Datavo's log lines go: stderr by default ("datavo: WARNING: ..."), or a sink the embedding program installs
// (the Python SDK forwards them to Python's `logging`). The level comes from $DATAVO_LOG_LEVEL (error, warning,
// info, debug; default warning) until set_log_level() is called; lines above it are never formatted.
//
// Thread safety: every function may be called from any thread at any time.
#pragma once

#include <functional>
#include <string_view>

namespace datavo {

enum class LogLevel { error = 0, warning = 1, info = 2, debug = 3 };

// Receives one log line (without the "datavo: LEVEL: " prefix and without a newline). It is called from whichever
// thread logs, possibly several at once, sometimes while Datavo holds internal locks: it must be thread-safe,
// must not block for long and must not call back into Datavo.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Replaces the destination of every log line; an empty sink restores stderr. Once set_log_sink() returns, no line
// goes to the previous sink.
void set_log_sink(LogSink sink);

LogLevel log_level();
void set_log_level(LogLevel level);

}  // namespace datavo
