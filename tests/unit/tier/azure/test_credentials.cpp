// Tests of src/tier/azure/credentials.cpp against fake endpoints on loopback: the mode make_azure_auth picks
// (SAS, SharedKey, bearer), the SAS on every attempt, an IMDS that refuses unless client_id matches, an App Service
// endpoint that requires X-IDENTITY-HEADER, an AAD client-secret endpoint, workload identity, a fake `az` on a test
// PATH, refresh ahead of expiry, invalidate(), one repeat after a 401, and no secret in the debug log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "tier/azure/credentials.hpp"
#include "unit/tier/credential_test_support.hpp"
#include "util/log.hpp"

namespace datavo::azure {
namespace {

using namespace std::chrono_literals;
using credtest::FakeEnvironment;
using credtest::FakeHttpServer;
using credtest::form_of;
using credtest::write_text;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* k_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
constexpr const char* k_client_secret = "aad-client-secret-Qx8~";
constexpr const char* k_identity_header = "identity-header-Jd72";
constexpr const char* k_mi_client_id = "11111111-2222-3333-4444-555555555555";
constexpr const char* k_sas = "sv=2021-12-02&ss=b&srt=sco&sp=rl&se=2030-01-01T00%3A00%3A00Z&sig=SAS-SIGNATURE-Zz9%3D";

class AzureCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.sub("bin"));
    fake_.set_home(dir_.sub("home"));
    // No test may reach a real IMDS, nor a real az: loopback and an empty PATH unless a test sets its own.
    fake_.set("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:" + std::to_string(credtest::closed_port()));
    fake_.set("PATH", dir_.sub("bin"));
    auto& s = server_.server();
    s.Get("/metadata/identity/oauth2/token", [this](const httplib::Request& req, httplib::Response& res) {
      ++imds_requests_;
      if (req.get_header_value("Metadata") != "true" || req.get_param_value("api-version") != "2018-02-01" ||
          req.get_param_value("resource") != "https://storage.azure.com/") {
        res.status = 400;
        res.set_content(R"({"error":"invalid_request","error_description":"Required metadata header not specified"})",
                        "application/json");
        return;
      }
      if (req.get_param_value("client_id") != k_mi_client_id) {
        res.status = 400;
        res.set_content(R"({"error":"invalid_request","error_description":"Identity not found"})", "application/json");
        return;
      }
      res.set_content(json{{"access_token", "imds-" + std::to_string(++imds_tokens_)},
                           {"expires_in", std::to_string(lifetime_.load())},
                           {"expires_on", "0"},
                           {"resource", "https://storage.azure.com/"},
                           {"token_type", "Bearer"}}
                          .dump(),
                      "application/json");
    });
    s.Get("/msi/token", [this](const httplib::Request& req, httplib::Response& res) {
      ++app_service_requests_;
      if (req.get_header_value("X-IDENTITY-HEADER") != k_identity_header ||
          req.get_param_value("api-version") != "2019-08-01" ||
          req.get_param_value("resource") != "https://storage.azure.com/") {
        res.status = 401;
        res.set_content(R"({"error":"unauthorized"})", "application/json");
        return;
      }
      const auto expires_on =
          std::chrono::duration_cast<std::chrono::seconds>((fake_.now() + 1h).time_since_epoch()).count();
      res.set_content(json{{"access_token", "appservice-1"},
                           {"expires_on", std::to_string(expires_on)},
                           {"resource", "https://storage.azure.com/"},
                           {"token_type", "Bearer"},
                           {"client_id", "system"}}
                          .dump(),
                      "application/json");
    });
    s.Post(R"(/([^/]+)/oauth2/v2.0/token)", [this](const httplib::Request& req, httplib::Response& res) {
      ++aad_requests_;
      const auto form = form_of(req);
      auto field = [&](const char* name) { return form.count(name) ? form.at(name) : std::string("<missing>"); };
      const bool common = req.matches[1].str() == "tenant-1" && field("grant_type") == "client_credentials" &&
                          field("client_id") == "app-1" && field("scope") == "https://storage.azure.com/.default";
      const bool by_secret = field("client_secret") == k_client_secret;
      bool by_assertion = false;
      {
        std::lock_guard lock(mutex_);
        last_assertion_ = field("client_assertion");
        by_assertion = field("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" &&
                       last_assertion_.starts_with("federated-jwt-");
      }
      if (!common || !(by_secret || by_assertion)) {
        res.status = 400;
        res.set_content(R"({"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret."})",
                        "application/json");
        return;
      }
      res.set_content(json{{"token_type", "Bearer"},
                           {"expires_in", lifetime_.load()},
                           {"access_token", std::string(by_secret ? "aad-" : "wi-") + std::to_string(++aad_tokens_)}}
                          .dump(),
                      "application/json");
    });
    // A blob that only the second token may read (the first is "expired"), or no token at all when refuse_all_.
    s.Get("/acct/cont/blob", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      seen_.push_back({req.get_header_value("Authorization"), req.get_header_value("x-ms-version"),
                       req.get_header_value("x-ms-date"), req.target});
      if (fail_first_with_503_ && seen_.size() == 1) {
        res.status = 503;
        return;
      }
      if (req.has_header("Authorization") && req.get_header_value("Authorization") != "Bearer aad-2") {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer authorization_uri=https://login.microsoftonline.com/t/oauth2");
        res.set_content("<Error><Code>InvalidAuthenticationInfo</Code></Error>", "application/xml");
        return;
      }
      res.set_content("blob bytes", "application/octet-stream");
    });
    server_.start();
  }

  // A fake `az` in the test's PATH: checks its arguments, then runs `body` (sh).
  void write_az(const std::string& body) {
    const std::string path = dir_.sub("bin/az");
    write_text(path,
               "#!/bin/sh\n"
               "[ \"$*\" = \"account get-access-token --resource https://storage.azure.com/ -o json\" ] || "
               "{ echo \"unexpected arguments: $*\" >&2; exit 2; }\n" +
                   body);
    ::chmod(path.c_str(), 0755);
  }

  void use_aad_secret() {
    fake_.set("AZURE_AUTHORITY_HOST", server_.url());
    fake_.set("AZURE_TENANT_ID", "tenant-1");
    fake_.set("AZURE_CLIENT_ID", "app-1");
    fake_.set("AZURE_CLIENT_SECRET", k_client_secret);
  }

  std::shared_ptr<AzureTokenProvider> chain(std::string client_id = "") {
    return make_default_azure_credential({std::move(client_id)}, fake_.env(), http_);
  }

  AzureAuth auth_for(const std::string& url, const std::string& sas = "", const std::string& client_id = "") {
    auto made = make_azure_auth({url, sas, client_id}, fake_.env(), http_);
    EXPECT_TRUE(made) << made.error().message;
    return made ? *made : AzureAuth{};
  }

  struct Seen {
    std::string authorization, version, date, target;
  };
  std::vector<Seen> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }
  std::string last_assertion() {
    std::lock_guard lock(mutex_);
    return last_assertion_;
  }

  shardtest::TempDir dir_;
  FakeEnvironment fake_;
  std::shared_ptr<net::HttpClient> http_ = credtest::fast_http_client();
  std::atomic<int> imds_requests_{0}, imds_tokens_{0}, app_service_requests_{0}, aad_requests_{0}, aad_tokens_{0};
  std::atomic<int> lifetime_{3600};
  std::atomic<bool> fail_first_with_503_{false};
  std::mutex mutex_;
  std::vector<Seen> seen_;      // guarded by mutex_
  std::string last_assertion_;  // guarded by mutex_
  FakeHttpServer server_;       // last: stopped first, before what its handlers use is destroyed
};

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
