// Tests of src/util/percent.cpp: RFC 3986's unreserved set, which is also AWS's UriEncode() (the SigV4 vectors in
// tests/unit/tier/s3/test_sigv4.cpp sign paths and queries encoded by it).
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

}  // namespace
}  // namespace datavo::util
