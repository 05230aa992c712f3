// Tests of src/tier/azure/azure_auth.cpp against fake endpoints on loopback: the mode make_azure_auth picks (SAS,
// SharedKey, bearer), the SAS on every attempt, one repeat of a bearer request after a 401, and no secret in the
// debug log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tier/azure/shared_key.hpp"
#include "unit/tier/azure/azure_identity_fixture.hpp"
#include "util/log.hpp"

namespace datavo::azure {
namespace {

using namespace std::chrono_literals;
using namespace identity_test;
using credtest::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(AzureCredentialsTest, AccountOfHostStyleAndPathStyleUrls) {
  EXPECT_EQ(account_of_url("https://myacct.blob.core.windows.net/cont").value(), "myacct");
  EXPECT_EQ(account_of_url("https://MyAcct.blob.core.chinacloudapi.cn/cont/").value(), "myacct");
  EXPECT_EQ(account_of_url("http://127.0.0.1:10000/devstoreaccount1/cont").value(), "devstoreaccount1");
  EXPECT_EQ(account_of_url("http://localhost:10000/acct2/cont").value(), "acct2");
  EXPECT_EQ(account_of_url("http://[::1]:10000/acct3/c").value(), "acct3");
  EXPECT_EQ(account_of_url("http://azurite:10000/acct4/c").value(), "acct4");
  EXPECT_FALSE(account_of_url("http://127.0.0.1:10000/"));
  EXPECT_FALSE(account_of_url("not a url"));
}

TEST_F(AzureCredentialsTest, ModePrecedenceSasThenKeyForTheAccountThenTheChain) {
  const std::string url = "http://127.0.0.1:10000/devstoreaccount1/cont";
  EXPECT_EQ(auth_for(url).mode, AzureAuthMode::bearer);

  fake_.set("AZURE_STORAGE_CONNECTION_STRING", std::string("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
                                                           "AccountKey=") +
                                                   k_key + ";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;");
  const auto keyed = auth_for(url);
  EXPECT_EQ(keyed.mode, AzureAuthMode::shared_key);
  EXPECT_THAT(keyed.description, HasSubstr("account devstoreaccount1"));
  EXPECT_THAT(keyed.description, Not(HasSubstr(k_key)));
  // The tier's own sas_token beats an ambient key.
  EXPECT_EQ(auth_for(url, k_sas).mode, AzureAuthMode::sas);
  EXPECT_EQ(auth_for(url, std::string("?") + k_sas).mode, AzureAuthMode::sas);
  // A key for another account is not used.
  EXPECT_EQ(auth_for("https://otheracct.blob.core.windows.net/cont").mode, AzureAuthMode::bearer);

  fake_.unset("AZURE_STORAGE_CONNECTION_STRING");
  fake_.set("AZURE_STORAGE_ACCOUNT", "myacct");
  fake_.set("AZURE_STORAGE_KEY", k_key);
  EXPECT_EQ(auth_for("https://myacct.blob.core.windows.net/cont").mode, AzureAuthMode::shared_key);
  EXPECT_EQ(auth_for(url).mode, AzureAuthMode::bearer);
  fake_.unset("AZURE_STORAGE_ACCOUNT");
  fake_.unset("AZURE_STORAGE_KEY");

  // A custom domain matches by the connection string's BlobEndpoint; UseDevelopmentStorage means Azurite.
  fake_.set("AZURE_STORAGE_CONNECTION_STRING",
            std::string("AccountName=realacct;AccountKey=") + k_key + ";BlobEndpoint=https://blobs.example.com/");
  EXPECT_EQ(auth_for("https://blobs.example.com/cont").mode, AzureAuthMode::shared_key);
  fake_.set("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true");
  EXPECT_EQ(auth_for("http://127.0.0.1:10000/devstoreaccount1/cont").mode, AzureAuthMode::shared_key);
}

TEST_F(AzureCredentialsTest, MalformedSettingsAreConfigErrorsThatQuoteNoSecret) {
  auto no_sig =
      make_azure_auth({"https://a.blob.core.windows.net/c", "sv=2021-12-02&sp=r&SECRETPART", ""}, fake_.env(), http_);
  ASSERT_FALSE(no_sig);
  EXPECT_EQ(no_sig.error().code, ErrorCode::config);
  EXPECT_THAT(no_sig.error().message, Not(HasSubstr("SECRETPART")));
  fake_.set("AZURE_STORAGE_CONNECTION_STRING", "AccountName=a;AccountKey=NOT-BASE64-SECRET");
  auto bad_key = make_azure_auth({"https://a.blob.core.windows.net/c", "", ""}, fake_.env(), http_);
  ASSERT_FALSE(bad_key);
  EXPECT_THAT(bad_key.error().message, HasSubstr("$AZURE_STORAGE_CONNECTION_STRING"));
  EXPECT_THAT(bad_key.error().message, Not(HasSubstr("NOT-BASE64-SECRET")));
  fake_.set("AZURE_STORAGE_CONNECTION_STRING", "garbage-without-equals");
  EXPECT_FALSE(make_azure_auth({"https://a.blob.core.windows.net/c", "", ""}, fake_.env(), http_));
}

TEST_F(AzureCredentialsTest, SasIsAppendedToEveryAttemptWithDateAndVersion) {
  fail_first_with_503_ = true;
  const auto auth = auth_for(server_.url() + "/acct/cont", std::string("?") + k_sas);
  ASSERT_EQ(auth.mode, AzureAuthMode::sas);
  net::HttpClient client(TransportOptions{.initial_backoff = Milliseconds{1}, .max_backoff = Milliseconds{5}});
  net::HttpRequest request;
  request.url = server_.url() + "/acct/cont/blob";
  request.auth = auth.auth.get();
  auto response = client.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->attempts, 2);
  const auto requests = seen();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& r : requests) {
    EXPECT_EQ(r.target, std::string("/acct/cont/blob?") + k_sas) << "the SAS once, without a second '?'";
    EXPECT_EQ(r.version, k_storage_api_version);
    EXPECT_THAT(r.date, HasSubstr(" GMT"));
    EXPECT_EQ(r.authorization, "");
  }
  // The SAS never reaches a log line: the transport logs request.url (without it), redacted anyway.
  EXPECT_EQ(log::redact_url(request.url + "?" + k_sas).find("sig="), std::string::npos);
}

