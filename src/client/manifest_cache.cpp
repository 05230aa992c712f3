#include "client/manifest_cache.hpp"

#include <sys/stat.h>

#include <cstdlib>
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

}  // namespace

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

Result<void> ManifestCache::store_latest(const DatasetName& name, const LatestRecord& record) const {
  const std::string dir = directory(name);
  DATAVO_TRY(util::make_dirs(dir, k_dir_mode));
  const nlohmann::json json = {{"revision", record.revision}, {"etag", record.etag}};
  return util::write_file_atomic(dir + "/latest", json.dump() + "\n", k_file_mode);
}

}  // namespace datavo::client
