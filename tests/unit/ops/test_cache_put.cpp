// Tests of cache_put() and append_file() (src/ops/cache_put.cpp).
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/remote_double.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CachePutTest, InstallsTheFileAndFindsItAgain) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  const std::string file = dir.sub("shard.tar");
  const std::string content(3 << 20, 'x');  // more than one chunk of the read loop
  ASSERT_TRUE(util::write_file_atomic(file, content, 0644));
  auto put = cache_put(*cache, opstest::key_of('1'), file);
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_EQ(put->result.source, ServedFrom::fetched);
  EXPECT_EQ(put->result.handle.size(), Bytes{content.size()});
  auto again = cache_put(*cache, opstest::key_of('1'), file);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->result.source, ServedFrom::hit);
}

TEST(CachePutTest, AFileThatCannotBeOpenedIsAnErrorEvenForACachedHash) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  opstest::install(*cache, opstest::key_of('1'), "cached");
  auto put = cache_put(*cache, opstest::key_of('1'), dir.sub("missing.tar"));
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().code, ErrorCode::not_found);
  EXPECT_NE(put.error().message.find(dir.sub("missing.tar")), std::string::npos);
}

TEST(CachePutTest, APutOfALocallyCachedHashUploadsItToARemoteTierThatMissesIt) {
  TempDir dir;
  auto local = opstest::folder(dir.sub("a"), "a");
  const std::string file = dir.sub("shard.tar");
  ASSERT_TRUE(util::write_file_atomic(file, "shard bytes", 0644));
  ASSERT_TRUE(cache_put(*opstest::hierarchy({local}), opstest::key_of('1'), file));  // before the bucket existed
  auto bucket = std::make_shared<shardtest::ScriptedRemote>("bucket");
  auto cache = opstest::hierarchy({local, bucket});
  auto put = cache_put(*cache, opstest::key_of('1'), file);
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_EQ(put->result.source, ServedFrom::hit);
  ASSERT_TRUE(put->uploads);
  EXPECT_EQ(put->uploads->uploaded, 1u);
  auto held = bucket->inner().contains(opstest::key_of('1'));
  ASSERT_TRUE(held && *held) << "the bucket holds the shard now";
  auto again = cache_put(*cache, opstest::key_of('1'), file);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->uploads->uploaded, 1u) << "not uploaded twice";
  EXPECT_EQ(again->uploads->already_present, 1u);
  EXPECT_EQ(bucket->uploads_started.load(), 1);
}

TEST(AppendFileTest, AppendsEveryByteAfterWhatTheSinkHolds) {
  TempDir dir;
  ASSERT_TRUE(util::write_file_atomic(dir.sub("f"), "world", 0644));
  shardtest::StringSink sink;
  ASSERT_TRUE(sink.write("hello ", 6));
  auto appended = append_file(sink, dir.sub("f"));
  ASSERT_TRUE(appended) << appended.error().message;
  EXPECT_EQ(*appended, Bytes{5});
  EXPECT_EQ(sink.bytes(), "hello world");
  auto missing = append_file(sink, dir.sub("nope"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace datavo
