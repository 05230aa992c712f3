// `datavo cache ls`: the cached entries of this instance (or of every one), with what warm or read recorded each to
// be (datavo::cache_ls), like `hf cache ls`.
#include <iostream>

#include "cli/cli.hpp"
#include "util/rfc3339.hpp"

namespace datavo::cli {
namespace {

// "12 s ago", "5 min ago", "3 h ago", "2 d ago": how long ago an entry was last read (its mtime).
std::string age_text(std::int64_t seconds) {
  if (seconds < 60) return std::to_string(seconds) + " s ago";
  if (seconds < 3600) return std::to_string(seconds / 60) + " min ago";
  if (seconds < 86400) return std::to_string(seconds / 3600) + " h ago";
  return std::to_string(seconds / 86400) + " d ago";
}

std::int64_t age_seconds(const EntryInfo& entry, std::chrono::system_clock::time_point now) {
  return std::max<std::int64_t>(std::chrono::duration_cast<std::chrono::seconds>(now - entry.last_access).count(), 0);
}

nlohmann::json entry_json(const CacheEntry& e, std::int64_t age) {
  const std::optional<RecordedShard>& shard = e.shard;
  auto known = [&](auto value) { return shard ? nlohmann::json(value) : nlohmann::json(nullptr); };
  return {{"tier", e.tier},
          {"instance", e.entry.instance},
          {"content_hash", e.entry.hash.hex()},
          {"size_bytes", e.entry.size.count()},
          {"last_access", util::format_rfc3339(e.entry.last_access)},
          {"age_seconds", age},
          {"dataset", known(shard ? shard->dataset : "")},
          {"split", known(shard ? shard->split : "")},
          {"revision", known(shard ? shard->revision : 0)},
          {"shard_index", known(shard ? shard->shard_index : 0)},
          {"keys", known(shard ? shard->keys : std::vector<std::string>{})}};
}

std::vector<std::string> entry_row(const CacheEntry& e, std::int64_t age, bool all_instances) {
  std::vector<std::string> row = {e.tier};
  if (all_instances) row.push_back(e.entry.instance);
  const std::optional<RecordedShard>& shard = e.shard;
  std::string keys;
  if (shard)
    for (const auto& key : shard->keys) keys += (keys.empty() ? "" : ",") + key;
  row.insert(row.end(), {e.entry.hash.hex(), human_bytes(e.entry.size.count()), age_text(age),
                         shard ? shard->dataset + "/" + shard->split + "@" + std::to_string(shard->revision) : "-",
                         shard ? "shard " + std::to_string(shard->shard_index) : "-", shard ? keys : "-"});
  return row;
}

// The rows under a header, each column as wide as its widest cell plus two spaces (the last one unpadded).
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& table) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c)
      line += c + 1 == row.size() ? row[c] : row[c] + std::string(width[c] - row[c].size() + 2, ' ');
    std::cout << line << "\n";
  };
  if (!table.empty()) print_row(header);
  for (const auto& row : table) print_row(row);
}

// A total per tier (a local copy and a bucket's copy of one entry are two copies), then all copies, labelled so.
void print_totals(const CacheLsReport& report, bool all_instances) {
  for (const auto& t : report.tiers) {
    std::cout << "tier " << t.tier << ": ";
    if (t.listed)
      std::cout << t.entries << " entries, " << human_bytes(t.size.count()) << "\n";
    else
      std::cout << "not listed (see the error above)\n";
  }
  std::cout << "all tiers: " << report.entries.size() << " copies, " << human_bytes(report.size.count())
            << " (a copy per tier that holds an entry; "
            << (all_instances ? std::string("every instance") : "instance " + *report.instance) << ")\n";
}

void cmd_ls(const GlobalOptions& global, bool all_instances) {
  CacheSession session = open_session(global);
  CacheLsRequest request;
  if (!all_instances) request.instance = session.instance;
  const CacheLsReport report = cache_ls(*session.cache, request);
  for (const auto& failure : report.failures) print_tier_error(failure);
  const auto now = std::chrono::system_clock::now();
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<std::string>> table;
  for (const auto& e : report.entries) {
    rows.push_back(entry_json(e, age_seconds(e.entry, now)));
    table.push_back(entry_row(e, age_seconds(e.entry, now), all_instances));
  }
  nlohmann::json tiers = nlohmann::json::array();
  for (const auto& t : report.tiers) {
    tiers.push_back({{"tier", t.tier}, {"entries", t.entries}, {"size_bytes", t.size.count()}, {"listed", t.listed}});
  }
  const nlohmann::json json = {{"instance", report.instance ? nlohmann::json(*report.instance) : nullptr},
                               {"entries", rows.size()},
                               {"size_bytes", report.size.count()},
                               {"tiers", tiers},
                               {"entry_list", rows}};
  if (!global.json) {
    std::vector<std::string> header = {"tier"};
    if (all_instances) header.push_back("instance");
    header.insert(header.end(), {"content hash", "size", "last used", "dataset", "shard", "keys"});
    print_table(header, table);
    print_totals(report, all_instances);
  }
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_cache_ls_command(CLI::App& cache, GlobalOptions& global) {
  auto all_instances = std::make_shared<bool>(false);
  auto* ls = cache.add_subcommand("ls", "list cached entries of this instance, most recently used first");
  ls->add_flag("--all-instances", *all_instances, "list the entries of every instance");
  ls->callback([&global, all_instances] { cmd_ls(global, *all_instances); });
}

}  // namespace datavo::cli
