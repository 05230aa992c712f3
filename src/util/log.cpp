#include "util/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "datavo/log.hpp"

namespace datavo::log {
namespace {

Level initial_level() {
  Level out = Level::warning;
  const char* env = std::getenv("DATAVO_LOG_LEVEL");
  if (env != nullptr && *env != '\0' && !parse_level(env, out)) {
    // A library has no usage error to give (the CLI refuses the value before it logs); say it once, loudly.
    const std::string line = "datavo: WARNING: DATAVO_LOG_LEVEL=" + std::string(env) +
                             " is not one of error, warning, info, debug; logging at warning\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
  }
  return out;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> value{static_cast<int>(initial_level())};
  return value;
}

const char* label(Level level) {
  switch (level) {
    case Level::error: return "ERROR";
    case Level::warning: return "WARNING";
    case Level::info: return "INFO";
    case Level::debug: return "DEBUG";
  }
  return "?";
}

// The installed sink, if any, guarded by delivery_mutex(): shared by the lines being delivered (concurrently),
// exclusive in set_log_sink(), so that no line reaches a sink after it was replaced. Log lines are rare.
std::unique_ptr<const LogSink>& sink_storage() {
  static std::unique_ptr<const LogSink> sink;
  return sink;
}
std::shared_mutex& delivery_mutex() {
  static std::shared_mutex mu;
  return mu;
}

}  // namespace

Level level() { return static_cast<Level>(level_storage().load(std::memory_order_relaxed)); }
void set_level(Level l) { level_storage().store(static_cast<int>(l), std::memory_order_relaxed); }
bool enabled(Level l) { return static_cast<int>(l) <= level_storage().load(std::memory_order_relaxed); }

bool parse_level(std::string_view raw, Level& out) {
  std::string text(raw);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "error")
    out = Level::error;
  else if (text == "warning" || text == "warn")
    out = Level::warning;
  else if (text == "info")
    out = Level::info;
  else if (text == "debug")
    out = Level::debug;
  else
    return false;
  return true;
}

void write(Level l, std::string_view message) {
  {
    std::shared_lock delivering(delivery_mutex());
    if (const auto& sink = sink_storage()) {
      (*sink)(static_cast<LogLevel>(static_cast<int>(l)), message);
      return;
    }
  }
  std::string line = "datavo: ";
  line += label(l);
  line += ": ";
  line += message;
  line += '\n';
  // One write(2) per line keeps lines from concurrent threads and processes whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void warn_once(const std::string& once_key, std::string_view message) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard lock(mu);
    if (!seen.insert(once_key).second) return;
  }
  if (enabled(Level::warning)) write(Level::warning, message);
}

std::string redact_url(std::string_view url) {
  std::string out(url);
  if (auto q = out.find('?'); q != std::string::npos) out = out.substr(0, q) + "?<redacted>";
  if (auto scheme = out.find("://"); scheme != std::string::npos) {
    auto at = out.find('@', scheme + 3);
    auto slash = out.find('/', scheme + 3);
    if (at != std::string::npos && (slash == std::string::npos || at < slash))
      out = out.substr(0, scheme + 3) + "<redacted>@" + out.substr(at + 1);
  }
  return out;
}

}  // namespace datavo::log

namespace datavo {

void set_log_sink(LogSink sink) {
  auto next = sink ? std::make_unique<const LogSink>(std::move(sink)) : nullptr;
  std::unique_lock replacing(log::delivery_mutex());
  log::sink_storage() = std::move(next);
}

LogLevel log_level() { return static_cast<LogLevel>(static_cast<int>(log::level())); }
void set_log_level(LogLevel level) { log::set_level(static_cast<log::Level>(static_cast<int>(level))); }

}  // namespace datavo
