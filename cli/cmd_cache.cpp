// `datavo cache ...`: inspect and drive the cache hierarchy of this machine.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>

#include "cli/cli.hpp"
#include "client/manifest_cache.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/protocol.hpp"
#include "datavo/tier_registry.hpp"
#include "datavo/url_fetcher.hpp"
#include "util/cancel.hpp"
#include "util/fs.hpp"

namespace datavo::cli {
namespace {

struct Session {
  CacheConfig config;
  std::shared_ptr<ShardCacheHierarchy> cache;
  Instance instance = Instance::local();
};

Session open_session(const GlobalOptions& global) {
  Session s;
  s.config = require(resolve_config(global.config_path));
  s.cache = require(build_hierarchy(s.config));
  // The instance warm and read use for $DATAVO_SERVER: the server's remembered identity (no request), else its URL's.
  s.instance = require(OriginClient::remembered_instance(global.instance ? &*global.instance : nullptr));
  return s;
}

ShardKey key_for(const Session& s, const std::string& hash_text) {
  return ShardKey{s.instance, require(ContentHash::parse(hash_text))};
}

std::string format_time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// Every counter of include/datavo/tier.hpp under its own name, plus the hit rate.
nlohmann::json stats_json(const TierStats& s) {
  nlohmann::json out = nlohmann::json::object();
  s.for_each([&out](const char* name, std::uint64_t count) { out[name] = count; });
  out["hit_rate"] = s.hit_rate();
  return out;
}

// `uploads`: what went up to remote tiers before the command returns (nullopt without remote tiers).
void print_fetch_result(const GlobalOptions& global, const ShardKey& key, const FetchResult& result,
                        const std::optional<UploadSummary>& uploads = std::nullopt) {
  if (global.json) {
    nlohmann::json out = {{"content_hash", key.hash.hex()},
                          {"path", result.handle.path()},
                          {"tier", result.tier_name},
                          {"source", to_string(result.source)},
                          {"size_bytes", result.handle.size().count()}};
    if (uploads) out["uploads"] = uploads_json(*uploads);
    print_json(out);
  } else {
    std::cout << result.handle.path() << "\n";
    if (any_uploads(uploads)) std::cerr << "datavo: " << describe_uploads(*uploads) << "\n";
  }
}

// The effective settings of the tier called `name` (TierConfig::settings), empty when the config has none for it.
const std::vector<TierSetting>& settings_of(const CacheConfig& config, const std::string& name) {
  static const std::vector<TierSetting> none;
  for (const auto& tier : config.tiers)
    if (tier.name == name) return tier.settings;
  return none;
}

// The lock mechanism of a folder tier that exists. It is probed on first use, which creates .locks/: a tier that
// does not exist yet is not created just to be described.
std::optional<LockMechanism> lock_mechanism_of(Tier& tier) {
  FolderTier* folder = tier.as_folder();
  struct stat st {};
  if (folder == nullptr || ::stat(folder->location().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return folder->lock_mechanism();
}

void cmd_info(const GlobalOptions& global) {
  Session s = open_session(global);
  auto infos = s.cache->cache_info();
  std::vector<std::optional<LockMechanism>> locks;
  for (const auto& tier : s.cache->tiers()) locks.push_back(lock_mechanism_of(*tier));
  if (global.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& c : s.config.skipped) skipped.push_back({{"path", c.path}, {"reason", c.reason}});
    nlohmann::json tiers = nlohmann::json::array();
    for (std::size_t i = 0; i < infos.size(); ++i) {
      const TierInfo& t = infos[i];
      nlohmann::json settings = nlohmann::json::array();
      for (const auto& setting : settings_of(s.config, t.name))
        settings.push_back({{"setting", setting.name}, {"value", setting.value}, {"origin", setting.origin}});
      tiers.push_back({{"tier", t.name},
                       {"type", t.type},
                       {"path", t.location},
                       {"max_bytes", t.max_bytes ? nlohmann::json(t.max_bytes->count()) : nlohmann::json(nullptr)},
                       {"used_bytes", t.usage ? nlohmann::json(t.usage->used.count()) : nlohmann::json(nullptr)},
                       {"entries", t.usage ? nlohmann::json(t.usage->entries) : nlohmann::json(nullptr)},
                       {"read_only", t.read_only},
                       {"lock_mechanism", locks[i] ? nlohmann::json(to_string(*locks[i])) : nlohmann::json(nullptr)},
                       {"settings", settings}});
    }
    print_json({{"config",
                 {{"path", s.config.path.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.config.path)},
                  {"source", to_string(s.config.source)},
                  {"skipped", skipped},
                  {"warnings", s.config.warnings}}},
                {"instance", s.instance.name()},
                {"tiers", tiers}});
    return;
  }
  if (s.config.path.empty())
    std::cout << "config: built-in default\n";
  else
    std::cout << "config: " << s.config.path << " (" << to_string(s.config.source) << ")\n";
  for (const auto& c : s.config.skipped) std::cout << "  skipped " << c.path << ": " << c.reason << "\n";
  for (const auto& w : s.config.warnings) std::cout << "  warning: " << w << "\n";
  std::cout << "instance: " << s.instance.name() << "\n";
  std::cout << "tiers, fastest first:\n";
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const TierInfo& t = infos[i];
    std::cout << "  " << i + 1 << ". " << t.name << " [" << t.type << (t.read_only ? ", read-only" : "") << "] "
              << t.location << "\n     capacity " << (t.max_bytes ? human_bytes(t.max_bytes->count()) : "unbounded");
    if (t.usage) {
      std::cout << ", used " << human_bytes(t.usage->used.count()) << ", " << t.usage->entries << " entries";
    } else {
      std::cout << ", usage unknown";
    }
    std::cout << "\n";
    if (t.type == "folder") {
      std::cout << "     lock mechanism: "
                << (locks[i] ? to_string(*locks[i]) : "not probed yet (the tier directory does not exist)") << "\n";
    }
    // Like `ccache -p`: every effective setting and where its value came from.
    const auto& settings = settings_of(s.config, t.name);
    std::size_t width = 0;
    for (const auto& setting : settings) width = std::max(width, setting.name.size() + 3 + setting.value.size());
    for (const auto& setting : settings) {
      const std::string text = setting.name + " = " + setting.value;
      std::cout << "     " << text << std::string(width - text.size() + 2, ' ') << "(" << setting.origin << ")\n";
    }
  }
}

struct FetchArgs {
  std::string hash, url, sha256;
  std::optional<std::uint64_t> size;
};

void cmd_fetch(const GlobalOptions& global, const FetchArgs& args) {
  InterruptOnSignal interrupt;
  Session s = open_session(global);
  ShardKey key = key_for(s, args.hash);
  Expectation expected;
  if (!args.sha256.empty()) expected.sha256 = require(Sha256::parse(args.sha256));
  if (args.size) expected.size = Bytes{*args.size};
  TransportOptions transport;
  std::optional<std::string> token;
  if (const char* env = std::getenv("DATAVO_TOKEN"); env && *env) token = env;
  if (auto stall = require(stall_timeout_from_env())) transport.stall_timeout = *stall;
  // With a SHA-256 to check, a download a killed process left half-done can be continued safely.
  const PartialDownload partial = expected.sha256 ? PartialDownload::continue_verified : PartialDownload::restart;
  auto result = require(s.cache->get_or_fetch(key, make_url_fetcher(args.url, transport, token, partial), expected));
  print_fetch_result(global, key, result, wait_for_uploads(*s.cache));
}

void cmd_put(const GlobalOptions& global, const std::string& hash, const std::string& file) {
  InterruptOnSignal interrupt;
  Session s = open_session(global);
  ShardKey key = key_for(s, hash);
  util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) require(Result<void>(Error::from_errno(errno, "cannot open " + file)));
  Fetcher from_file = [&](ByteSink& sink) -> Result<Expectation> {
    if (sink.written().count() > 0) DATAVO_TRY(sink.restart());  // a dead writer's partial copy: start over
    if (::lseek(fd.get(), 0, SEEK_SET) < 0) return Error::from_errno(errno, "cannot rewind " + file);
    std::vector<char> buffer(1 << 20);
    for (;;) {
      if (util::cancel_requested()) return util::cancelled_error("cache put " + file);
      ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::from_errno(errno, "cannot read " + file);
      }
      if (n == 0) break;
      DATAVO_TRY(sink.write(buffer.data(), static_cast<std::size_t>(n)));
    }
    return Expectation{};
  };
  auto result = require(s.cache->get_or_fetch(key, from_file));
  print_fetch_result(global, key, result, wait_for_uploads(*s.cache));
}

