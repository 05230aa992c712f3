// Tests of the in-memory remote tier (src/tier/memory/memory_tier.cpp), the test double for remote tiers.
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

TEST(MemoryTier, ContainsIsFalseUntilInstalled) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey key = make_key(1);
  auto before = tier->contains(key);
  ASSERT_TRUE(before);
  EXPECT_FALSE(*before);
  auto installed = install(*tier, dir, key, "hello");
  ASSERT_TRUE(installed);
  EXPECT_EQ(*installed, InstallOutcome::installed);
  auto after = tier->contains(key);
  ASSERT_TRUE(after);
  EXPECT_TRUE(*after);
}

TEST(MemoryTier, ReadIntoCopiesTheInstalledBytes) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey key = make_key(2);
  const std::string bytes = random_bytes(70000, 2);
  ASSERT_TRUE(install(*tier, dir, key, bytes));
  StringSink sink;
  auto read = tier->read_into(key, sink);
  ASSERT_TRUE(read);
  EXPECT_TRUE(*read);
  EXPECT_TRUE(sink.bytes() == bytes);
}

TEST(MemoryTier, ReadIntoAMissIsFalseNotAnError) {
  auto tier = make_memory();
  StringSink sink;
  auto read = tier->read_into(make_key(3), sink);
  ASSERT_TRUE(read);
  EXPECT_FALSE(*read);
  EXPECT_TRUE(sink.bytes().empty());
}

TEST(MemoryTier, InstallCopyOfAPresentKeyIsAlreadyPresentAndKeepsTheFirstBytes) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey key = make_key(4);
  ASSERT_TRUE(install(*tier, dir, key, "first"));
  auto again = install(*tier, dir, key, "second");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, InstallOutcome::already_present);
  StringSink sink;
  ASSERT_TRUE(tier->read_into(key, sink));
  EXPECT_EQ(sink.bytes(), "first");
}

TEST(MemoryTier, InstancesAreSeparate) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey in_a = make_key(5, "a");
  const ShardKey in_b{make_instance("b"), in_a.hash};
  ASSERT_TRUE(install(*tier, dir, in_a, "for a"));
  auto b = tier->contains(in_b);
  ASSERT_TRUE(b);
  EXPECT_FALSE(*b);
}

TEST(MemoryTier, RemoveReturnsWhetherThereWasAnEntry) {
  TempDir dir;
  auto tier = make_memory();
  const ShardKey key = make_key(6);
  ASSERT_TRUE(install(*tier, dir, key, "bytes"));
  auto removed = tier->remove(key);
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  auto contains = tier->contains(key);
  ASSERT_TRUE(contains);
  EXPECT_FALSE(*contains);
  auto again = tier->remove(key);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
}

TEST(MemoryTier, UsageSumsBytesAndCountsEntries) {
  TempDir dir;
  auto tier = make_memory();
  auto empty = tier->usage();
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->used, Bytes{0});
  EXPECT_EQ(empty->entries, 0u);
  ASSERT_TRUE(install(*tier, dir, make_key(7), random_bytes(100, 7)));
  ASSERT_TRUE(install(*tier, dir, make_key(8, "other"), random_bytes(250, 8)));
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{350});
  EXPECT_EQ(usage->entries, 2u);
  ASSERT_TRUE(tier->remove(make_key(7)));
  usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{250});
  EXPECT_EQ(usage->entries, 1u);
}

TEST(MemoryTier, ListReportsInstanceHashAndSizeOfEveryEntry) {
  TempDir dir;
  auto tier = make_memory();
  ASSERT_TRUE(install(*tier, dir, make_key(9, "one"), random_bytes(10, 9)));
  ASSERT_TRUE(install(*tier, dir, make_key(10, "two.example"), random_bytes(20, 10)));
  auto listed = tier->list();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  bool saw_one = false, saw_two = false;
  for (const auto& e : *listed) {
    if (e.instance == "one") {
      saw_one = true;
      EXPECT_EQ(e.hash, make_key(9).hash);
      EXPECT_EQ(e.size, Bytes{10});
    } else if (e.instance == "two.example") {
      saw_two = true;
      EXPECT_EQ(e.hash, make_key(10).hash);
      EXPECT_EQ(e.size, Bytes{20});
    }
  }
  EXPECT_TRUE(saw_one);
  EXPECT_TRUE(saw_two);
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
