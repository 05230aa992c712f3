// The `datavo` command line: shared options, exit codes, the output helpers of the commands and the registration
// function of each command file. A command parses its arguments, calls one library operation
// (include/datavo/operations.hpp, warm.hpp, demo.hpp, ...) and prints its report: text, or with --json the one
// JSON object of docs/cli.md.
// Exit codes (docs/cli.md): 0 success, 1 the work failed, 2 bad input of any kind (usage, config, an unknown
// dataset, key or revision, a bad hash), 130 / 143 interrupted by SIGINT / SIGTERM. Errors go to stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "datavo/hierarchy.hpp"
#include "datavo/operations.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"

namespace datavo::cli {

enum ExitCode : int { k_exit_ok = 0, k_exit_failed = 1, k_exit_usage = 2 };

// Options every command takes (--config, --instance, --json, -v).
struct GlobalOptions {
  std::optional<std::string> config_path;
  std::optional<std::string> instance;
  bool json = false;
  int verbosity = 0;
};

// Thrown by command code for a failure that ends the command; caught once in main.cpp, which prints the message
// on stderr and, under --json, one JSON object on stdout: `report` (when it is an object) with
// "error": {"code", "message"} added (docs/cli.md).
struct Fatal {
  int exit_code;
  Error error;
  nlohmann::json report = nullptr;  // what the command found before it failed, e.g. warm's summary
};

// Maps an Error to its exit code: config/invalid_argument -> 2 (bad input of any kind), everything else -> 1.
int exit_code_for(const Error& error);
// Unwraps a Result or throws Fatal.
template <typename T>
T require(Result<T> result) {
  if (!result) throw Fatal{exit_code_for(result.error()), std::move(result).error()};
  return std::move(result).value();
}
inline void require(Result<void> result) {
  if (!result) throw Fatal{exit_code_for(result.error()), std::move(result).error()};
}
// Ends a command whose operation ran but did not do all it was asked (a report's `error`): exit 1, and under
// --json `report` with the error added. Returns when `error` is nullopt.
void fail_if(const std::optional<Error>& error, nlohmann::json report);

// Prints `value` to stdout as one line of JSON.
void print_json(const nlohmann::json& value);
// "datavo: ERROR: tier 'NAME': MESSAGE" on stderr.
void print_tier_error(const TierError& failure);

// The cache of a `cache` command: --config and --instance applied (open_cache_session); throws Fatal.
CacheSession open_session(const GlobalOptions& global);
// --server and --instance over the environment's defaults.
OriginClientOptions origin_options(const GlobalOptions& global, const std::optional<std::string>& server);

// {"uploaded", "already_present", "failed", "pending"} of a summary.
nlohmann::json uploads_json(const UploadSummary& summary);
// "uploads to remote tiers: 3 uploaded, 1 already there, 0 failed" for people.
std::string describe_uploads(const UploadSummary& summary);
// Whether anything went up, or was tried: a text report gives the line only then.
bool any_uploads(const std::optional<UploadSummary>& summary);

// Formats a byte count for people: "512 B", "1.5 MiB".
std::string human_bytes(std::uint64_t bytes);
// --metrics-textfile PATH (warm, read): the file MetricsTextfile keeps (datavo/metrics.hpp).
void add_metrics_textfile_option(CLI::App* command, std::optional<std::string>& path);
// Decimal megabytes, as "MB/s" is read by people comparing with disk and network figures.
double megabytes(Bytes bytes);

// The arguments of a command that reads a dataset (warm, read).
struct DatasetArgs {
  std::string dataset;
  std::vector<std::string> keys;
  std::optional<std::uint64_t> revision;
  std::optional<std::string> server;
};
void add_dataset_args(CLI::App* command, DatasetArgs& args);

// Each command file registers its command. The callbacks run after parsing, with `global` filled in.
void add_warm_command(CLI::App& app, GlobalOptions& global);          // cmd_warm.cpp
void add_read_command(CLI::App& app, GlobalOptions& global);          // cmd_read.cpp
void add_demo_command(CLI::App& app, GlobalOptions& global);          // cmd_demo.cpp
void add_pack_command(CLI::App& app, GlobalOptions& global);          // cmd_pack.cpp
void add_serve_command(CLI::App& app);                                // cmd_serve.cpp
void add_content_hash_command(CLI::App& app, GlobalOptions& global);  // cmd_content_hash.cpp
void add_cache_commands(CLI::App& app, GlobalOptions& global);        // cmd_cache.cpp: the `cache` group
// The subcommands of `cache`, one file each (cmd_cache_<name>.cpp).
void add_cache_info_command(CLI::App& cache, GlobalOptions& global);
void add_cache_fetch_command(CLI::App& cache, GlobalOptions& global);
void add_cache_put_command(CLI::App& cache, GlobalOptions& global);
void add_cache_check_command(CLI::App& cache, GlobalOptions& global);
void add_cache_ls_command(CLI::App& cache, GlobalOptions& global);
void add_cache_rm_command(CLI::App& cache, GlobalOptions& global);
void add_cache_gc_command(CLI::App& cache, GlobalOptions& global);
void add_cache_verify_command(CLI::App& cache, GlobalOptions& global);
void add_cache_stats_command(CLI::App& cache, GlobalOptions& global);
// `cache fetch` and `cache put` print the same report.
void print_install_report(const GlobalOptions& global, const CacheInstallReport& report);

// While alive, SIGINT and SIGTERM do not kill the process: a thread of its own takes them with sigwait() and asks
// every cancellable operation to stop (util/cancel.hpp), so that the command unwinds normally (staging files and
// locks removed by their RAII owners, the progress bar's line closed) and main() reports it (one line; exit 130 or
// 143). A second signal ends the process at once. Construct it first thing in a command, before any thread starts:
// threads inherit the blocked signals. A signal the process was started with ignored stays ignored. Not copyable.
class InterruptOnSignal {
 public:
  InterruptOnSignal();
  ~InterruptOnSignal();
  InterruptOnSignal(const InterruptOnSignal&) = delete;
  InterruptOnSignal& operator=(const InterruptOnSignal&) = delete;
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace datavo::cli
