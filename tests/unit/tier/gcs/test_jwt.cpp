// Tests of src/tier/gcs/jwt.cpp: RS256 signatures checked with OpenSSL in the test, and keys that cannot be used.
#include <gtest/gtest.h>

#include "tier/gcs/jwt.hpp"
#include "unit/tier/gcs/gcs_test_keys.hpp"

namespace datavo::gcs {
namespace {

TEST(GcsJwt, Rs256SignatureVerifiesWithThePublicKey) {
  auto key = gcstest::make_rsa_key();
  ASSERT_TRUE(key);
  const std::string header = R"({"alg":"RS256","typ":"JWT"})";
  const std::string claims = R"({"iss":"sa@example.iam.gserviceaccount.com","exp":2})";
  auto jwt = sign_jwt_rs256(header, claims, gcstest::private_key_pem(key.get()));
  ASSERT_TRUE(jwt) << jwt.error().message;
  auto verified = gcstest::verify_rs256(*jwt, key.get());
  ASSERT_TRUE(verified) << "the signature does not verify";
  EXPECT_EQ(verified->header["alg"], "RS256");
  EXPECT_EQ(verified->claims["iss"], "sa@example.iam.gserviceaccount.com");

  auto other = gcstest::make_rsa_key();
  EXPECT_FALSE(gcstest::verify_rs256(*jwt, other.get())) << "verified with an unrelated key";
  std::string tampered = *jwt;
  tampered[tampered.find('.') + 2] ^= 1;
  EXPECT_FALSE(gcstest::verify_rs256(tampered, key.get()));
}

TEST(GcsJwt, AnUnreadableOrNonRsaKeyIsAnErrorThatDoesNotQuoteTheKey) {
  const std::string garbage = "-----BEGIN PRIVATE KEY-----\nnot-a-key-SECRETSECRET\n-----END PRIVATE KEY-----\n";
  auto bad = sign_jwt_rs256("{}", "{}", garbage);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message.find("SECRETSECRET"), std::string::npos) << bad.error().message;

  gcstest::Pkey ec(EVP_EC_gen("P-256"));
  ASSERT_TRUE(ec);
  auto not_rsa = sign_jwt_rs256("{}", "{}", gcstest::private_key_pem(ec.get()));
  ASSERT_FALSE(not_rsa);
  EXPECT_NE(not_rsa.error().message.find("not an RSA key"), std::string::npos) << not_rsa.error().message;
}

}  // namespace
}  // namespace datavo::gcs
