// Tests of src/util/percent.cpp: RFC 3986's unreserved set, which is also AWS's UriEncode() (the SigV4 vectors in
// tests/unit/tier/s3/test_sigv4.cpp sign paths and queries encoded by it), and its decoding.
#include <gtest/gtest.h>

#include "util/percent.hpp"

namespace datavo::util {
namespace {

TEST(PercentEncode, KeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(percent_encode("A-Za-z0-9-._~"), "A-Za-z0-9-._~");
  EXPECT_EQ(percent_encode("a b+c"), "a%20b%2Bc");
  EXPECT_EQ(percent_encode("=&?#%*!'()$,;:@"), "%3D%26%3F%23%25%2A%21%27%28%29%24%2C%3B%3A%40");
  EXPECT_EQ(percent_encode("ключ"), "%D0%BA%D0%BB%D1%8E%D1%87");  // UTF-8 bytes, upper-case hex
  EXPECT_EQ(percent_encode(std::string_view("a\0b", 3)), "a%00b");
}

TEST(PercentEncode, ASlashIsEncodedUnlessKept) {
  EXPECT_EQ(percent_encode("a/b"), "a%2Fb");
  EXPECT_EQ(percent_encode("a/b", Slash::keep), "a/b");
  EXPECT_EQ(percent_encode("dir/a b", Slash::keep), "dir/a%20b");
}

TEST(PercentDecode, DecodesEachEscapeOnce) {
  EXPECT_EQ(percent_decode("a%20b%2bc%2Fd").value(), "a b+c/d");
  EXPECT_EQ(percent_decode("%2541").value(), "%41");
  EXPECT_EQ(percent_decode("%D0%BA%d0%bb").value(), "кл");
  EXPECT_EQ(percent_decode("").value(), "");
}

TEST(PercentDecode, PlusIsASpaceOnlyInForms) {
  EXPECT_EQ(percent_decode("a+b%2B").value(), "a+b+");
  EXPECT_EQ(percent_decode("a+b%2B", Plus::space).value(), "a b+");
}

TEST(PercentDecode, AMalformedEscapeIsRefused) {
  for (const char* bad : {"%", "a%2", "%zz", "%2g", "x%"}) EXPECT_FALSE(percent_decode(bad)) << bad;
}

TEST(PercentDecode, UndoesPercentEncode) {
  const std::string text = "dir/a b+c?=&ключ~";
  EXPECT_EQ(percent_decode(percent_encode(text)).value(), text);
  EXPECT_EQ(percent_decode(percent_encode(text, Slash::keep)).value(), text);
}

}  // namespace
}  // namespace datavo::util