// "12 s ago", "5 min ago", "3 h ago", "2 d ago": how long ago an entry was last read (its mtime).
std::string age_text(std::int64_t seconds) {
  seconds = std::max<std::int64_t>(seconds, 0);
  if (seconds < 60) return std::to_string(seconds) + " s ago";
  if (seconds < 3600) return std::to_string(seconds / 60) + " min ago";
  if (seconds < 86400) return std::to_string(seconds / 3600) + " h ago";
  return std::to_string(seconds / 86400) + " d ago";
}

// What the shard index of the manifest cache (client/manifest_cache.hpp) says a content hash is, per instance.
class ShardIndex {
 public:
  ShardIndex() {
    if (auto dir = client::default_manifest_cache_dir()) root_ = std::move(*dir);
  }
  std::optional<client::ShardRecord> find(const std::string& instance, const ContentHash& hash) {
    auto* cache = of(instance);
    return cache ? cache->load_shard(hash) : std::nullopt;
  }
  std::vector<std::pair<ContentHash, client::ShardRecord>> all(const Instance& instance) {
    auto* cache = of(instance.name());
    return cache ? cache->shards() : std::vector<std::pair<ContentHash, client::ShardRecord>>{};
  }

 private:
  client::ManifestCache* of(const std::string& instance) {
    if (root_.empty()) return nullptr;
    auto it = caches_.find(instance);
    if (it == caches_.end()) {
      auto parsed = Instance::parse(instance);
      if (!parsed) return nullptr;
      it = caches_.emplace(instance, std::make_unique<client::ManifestCache>(root_, *parsed)).first;
    }
    return it->second.get();
  }
  std::string root_;
  std::map<std::string, std::unique_ptr<client::ManifestCache>> caches_;
};

