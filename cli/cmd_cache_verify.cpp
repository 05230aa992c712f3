// `datavo cache verify`: re-hashes the entries of every folder tier against their recorded SHA-256 and checks the
// objects of every cloud tier against their recorded size and SHA-256 (datavo::cache_verify); --full downloads
// the cloud objects; --repair quarantines bad entries and deletes bad objects from writable cloud tiers.
#include <iostream>

#include "cli/cli.hpp"

namespace datavo::cli {
namespace {

nlohmann::json folder_rows(const CacheVerifyReport& report, bool text) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    const VerifyReport& v = tier.verify;
    rows.push_back({{"tier", tier.tier},
                    {"checked", v.checked},
                    {"ok", v.ok},
                    {"bad", v.bad},
                    {"unverifiable", v.unverifiable},
                    {"quarantined", v.quarantined},
                    {"bad_paths", v.bad_paths}});
    if (!text) continue;
    std::cout << tier.tier << ": " << v.checked << " checked, " << v.ok << " ok, " << v.bad << " bad, "
              << v.unverifiable << " without a recorded digest, " << v.quarantined << " quarantined\n";
    for (const auto& p : v.bad_paths) std::cout << "  bad: " << p << "\n";
  }
  return rows;
}

void print_object_row(const TierObjectVerifyReport& tier) {
  const ObjectVerifyReport& v = tier.verify;
  std::cout << tier.tier << " (" << tier.type << "): ";
  if (tier.error) {
    std::cout << "not verified: " << tier.error->message << "\n";
    return;
  }
  std::cout << v.objects << " objects, " << v.verified_by_service << " verified by the service's SHA-256, "
            << v.verified_by_download << " verified by download, " << v.metadata_only << " metadata only, " << v.bad
            << " bad, " << v.removed << " removed\n";
  for (const auto& bad : v.bad_objects) {
    std::cout << "  bad: " << bad.object << ": " << bad.why << (bad.removed ? " (removed)" : "") << "\n";
  }
}

nlohmann::json object_rows(const CacheVerifyReport& report, bool text) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : report.objects) {
    const ObjectVerifyReport& v = tier.verify;
    nlohmann::json bad = nlohmann::json::array();
    for (const auto& b : v.bad_objects) bad.push_back({{"object", b.object}, {"why", b.why}, {"removed", b.removed}});
    nlohmann::json row = {{"tier", tier.tier},
                          {"type", tier.type},
                          {"read_only", tier.read_only},
                          {"objects", v.objects},
                          {"verified_by_service", v.verified_by_service},
                          {"verified_by_download", v.verified_by_download},
                          {"metadata_only", v.metadata_only},
                          {"bad", v.bad},
                          {"removed", v.removed},
                          {"bad_objects", bad},
                          {"error", nullptr}};
    if (tier.error) row["error"] = {{"code", to_string(tier.error->code)}, {"message", tier.error->message}};
    rows.push_back(std::move(row));
    if (text) print_object_row(tier);
  }
  return rows;
}

void cmd_verify(const GlobalOptions& global, bool repair, bool full) {
  InterruptOnSignal interrupt;
  CacheSession session = open_session(global);
  const CacheVerifyReport report =
      cache_verify(*session.cache, repair ? Repair::yes : Repair::no, full ? VerifyDepth::full : VerifyDepth::metadata);
  const bool text = !global.json;
  nlohmann::json rows = folder_rows(report, text);
  nlohmann::json objects = object_rows(report, text);
  nlohmann::json not_verified = nlohmann::json::array();
  for (const auto& tier : report.not_verified) {
    not_verified.push_back({{"tier", tier.tier}, {"type", tier.type}, {"why", tier.why}});
    if (text) std::cout << tier.tier << " (" << tier.type << "): " << tier.why << "\n";
  }
  if (text && report.metadata_only > 0) {
    std::cout << report.metadata_only
              << " cloud objects were checked by their metadata only (the service keeps no SHA-256 of them); "
                 "`datavo cache verify --full` downloads and hashes them\n";
  }
  const nlohmann::json json = {
      {"repair", repair},   {"depth", to_string(report.depth)},      {"tiers", rows},
      {"objects", objects}, {"metadata_only", report.metadata_only}, {"not_verified", not_verified}};
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_verify_command(CLI::App& cache, GlobalOptions& global) {
  auto repair = std::make_shared<bool>(false);
  auto full = std::make_shared<bool>(false);
  auto* verify = cache.add_subcommand(
      "verify", "re-hash entries against their recorded SHA-256; check cloud objects against their metadata");
  verify->add_flag("--repair", *repair,
                   "move bad entries to .quarantine/; delete bad objects from writable cloud tiers");
  verify->add_flag("--full", *full, "also download and hash every cloud object (default: a HEAD each)");
  verify->callback([&global, repair, full] { cmd_verify(global, *repair, *full); });
}

}  // namespace datavo::cli
