// `datavo cache ...`: inspect and drive the cache hierarchy of this machine.
#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/tier_registry.hpp"
#include "datavo/url_fetcher.hpp"
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
  s.instance = require(Instance::resolve(global.instance ? &*global.instance : nullptr));
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

nlohmann::json stats_json(const TierStats& s) {
  return {{"hits", s.hits},
          {"misses", s.misses},
          {"hit_rate", s.hit_rate()},
          {"promotions", s.promotions},
          {"installs", s.installs},
          {"capacity_skips", s.capacity_skips},
          {"evictions", s.evictions},
          {"errors", s.errors},
          {"bytes_served", s.bytes_served.count()},
          {"bytes_installed", s.bytes_installed.count()}};
}

// Prints the shard's path (and, with --json, where it came from), after waiting for its uploads to remote tiers:
// `fetch` and `put` report them (on stderr in text mode, where stdout is only the path).
void print_fetch_result(const GlobalOptions& global, const FetchResult& result, ShardCacheHierarchy& cache) {
  const nlohmann::json uploads = wait_for_uploads(cache);
  if (global.json) {
    print_json({{"path", result.handle.path()},
                {"tier", result.tier_name},
                {"source", to_string(result.source)},
                {"size", result.handle.size().count()},
                {"uploads", uploads}});
  } else {
    std::cout << result.handle.path() << "\n";
    if (any_uploads(uploads)) std::cerr << "datavo: uploads to remote tiers: " << describe_uploads(uploads) << "\n";
  }
}