void cmd_ls(const GlobalOptions& global, bool all_instances) {
  Session s = open_session(global);
  ShardIndex index;
  const auto now = std::chrono::system_clock::now();
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<std::string>> table;  // the text columns, one row per entry
  std::uint64_t total = 0;
  std::optional<Error> failure;
  for (const auto& tier : s.cache->tiers()) {
    auto entries = tier->list();
    if (!entries) {
      std::cerr << "datavo: ERROR: tier '" << tier->name() << "': " << entries.error().message << "\n";
      if (!failure) failure = Error{entries.error().code, "cannot list tier '" + tier->name() + "'"};
      continue;
    }
    for (const auto& e : *entries) {
      if (!all_instances && e.instance != s.instance.name()) continue;
      total += e.size.count();
      const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - e.last_access).count();
      const auto record = index.find(e.instance, e.hash);
      auto known = [&](auto value) { return record ? nlohmann::json(value) : nlohmann::json(nullptr); };
      rows.push_back({{"tier", tier->name()},
                      {"instance", e.instance},
                      {"content_hash", e.hash.hex()},
                      {"size_bytes", e.size.count()},
                      {"last_access", format_time(e.last_access)},
                      {"age_seconds", std::max<std::int64_t>(age, 0)},
                      {"dataset", known(record ? record->dataset : "")},
                      {"split", known(record ? record->split : "")},
                      {"revision", known(record ? record->revision : 0)},
                      {"shard_index", known(record ? record->shard_index : 0)},
                      {"keys", known(record ? record->keys : std::vector<std::string>{})}});
      std::string keys;
      if (record)
        for (const auto& key : record->keys) keys += (keys.empty() ? "" : ",") + key;
      std::vector<std::string> row = {tier->name()};
      if (all_instances) row.push_back(e.instance);
      row.insert(row.end(),
                 {e.hash.hex(), human_bytes(e.size.count()), age_text(age),
                  record ? record->dataset + "/" + record->split + "@" + std::to_string(record->revision) : "-",
                  record ? "shard " + std::to_string(record->shard_index) : "-", record ? keys : "-"});
      table.push_back(std::move(row));
    }
  }
  nlohmann::json report = {{"instance", all_instances ? nlohmann::json(nullptr) : nlohmann::json(s.instance.name())},
                           {"entries", rows.size()},
                           {"size_bytes", total},
                           {"entry_list", rows}};
  if (!global.json) {
    std::vector<std::string> header = {"tier"};
    if (all_instances) header.push_back("instance");
    header.insert(header.end(), {"content hash", "size", "last used", "dataset", "shard", "keys"});
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
    std::cout << "total: " << rows.size() << " entries, " << human_bytes(total)
              << (all_instances ? std::string(" (every instance)") : " (instance " + s.instance.name() + ")") << "\n";
  }
  if (failure) throw Fatal{k_exit_failed, *failure, report};
  if (global.json) print_json(report);
}