TEST_F(AzureCredentialsTest, BearerRequestIsRepeatedOnceAfterA401WithAFreshToken) {
  use_aad_secret();
  const auto auth = auth_for(server_.url() + "/acct/cont");
  ASSERT_EQ(auth.mode, AzureAuthMode::bearer);
  net::HttpClient client;
  net::HttpRequest request;
  request.url = server_.url() + "/acct/cont/blob";
  request.auth = auth.auth.get();
  auto response = client.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "blob bytes");
  EXPECT_EQ(response->attempts, 2);
  const auto requests = seen();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].authorization, "Bearer aad-1");
  EXPECT_EQ(requests[1].authorization, "Bearer aad-2");
  for (const auto& r : requests) {
    EXPECT_GE(r.version, std::string("2017-11-09")) << "bearer tokens need x-ms-version >= 2017-11-09";
    EXPECT_FALSE(r.date.empty());
  }
}

TEST_F(AzureCredentialsTest, NoSecretAppearsInTheDebugLog) {
  const auto saved = log::level();
  log::set_level(log::Level::debug);
  std::vector<std::string> errors;
  std::string captured;
  {
    credtest::StderrCapture capture(dir_.sub("stderr.txt"));
    net::HttpClient client;
    auto fetch_blob = [&](const AzureAuth& auth) {
      net::HttpRequest request;
      request.url = server_.url() + "/acct/cont/blob";
      request.auth = auth.auth.get();
      if (auto r = client.perform(request); !r) errors.push_back(r.error().message);
    };
    use_aad_secret();
    fetch_blob(auth_for(server_.url() + "/acct/cont"));
    fetch_blob(auth_for(server_.url() + "/acct/cont", k_sas));
    fake_.set("AZURE_STORAGE_ACCOUNT", "acct");
    fake_.set("AZURE_STORAGE_KEY", k_key);
    fetch_blob(auth_for("http://127.0.0.1:" + std::to_string(server_.port()) + "/acct/cont"));
    fake_.unset("AZURE_STORAGE_KEY");
    fake_.set("AZURE_CLIENT_SECRET", "wrong");
    if (auto r = chain()->get(); !r) errors.push_back(r.error().message);
    fake_.unset("AZURE_CLIENT_SECRET");
    fake_.set("IDENTITY_ENDPOINT", server_.url() + "/msi/token");
    fake_.set("IDENTITY_HEADER", k_identity_header);
    (void)chain()->get();
    fake_.set("IDENTITY_HEADER", std::string(k_identity_header) + "-wrong");
    if (auto r = chain()->get(); !r) errors.push_back(r.error().message);
    captured = capture.text();
  }
  log::set_level(saved);
  EXPECT_THAT(captured, HasSubstr("DEBUG")) << "the debug log was not captured";
  EXPECT_GE(errors.size(), 2u);
  for (const std::string& secret :
       {std::string(k_client_secret), std::string(k_identity_header), std::string("SAS-SIGNATURE"),
        std::string(k_key).substr(0, 20), std::string("aad-1"), std::string("aad-2"), std::string("appservice-1"),
        std::string("SharedKey acct:")}) {
    EXPECT_THAT(captured, Not(HasSubstr(secret))) << "the log shows " << secret;
    for (const auto& message : errors) EXPECT_THAT(message, Not(HasSubstr(secret))) << message;
  }
}

}  // namespace
}  // namespace datavo::azure
