// Tests of src/util/base64.cpp: RFC 4648 sections 4 and 5.
#include <gtest/gtest.h>

#include "util/base64.hpp"

namespace datavo::util {
namespace {

TEST(Base64, UrlAlphabetMatchesRfc4648WithoutPadding) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode("\xfb\xff\xbf"), "-_-_");  // the two characters that differ from base64
  for (const std::string& text : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                                  std::string("\xfb\xff\xbf\x00\x01", 5)}) {
    auto decoded = base64url_decode(base64url_encode(text));
    ASSERT_TRUE(decoded);
    EXPECT_EQ(*decoded, text);
  }
  EXPECT_EQ(base64url_decode("Zm8=").value(), "fo");
  EXPECT_FALSE(base64url_decode("Zm+v"));
  EXPECT_FALSE(base64url_decode("Z"));
}

TEST(Base64, StandardAlphabetWithPaddingRoundTrips) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(base64_decode("Zg==").value(), "f");
  EXPECT_EQ(base64_decode("+/8=").value(), "\xfb\xff");
  EXPECT_EQ(base64_decode("").value(), "");
  EXPECT_FALSE(base64_decode("Zg="));
  EXPECT_FALSE(base64_decode("Z!=="));
}

}  // namespace
}  // namespace datavo::util
