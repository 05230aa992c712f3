// Tests of what the tier interface defines once for every tier (src/tier/tier.cpp): the shard handle (ownership,
// moves, duplicate), the counters' arithmetic and can_hold.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "datavo/tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(ShardHandle, ClosesItsDescriptorOnDestructionAndMovesOwnership) {
  TempDir dir;
  int fd = -1;
  {
    ShardHandle handle = handle_on_new_file(dir.sub("f"), "bytes");
    fd = handle.fd();
    ASSERT_TRUE(handle.valid());
    ShardHandle moved = std::move(handle);
    EXPECT_FALSE(handle.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
    EXPECT_EQ(moved.fd(), fd);
    EXPECT_EQ(moved.size(), Bytes{5});
    EXPECT_TRUE(fd_open(fd));
  }
  EXPECT_FALSE(fd_open(fd));
}

TEST(ShardHandle, ADuplicateKeepsReadingAfterTheOriginalIsClosedAndTheFileRemoved) {
  TempDir dir;
  const std::string path = dir.sub("entry");
  std::optional<ShardHandle> original(handle_on_new_file(path, "the shard's bytes"));
  auto copy = original->duplicate();
  ASSERT_TRUE(copy) << copy.error().message;
  EXPECT_NE(copy->fd(), original->fd());
  EXPECT_EQ(copy->path(), path);
  EXPECT_EQ(copy->size(), Bytes{17});
  EXPECT_NE(::fcntl(copy->fd(), F_GETFD) & FD_CLOEXEC, 0);
  original.reset();
  ::unlink(path.c_str());
  EXPECT_EQ(read_handle(*copy), "the shard's bytes");

  ShardHandle closed;
  auto none = closed.duplicate();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().sys_errno, EBADF);
}

TEST(TierStats, AddUpSetByNameAndTellEmpty) {
  TierStats a;
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.set("hits", 3));
  EXPECT_TRUE(a.set("bytes_served", 300));
  EXPECT_FALSE(a.set("no_such_counter", 1));
  TierStats b;
  b.hits = 1;
  b.misses = 4;
  a += b;
  EXPECT_EQ(a.hits, 4u);
  EXPECT_EQ(a.misses, 4u);
  EXPECT_EQ(a.bytes_served, Bytes{300});
  EXPECT_DOUBLE_EQ(a.hit_rate(), 0.5);
  EXPECT_FALSE(a.empty());
  std::string names;
  a.for_each([&names](const char* name, std::uint64_t) { names += std::string(name) + " "; });
  EXPECT_EQ(names.rfind("hits misses promotions installs ", 0), 0u) << names;
}

TEST(TierCounters, TakeReturnsTheCountsAndZeroesThem) {
  TierCounters counters;
  counters.hits.fetch_add(2);
  counters.bytes_installed.fetch_add(10);
  const TierStats taken = counters.take();
  EXPECT_EQ(taken.hits, 2u);
  EXPECT_EQ(taken.bytes_installed, Bytes{10});
  EXPECT_TRUE(counters.snapshot().empty());
}

TEST(Tier, CanHoldRespectsReadOnlyAndMaxBytes) {
  TempDir dir;
  auto bounded_options = folder_options(dir.sub("a"));
  bounded_options.max_bytes = Bytes{100};
  auto bounded = make_folder(bounded_options);
  EXPECT_TRUE(bounded->can_hold(Bytes{100}));
  EXPECT_FALSE(bounded->can_hold(Bytes{101}));
  auto unbounded = make_folder(dir.sub("b"));
  EXPECT_TRUE(unbounded->can_hold(Bytes{std::uint64_t{1} << 50}));
  auto ro_options = folder_options(dir.sub("c"));
  ro_options.access = Access::read_only;
  EXPECT_FALSE(make_folder(ro_options)->can_hold(Bytes{1}));
}

}  // namespace
}  // namespace datavo
