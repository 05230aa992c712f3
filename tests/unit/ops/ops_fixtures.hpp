// Helpers of the ops tests: a hierarchy of folder tiers (plus an optional memory tier) in a fresh directory, and
// entries installed into it from bytes in memory.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/memory_tier.hpp"

namespace datavo::opstest {

inline std::shared_ptr<Tier> folder(const std::string& path, const std::string& name,
                                    std::optional<Bytes> max_bytes = std::nullopt) {
  FolderTierOptions options;
  options.path = path;
  options.name = name;
  options.max_bytes = max_bytes;
  options.durability = Durability::no_sync;
  auto tier = FolderTier::create(options);
  if (!tier) throw std::runtime_error(tier.error().message);
  return *tier;
}

inline std::shared_ptr<Tier> failing_memory_tier(const std::string& name) {
  MemoryTierOptions options;
  options.name = name;
  options.fail_with = ErrorCode::io;
  return make_memory_tier(options);
}

inline std::shared_ptr<ShardCacheHierarchy> hierarchy(std::vector<std::shared_ptr<Tier>> tiers) {
  auto cache = ShardCacheHierarchy::create(std::move(tiers));
  if (!cache) throw std::runtime_error(cache.error().message);
  return *cache;
}

// A content hash made of one repeated hex digit.
inline ContentHash hash_of(char digit) { return *ContentHash::parse(std::string(64, digit)); }

inline ShardKey key_of(char digit, const std::string& instance = "local") {
  return ShardKey{*Instance::parse(instance), hash_of(digit)};
}

// Installs `bytes` under `key` through the hierarchy; the result of get_or_fetch.
inline FetchResult install(ShardCacheHierarchy& cache, const ShardKey& key, const std::string& bytes) {
  auto result = cache.get_or_fetch(key, [&](ByteSink& sink) -> Result<Expectation> {
    DATAVO_TRY(sink.write(bytes.data(), bytes.size()));
    return Expectation{};
  });
  if (!result) throw std::runtime_error(result.error().message);
  return std::move(*result);
}

}  // namespace datavo::opstest
