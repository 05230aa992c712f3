// A consumer of the installed library, through its public headers only: a folder tier and a hierarchy in a temp
// directory, one shard fetched (a fetcher writing a few bytes), then hit, read back and hashed. Prints one
// `name value` line per result for tests/install/test_install.sh to check.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "datavo/content_hash.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"

namespace {

int fail(const char* what, const datavo::Error& error) {
  std::fprintf(stderr, "datavo_consumer: %s: %s\n", what, error.message.c_str());
  return 1;
}

std::string read_all(int fd, datavo::Bytes size) {
  std::string bytes(size.count(), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0) return {};
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

}  // namespace

int main() {
  char dir_template[] = "/tmp/datavo_consumer.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return 1;
  const std::filesystem::path dir = dir_template;

  auto tier = datavo::FolderTier::create({.path = (dir / "shards").string(), .name = "local"});
  if (!tier) return fail("FolderTier::create", tier.error());
  auto cache = datavo::ShardCacheHierarchy::create({tier.value()});
  if (!cache) return fail("ShardCacheHierarchy::create", cache.error());

  const datavo::ShardIdentity identity{.manifest_ref = "voice_demo_v1/train@m1",
                                       .revision = "42",
                                       .shard_index = 3,
                                       .keys = {"transcript.txt", "audio.wav"},
                                       .sample_ids = {"utt_0001", "utt_0002", "utt_0003"}};
  const datavo::ShardKey key{datavo::Instance::local(), datavo::compute_content_hash(identity)};
  std::printf("content_hash %s\n", key.hash.hex().c_str());

  const std::string payload = "hello from an installed datavo\n";
  int fetches = 0;
  const datavo::Fetcher fetcher = [&](datavo::ByteSink& sink) -> datavo::Result<datavo::Expectation> {
    ++fetches;
    if (auto restarted = sink.restart(); !restarted) return restarted.error();
    if (auto written = sink.write(payload.data(), payload.size()); !written) return written.error();
    return datavo::Expectation{.size = datavo::Bytes{payload.size()}, .sha256 = std::nullopt};
  };

  for (const char* pass : {"first", "second"}) {
    auto result = (*cache)->get_or_fetch(key, fetcher);
    if (!result) return fail("get_or_fetch", result.error());
    const std::string bytes = read_all(result->handle.fd(), result->handle.size());
    datavo::Sha256Hasher hasher;
    hasher.update(bytes.data(), bytes.size());
    std::printf("%s %s tier=%s size=%llu sha256=%s\n", pass, datavo::to_string(result->source),
                result->tier_name.c_str(), static_cast<unsigned long long>(bytes.size()),
                hasher.finish().hex().c_str());
  }
  std::printf("fetches %d\n", fetches);
  cache->reset();
  std::filesystem::remove_all(dir);
  return 0;
}