// The content hashes the shard index records for `dataset` ("<dataset>/<split>", or "<dataset>" for every split).
std::vector<ContentHash> hashes_of_dataset(const Session& s, const std::string& dataset) {
  const auto slash = dataset.find('/');
  if (slash == std::string::npos) {
    require(protocol::validate_name("dataset", dataset));
  } else {
    require(DatasetName::parse(dataset));
  }
  ShardIndex index;
  std::vector<ContentHash> out;
  for (auto& [hash, record] : index.all(s.instance)) {
    if (record.dataset + "/" + record.split == dataset || record.dataset == dataset) out.push_back(hash);
  }
  return out;
}

struct RmArgs {
  std::vector<std::string> hashes;
  std::string dataset;
};

void cmd_rm(const GlobalOptions& global, const RmArgs& args) {
  Session s = open_session(global);
  if (args.hashes.empty() && args.dataset.empty()) {
    throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, "cache rm: give content hashes or --dataset NAME"}};
  }
  std::vector<ShardKey> keys;
  for (const auto& hash : args.hashes) keys.push_back(key_for(s, hash));  // every hash is checked before any removal
  const std::size_t named = keys.size();
  if (!args.dataset.empty()) {
    for (auto& hash : hashes_of_dataset(s, args.dataset)) keys.push_back(ShardKey{s.instance, std::move(hash)});
  }
  nlohmann::json rows = nlohmann::json::array();
  std::uint64_t removed = 0, not_cached = 0, removed_of_dataset = 0;
  std::optional<Error> failure;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const ShardKey& key = keys[i];
    const bool of_dataset = i >= named;  // recorded once, maybe evicted since: not being cached is no failure
    nlohmann::json removed_from = nlohmann::json::array();
    for (const auto& tier : s.cache->tiers()) {
      if (tier->read_only()) continue;
      auto gone = tier->remove(key);
      if (!gone) {
        std::cerr << "datavo: ERROR: tier '" << tier->name() << "': " << gone.error().message << "\n";
        if (!failure) failure = Error{gone.error().code, "could not remove " + key.hash.hex() + " from every tier"};
      } else if (*gone) {
        removed_from.push_back(tier->name());
      }
    }
    if (removed_from.empty()) {
      if (of_dataset) continue;
      ++not_cached;
      std::cerr << "datavo: " << key.hash.hex() << " is not cached (instance " << key.instance.name() << ")\n";
    } else {
      ++removed;
      if (of_dataset) ++removed_of_dataset;
      if (!global.json) {
        for (const auto& t : removed_from)
          std::cout << "removed " << key.hash.hex() << " from " << t.get<std::string>() << "\n";
      }
    }
    rows.push_back({{"content_hash", key.hash.hex()}, {"removed_from", removed_from}});
  }
  s.cache->flush_stats();
  nlohmann::json report = {{"removed", removed}, {"not_cached", not_cached}, {"entry_list", rows}};
  if (failure) throw Fatal{k_exit_failed, *failure, report};
  if (not_cached > 0) {
    const std::string what =
        named == 1 ? keys.front().hash.hex() + " is not cached"
                   : std::to_string(not_cached) + " of " + std::to_string(named) + " entries are not cached";
    throw Fatal{k_exit_failed, Error{ErrorCode::not_found, what + "; nothing to remove"}, report};
  }
  if (!args.dataset.empty() && removed_of_dataset == 0) {
    throw Fatal{k_exit_failed,
                Error{ErrorCode::not_found, "no cached entry of dataset " + args.dataset + " (instance " +
                                                s.instance.name() + "); nothing to remove"},
                report};
  }
  if (global.json) print_json(report);
}

