// `datavo cache rm`: removes entries from every writable tier: content hashes, and every recorded entry of a
// dataset (datavo::cache_rm).
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

struct RmArgs {
  std::vector<std::string> hashes;
  std::string dataset;
};

// What happened to one entry: its tiers' errors and "not cached" on stderr, each removal on stdout (text only).
void print_entry(const GlobalOptions& global, const RemovedEntry& entry, const Instance& instance) {
  for (const auto& failure : entry.failures) print_tier_error(failure);
  if (entry.removed_from.empty()) {
    if (entry.reason == RmReason::named)
      std::cerr << "datavo: " << entry.hash.hex() << " is not cached (instance " << instance.name() << ")\n";
    return;
  }
  if (global.json) return;
  for (const auto& tier : entry.removed_from) std::cout << "removed " << entry.hash.hex() << " from " << tier << "\n";
}

void cmd_rm(const GlobalOptions& global, const RmArgs& args) {
  CacheSession session = open_session(global);
  if (args.hashes.empty() && args.dataset.empty()) {
    throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, "cache rm: give content hashes or --dataset NAME"}};
  }
  CacheRmRequest request;
  request.instance = session.instance;
  // Every hash is checked before any removal.
  for (const auto& hash : args.hashes) request.hashes.push_back(require(ContentHash::parse(hash)));
  if (!args.dataset.empty()) request.dataset = args.dataset;
  const CacheRmReport report = require(cache_rm(*session.cache, request));
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& entry : report.entries) {
    print_entry(global, entry, session.instance);
    rows.push_back({{"content_hash", entry.hash.hex()}, {"removed_from", entry.removed_from}});
  }
  const nlohmann::json json = {{"removed", report.removed}, {"not_cached", report.not_cached}, {"entry_list", rows}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_rm_command(CLI::App& cache, GlobalOptions& global) {
  auto args = std::make_shared<RmArgs>();
  auto* rm = cache.add_subcommand("rm", "remove entries from every writable tier (exit 1 if one is not cached)");
  rm->add_option("hash", args->hashes, "content hashes");
  rm->add_option("--dataset", args->dataset,
                 "also every entry of this dataset (<dataset>/<split>, or <dataset> for all its splits) that warm or "
                 "read recorded");
  rm->callback([&global, args] { cmd_rm(global, *args); });
}

}  // namespace datavo::cli
