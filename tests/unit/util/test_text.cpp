#include <gtest/gtest.h>

#include <string>

#include "util/text.hpp"

namespace datavo::util {
namespace {

TEST(Text, CaseAndTrim) {
  EXPECT_EQ(to_lower("X-Amz-Date"), "x-amz-date");
  EXPECT_TRUE(iequals("Content-Length", "content-length"));
  EXPECT_FALSE(iequals("abc", "abd"));
  EXPECT_EQ(trim(" \t value \r\n"), "value");
  EXPECT_EQ(trim_left("  a "), "a ");
  EXPECT_EQ(trim_right("  a "), "  a");
  EXPECT_EQ(trim(" \t "), "");
}

TEST(Text, PrintableEscapesQuotesBackslashesAndNonPrintableBytes) {
  EXPECT_EQ(printable("utt_0001.audio.wav"), "utt_0001.audio.wav");
  EXPECT_EQ(printable("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(printable(std::string("n\n\x01\x7f\xc3\xbc\0z", 8)), "n\\x0a\\x01\\x7f\\xc3\\xbc\\x00z");
  EXPECT_EQ(printable(""), "");
}

TEST(Text, PrintableCutsLongTextKeepingItsStartAndEnd) {
  const std::string exact(k_max_printable, 'a');
  EXPECT_EQ(printable(exact), exact) << "at the limit: whole";

  const std::string name = std::string(1000, 'd') + "/utt_0001.audio.wav";
  const std::string shown = printable(name);
  EXPECT_LE(shown.size(), k_max_printable + 2) << "120 characters, \"…\" counted as one (three UTF-8 bytes)";
  EXPECT_TRUE(shown.starts_with("ddddd")) << shown;
  EXPECT_TRUE(shown.ends_with("/utt_0001.audio.wav")) << shown;
  EXPECT_NE(shown.find("\u2026"), std::string::npos) << shown;

  // Binary is cut between escapes, never inside one.
  const std::string binary(100, '\x9f');
  const std::string cut = printable(binary);
  EXPECT_LE(cut.size(), k_max_printable + 2);
  const std::string head = cut.substr(0, cut.find("\u2026"));
  const std::string tail = cut.substr(cut.find("\u2026") + 3);
  EXPECT_EQ(head.size() % 4, 0u) << cut;
  EXPECT_EQ(tail.size() % 4, 0u) << cut;
  EXPECT_EQ(head, tail);
  EXPECT_EQ(printable("abcdef", 3), "a\u2026f");
}

}  // namespace
}  // namespace datavo::util
