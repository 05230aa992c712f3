// Live tests of the Azure request auth (src/tier/azure/) against a real Azurite, which validates SharedKey and SAS
// signatures: create a container, Put Blob, Get Blob with a Range, and refusals of a wrong key and a tampered SAS,
// all through net::HttpClient with the RequestAuth of make_azure_auth.
//
// They need a running Azurite: tests/e2e/test_emulators.sh starts one with tests/support/emulators.sh, exports
// AZURITE_BLOB_ENDPOINT (and AZURITE_ACCOUNT_NAME / AZURITE_ACCOUNT_KEY / AZURITE_CONNECTION_STRING), and runs
// `datavo_unit_tests --gtest_filter='AzuriteLive*'` with DATAVO_REQUIRE_EMULATORS=1. By hand:
//
//   eval "$(tests/support/emulators.sh up azurite)"
//   DATAVO_REQUIRE_EMULATORS=1 build/tests/datavo_unit_tests --gtest_filter='AzuriteLive*'
//   tests/support/emulators.sh down
//
// Without AZURITE_BLOB_ENDPOINT they are skipped, saying so by name, unless DATAVO_REQUIRE_EMULATORS=1: then they
// fail naming the variable (never a silent pass).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <random>

#include "net/http_client.hpp"
#include "support/azurite_sas.hpp"
#include "tier/azure/azure_auth.hpp"
#include "util/percent.hpp"

namespace datavo::azure {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* k_default_account = "devstoreaccount1";
constexpr const char* k_default_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

class AzuriteLive : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = getenv_or("AZURITE_BLOB_ENDPOINT", "");
    if (endpoint_.empty()) {
      if (getenv_or("DATAVO_REQUIRE_EMULATORS", "") == "1")
        FAIL() << "AZURITE_BLOB_ENDPOINT is not set, and DATAVO_REQUIRE_EMULATORS=1 requires Azurite: start it with "
                  "`eval \"$(tests/support/emulators.sh up azurite)\"` (tests/e2e/test_emulators.sh does)";
      GTEST_SKIP() << "AZURITE_BLOB_ENDPOINT is not set: these live Azurite tests run in tests/e2e/test_emulators.sh";
    }
    while (endpoint_.ends_with("/")) endpoint_.pop_back();
    account_ = getenv_or("AZURITE_ACCOUNT_NAME", k_default_account);
    key_ = getenv_or("AZURITE_ACCOUNT_KEY", k_default_key);
    std::random_device random;
    container_ = "datavo-live-" + std::to_string(random() % 1'000'000'000);
  }

  AzureAuth auth(const cloud::CredentialEnv& env, const std::string& sas = "") {
    auto made = make_azure_auth({endpoint_ + "/" + container_, sas, ""}, env, http_);
    EXPECT_TRUE(made) << made.error().message;
    return made ? *made : AzureAuth{};
  }

  Result<net::HttpResponse> send(net::RequestAuth* auth, net::HttpMethod method, const std::string& path,
                                 net::HttpHeaders headers = {}, std::string body = {}, bool with_body = false) {
    net::HttpRequest request;
    request.method = method;
    request.url = endpoint_ + "/" + container_ + path;
    request.headers = std::move(headers);
    if (with_body) request.body = std::move(body);
    request.auth = auth;
    request.deadline = Milliseconds{30'000};
    return client_.perform(request);
  }

  // Create container, Put Blob, Get Blob with a Range, and the container's deletion, with `auth`.
  void round_trip(net::RequestAuth* auth) {
    auto created = send(auth, net::HttpMethod::put, "?restype=container", {}, "", true);
    ASSERT_TRUE(created) << created.error().message;
    EXPECT_EQ(created->status, 201);
    auto put =
        send(auth, net::HttpMethod::put, "/dir/a.txt",
             {{"x-ms-blob-type", "BlockBlob"}, {"Content-Type", "application/octet-stream"}}, "hello azurite", true);
    ASSERT_TRUE(put) << put.error().message;
    EXPECT_EQ(put->status, 201);
    auto ranged = send(auth, net::HttpMethod::get, "/dir/a.txt", {{"Range", "bytes=6-12"}});
    ASSERT_TRUE(ranged) << ranged.error().message;
    EXPECT_EQ(ranged->status, 206);
    EXPECT_EQ(ranged->body, "azurite");
    EXPECT_EQ(ranged->entity_size, 13u);
    auto whole = send(auth, net::HttpMethod::get, "/dir/a.txt");
    ASSERT_TRUE(whole);
    EXPECT_EQ(whole->body, "hello azurite");
    auto missing = send(auth, net::HttpMethod::get, "/dir/missing.txt");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
  }

  void TearDown() override {
    if (endpoint_.empty() || container_.empty()) return;
    auto cleanup = auth(azuretest::env_of({{"AZURE_STORAGE_ACCOUNT", account_}, {"AZURE_STORAGE_KEY", key_}}));
    if (cleanup.auth) (void)send(cleanup.auth.get(), net::HttpMethod::delete_, "?restype=container");
  }

  std::string endpoint_, account_, key_, container_;
  std::shared_ptr<net::HttpClient> http_ = std::make_shared<net::HttpClient>();
  net::HttpClient client_{TransportOptions{.max_attempts = 2, .initial_backoff = Milliseconds{50}}};
};

TEST_F(AzuriteLive, SharedKeySignedRequestsAreAcceptedAndAWrongKeyIsRefused) {
  const std::string connection = getenv_or("AZURITE_CONNECTION_STRING", "");
  auto env = connection.empty() ? azuretest::env_of({{"AZURE_STORAGE_ACCOUNT", account_}, {"AZURE_STORAGE_KEY", key_}})
                                : azuretest::env_of({{"AZURE_STORAGE_CONNECTION_STRING", connection}});
  const auto shared = auth(env);
  ASSERT_EQ(shared.mode, AzureAuthMode::shared_key) << shared.description;
  round_trip(shared.auth.get());

  // The same request signed with another key: Azurite recomputes the signature and refuses it.
  const auto wrong =
      auth(azuretest::env_of({{"AZURE_STORAGE_ACCOUNT", account_}, {"AZURE_STORAGE_KEY", "d3Jvbmcga2V5IGJ5dGVz"}}));
  ASSERT_EQ(wrong.mode, AzureAuthMode::shared_key);
  auto refused = send(wrong.auth.get(), net::HttpMethod::get, "/dir/a.txt");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(refused.error().message, HasSubstr("403"));
}

TEST_F(AzuriteLive, AnAccountSasMadeInTheTestIsAcceptedAndATamperedOneIsRefused) {
  const auto sas = auth(azuretest::env_of({}), "?" + azuretest::account_sas(account_, key_, std::chrono::hours(1)));
  ASSERT_EQ(sas.mode, AzureAuthMode::sas);
  round_trip(sas.auth.get());

  const auto tampered = auth(azuretest::env_of({}), azuretest::account_sas(account_, key_, std::chrono::hours(1),
                                                                           azuretest::SasSignature::tampered));
  auto refused = send(tampered.auth.get(), net::HttpMethod::get, "/dir/a.txt");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(refused.error().message, Not(HasSubstr("sig="))) << "the SAS must not reach the error message";
}

}  // namespace
}  // namespace datavo::azure