void cmd_info(const GlobalOptions& global) {
  Session s = open_session(global);
  auto infos = s.cache->cache_info();
  if (global.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& c : s.config.skipped) skipped.push_back({{"path", c.path}, {"reason", c.reason}});
    nlohmann::json tiers = nlohmann::json::array();
    for (const auto& t : infos) {
      tiers.push_back({{"name", t.name},
                       {"type", t.type},
                       {"path", t.location},
                       {"max_bytes", t.max_bytes ? nlohmann::json(t.max_bytes->count()) : nlohmann::json(nullptr)},
                       {"used_bytes", t.usage ? nlohmann::json(t.usage->used.count()) : nlohmann::json(nullptr)},
                       {"entries", t.usage ? nlohmann::json(t.usage->entries) : nlohmann::json(nullptr)},
                       {"read_only", t.read_only}});
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
  int n = 1;
  for (const auto& t : infos) {
    std::cout << "  " << n++ << ". " << t.name << " [" << t.type << (t.read_only ? ", read-only" : "") << "] "
              << t.location << "\n     capacity " << (t.max_bytes ? human_bytes(t.max_bytes->count()) : "unbounded");
    if (t.usage) {
      std::cout << ", used " << human_bytes(t.usage->used.count()) << ", " << t.usage->entries << " entries";
    } else {
      std::cout << ", usage unknown";
    }
    std::cout << "\n";
  }
}

struct FetchArgs {
  std::string hash, url, sha256;
  std::optional<std::uint64_t> size;
};

void cmd_fetch(const GlobalOptions& global, const FetchArgs& args) {
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
  print_fetch_result(global, result, *s.cache);
}

void cmd_put(const GlobalOptions& global, const std::string& hash, const std::string& file) {
  Session s = open_session(global);
  ShardKey key = key_for(s, hash);
  util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) require(Result<void>(Error::from_errno(errno, "cannot open " + file)));
  Fetcher from_file = [&](ByteSink& sink) -> Result<Expectation> {
    if (sink.written().count() > 0) DATAVO_TRY(sink.restart());  // a dead writer's partial copy: start over
    if (::lseek(fd.get(), 0, SEEK_SET) < 0) return Error::from_errno(errno, "cannot rewind " + file);
    std::vector<char> buffer(1 << 20);
    for (;;) {
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
  print_fetch_result(global, result, *s.cache);
}

void cmd_ls(const GlobalOptions& global, bool all_instances) {
  Session s = open_session(global);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& tier : s.cache->tiers()) {
    auto entries = tier->list();
    if (!entries) {
      std::cerr << "datavo: WARNING: tier '" << tier->name() << "': " << entries.error().message << "\n";
      continue;
    }
    for (const auto& e : *entries) {
      if (!all_instances && e.instance != s.instance.name()) continue;
      if (global.json) {
        rows.push_back({{"tier", tier->name()},
                        {"instance", e.instance},
                        {"hash", e.hash.hex()},
                        {"size", e.size.count()},
                        {"last_access", format_time(e.last_access)}});
      } else {
        std::cout << tier->name() << "\t" << e.instance << "\t" << e.hash.hex() << "\t" << e.size.count() << "\t"
                  << format_time(e.last_access) << "\n";
      }
    }
  }
  if (global.json) print_json(rows);
}

void cmd_rm(const GlobalOptions& global, const std::string& hash) {
  Session s = open_session(global);
  ShardKey key = key_for(s, hash);
  nlohmann::json removed_from = nlohmann::json::array();
  bool failed = false;
  for (const auto& tier : s.cache->tiers()) {
    if (tier->read_only()) continue;
    auto removed = tier->remove(key);
    if (!removed) {
      std::cerr << "datavo: ERROR: tier '" << tier->name() << "': " << removed.error().message << "\n";
      failed = true;
    } else if (*removed) {
      removed_from.push_back(tier->name());
    }
  }
  s.cache->flush_stats();
  if (global.json)
    print_json({{"hash", hash}, {"removed_from", removed_from}});
  else if (removed_from.empty())
    std::cout << hash << " is not cached\n";
  else
    for (const auto& t : removed_from) std::cout << "removed from " << t.get<std::string>() << "\n";
  if (failed) throw Fatal{k_exit_failed, Error{ErrorCode::io, "could not remove " + hash + " from every tier"}};
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
                    {"bytes_freed", report->bytes_freed.count()},
                    {"staging_swept", report->staging_swept},
                    {"locks_swept", report->locks_swept},
                    {"used_after", report->used_after.count()},
                    {"dry_run", dry_run}});
    if (!global.json) {
      std::cout << tier->name() << ": " << (dry_run ? "would evict " : "evicted ") << report->entries_evicted
                << " entries (" << report->expired << " expired), " << human_bytes(report->bytes_freed.count())
                << "; swept " << report->staging_swept << " staging and " << report->locks_swept << " lock files; "
                << human_bytes(report->used_after.count()) << " in use\n";
    }
  }
  s.cache->flush_stats();
  if (global.json) print_json(rows);
  if (failed) throw Fatal{k_exit_failed, Error{ErrorCode::io, "gc failed on at least one tier"}};
}

void cmd_verify(const GlobalOptions& global, bool repair) {
  Session s = open_session(global);
  nlohmann::json rows = nlohmann::json::array();
  std::uint64_t unrepaired = 0;
  for (const auto& tier : s.cache->tiers()) {
    FolderTier* folder = tier->as_folder();
    if (!folder) continue;
    auto report = folder->verify(repair ? Repair::yes : Repair::no);
    if (!report) throw Fatal{k_exit_failed, report.error()};
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
  if (global.json) print_json(rows);
  if (unrepaired > 0) {
    throw Fatal{k_exit_failed, Error{ErrorCode::integrity, std::to_string(unrepaired) +
                                                               " entries do not match their digest; run "
                                                               "`datavo cache verify --repair` to quarantine them"}};
  }
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
    print_json(rows);
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

  auto rm_hash = std::make_shared<std::string>();
  auto* rm = cache->add_subcommand("rm", "remove an entry from every writable tier");
  rm->add_option("hash", *rm_hash, "content hash")->required();
  rm->callback([&global, rm_hash] { cmd_rm(global, *rm_hash); });

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
