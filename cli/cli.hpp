// The `datavo` command line: shared options, exit codes and the registration function of each command file.
// Exit codes (docs/cli.md): 0 success, 1 the work failed, 2 bad input of any kind (usage, config, an unknown
// dataset, key or revision, a bad hash), 130 / 143 interrupted by SIGINT / SIGTERM. Errors go to stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "datavo/hierarchy.hpp"
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
// Prints `value` to stdout as one line of JSON.
void print_json(const nlohmann::json& value);

// Each command file registers its subcommands. The callbacks run after parsing, with `global` filled in.
void add_cache_commands(CLI::App& app, GlobalOptions& global);         // cmd_cache.cpp
void add_cache_check_command(CLI::App& cache, GlobalOptions& global);  // cmd_check.cpp: cache check
void add_content_hash_command(CLI::App& app, GlobalOptions& global);   // cmd_content_hash.cpp
void add_origin_commands(CLI::App& app, GlobalOptions& global);        // cmd_origin.cpp: pack, serve
void add_dataset_commands(CLI::App& app, GlobalOptions& global);       // cmd_dataset.cpp: warm, read, demo

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

// Waits (bounded) for the background uploads to remote tiers of `cache`, so that a command reports their outcome
// before it exits. Returns nullopt when the hierarchy has no remote tier.
std::optional<UploadSummary> wait_for_uploads(ShardCacheHierarchy& cache);
// {"uploaded", "already_present", "failed", "pending"} of a summary.
nlohmann::json uploads_json(const UploadSummary& summary);
// "uploads to remote tiers: 3 uploaded, 1 already there, 0 failed" for people.
std::string describe_uploads(const UploadSummary& summary);
// Whether anything went up, or was tried: a text report gives the line only then.
bool any_uploads(const std::optional<UploadSummary>& summary);

// Formats a byte count for people: "512 B", "1.5 MiB".
std::string human_bytes(std::uint64_t bytes);

}  // namespace datavo::cli
