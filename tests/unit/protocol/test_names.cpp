// The name rules of the protocol (src/protocol/names.cpp): names, sample ids, numbers in text, quoting and
// DatasetName.
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

TEST(ProtocolNames, ValidNames) {
  for (const char* name : {"voice_demo_v1", "train", "a", "audio.wav", "x-y_z.1", "A9"}) {
    EXPECT_TRUE(protocol::validate_name("key", name)) << name;
  }
  EXPECT_TRUE(protocol::validate_name("key", std::string(128, 'k')));
}

TEST(ProtocolNames, InvalidNamesAreRefusedWithTheirReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"..", "must start with a letter or a digit"},
      {".", "must start with a letter or a digit"},
      {".hidden", "must start with a letter or a digit"},
      {"a/b", "only A-Z a-z 0-9 . _ - are allowed"},
      {"/etc", "must start with a letter or a digit"},
      {"a..b", "\"..\" is not allowed"},
      {"-x", "must start"},
      {"_x", "must start"},
      {"a b", "only A-Z"},
      {"a%2e", "only A-Z"},
      {std::string("a\0b", 3), "only A-Z"},
      {"caf\xc3\xa9", "only A-Z"},
      {std::string(129, 'k'), "longer than 128 bytes"},
  };
  for (const auto& [name, reason] : cases) {
    auto valid = protocol::validate_name("dataset", name);
    ASSERT_FALSE(valid) << name;
    EXPECT_EQ(valid.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(valid.error().message.find("invalid dataset name"), std::string::npos) << valid.error().message;
    EXPECT_NE(valid.error().message.find(reason), std::string::npos) << valid.error().message;
  }
}

TEST(ProtocolNames, SampleIds) {
  for (const char* id : {"utt_0001", "train/utt_0001", "a.b/c", "-1", "_x", "0"}) {
    EXPECT_TRUE(protocol::validate_sample_id(id)) << id;
  }
  for (std::string id :
       {std::string(""), std::string("/abs"), std::string("a//b"), std::string("../x"), std::string("a/../b"),
        std::string("./a"), std::string("a/"), std::string("a.b"), std::string("a\0b", 3), std::string(513, 'x')}) {
    auto valid = protocol::validate_sample_id(id);
    ASSERT_FALSE(valid) << id;
    EXPECT_NE(valid.error().message.find("invalid sample id"), std::string::npos) << valid.error().message;
  }
}

TEST(ProtocolNames, NumbersAreCanonicalDecimals) {
  EXPECT_EQ(protocol::parse_number("42", 1), 42u);
  EXPECT_EQ(protocol::parse_number("0", 0), 0u);
  EXPECT_EQ(protocol::parse_number("999999999999999999", 1), 999999999999999999u);
  for (const char* bad : {"0", "", "-1", "+1", "01", "1.0", "1e3", " 1", "1 ", "9999999999999999999"}) {
    EXPECT_FALSE(protocol::parse_number(bad, 1)) << bad;
  }
  EXPECT_FALSE(protocol::parse_number("5", 6));
}

TEST(ProtocolNames, QuoteEscapesWhatIsNotPrintableAscii) {
  EXPECT_EQ(protocol::quote("train"), "\"train\"");
  EXPECT_EQ(protocol::quote(std::string("a\0\"\\\xff", 5)), "\"a\\x00\\x22\\x5c\\xff\"");
}

TEST(ProtocolNames, DatasetNameParsesDatasetAndSplit) {
  auto name = DatasetName::parse("voice_demo_v1/train");
  ASSERT_TRUE(name) << name.error().message;
  EXPECT_EQ(name->dataset, "voice_demo_v1");
  EXPECT_EQ(name->split, "train");
  EXPECT_EQ(name->full(), "voice_demo_v1/train");
}

TEST(ProtocolNames, DatasetNameRefusesBadNamesNamingThePart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nosplit", "expected <dataset>/<split>"},
      {"/train", "dataset name"},
      {"a/", "split name"},
      {"../train", "dataset name"},
      {"a/..", "split name"},
      {"a..b/train", "dataset name"},
      {"a/b/c", "split name"},
      {".hidden/train", "dataset name"},
      {"a b/train", "dataset name"},
      {"a/tr ain", "split name"},
  };
  for (const auto& [text, part] : cases) {
    auto name = DatasetName::parse(text);
    ASSERT_FALSE(name) << text;
    EXPECT_EQ(name.error().code, ErrorCode::invalid_argument) << text;
    EXPECT_NE(name.error().message.find(part), std::string::npos) << name.error().message;
  }
}

}  // namespace
}  // namespace datavo
