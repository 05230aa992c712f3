#include <gtest/gtest.h>

#include "datavo/content_hash.hpp"

namespace datavo {
namespace {

ShardIdentity issue_vector() {
  ShardIdentity id;
  id.manifest_ref = "voice_demo_v1/train@m1";
  id.revision = "42";
  id.shard_index = 3;
  id.keys = {"transcript.txt", "audio.wav"};
  id.sample_ids = {"utt_0001", "utt_0002", "utt_0003"};
  return id;
}

TEST(ContentHash, MatchesPublishedVectorWithTwoKeys) {
  EXPECT_EQ(compute_content_hash(issue_vector()).hex(),
            "61f3427f3e6c250ad3d54035eb97cb636a5301e48e1d56d6c681ee6def32afd5");
}

TEST(ContentHash, MatchesPublishedVectorWithOneKey) {
  auto id = issue_vector();
  id.keys = {"audio.wav"};
  EXPECT_EQ(compute_content_hash(id).hex(), "1d8dd7d43d1a547d426d0bdb41c0d851d027688e32889961ca28130a389d21c3");
}

TEST(ContentHash, KeysAreSortedAndDeduplicated) {
  auto a = issue_vector();
  auto b = issue_vector();
  b.keys = {"audio.wav", "transcript.txt", "audio.wav"};
  EXPECT_EQ(compute_content_hash(a), compute_content_hash(b));
}

TEST(ContentHash, SampleOrderMatters) {
  auto a = issue_vector();
  auto b = issue_vector();
  std::swap(b.sample_ids[0], b.sample_ids[1]);
  EXPECT_NE(compute_content_hash(a), compute_content_hash(b));
}

TEST(ContentHash, ParseRefusesAnythingButLowercaseHex) {
  const std::string good(64, 'a');
  EXPECT_TRUE(ContentHash::parse(good));
  for (std::string bad :
       {std::string(63, 'a'), std::string(65, 'a'), std::string(64, 'A'), std::string("../") + std::string(61, 'a'),
        std::string(63, 'a') + "/", std::string(63, 'a') + '\0'}) {
    auto parsed = ContentHash::parse(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
  }
  auto upper = ContentHash::parse(std::string(10, 'a') + "G" + std::string(53, 'a'));
  ASSERT_FALSE(upper);
  EXPECT_NE(upper.error().message.find("byte offset 10"), std::string::npos);
}

TEST(Instance, FromServerUrl) {
  EXPECT_EQ(Instance::from_server("https://dev.datavo.io").value().name(), "dev.datavo.io");
  EXPECT_EQ(Instance::from_server("http://127.0.0.1:8080/api").value().name(), "127.0.0.1_8080");
  EXPECT_EQ(Instance::from_server("http://user:pw@Host.Example:9/").value().name(), "host.example_9");
  EXPECT_EQ(Instance::from_server("http://[::1]:8080").value().name(), "--1_8080");
  EXPECT_FALSE(Instance::from_server("http:///path"));
}

TEST(Instance, ParseRefusesPathComponents) {
  EXPECT_FALSE(Instance::parse(".."));
  EXPECT_FALSE(Instance::parse("a/b"));
  EXPECT_FALSE(Instance::parse(""));
  EXPECT_TRUE(Instance::parse("local"));
}

TEST(Sha256, KnownVector) {
  Sha256Hasher h;
  h.update("abc", 3);
  EXPECT_EQ(h.finish().hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace datavo