void cmd_gc(const GlobalOptions& global, bool dry_run) {
  Session s = open_session(global);
  nlohmann::json rows = nlohmann::json::array();
  bool failed = false;
  for (const auto& tier : s.cache->tiers()) {
    FolderTier* folder = tier->as_folder();
    if (!folder || folder->read_only()) continue;
    auto report = folder->gc(dry_run ? DryRun::yes : DryRun::no);
    if (!report) {
      std::cerr << "datavo: ERROR: tier '" << tier->name() << "': " << report.error().message << "\n";
      failed = true;
      continue;
    }
    rows.push_back({{"tier", tier->name()},
                    {"evicted", report->entries_evicted},
                    {"expired", report->expired},
                    {"freed_bytes", report->bytes_freed.count()},
                    {"staging_swept", report->staging_swept},
                    {"locks_swept", report->locks_swept},
                    {"used_bytes", report->used_after.count()}});
    if (!global.json) {
      std::cout << tier->name() << ": " << (dry_run ? "would evict " : "evicted ") << report->entries_evicted
                << " entries (" << report->expired << " expired), " << human_bytes(report->bytes_freed.count())
                << "; swept " << report->staging_swept << " staging and " << report->locks_swept << " lock files; "
                << human_bytes(report->used_after.count()) << " in use\n";
    }
  }
  s.cache->flush_stats();
  const nlohmann::json out = {{"dry_run", dry_run}, {"tiers", rows}};
  if (failed) throw Fatal{k_exit_failed, Error{ErrorCode::io, "gc failed on at least one tier"}, out};
  if (global.json) print_json(out);
}

void cmd_verify(const GlobalOptions& global, bool repair) {
  Session s = open_session(global);
  nlohmann::json rows = nlohmann::json::array();
  std::uint64_t unrepaired = 0;
  for (const auto& tier : s.cache->tiers()) {
    FolderTier* folder = tier->as_folder();
    if (!folder) continue;
    auto report = folder->verify(repair ? Repair::yes : Repair::no);
    if (!report) throw Fatal{k_exit_failed, report.error(), {{"repair", repair}, {"tiers", rows}}};
    unrepaired += report->bad - report->quarantined;
    rows.push_back({{"tier", tier->name()},
                    {"checked", report->checked},
                    {"ok", report->ok},
                    {"bad", report->bad},
                    {"unverifiable", report->unverifiable},
                    {"quarantined", report->quarantined},
                    {"bad_paths", report->bad_paths}});
    if (!global.json) {
      std::cout << tier->name() << ": " << report->checked << " checked, " << report->ok << " ok, " << report->bad
                << " bad, " << report->unverifiable << " without a recorded digest, " << report->quarantined
                << " quarantined\n";
      for (const auto& p : report->bad_paths) std::cout << "  bad: " << p << "\n";
    }
  }
  const nlohmann::json out = {{"repair", repair}, {"tiers", rows}};
  if (unrepaired > 0) {
    throw Fatal{
        k_exit_failed,
        Error{ErrorCode::integrity, std::to_string(unrepaired) + " entries do not match their digest; run "
                                                                 "`datavo cache verify --repair` to quarantine them"},
        out};
  }
  if (global.json) print_json(out);
}

