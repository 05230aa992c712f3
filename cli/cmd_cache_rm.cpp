// `datavo cache rm`: removes entries (content hashes, and every recorded entry of a dataset) from the local tiers,
// or with --tier/--all-tiers from shared ones too, after a confirmation on a terminal (datavo::cache_rm).
#include <unistd.h>

#include <iostream>
#include <string>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

struct RmArgs {
  std::vector<std::string> hashes;
  std::string dataset;
  std::vector<std::string> tiers;
  bool all_tiers = false;
  bool yes = false;
};

std::string_view choice_name(RmTierChoice choice) {
  switch (choice) {
    case RmTierChoice::removes: return "removes";
    case RmTierChoice::shared: return "shared";
    case RmTierChoice::not_named: return "not_named";
    case RmTierChoice::read_only: return "read_only";
  }
  return "removes";
}

// What happened to one entry: its tiers' errors and "not cached" on stderr, each removal on stdout (text only).
void print_entry(const GlobalOptions& global, const RemovedEntry& entry, const Instance& instance) {
  for (const auto& failure : entry.failures) print_tier_error(failure);
  if (entry.removed_from.empty()) {
    if (entry.reason == RmReason::named)
      std::cerr << "datavo: " << entry.hash.hex() << " is not cached in the tiers in scope (instance "
                << instance.name() << ")\n";
    return;
  }
  if (global.json) return;
  for (const auto& tier : entry.removed_from) std::cout << "removed " << entry.hash.hex() << " from " << tier << "\n";
}

// The tiers left alone, one line each (text only): a shared one says how to reach it.
void print_left_alone(const std::vector<RmTier>& tiers) {
  for (const auto& t : tiers) {
    if (t.choice == RmTierChoice::removes) continue;
    std::cout << "left alone: " << t.tier << " [" << t.type << "] " << t.location;
    if (t.choice == RmTierChoice::shared) std::cout << " (shared; --tier " << t.tier << " or --all-tiers reaches it)";
    if (t.choice == RmTierChoice::not_named) std::cout << " (not named by --tier)";
    if (t.choice == RmTierChoice::read_only) std::cout << " (read-only)";
    std::cout << "\n";
  }
}

// Before touching a shared tier: --yes, or a "y" typed on the terminal. Without a terminal it is a usage error.
void confirm_shared(const std::vector<RmTier>& tiers, const RmArgs& args) {
  std::string shared;
  for (const auto& t : tiers) {
    if (t.choice == RmTierChoice::removes && t.reach == TierReach::shared)
      shared += (shared.empty() ? "" : ", ") + t.tier + " (" + t.location + ")";
  }
  if (shared.empty() || args.yes) return;
  if (!::isatty(STDIN_FILENO) || !::isatty(STDERR_FILENO)) {
    throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument,
                                    "cache rm: removing from the shared tier(s) " + shared +
                                        ", which other machines read, needs a confirmation: pass --yes (there is "
                                        "no terminal to ask on); nothing removed"}};
  }
  std::cerr << "datavo: cache rm removes from the shared tier(s) " << shared
            << ", which other machines read. Continue? [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  if (answer != "y" && answer != "Y" && answer != "yes") {
    throw Fatal{k_exit_failed, Error{ErrorCode::cancelled, "cache rm: not confirmed; nothing removed"}};
  }
}

CacheRmRequest request_of(const CacheSession& session, const RmArgs& args) {
  if (args.hashes.empty() && args.dataset.empty()) {
    throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, "cache rm: give content hashes or --dataset NAME"}};
  }
  CacheRmRequest request;
  request.instance = session.instance;
  // Every hash is checked before any removal.
  for (const auto& hash : args.hashes) request.hashes.push_back(require(ContentHash::parse(hash)));
  if (!args.dataset.empty()) request.dataset = args.dataset;
  if (args.all_tiers) request.scope = RmScope::every_tier;
  if (!args.tiers.empty()) {
    request.scope = RmScope::named;
    request.tiers = args.tiers;
  }
  return request;
}

nlohmann::json tiers_json(const std::vector<RmTier>& tiers) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : tiers) {
    out.push_back({{"tier", t.tier},
                   {"type", t.type},
                   {"location", t.location},
                   {"shared", t.reach == TierReach::shared},
                   {"touched", t.choice == RmTierChoice::removes},
                   {"choice", choice_name(t.choice)}});
  }
  return out;
}

void cmd_rm(const GlobalOptions& global, const RmArgs& args) {
  CacheSession session = open_session(global);
  const CacheRmRequest request = request_of(session, args);
  confirm_shared(require(cache_rm_tiers(*session.cache, request)), args);
  // After the confirmation, whose read of stdin a signal would not end.
  InterruptOnSignal interrupt;
  const CacheRmReport report = require(cache_rm(*session.cache, request));
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& entry : report.entries) {
    print_entry(global, entry, session.instance);
    rows.push_back({{"content_hash", entry.hash.hex()}, {"removed_from", entry.removed_from}});
  }
  nlohmann::json left_alone = nlohmann::json::array();
  for (const auto& t : report.tiers)
    if (t.choice != RmTierChoice::removes) left_alone.push_back(t.tier);
  const nlohmann::json json = {{"removed", report.removed},
                               {"not_cached", report.not_cached},
                               {"entry_list", rows},
                               {"tiers", tiers_json(report.tiers)},
                               {"skipped_tiers", left_alone}};
  if (!global.json) print_left_alone(report.tiers);
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_rm_command(CLI::App& cache, GlobalOptions& global) {
  auto args = std::make_shared<RmArgs>();
  auto* rm = cache.add_subcommand(
      "rm", "remove entries from the local tiers, shared tiers only when asked (exit 1 if one is not cached)");
  rm->add_option("hash", args->hashes, "content hashes");
  rm->add_option("--dataset", args->dataset,
                 "also every entry of this dataset (<dataset>/<split>, or <dataset> for all its splits) that warm or "
                 "read recorded");
  auto* tier = rm->add_option("--tier", args->tiers,
                              "remove from this tier only (repeatable), a shared one (a bucket) included");
  auto* all = rm->add_flag("--all-tiers", args->all_tiers, "remove from every writable tier, shared ones included");
  tier->excludes(all);
  rm->add_flag("--yes,-y", args->yes, "remove from shared tiers without asking");
  rm->callback([&global, args] { cmd_rm(global, *args); });
}

}  // namespace datavo::cli
