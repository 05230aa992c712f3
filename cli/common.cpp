// What the commands share: the failure of a report, the session of the `cache` commands, and the output helpers.
#include <iostream>

#include "cli/cli.hpp"
#include "util/human.hpp"

namespace datavo::cli {

int exit_code_for(const Error& error) {
  switch (error.code) {
    case ErrorCode::config:
    case ErrorCode::invalid_argument: return k_exit_usage;
    default: return k_exit_failed;
  }
}

void fail_if(const std::optional<Error>& error, nlohmann::json report) {
  if (error) throw Fatal{k_exit_failed, *error, std::move(report)};
}

void print_json(const nlohmann::json& value) { std::cout << value.dump() << std::endl; }

void print_tier_error(const TierError& failure) {
  std::cerr << "datavo: ERROR: tier '" << failure.tier << "': " << failure.error.message << "\n";
}

CacheSession open_session(const GlobalOptions& global) {
  return require(open_cache_session(CacheSessionOptions{global.config_path, global.instance}));
}

OriginClientOptions origin_options(const GlobalOptions& global, const std::optional<std::string>& server) {
  OriginClientOptions options;
  if (server) options.server = *server;
  options.instance = global.instance;
  return options;
}

nlohmann::json uploads_json(const UploadSummary& summary) {
  return {{"uploaded", summary.uploaded},
          {"already_present", summary.already_present},
          {"failed", summary.failed},
          {"skipped", summary.skipped},
          {"pending", summary.pending}};
}

bool any_uploads(const std::optional<UploadSummary>& summary) {
  return summary &&
         summary->uploaded + summary->already_present + summary->failed + summary->skipped + summary->pending > 0;
}

std::string describe_uploads(const UploadSummary& summary) {
  std::string out = "uploads to remote tiers: " + std::to_string(summary.uploaded) + " uploaded, " +
                    std::to_string(summary.already_present) + " already there, " + std::to_string(summary.failed) +
                    " failed";
  if (summary.skipped > 0) out += ", " + std::to_string(summary.skipped) + " skipped";
  if (summary.pending > 0) out += ", " + std::to_string(summary.pending) + " still pending";
  return out;
}

std::string human_bytes(std::uint64_t bytes) { return util::human_bytes(Bytes{bytes}); }

void add_metrics_textfile_option(CLI::App* command, std::optional<std::string>& path) {
  command->add_option("--metrics-textfile", path,
                      "keep PATH holding the per-tier metrics in the Prometheus text format, rewritten atomically "
                      "every 5 s and at the end (node_exporter's textfile collector: name it *.prom)");
}

double megabytes(Bytes bytes) { return double(bytes.count()) / 1e6; }

void add_dataset_args(CLI::App* command, DatasetArgs& args) {
  command->add_option("dataset", args.dataset, "the dataset, <dataset>/<split> (e.g. voice_demo_v1/train)")->required();
  command->add_option("--key", args.keys, "a key of the key group (repeatable: --key audio.wav --key transcript.txt)")
      ->required()
      ->allow_extra_args(false);
  command->add_option("--revision", args.revision, "pin a revision: with a cached manifest, no manifest request");
  command->add_option("--server", args.server, "the origin server URL (default: $DATAVO_SERVER)");
}

void print_install_report(const GlobalOptions& global, const CacheInstallReport& report) {
  const FetchResult& result = report.result;
  if (global.json) {
    nlohmann::json out = {{"content_hash", report.hash.hex()},
                          {"path", result.handle.path()},
                          {"tier", result.tier_name},
                          {"source", to_string(result.source)},
                          {"size_bytes", result.handle.size().count()}};
    if (report.uploads) out["uploads"] = uploads_json(*report.uploads);
    print_json(out);
  } else {
    std::cout << result.handle.path() << "\n";
    if (any_uploads(report.uploads)) std::cerr << "datavo: " << describe_uploads(*report.uploads) << "\n";
  }
}

}  // namespace datavo::cli
