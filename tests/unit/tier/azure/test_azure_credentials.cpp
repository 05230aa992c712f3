// Tests of src/tier/azure/azure_credentials.cpp against fake endpoints on loopback: an IMDS that refuses unless
// client_id matches, an App Service endpoint that requires X-IDENTITY-HEADER, an AAD client-secret endpoint,
// workload identity, a fake `az` on a test PATH, the first link that works kept, refresh ahead of expiry and
// invalidate().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/tier/azure/azure_identity_fixture.hpp"
#include "util/log.hpp"

namespace datavo::azure {
namespace {

using namespace std::chrono_literals;
using namespace identity_test;
using credtest::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(AzureCredentialsTest, ImdsGivesATokenOnlyForTheMatchingClientId) {
  fake_.set("AZURE_POD_IDENTITY_AUTHORITY_HOST", server_.url());
  auto pinned = chain(k_mi_client_id);
  auto token = pinned->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "imds-1");
  EXPECT_EQ(token->expires_at, fake_.now() + 1h) << "expires_in (a string) wins over expires_on";
  EXPECT_THAT(pinned->describe(), HasSubstr("managed identity (IMDS at " + server_.url() + ") for client"));

  // Another client id (or none): IMDS has no such identity, the chain goes on and finds nothing else.
  auto other = chain("99999999-0000-0000-0000-000000000000")->get();
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(other.error().message, HasSubstr("Identity not found"));
  EXPECT_THAT(other.error().message, HasSubstr("environment client secret: $AZURE_TENANT_ID"));
  EXPECT_THAT(other.error().message, HasSubstr("workload identity: $AZURE_FEDERATED_TOKEN_FILE"));
  EXPECT_THAT(other.error().message, HasSubstr("the Azure CLI: no az in $PATH"));
  EXPECT_FALSE(chain()->get());
  EXPECT_EQ(imds_tokens_, 1);
}

TEST_F(AzureCredentialsTest, AppServiceEndpointRequiresTheIdentityHeader) {
  fake_.set("IDENTITY_ENDPOINT", server_.url() + "/msi/token");
  fake_.set("IDENTITY_HEADER", k_identity_header);
  auto provider = chain();
  auto token = provider->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "appservice-1");
  EXPECT_EQ(token->expires_at, fake_.now() + 1h);
  EXPECT_THAT(provider->describe(), HasSubstr("App Service endpoint"));

  // A wrong header: App Service is configured explicitly, so its refusal is the answer (no fall-through).
  fake_.set("IDENTITY_HEADER", "wrong");
  auto refused = chain()->get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(refused.error().message, HasSubstr("App Service"));
  EXPECT_EQ(imds_requests_, 0);
}

TEST_F(AzureCredentialsTest, EnvironmentClientSecretAtTheAuthorityHost) {
  use_aad_secret();
  auto provider = chain();
  auto token = provider->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "aad-1");
  EXPECT_EQ(provider->describe(), "environment client secret");

  fake_.set("AZURE_CLIENT_SECRET", "wrong-secret");
  auto refused = chain()->get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied) << "a configured credential that fails ends the chain";
  EXPECT_THAT(refused.error().message, HasSubstr("AADSTS7000215"));

  fake_.set("AZURE_TENANT_ID", "../evil");
  auto bad_tenant = chain()->get();
  ASSERT_FALSE(bad_tenant);
  EXPECT_EQ(bad_tenant.error().code, ErrorCode::config);
}

TEST_F(AzureCredentialsTest, WorkloadIdentityReadsTheRotatingTokenFile) {
  fake_.set("AZURE_AUTHORITY_HOST", server_.url() + "/");
  fake_.set("AZURE_TENANT_ID", "tenant-1");
  fake_.set("AZURE_CLIENT_ID", "app-1");
  fake_.set("AZURE_FEDERATED_TOKEN_FILE", dir_.sub("federated-token"));
  write_text(dir_.sub("federated-token"), "federated-jwt-1\n");
  auto provider = chain();
  auto token = provider->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "wi-1");
  EXPECT_EQ(last_assertion(), "federated-jwt-1");
  write_text(dir_.sub("federated-token"), "federated-jwt-2");
  provider->invalidate();
  EXPECT_EQ(provider->get()->token, "wi-2");
  EXPECT_EQ(last_assertion(), "federated-jwt-2");
}

TEST_F(AzureCredentialsTest, AzureCliOnThePathGivesTheToken) {
  const auto expires_on =
      std::chrono::duration_cast<std::chrono::seconds>((fake_.now() + 50min).time_since_epoch()).count();
  write_az(
      "cat <<EOF\n{\"accessToken\": \"cli-token-1\", \"expiresOn\": \"2099-01-01 00:00:00.000000\", "
      "\"expires_on\": " +
      std::to_string(expires_on) + ", \"subscription\": \"s\", \"tenant\": \"t\", \"tokenType\": \"Bearer\"}\nEOF\n");
  auto provider = chain();
  auto token = provider->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "cli-token-1");
  EXPECT_EQ(token->expires_at, fake_.now() + 50min) << "expires_on (Unix seconds) is preferred to expiresOn";
  EXPECT_THAT(provider->describe(), HasSubstr("the Azure CLI"));
}

TEST_F(AzureCredentialsTest, AzureCliNotLoggedInOrFailingIsReported) {
  write_az("echo \"ERROR: Please run 'az login' to setup account.\" >&2\nexit 1\n");
  auto not_logged_in = chain()->get();
  ASSERT_FALSE(not_logged_in);
  EXPECT_EQ(not_logged_in.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(not_logged_in.error().message, HasSubstr("is not logged in"));
  EXPECT_THAT(not_logged_in.error().message, HasSubstr("tried"));

  write_az("echo 'ERROR: something else broke' >&2\nexit 3\n");
  auto broken = chain()->get();
  ASSERT_FALSE(broken);
  EXPECT_THAT(broken.error().message, HasSubstr("exit status 3: ERROR: something else broke"));
}

TEST_F(AzureCredentialsTest, TheFirstCredentialThatWorksIsKept) {
  fake_.set("AZURE_POD_IDENTITY_AUTHORITY_HOST", server_.url());  // answers "Identity not found" without client_id
  write_az("echo '{\"accessToken\": \"cli\", \"expires_on\": 4102444800}'\n");
  auto provider = chain();
  ASSERT_TRUE(provider->get());
  EXPECT_EQ(imds_requests_, 1);
  provider->invalidate();
  ASSERT_TRUE(provider->get());
  EXPECT_EQ(imds_requests_, 1) << "after the CLI answered, IMDS is not asked again";
}

TEST_F(AzureCredentialsTest, ShortLivedTokensAreRefreshedAheadOfExpiryAndAfterInvalidate) {
  use_aad_secret();
  lifetime_ = 4;  // refreshed when less than 2 s is left
  auto provider = chain();
  EXPECT_EQ(provider->get()->token, "aad-1");
  fake_.advance(1900ms);
  EXPECT_EQ(provider->get()->token, "aad-1");
  fake_.advance(200ms);
  EXPECT_EQ(provider->get()->token, "aad-2") << "1.9 s left of 4 s: refreshed before it expired";
  provider->invalidate();
  EXPECT_EQ(provider->get()->token, "aad-3");
  EXPECT_EQ(aad_requests_, 3);
}

}  // namespace
}  // namespace datavo::azure
