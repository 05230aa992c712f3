#include "client/manifest_cache.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo::client {
namespace {

constexpr const char* k_default_dir_under_home = "/.cache/altavo/datavo/manifests";
// Group-readable like the shard tiers (docs/layout.md), so that one manifest cache can serve a Unix group.
constexpr mode_t k_dir_mode = 02775;
constexpr mode_t k_file_mode = 0644;

std::string non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string server_file(const std::string& root, const std::string& server) {
  std::string key;
  for (char c : server) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    key += keep ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
  }
  return root + "/.servers/" + key + ".json";
}

}  // namespace

std::optional<Instance> load_server_instance(const std::string& root, const std::string& server) {
  const std::string path = server_file(root, server);
  if (!exists(path)) return std::nullopt;
  auto text = util::read_file(path, std::size_t{4096});
  if (!text) return std::nullopt;
  auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("server") || json["server"] != server || !json.contains("instance") ||
      !json["instance"].is_string()) {
    LOG_WARNING("ignoring " << path << ": expected {\"server\": \"" << server << "\", \"instance\": <name>}");
    return std::nullopt;
  }
  auto instance = Instance::parse(json["instance"].get<std::string>());
  if (!instance) return std::nullopt;
  return std::move(*instance);
}

Result<void> store_server_instance(const std::string& root, const std::string& server, const Instance& instance) {
  DATAVO_TRY(util::make_dirs(root + "/.servers", k_dir_mode));
  const nlohmann::json json = {{"server", server}, {"instance", instance.name()}};
  return util::write_file_atomic(server_file(root, server), json.dump() + "\n", k_file_mode);
}

Result<std::string> default_manifest_cache_dir() {
  if (auto dir = non_empty_env("DATAVO_MANIFEST_CACHE_DIR"); !dir.empty()) return dir;
  if (auto home = non_empty_env("HOME"); !home.empty()) return home + k_default_dir_under_home;
  return Error{ErrorCode::invalid_argument,
               "the manifest cache needs DATAVO_MANIFEST_CACHE_DIR or HOME, and neither is set"};
}

std::string ManifestCache::directory(const DatasetName& name) const {
  // Both name parts are validated path components (DatasetName::parse), as is the instance.
  return root_ + "/" + instance_.name() + "/" + name.dataset + "/" + name.split;
}

std::optional<Manifest> ManifestCache::load(const DatasetName& name, std::uint64_t revision) const {
  const std::string path = directory(name) + "/" + std::to_string(revision) + ".json";
  if (!exists(path)) return std::nullopt;
  auto text = util::read_file(path);
  if (!text) {
    LOG_WARNING("ignoring the cached manifest " << path << ": " << text.error().message);
    return std::nullopt;
  }
  auto manifest = Manifest::parse(*text);
  if (!manifest) {
    LOG_WARNING("ignoring the cached manifest " << path << ": " << manifest.error().message);
    return std::nullopt;
  }
  if (manifest->revision != revision || manifest->name.dataset != name.dataset || manifest->name.split != name.split) {
    LOG_WARNING("ignoring the cached manifest " << path << ": it holds " << manifest->name.full() << " revision "
                                                << manifest->revision);
    return std::nullopt;
  }
  return std::move(*manifest);
}

std::optional<LatestRecord> ManifestCache::load_latest(const DatasetName& name) const {
  const std::string path = directory(name) + "/latest";
  if (!exists(path)) return std::nullopt;
  auto text = util::read_file(path);
  if (!text) {
    LOG_WARNING("ignoring " << path << ": " << text.error().message);
    return std::nullopt;
  }
  auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("revision") || !json["revision"].is_number_unsigned() ||
      !json.contains("etag") || !json["etag"].is_string() || json["revision"].get<std::uint64_t>() == 0) {
    LOG_WARNING("ignoring " << path << ": expected {\"revision\": <positive integer>, \"etag\": <string>}");
    return std::nullopt;
  }
  return LatestRecord{json["revision"].get<std::uint64_t>(), json["etag"].get<std::string>()};
}

Result<void> ManifestCache::store(const DatasetName& name, std::uint64_t revision, std::string_view body) const {
  const std::string dir = directory(name);
  DATAVO_TRY(util::make_dirs(dir, k_dir_mode));
  return util::write_file_atomic(dir + "/" + std::to_string(revision) + ".json", body, k_file_mode);
}

Result<void> ManifestCache::store_shard(const ContentHash& hash, const ShardRecord& record) const {
  const std::string dir = root_ + "/" + instance_.name() + "/.shards";
  const std::string path = dir + "/" + hash.hex() + ".json";
  if (exists(path)) return ok();
  DATAVO_TRY(util::make_dirs(dir, k_dir_mode));
  const nlohmann::json json = {{"dataset", record.dataset},
                               {"split", record.split},
                               {"revision", record.revision},
                               {"shard_index", record.shard_index},
                               {"keys", record.keys}};
  return util::write_file_atomic(path, json.dump() + "\n", k_file_mode);
}

namespace {

std::optional<ShardRecord> parse_shard_record(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  for (const char* field : {"dataset", "split"})
    if (!json.contains(field) || !json[field].is_string()) return std::nullopt;
  for (const char* field : {"revision", "shard_index"})
    if (!json.contains(field) || !json[field].is_number_unsigned()) return std::nullopt;
  if (!json.contains("keys") || !json["keys"].is_array()) return std::nullopt;
  ShardRecord record{json["dataset"].get<std::string>(),
                     json["split"].get<std::string>(),
                     json["revision"].get<std::uint64_t>(),
                     json["shard_index"].get<std::uint64_t>(),
                     {}};
  for (const auto& key : json["keys"]) {
    if (!key.is_string()) return std::nullopt;
    record.keys.push_back(key.get<std::string>());
  }
  return record;
}

}  // namespace

std::optional<ShardRecord> ManifestCache::load_shard(const ContentHash& hash) const {
  auto text = util::read_file(root_ + "/" + instance_.name() + "/.shards/" + hash.hex() + ".json", std::size_t{65536});
  if (!text) return std::nullopt;
  return parse_shard_record(*text);
}

std::vector<std::pair<ContentHash, ShardRecord>> ManifestCache::shards() const {
  std::vector<std::pair<ContentHash, ShardRecord>> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root_ + "/" + instance_.name() + "/.shards", error)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".json")) continue;
    auto hash = ContentHash::parse(std::string_view(name).substr(0, name.size() - 5));
    if (!hash) continue;
    if (auto record = load_shard(*hash)) out.emplace_back(std::move(*hash), std::move(*record));
  }
  return out;
}

Result<void> ManifestCache::store_latest(const DatasetName& name, const LatestRecord& record) const {
  const std::string dir = directory(name);
  DATAVO_TRY(util::make_dirs(dir, k_dir_mode));
  const nlohmann::json json = {{"revision", record.revision}, {"etag", record.etag}};
  return util::write_file_atomic(dir + "/latest", json.dump() + "\n", k_file_mode);
}

}  // namespace datavo::client
