// Entry point of the `datavo` command: parses the command line and is the one place where Fatal is caught.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/cli.hpp"
#include "datavo/tier_registry.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::cli {

namespace {

// The one failure report: the message on stderr and, under --json, one JSON object on stdout (docs/cli.md).
int report_failure(bool json, int exit_code, const Error& error, nlohmann::json report) {
  datavo::log::write(datavo::log::Level::error, error.message);
  if (json) {
    if (!report.is_object()) report = nlohmann::json::object();
    report["error"] = {{"code", reported_code(error)}, {"message", error.message}};
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

// "datavo 0.1.0" and the features of this build, like `ccache --version`: the tier types it can make.
std::string version_text(bool json) {
  std::vector<std::string> features;
  for (const auto& type : datavo::tier_type_names()) features.push_back(type + "-tier");
  if (json) return nlohmann::json{{"version", DATAVO_VERSION}, {"features", features}}.dump();
  std::string out = std::string("datavo ") + DATAVO_VERSION + "\nFeatures:";
  for (const auto& feature : features) out += " " + feature;
  return out;
}

// $DATAVO_LOG_LEVEL, checked before anything logs: an unknown value is a usage error naming the variable.
void check_log_level_env() {
  const char* env = std::getenv("DATAVO_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return;
  datavo::log::Level level{};
  if (datavo::log::parse_level(env, level)) return;
  throw Fatal{k_exit_usage, datavo::Error{datavo::ErrorCode::invalid_argument,
                                          "DATAVO_LOG_LEVEL=" + std::string(env) +
                                              ": expected error, warning, info or debug (in any case)"}};
}

constexpr const char* k_environment_help =
    "Environment (docs/cli.md):\n"
    "  DATAVO_SERVER               the origin's URL, e.g. http://127.0.0.1:8080 (warm, read; --server overrides it)\n"
    "  DATAVO_TOKEN                the bearer token of an origin that requires one (datavo serve --token-file)\n"
    "  DATAVO_OFFLINE=1            no network: manifests and shards from the caches only\n"
    "  DATAVO_LOG_LEVEL            error, warning (default), info or debug\n"
    "  DATAVO_STALL_TIMEOUT        seconds without a byte before a transfer is retried (default 30)\n"
    "  DATAVO_SHARD_CACHE_CONFIG   the shards.yaml to use (--config overrides it)\n"
    "  DATAVO_SHARD_CACHE_DIR      the folder of the built-in default tier\n"
    "  DATAVO_MANIFEST_CACHE_DIR   the manifest cache (default ~/.cache/altavo/datavo/manifests)\n"
    "Exit codes: 0 ok, 1 the work failed, 2 bad input, 130/143 interrupted (SIGINT/SIGTERM).";

// Whether --json was given: a parse error can come before CLI11 has stored it.
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--json") return true;
  }
  return false;
}

// The usage error of a parse failure. A word where the deepest command given expects a subcommand (`frobnicate`
// in `datavo frobnicate` or `datavo cache frobnicate`) is named as an unknown command, with the commands there;
// CLI11 would only say that a subcommand is required.
datavo::Error usage_error(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* deepest = &app;
  std::string path = "datavo";
  while (!deepest->get_subcommands().empty()) {
    deepest = deepest->get_subcommands().front();
    path += " " + deepest->get_name();
  }
  const auto commands = deepest->get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); });
  const auto unparsed = app.remaining(true);
  if (commands.empty() || unparsed.empty() || unparsed.front().starts_with("-"))
    return datavo::Error{datavo::ErrorCode::invalid_argument,
                         std::string(e.what()) + " (run " + path + " --help for more information)"};
  std::string names;
  for (const CLI::App* command : commands) names += (names.empty() ? "" : ", ") + command->get_name();
  std::string where = deepest == &app ? "" : " of '" + path + "'";
  return datavo::Error{datavo::ErrorCode::invalid_argument, "unknown command '" + unparsed.front() + "'" + where +
                                                                "; the commands are " + names + " (run " + path +
                                                                " --help for more information)"};
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
  const bool json_requested = wants_json(argc, argv);
  app.set_version_flag(
      "--version", [json_requested] { return version_text(json_requested); },
      "print the version and the features of this build (the tier types it provides), then exit");
  app.footer(k_environment_help);
  app.parse_complete_callback([&] {
    if (global.verbosity >= 2)
      datavo::log::set_level(datavo::log::Level::debug);
    else if (global.verbosity == 1)
      datavo::log::set_level(datavo::log::Level::info);
  });

  add_cache_commands(app, global);
  add_content_hash_command(app, global);
  add_pack_command(app, global);
  add_serve_command(app);
  add_warm_command(app, global);
  add_read_command(app, global);
  add_demo_command(app, global);

  const bool json = json_requested;
  try {
    check_log_level_env();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return report_failure(json, k_exit_usage, usage_error(app, e), nullptr);
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
