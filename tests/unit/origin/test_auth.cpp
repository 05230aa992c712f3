// The bearer-token check of the server (src/origin/auth.cpp).
#include <gtest/gtest.h>

#include "origin/auth.hpp"

namespace datavo::origin {
namespace {

TEST(OriginAuth, TheSchemeIsCaseInsensitiveAndTheTokenExact) {
  for (const char* header : {"Bearer s3cret", "bearer s3cret", "BEARER s3cret"}) {
    EXPECT_TRUE(bearer_token_matches(header, "s3cret")) << header;
  }
  for (const char* header : {"", "Bearer", "Bearer ", "Bearer S3cret", "Bearer s3cret2", "Bearer s3cre", "Basic s3cret",
                             "s3cret", "Bearer  s3cret", "Bearers3cret"}) {
    EXPECT_FALSE(bearer_token_matches(header, "s3cret")) << header;
  }
}

}  // namespace
}  // namespace datavo::origin
