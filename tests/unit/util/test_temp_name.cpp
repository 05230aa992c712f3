// Tests of the one temporary-name scheme (src/util/temp_name.cpp): both placements carry the writer's tag, and
// temp_writer() reads it back from either, from the older staging names too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>

#include "support/shard_fixtures.hpp"
#include "util/fs.hpp"
#include "util/temp_name.hpp"

namespace datavo::util {
namespace {

const std::string& me() {
  static const std::string pid = std::to_string(::getpid());
  return pid;
}

TEST(TempName, BesideItsTargetTheNameIsTargetTmpTag) {
  const std::string name = temp_name_beside("/var/cache/x/.stats.json");
  const std::string prefix = "/var/cache/x/.stats.json.tmp." + host_name() + "." + me() + ".";
  ASSERT_EQ(name.compare(0, prefix.size(), prefix), 0) << name;
  EXPECT_EQ(name.size(), prefix.size() + 16) << name;  // 16 random hex digits
  EXPECT_NE(temp_name_beside("/a"), temp_name_beside("/a"));
}

TEST(TempName, InADirectoryTheNameIsTagStemTmp) {
  const std::string name = temp_name_in("/t/.staging", "local.abc");
  const std::string prefix = "/t/.staging/" + host_name() + "." + me() + ".";
  ASSERT_EQ(name.compare(0, prefix.size(), prefix), 0) << name;
  EXPECT_TRUE(name.ends_with(".local.abc.tmp")) << name;
  EXPECT_EQ(name.size(), prefix.size() + 16 + std::string(".local.abc.tmp").size()) << name;
}

TEST(TempName, TheWriterIsReadBackFromEitherPlacement) {
  for (const std::string& path : {temp_name_beside("/d/file"), temp_name_in("/d", "stem.x")}) {
    const std::string file_name = path.substr(path.rfind('/') + 1);
    auto writer = temp_writer(file_name);
    ASSERT_TRUE(writer) << file_name;
    EXPECT_EQ(writer->host, host_name());
    EXPECT_EQ(writer->pid, ::getpid());
    EXPECT_FALSE(written_by_dead_local_process(file_name)) << "this process is alive";
  }
  // The staging names of older versions: "<tag>.tmp", and a beside-name with a shorter random part.
  auto old_staging = temp_writer("somehost.4242.0123abcd.tmp");
  ASSERT_TRUE(old_staging);
  EXPECT_EQ(old_staging->host, "somehost");
  EXPECT_EQ(old_staging->pid, 4242);
  auto old_beside = temp_writer("entry.sha256.tmp.otherhost.17.89abcdef");
  ASSERT_TRUE(old_beside);
  EXPECT_EQ(old_beside->host, "otherhost");
  EXPECT_EQ(old_beside->pid, 17);
}

TEST(TempName, NamesWithoutATagHaveNoWriter) {
  for (const char* name : {"abc.tar", "x.tmp", "host.notapid.r.tmp", "host.0.r.tmp", ".tmp", "a.tmp.host",
                           "f.tmp.h.-3.r", "host.99999999999999999999.r.tmp"}) {
    EXPECT_FALSE(temp_writer(name)) << name;
    EXPECT_FALSE(written_by_dead_local_process(name)) << name;
  }
}

TEST(TempName, ADeadWriterIsOnlyJudgedOnItsOwnHost) {
  const pid_t dead = shardtest::dead_pid();
  const std::string here = host_name() + "." + std::to_string(dead) + ".0123456789abcdef.local.h.tmp";
  const std::string elsewhere = "not-" + host_name() + "." + std::to_string(dead) + ".0123456789abcdef.local.h.tmp";
  EXPECT_TRUE(written_by_dead_local_process(here));
  EXPECT_FALSE(written_by_dead_local_process(elsewhere)) << "another host's pid says nothing here";
  EXPECT_TRUE(written_by_dead_local_process("f.tmp." + host_name() + "." + std::to_string(dead) + ".00"));
}

}  // namespace
}  // namespace datavo::util
