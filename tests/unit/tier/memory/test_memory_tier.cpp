// Tests of the in-memory remote tier (src/tier/memory/memory_tier.cpp), the test double for remote tiers. The
// contract every tier shares (miss, put, get, already present, remove, list, usage, instances, a corrupt object)
// is the conformance suite's (tests/conformance/, instance Memory/...); these are the double's own behaviours.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "datavo/memory_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;

std::shared_ptr<Tier> make_memory(std::string name = "remote") {
  MemoryTierOptions options;
  options.name = std::move(name);
  return make_memory_tier(options);
}

// Installs `bytes` under `key` through a file handle, as the hierarchy does.
Result<InstallOutcome> install(Tier& tier, const TempDir& dir, const ShardKey& key, const std::string& bytes) {
  static int counter = 0;
  ShardHandle source = handle_on_new_file(dir.sub("source-" + std::to_string(++counter)), bytes);
  return tier.install_copy(key, source, sha256_of(bytes));
}

TEST(MemoryTier, IsARemoteTierThatIsNotDirectlyReadable) {
  MemoryTierOptions options;
  options.name = "blob";
  options.max_bytes = Bytes{1234};
  auto tier = make_memory_tier(options);
  EXPECT_EQ(tier->name(), "blob");
  EXPECT_EQ(tier->type(), "memory");
  EXPECT_FALSE(tier->supports_direct_read());
  EXPECT_FALSE(tier->read_only());
  EXPECT_EQ(tier->as_folder(), nullptr);
  EXPECT_EQ(tier->max_bytes(), Bytes{1234});
  EXPECT_FALSE(tier->location().empty());
  EXPECT_TRUE(tier->can_hold(Bytes{1234}));
  EXPECT_FALSE(tier->can_hold(Bytes{1235}));
}

TEST(MemoryTier, ReadIntoReportsTheDigestGivenToInstallNotOneOfItsOwn) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey key = make_key(2);
  const std::string bytes = random_bytes(1000, 2);
  ShardHandle source = handle_on_new_file(dir.sub("source"), bytes);
  ASSERT_TRUE(tier->install_copy(key, source, sha256_of("other bytes")));
  StringSink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read && *read);
  EXPECT_EQ((*read)->sha256, sha256_of("other bytes"));
  EXPECT_EQ((*read)->size, Bytes{bytes.size()});
  EXPECT_TRUE(sink.bytes() == bytes);
}

TEST(MemoryTier, FailWithMakesEveryCallAnError) {
  TempDir dir;
  MemoryTierOptions options;
  options.name = "down";
  options.fail_with = ErrorCode::remote;
  auto tier = make_memory_tier(options);
  const ShardKey key = make_key(11);

  auto contains = tier->contains(key);
  ASSERT_FALSE(contains);
  EXPECT_EQ(contains.error().code, ErrorCode::remote);
  StringSink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::remote);
  auto installed = install(*tier, dir, key, "bytes");
  ASSERT_FALSE(installed);
  EXPECT_EQ(installed.error().code, ErrorCode::remote);
  auto removed = tier->remove(key);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::remote);
  auto usage = tier->usage();
  ASSERT_FALSE(usage);
  EXPECT_EQ(usage.error().code, ErrorCode::remote);
  auto listed = tier->list();
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().code, ErrorCode::remote);

  MemoryTierOptions io_options;
  io_options.fail_with = ErrorCode::io;
  auto io_tier = make_memory_tier(io_options);
  auto io_contains = io_tier->contains(key);
  ASSERT_FALSE(io_contains);
  EXPECT_EQ(io_contains.error().code, ErrorCode::io);
}

TEST(MemoryTier, IsSafeToUseFromManyThreads) {
  TempDir dir;
  auto tier = make_memory();
  constexpr int k_threads = 8;
  constexpr int k_keys = 20;
  std::vector<std::string> sources;
  for (int k = 0; k < k_keys; ++k) {
    sources.push_back(dir.sub("src-" + std::to_string(k)));
    write_file(sources.back(), random_bytes(1000 + std::size_t(k), std::uint64_t(k)));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        const int k = (t * 7 + round) % k_keys;
        const ShardKey key = make_key(std::uint64_t(100 + k));
        const std::string expected = random_bytes(1000 + std::size_t(k), std::uint64_t(k));
        int fd = ::open(sources[std::size_t(k)].c_str(), O_RDONLY | O_CLOEXEC);
        ShardHandle source(fd, sources[std::size_t(k)], Bytes{expected.size()});
        if (!tier->install_copy(key, source, sha256_of(expected))) ++failures;
        StringSink sink;
        auto read = tier->read_into(key, sink);
        if (!read || !*read || sink.bytes() != expected) ++failures;
        if (!tier->usage() || !tier->list()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->entries, std::uint64_t(k_keys));
}

}  // namespace
}  // namespace datavo
