// Entry point of the `datavo` command: parses the command line and is the one place where Fatal is caught.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/cli.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::cli {

int exit_code_for(const Error& error) {
  switch (error.code) {
    case ErrorCode::config:
    case ErrorCode::invalid_argument: return k_exit_usage;
    default: return k_exit_failed;
  }
}

void print_json(const nlohmann::json& value) { std::cout << value.dump() << std::endl; }

std::string human_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0)
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  return buffer;
}

namespace {

// The one failure report: the message on stderr and, under --json, one JSON object on stdout (docs/cli.md).
int report_failure(bool json, int exit_code, const Error& error, nlohmann::json report) {
  datavo::log::write(datavo::log::Level::error, error.message);
  if (json) {
    if (!report.is_object()) report = nlohmann::json::object();
    report["error"] = {{"code", to_string(error.code)}, {"message", error.message}};
    print_json(report);
  }
  return exit_code;
}

// The one line of an interrupted command (InterruptOnSignal): by then every transfer has stopped and what it left
// (staging files, locks) has been removed by its owner. Exit 128 + the signal, as a shell reports it.
int report_interrupted(bool json, nlohmann::json report) {
  const int sig = datavo::util::cancel_signal();
  const std::string message = "interrupted by " + datavo::util::signal_name(sig) +
                              ": transfers stopped, partial downloads and their locks removed";
  std::string line = "datavo: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (json) {
    if (!report.is_object()) report = nlohmann::json::object();
    report["error"] = {{"code", to_string(datavo::ErrorCode::cancelled)}, {"message", message}};
    print_json(report);
  }
  return 128 + sig;
}

// Whether --json was given: a parse error can come before CLI11 has stored it.
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json") return true;
  }
  return false;
}

}  // namespace

}  // namespace datavo::cli

int main(int argc, char** argv) {
  using namespace datavo::cli;
  CLI::App app{"datavo: a content-addressed shard cache hierarchy for ML training data"};
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  app.add_option("--config", global.config_path, "shards.yaml to use (overrides $DATAVO_SHARD_CACHE_CONFIG)");
  app.add_option("--instance", global.instance, "server instance whose entries to use (default: from $DATAVO_SERVER)");
  app.add_flag("--json", global.json, "print machine-readable JSON on stdout");
  app.add_flag("-v,--verbose", global.verbosity, "log more (-v info, -vv debug); see also $DATAVO_LOG_LEVEL");
  app.parse_complete_callback([&] {
    if (global.verbosity >= 2)
      datavo::log::set_level(datavo::log::Level::debug);
    else if (global.verbosity == 1)
      datavo::log::set_level(datavo::log::Level::info);
  });

  add_cache_commands(app, global);
  add_content_hash_command(app, global);
  add_origin_commands(app, global);
  add_dataset_commands(app, global);

  const bool json = wants_json(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (!json) return app.exit(e) == 0 ? k_exit_ok : k_exit_usage;
    return report_failure(json, k_exit_usage,
                          datavo::Error{datavo::ErrorCode::invalid_argument,
                                        std::string(e.what()) + " (run with --help for more information)"},
                          nullptr);
  } catch (const Fatal& fatal) {
    // A failure caused by the interruption (the transfers it stopped) is reported as the interruption.
    if (datavo::util::cancel_requested()) return report_interrupted(json, fatal.report);
    return report_failure(json, fatal.exit_code, fatal.error, fatal.report);
  } catch (const std::exception& e) {
    return report_failure(json, k_exit_failed,
                          datavo::Error{datavo::ErrorCode::internal, std::string("internal error: ") + e.what()},
                          nullptr);
  }
  if (datavo::util::cancel_requested()) return report_interrupted(json, nullptr);
  return k_exit_ok;
}
