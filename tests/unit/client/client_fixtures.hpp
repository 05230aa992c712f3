// Helpers of the client tests: a fresh cache hierarchy and manifest cache per test, client options that ignore
// the environment, and an RAII environment variable.
#pragma once

#include <stdlib.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/sample_stream.hpp"
#include "support/temp_dir.hpp"

namespace datavo::clienttest {

// A folder tier at `path` without fsync, bounded by `max_bytes` when given.
inline std::shared_ptr<FolderTier> fresh_folder(const std::string& path, const std::string& name = "local",
                                                std::optional<Bytes> max_bytes = std::nullopt) {
  FolderTierOptions options;
  options.path = path;
  options.name = name;
  options.durability = Durability::no_sync;
  options.max_bytes = max_bytes;
  auto tier = FolderTier::create(options);
  if (!tier) throw std::runtime_error(tier.error().message);
  return *tier;
}

// A hierarchy of the one tier `tier`.
inline std::shared_ptr<ShardCacheHierarchy> cache_of(std::shared_ptr<Tier> tier) {
  auto cache = ShardCacheHierarchy::create({std::move(tier)});
  if (!cache) throw std::runtime_error(cache.error().message);
  return *cache;
}

inline std::shared_ptr<ShardCacheHierarchy> fresh_cache(const std::string& path, const std::string& name = "local") {
  return cache_of(fresh_folder(path, name));
}

// Options that do not depend on DATAVO_* in the environment (offline is left to the test).
inline OriginClientOptions client_options(const std::string& server, const std::string& manifest_dir,
                                          std::optional<Offline> offline = Offline::no) {
  OriginClientOptions options;
  options.server = server;
  options.manifest_cache_dir = manifest_dir;
  options.offline = offline;
  options.token = "";
  options.transport.max_attempts = 2;
  options.transport.initial_backoff = Milliseconds{10};
  return options;
}

inline std::shared_ptr<OriginClient> make_client(const OriginClientOptions& options) {
  auto client = OriginClient::create(options);
  if (!client) throw std::runtime_error(client.error().message);
  return *client;
}

// Options of a stream over the fake origin at `server` (fake_origin.hpp) through `cache`.
inline SampleStreamOptions fake_stream_options(const std::string& server, const std::string& manifest_dir,
                                               std::shared_ptr<ShardCacheHierarchy> cache,
                                               std::vector<std::string> keys = {"audio.wav", "transcript.txt"}) {
  SampleStreamOptions o;
  o.keys = std::move(keys);
  o.cache = std::move(cache);
  o.origin = client_options(server, manifest_dir);
  return o;
}

// The fake origin's dataset "fake/train" read with `options`; throws (failing the test) when it cannot be opened.
inline SampleStream open_fake_stream(SampleStreamOptions options) {
  auto stream = SampleStream::from_dataset("fake/train", std::move(options));
  if (!stream) throw std::runtime_error(stream.error().message);
  return std::move(*stream);
}

// Sets (or unsets, with nullopt) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Reads every sample of `stream`; the ids in order. Fails the calling test on an error.
inline Result<std::vector<std::string>> read_ids(SampleStream& stream) {
  std::vector<std::string> ids;
  for (;;) {
    auto sample = stream.next();
    if (!sample) return sample.error();
    if (!*sample) return ids;
    ids.push_back((*sample)->id);
  }
}

}  // namespace datavo::clienttest