void cmd_stats(const GlobalOptions& global, bool reset) {
  Session s = open_session(global);
  if (reset) {
    for (const auto& tier : s.cache->tiers()) {
      if (auto* folder = tier->as_folder()) require(folder->reset_stats());
    }
  }
  auto infos = s.cache->cache_info();
  if (global.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& t : infos) rows.push_back({{"tier", t.name}, {"type", t.type}, {"stats", stats_json(t.stats)}});
    print_json({{"tiers", rows}});
    return;
  }
  std::cout << std::left << std::setw(16) << "tier" << std::right << std::setw(9) << "hits" << std::setw(9) << "misses"
            << std::setw(9) << "hit rate" << std::setw(11) << "promotions" << std::setw(9) << "installs" << std::setw(9)
            << "skips" << std::setw(10) << "evictions" << std::setw(8) << "errors" << std::setw(12) << "served"
            << std::setw(12) << "installed"
            << "\n";
  for (const auto& t : infos) {
    char rate[16];
    std::snprintf(rate, sizeof rate, "%.1f%%", 100.0 * t.stats.hit_rate());
    std::cout << std::left << std::setw(16) << t.name << std::right << std::setw(9) << t.stats.hits << std::setw(9)
              << t.stats.misses << std::setw(9) << rate << std::setw(11) << t.stats.promotions << std::setw(9)
              << t.stats.installs << std::setw(9) << t.stats.capacity_skips << std::setw(10) << t.stats.evictions
              << std::setw(8) << t.stats.errors << std::setw(12) << human_bytes(t.stats.bytes_served.count())
              << std::setw(12) << human_bytes(t.stats.bytes_installed.count()) << "\n";
  }
}

}  // namespace

void add_cache_commands(CLI::App& app, GlobalOptions& global) {
  auto* cache = app.add_subcommand("cache", "inspect and drive the shard cache hierarchy");
  cache->require_subcommand(1);

  add_cache_check_command(*cache, global);

  cache->add_subcommand("info", "show the config used and each tier, fastest first")->callback([&global] {
    cmd_info(global);
  });

  auto fetch_args = std::make_shared<FetchArgs>();
  auto* fetch = cache->add_subcommand("fetch", "get a shard through the hierarchy, fetching URL on a miss");
  fetch->add_option("hash", fetch_args->hash, "content hash (64 lowercase hex)")->required();
  fetch->add_option("--url", fetch_args->url, "http(s):// or file:// URL of the shard")->required();
  fetch->add_option("--sha256", fetch_args->sha256, "expected SHA-256 of the bytes");
  fetch->add_option("--size", fetch_args->size, "expected size in bytes");
  fetch->callback([&global, fetch_args] { cmd_fetch(global, *fetch_args); });

  auto put_args = std::make_shared<std::pair<std::string, std::string>>();
  auto* put = cache->add_subcommand("put", "install a local file under a content hash");
  put->add_option("hash", put_args->first, "content hash")->required();
  put->add_option("file", put_args->second, "file to install")->required()->check(CLI::ExistingFile);
  put->callback([&global, put_args] { cmd_put(global, put_args->first, put_args->second); });

  auto all_instances = std::make_shared<bool>(false);
  auto* ls = cache->add_subcommand("ls", "list cached entries of this instance, most recently used first");
  ls->add_flag("--all-instances", *all_instances, "list the entries of every instance");
  ls->callback([&global, all_instances] { cmd_ls(global, *all_instances); });

  auto rm_args = std::make_shared<RmArgs>();
  auto* rm = cache->add_subcommand("rm", "remove entries from every writable tier (exit 1 if one is not cached)");
  rm->add_option("hash", rm_args->hashes, "content hashes");
  rm->add_option("--dataset", rm_args->dataset,
                 "also every entry of this dataset (<dataset>/<split>, or <dataset> for all its splits) that warm or "
                 "read recorded");
  rm->callback([&global, rm_args] { cmd_rm(global, *rm_args); });

  auto dry_run = std::make_shared<bool>(false);
  auto* gc = cache->add_subcommand("gc", "evict to the budget and max_age; sweep leftover staging and lock files");
  gc->add_flag("--dry-run", *dry_run, "report what would be removed, remove nothing");
  gc->callback([&global, dry_run] { cmd_gc(global, *dry_run); });

  auto repair = std::make_shared<bool>(false);
  auto* verify = cache->add_subcommand("verify", "re-hash entries against their recorded SHA-256");
  verify->add_flag("--repair", *repair, "move bad entries to .quarantine/");
  verify->callback([&global, repair] { cmd_verify(global, *repair); });

  auto reset = std::make_shared<bool>(false);
  auto* stats = cache->add_subcommand("stats", "cumulative per-tier counters of every process");
  stats->add_flag("--reset", *reset, "zero the counters first");
  stats->callback([&global, reset] { cmd_stats(global, *reset); });
}

}  // namespace datavo::cli
