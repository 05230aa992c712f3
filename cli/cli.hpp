// The `datavo` command line: shared options, exit codes and the registration function of each command file.
// Exit codes: 0 success, 1 the work failed, 2 usage or configuration error. Errors go to stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
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

// Thrown by command code for a failure that ends the command; caught once in main.cpp.
struct Fatal {
  int exit_code;
  Error error;
};

// Maps an Error to its exit code: config/invalid_argument -> 2, everything else -> 1.
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

// Waits (at most ShardCacheHierarchy::k_destructor_upload_bound) for the background uploads to remote tiers and
// returns what happened to them, {"uploaded", "already_present", "failed", "pending"}. A failed upload has been a
// WARNING already; it does not fail the command (the read it served succeeded).
nlohmann::json wait_for_uploads(ShardCacheHierarchy& cache);
// "uploaded 3, already present 1, failed 0" (and ", 2 abandoned" when some did not finish in time).
std::string describe_uploads(const nlohmann::json& uploads);
// Whether any upload to a remote tier happened (so that a text report is worth a line).
bool any_uploads(const nlohmann::json& uploads);

// Formats a byte count for people: "512 B", "1.5 MiB".
std::string human_bytes(std::uint64_t bytes);

}  // namespace datavo::cli
