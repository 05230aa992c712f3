// C++ log lines to Python's `logging`: queued by any thread, handed over by a Python thread (see bindings.hpp).
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "bindings.hpp"
#include "datavo/log.hpp"

namespace datavo::python {
namespace {

// Lines logged by any thread, waiting for a Python thread to hand them to `logging`. Bounded: a process that never
// returns to Python (a long C++ call) cannot grow it without limit; what is dropped is counted and reported.
struct LogQueue {
  static constexpr std::size_t k_max_lines = 10'000;
  std::mutex mu;
  std::deque<std::pair<LogLevel, std::string>> lines;
  std::size_t dropped = 0;
};
LogQueue& log_queue() {
  static LogQueue* q = new LogQueue();
  return *q;
}

void queue_line(LogLevel level, std::string_view message) {
  auto& q = log_queue();
  std::lock_guard lock(q.mu);
  if (q.lines.size() >= LogQueue::k_max_lines) {
    q.lines.pop_front();
    ++q.dropped;
  }
  q.lines.emplace_back(level, std::string(message));
}

int python_level(LogLevel level) {
  switch (level) {
    case LogLevel::error: return 40;
    case LogLevel::warning: return 30;
    case LogLevel::info: return 20;
    case LogLevel::debug: return 10;
  }
  return 30;
}

void set_log_forwarding(py::object logger) {
  auto& g = globals();
  if (logger.is_none()) {
    set_log_sink({});
    drain_logs();
    g.logger = py::object();
    return;
  }
  g.logger = std::move(logger);
  set_log_sink(queue_line);
}

}  // namespace

void drain_logs() {
  auto& g = globals();
  if (!g.logger) return;
  std::deque<std::pair<LogLevel, std::string>> lines;
  std::size_t dropped = 0;
  {
    auto& q = log_queue();
    std::lock_guard lock(q.mu);
    lines.swap(q.lines);
    std::swap(dropped, q.dropped);
  }
  if (lines.empty() && dropped == 0) return;
  py::object log = g.logger.attr("log");
  try {
    if (dropped > 0) log(30, std::to_string(dropped) + " earlier log lines were dropped (the queue was full)");
    for (auto& [level, message] : lines) log(python_level(level), py::str(message));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("datavo_sdk: forwarding a log line");
  }
}

void bind_logging(py::module_& m) {
  m.def("set_log_forwarding", &set_log_forwarding,
        "Sends Datavo's log lines to `logger` (a logging.Logger), or back to stderr with None.");
  m.def("drain_logs", &drain_logs, "Hands the log lines queued so far to the logger.");
  m.def(
      "set_log_level", [](int level) { set_log_level(static_cast<LogLevel>(level)); },
      "0 error, 1 warning, 2 info, 3 debug.");
  m.def("log_level", [] { return static_cast<int>(log_level()); });
}

}  // namespace datavo::python
