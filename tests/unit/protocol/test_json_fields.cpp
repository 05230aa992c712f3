// Typed reads of JSON fields (src/protocol/json_fields.cpp): every refusal names its field and keeps its code.
#include <gtest/gtest.h>

#include "protocol/json_fields.hpp"

namespace datavo::protocol {
namespace {

using json = nlohmann::json;

TEST(ProtocolJsonFields, ParseObjectNamesWhatIsWrong) {
  auto not_json = parse_object("{", ErrorCode::config, "f.json: ");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.error().code, ErrorCode::config);
  EXPECT_EQ(not_json.error().message, "f.json: not JSON");
  auto array = parse_object("[1]", ErrorCode::config, "f.json: ");
  ASSERT_FALSE(array);
  EXPECT_EQ(array.error().message, "f.json: not a JSON object");
  ASSERT_TRUE(parse_object(R"({"a":1})", ErrorCode::config, ""));
}

TEST(ProtocolJsonFields, TypedReads) {
  const json doc =
      json::parse(R"({"s":"x","e":"","u":0,"p":3,"n":-4,"big":18446744073709551615,"f":1.5,"a":[1],"o":{"k":"v"}})");
  const JsonFields in(doc, ErrorCode::remote, "ctx: ");
  EXPECT_EQ(in.string("s").value(), "x");
  EXPECT_EQ(in.string("e").value(), "");
  EXPECT_EQ(in.non_empty_string("e").error().message, "ctx: \"e\" is empty");
  EXPECT_EQ(in.unsigned_number("u").value(), 0u);
  EXPECT_EQ(in.positive_number("u").error().message, "ctx: \"u\" is missing or not a positive integer");
  EXPECT_EQ(in.positive_number("p").value(), 3u);
  EXPECT_EQ(in.integer("n").value(), -4);
  EXPECT_FALSE(in.unsigned_number("n"));
  EXPECT_EQ(in.integer("big").error().message, "ctx: \"big\" is missing or not an integer");
  EXPECT_FALSE(in.integer("f"));
  EXPECT_FALSE(in.unsigned_number("f"));
  EXPECT_EQ((*in.array("a").value())[0], 1);
  EXPECT_EQ(in.array("o").error().message, "ctx: \"o\" is missing or not an array");
  EXPECT_EQ((*in.object("o").value())["k"], "v");
  EXPECT_EQ(in.string("missing").error().message, "ctx: \"missing\" is missing or not a string");
  EXPECT_EQ(in.string("s").value(), "x");
  EXPECT_TRUE(in.has("f"));
  EXPECT_FALSE(in.has("missing"));
  EXPECT_EQ(in.string("u").error().code, ErrorCode::remote);
}

TEST(ProtocolJsonFields, NestedReadsNameTheirPath) {
  const json doc = json::parse(R"({"list":[{"name":7}],"words":["a",2]})");
  const JsonFields in(doc, ErrorCode::integrity, "m: ");
  const JsonFields element = in.nested(doc["list"][0], "list[0].");
  EXPECT_EQ(element.string("name").error().message, "m: \"list[0].name\" is missing or not a string");
  std::vector<std::string> words;
  auto read = in.strings("words", doc["words"], words);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().message, "m: \"words[1]\" is not a string");
  EXPECT_EQ(read.error().code, ErrorCode::integrity);
}

TEST(ProtocolJsonFields, DumpReplacesInvalidUtf8) {
  EXPECT_EQ(dump(json{{"k", std::string("a\xff")}}), "{\"k\":\"a\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace datavo::protocol
