// The manifest (src/protocol/manifest.cpp): the documented example, round trips, and refusals naming the field.
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

constexpr const char* k_manifest =
    R"({"dataset":"d","split":"train","manifest_ref":"d/train@m1","revision":42,"keys":["audio.wav","text.txt"],)"
    R"("shards":[{"index":0,"samples":["a","b"]},{"index":1,"samples":["c"]}]})";

Manifest example() {
  return Manifest{DatasetName{"d", "train"},
                  "d/train@m1",
                  42,
                  {"audio.wav", "text.txt"},
                  {ManifestShard{0, {"a", "b"}}, ManifestShard{1, {"c"}}}};
}

TEST(ProtocolManifest, ParsesTheProtocolExample) {
  auto manifest = Manifest::parse(k_manifest);
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(*manifest, example());
}

TEST(ProtocolManifest, RoundTrips) {
  for (Manifest manifest : {example(), Manifest{DatasetName{"x", "y"}, "r", 1, {}, {}}}) {
    auto parsed = Manifest::parse(manifest.to_json());
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(*parsed, manifest);
  }
  // The JSON the server writes is compact and its fields are those of docs/protocol.md.
  EXPECT_EQ(example().to_json(), R"({"dataset":"d","keys":["audio.wav","text.txt"],"manifest_ref":"d/train@m1",)"
                                 R"("revision":42,"shards":[{"index":0,"samples":["a","b"]},{"index":1,)"
                                 R"("samples":["c"]}],"split":"train"})");
}

TEST(ProtocolManifest, RefusesMalformedManifestsNamingTheField) {
  const std::string head = R"({"dataset":"d","split":"train","manifest_ref":"r",)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", "not a JSON object"},
      {"{", "not JSON"},
      {head + R"("revision":0,"keys":[],"shards":[]})", "\"revision\""},
      {head + R"("revision":"1","keys":[],"shards":[]})", "\"revision\""},
      {head + R"("revision":1,"keys":["b","a"],"shards":[]})", "\"keys\" are not sorted and unique"},
      {head + R"("revision":1,"keys":["a","a"],"shards":[]})", "\"keys\" are not sorted and unique"},
      {head + R"("revision":1,"keys":["../x"],"shards":[]})", "\"keys[0]\" is invalid: invalid key name"},
      {head + R"("revision":1,"keys":[7],"shards":[]})", "\"keys[0]\" is not a string"},
      {head + R"("revision":1,"keys":"a","shards":[]})", "\"keys\""},
      {head + R"("revision":1,"keys":["a"]})", "\"shards\""},
      {head + R"("revision":1,"keys":["a"],"shards":[{"index":0,"samples":[]},{"index":0,"samples":[]}]})",
       "\"shards[1].index\" 0 repeats"},
      {head + R"("revision":1,"keys":["a"],"shards":[{"index":-1,"samples":[]}]})", "\"shards[0].index\""},
      {head + R"("revision":1,"keys":["a"],"shards":[7]})", "\"shards[0]\" is not an object"},
      {head + R"("revision":1,"keys":["a"],"shards":[{"index":0,"samples":["x",""]}]})",
       "\"shards[0].samples[1]\" is empty"},
      {head + R"("revision":1,"keys":["a"],"shards":[{"index":0}]})", "\"shards[0].samples\""},
      {R"({"dataset":"d","split":"train","revision":1,"keys":["a"],"shards":[]})", "\"manifest_ref\""},
      {R"({"dataset":"d","split":"train","manifest_ref":"","revision":1,"keys":[],"shards":[]})",
       "\"manifest_ref\" is empty"},
      {R"({"dataset":"d/e","split":"train","manifest_ref":"r","revision":1,"keys":[],"shards":[]})",
       "\"dataset\" is invalid"},
      {R"({"dataset":"d","manifest_ref":"r","revision":1,"keys":[],"shards":[]})", "\"split\""},
  };
  for (const auto& [text, needle] : cases) {
    auto manifest = Manifest::parse(text);
    ASSERT_FALSE(manifest) << text;
    EXPECT_EQ(manifest.error().code, ErrorCode::integrity) << text;
    EXPECT_NE(manifest.error().message.find("malformed manifest: "), std::string::npos) << manifest.error().message;
    EXPECT_NE(manifest.error().message.find(needle), std::string::npos) << manifest.error().message;
  }
}

TEST(ProtocolManifest, NormalizesKeysAndRefusesUnknownOnes) {
  const Manifest manifest = example();
  auto keys = manifest.normalize_keys({"text.txt", "audio.wav", "text.txt"});
  ASSERT_TRUE(keys);
  EXPECT_EQ(*keys, (std::vector<std::string>{"audio.wav", "text.txt"}));
  auto unknown = manifest.normalize_keys({"video.mp4"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(unknown.error().message.find("audio.wav, text.txt"), std::string::npos) << unknown.error().message;
  EXPECT_FALSE(manifest.normalize_keys({}));
}

TEST(ProtocolManifest, IdentityFeedsTheContentHash) {
  const ShardIdentity identity = example().identity(0, {"audio.wav"});
  EXPECT_EQ(identity.manifest_ref, "d/train@m1");
  EXPECT_EQ(identity.revision, "42");
  EXPECT_EQ(identity.shard_index, 0u);
  EXPECT_EQ(identity.keys, std::vector<std::string>{"audio.wav"});
  EXPECT_EQ(identity.sample_ids, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace datavo
