// Tests of src/tier/gcs/google_credentials.cpp against fake Google endpoints on loopback: a token endpoint that
// verifies the service account's RS256 JWT (with the public half of a key made here) and checks its claims, the
// refresh-token grant, an STS exchange reading a subject-token file (with and without impersonation), a GCE
// metadata server that requires Metadata-Flavor, the ADC order, refresh ahead of expiry, invalidate(), the
// RequestAuth's one repeat after a 401, and the absence of every secret from the debug log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "tier/cloud/bearer_auth.hpp"
#include "tier/gcs/google_credentials.hpp"
#include "unit/tier/credential_test_support.hpp"
#include "unit/tier/gcs/gcs_test_keys.hpp"
#include "util/log.hpp"

namespace datavo::gcs {
namespace {

using namespace std::chrono_literals;
using credtest::FakeEnvironment;
using credtest::FakeHttpServer;
using credtest::form_of;
using credtest::write_text;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* k_email = "datavo-test@example-project.iam.gserviceaccount.com";
constexpr const char* k_key_id = "0123456789abcdef";
constexpr const char* k_client_secret = "client-secret-Zk7Q";
constexpr const char* k_refresh_token = "1//refresh-token-Xv93";
constexpr const char* k_subject_token = "subject-token-Pq31";

std::string rfc3339(cloud::WallClock::time_point time) {
  const std::time_t seconds = cloud::WallClock::to_time_t(time);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

class GcsCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = gcstest::make_rsa_key();  // before the server starts: no lock needed yet
    ASSERT_TRUE(key_);
    std::filesystem::create_directories(dir_.sub("home"));
    fake_.set_home(dir_.sub("home"));
    // No test may reach a real metadata server: point it at a closed loopback port unless a test sets its own.
    fake_.set("GCE_METADATA_HOST", "127.0.0.1:" + std::to_string(credtest::closed_port()));
    install_handlers();
    server_.start();
  }

  // The token endpoint of a service account: verifies the JWT's signature with the public key and its claims.
  void install_handlers() {
    auto& s = server_.server();
    s.Post("/token", [this](const httplib::Request& req, httplib::Response& res) {
      ++sa_requests_;
      const auto form = form_of(req);
      auto refuse = [&](const std::string& why) {
        res.status = 400;
        res.set_content(json{{"error", "invalid_grant"}, {"error_description", why}}.dump(), "application/json");
      };
      if (req.get_header_value("Content-Type") != "application/x-www-form-urlencoded") return refuse("content type");
      if (form.count("grant_type") == 0 || form.at("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer")
        return refuse("grant_type");
      if (form.count("assertion") == 0) return refuse("no assertion");
      std::optional<gcstest::VerifiedJwt> jwt;
      {
        std::lock_guard lock(mutex_);
        jwt = gcstest::verify_rs256(form.at("assertion"), key_.get());
      }
      if (!jwt) return refuse("Invalid JWT Signature.");
      const auto& claims = jwt->claims;
      const long long now = std::chrono::duration_cast<std::chrono::seconds>(fake_.now().time_since_epoch()).count();
      if (jwt->header.value("alg", "") != "RS256" || jwt->header.value("kid", "") != k_key_id) return refuse("header");
      if (claims.value("iss", "") != k_email) return refuse("iss");
      if (claims.value("scope", "") != "https://www.googleapis.com/auth/devstorage.read_write") return refuse("scope");
      if (claims.value("aud", "") != server_.url() + "/token") return refuse("aud");
      const long long iat = claims.value("iat", 0LL), exp = claims.value("exp", 0LL);
      if (exp - iat != 3600) return refuse("exp is not iat + 3600");
      if (iat < now - 5 || iat > now + 5) return refuse("iat is not now");
      const int n = ++sa_tokens_;
      res.set_content(json{{"access_token", "ya29.sa-" + std::to_string(n)},
                           {"expires_in", sa_lifetime_.load()},
                           {"token_type", "Bearer"}}
                          .dump(),
                      "application/json");
    });
    s.Post("/authorized", [this](const httplib::Request& req, httplib::Response& res) {
      ++user_requests_;
      const auto form = form_of(req);
      if (form.count("grant_type") == 0 || form.at("grant_type") != "refresh_token" || form.count("client_id") == 0 ||
          form.at("client_id") != "client-1.apps.googleusercontent.com" || form.count("client_secret") == 0 ||
          form.at("client_secret") != k_client_secret || form.count("refresh_token") == 0 ||
          form.at("refresh_token") != k_refresh_token) {
        res.status = 400;
        res.set_content(R"({"error":"invalid_grant"})", "application/json");
        return;
      }
      res.set_content(json{{"access_token", "ya29.user-" + std::to_string(user_requests_.load())},
                           {"expires_in", 3599},
                           {"token_type", "Bearer"}}
                          .dump(),
                      "application/json");
    });
    s.Post("/sts", [this](const httplib::Request& req, httplib::Response& res) {
      ++sts_requests_;
      const auto form = form_of(req);
      auto field = [&](const char* name) { return form.count(name) ? form.at(name) : std::string("<missing>"); };
      {
        std::lock_guard lock(mutex_);
        last_sts_scope_ = field("scope");
        last_subject_token_ = field("subject_token");
      }
      if (field("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
          field("audience") != "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x" ||
          field("requested_token_type") != "urn:ietf:params:oauth:token-type:access_token" ||
          field("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt") {
        res.status = 400;
        res.set_content(R"({"error":"invalid_request"})", "application/json");
        return;
      }
      res.set_content(json{{"access_token", "sts-" + std::to_string(sts_requests_.load())},
                           {"issued_token_type", "urn:ietf:params:oauth:token-type:access_token"},
                           {"token_type", "Bearer"},
                           {"expires_in", 3600}}
                          .dump(),
                      "application/json");
    });
    s.Post(R"(/v1/projects/-/serviceAccounts/([^/]+):generateAccessToken)", [this](const httplib::Request& req,
                                                                                   httplib::Response& res) {
      ++impersonation_requests_;
      const auto body = json::parse(req.body, nullptr, false);
      if (req.matches[1].str() != k_email || !req.get_header_value("Authorization").starts_with("Bearer sts-") ||
          !body.is_object() || body["scope"] != json::array({k_storage_scope})) {
        res.status = 403;
        res.set_content(R"({"error":{"code":403}})", "application/json");
        return;
      }
      res.set_content(json{{"accessToken", "ya29.impersonated-1"}, {"expireTime", rfc3339(fake_.now() + 1h)}}.dump(),
                      "application/json");
    });
    s.Get("/computeMetadata/v1/instance/service-accounts/default/token",
          [this](const httplib::Request& req, httplib::Response& res) {
            res.set_header("Metadata-Flavor", "Google");
            if (req.get_header_value("Metadata-Flavor") != "Google") {
              ++metadata_refused_;
              res.status = 403;
              res.set_content("Missing Metadata-Flavor:Google header.", "text/plain");
              return;
            }
            ++metadata_requests_;
            res.set_content(json{{"access_token", "ya29.gce-" + std::to_string(metadata_requests_.load())},
                                 {"expires_in", 3599},
                                 {"token_type", "Bearer"}}
                                .dump(),
                            "application/json");
          });
    // A GCS object that only the second service-account token may read: the first is "revoked".
    s.Get("/storage/v1/b/bucket/o/object", [this](const httplib::Request& req, httplib::Response& res) {
      ++resource_requests_;
      const auto auth = req.get_header_value("Authorization");
      if (auth != "Bearer ya29.sa-2" || always_refuse_) {
        res.status = 401;
        res.set_content(R"({"error":{"code":401,"message":"Invalid Credentials"}})", "application/json");
        return;
      }
      res.set_content("object bytes", "application/octet-stream");
    });
  }

  std::string write_service_account_file(const std::string& name) {
    const std::string path = dir_.sub(name);
    write_text(path, json{{"type", "service_account"},
                          {"project_id", "example-project"},
                          {"private_key_id", k_key_id},
                          {"private_key", private_key()},
                          {"client_email", k_email},
                          {"client_id", "1234"},
                          {"token_uri", server_.url() + "/token"}}
                         .dump());
    return path;
  }

  std::string write_authorized_user_file(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_text(path, json{{"type", "authorized_user"},
                          {"client_id", "client-1.apps.googleusercontent.com"},
                          {"client_secret", k_client_secret},
                          {"refresh_token", k_refresh_token},
                          {"token_uri", server_.url() + "/authorized"}}
                         .dump());
    return path;
  }

  std::string write_external_account_file(bool impersonate, bool json_format) {
    const std::string token_path = dir_.sub("subject-token");
    if (json_format)
      write_text(token_path, json{{"id_token", k_subject_token}}.dump());
    else
      write_text(token_path, std::string(k_subject_token) + "\n");
    json source = {{"file", token_path}};
    if (json_format) source["format"] = {{"type", "json"}, {"subject_token_field_name", "id_token"}};
    json file = {{"type", "external_account"},
                 {"audience", "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x"},
                 {"subject_token_type", "urn:ietf:params:oauth:token-type:jwt"},
                 {"token_url", server_.url() + "/sts"},
                 {"credential_source", source}};
    if (impersonate)
      file["service_account_impersonation_url"] =
          server_.url() + "/v1/projects/-/serviceAccounts/" + k_email + ":generateAccessToken";
    const std::string path = dir_.sub("external.json");
    write_text(path, file.dump());
    return path;
  }

  std::string private_key() {
    std::lock_guard lock(mutex_);
    return gcstest::private_key_pem(key_.get());
  }
  // The server verifies JWTs with this key from now on.
  void replace_key() {
    auto key = gcstest::make_rsa_key();
    std::lock_guard lock(mutex_);
    key_ = std::move(key);
  }
  std::string last_sts_scope() {
    std::lock_guard lock(mutex_);
    return last_sts_scope_;
  }
  std::string last_subject_token() {
    std::lock_guard lock(mutex_);
    return last_subject_token_;
  }

  std::shared_ptr<cloud::TokenProvider> provider() {
    auto made = make_gcs_token_provider({}, fake_.env(), http_);
    EXPECT_TRUE(made) << made.error().message;
    return made ? *made : nullptr;
  }

  shardtest::TempDir dir_;
  FakeEnvironment fake_;
  std::shared_ptr<net::HttpClient> http_ = credtest::fast_http_client();
  std::mutex mutex_;
  gcstest::Pkey key_;  // guarded by mutex_ (the server's threads verify with it)
  std::atomic<int> sa_requests_{0}, sa_tokens_{0}, sa_lifetime_{3}, user_requests_{0}, sts_requests_{0};
  std::atomic<int> impersonation_requests_{0}, metadata_requests_{0}, metadata_refused_{0}, resource_requests_{0};
  std::atomic<bool> always_refuse_{false};
  std::string last_sts_scope_, last_subject_token_;  // guarded by mutex_
  FakeHttpServer server_;                            // last: stopped first, before what its handlers use is destroyed
};

TEST_F(GcsCredentialsTest, ServiceAccountJwtIsVerifiedAndExchangedForAToken) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  auto gcs = provider();
  ASSERT_TRUE(gcs);
  EXPECT_THAT(gcs->describe(), HasSubstr("service account key file " + dir_.sub("sa.json")));
  EXPECT_THAT(gcs->describe(), HasSubstr(k_email));
  auto token = gcs->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "ya29.sa-1");
  EXPECT_EQ(token->expires_at, fake_.now() + 3s);
  EXPECT_EQ(sa_tokens_, 1);
}

TEST_F(GcsCredentialsTest, AJwtSignedWithAnotherKeyIsRefusedAsPermissionDenied) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  replace_key();  // the server now verifies with a key the file does not hold
  auto token = provider()->get();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(token.error().message, HasSubstr("Invalid JWT Signature"));
  EXPECT_EQ(sa_tokens_, 0);
}

TEST_F(GcsCredentialsTest, ShortLivedTokensAreRefreshedAheadOfExpiry) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  auto gcs = provider();  // tokens live 3 s: refreshed when less than 1.5 s is left
  EXPECT_EQ(gcs->get()->token, "ya29.sa-1");
  EXPECT_EQ(gcs->get()->token, "ya29.sa-1");
  fake_.advance(1400ms);
  EXPECT_EQ(gcs->get()->token, "ya29.sa-1") << "1.6 s left of 3 s: still cached";
  fake_.advance(200ms);
  auto refreshed = gcs->get();
  ASSERT_TRUE(refreshed);
  EXPECT_EQ(refreshed->token, "ya29.sa-2") << "1.4 s left of 3 s: refreshed before it expired";
  EXPECT_EQ(sa_requests_, 2);
}

TEST_F(GcsCredentialsTest, RefreshHappensAheadOfExpiryOnTheRealClock) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  sa_lifetime_ = 2;
  cloud::CredentialEnv env = fake_.env();
  env.clock = nullptr;  // the system clock
  auto gcs = make_gcs_token_provider({}, env, http_).value();
  auto first = gcs->get();
  ASSERT_TRUE(first) << first.error().message;
  std::this_thread::sleep_for(1100ms);  // 0.9 s of the 2 s left: under the 1 s margin
  auto second = gcs->get();
  ASSERT_TRUE(second);
  EXPECT_NE(second->token, first->token);
  EXPECT_LT(cloud::WallClock::now(), first->expires_at) << "the first token had not expired yet";
}

TEST_F(GcsCredentialsTest, InvalidateFetchesANewToken) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  auto gcs = provider();
  EXPECT_EQ(gcs->get()->token, "ya29.sa-1");
  gcs->invalidate();
  EXPECT_EQ(gcs->get()->token, "ya29.sa-2");
  EXPECT_EQ(gcs->get()->token, "ya29.sa-2");
  EXPECT_EQ(sa_requests_, 2);
}

TEST_F(GcsCredentialsTest, AuthorizedUserFileUsesTheRefreshTokenGrant) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_authorized_user_file(dir_.sub("user.json")));
  auto gcs = provider();
  EXPECT_THAT(gcs->describe(), HasSubstr("authorized user file"));
  auto token = gcs->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "ya29.user-1");
  EXPECT_EQ(user_requests_, 1);
}

TEST_F(GcsCredentialsTest, ExternalAccountExchangesTheSubjectTokenFileAtSts) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_external_account_file(/*impersonate=*/false, /*json=*/false));
  auto gcs = provider();
  auto token = gcs->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "sts-1");
  EXPECT_EQ(last_subject_token(), k_subject_token) << "the trailing newline of a text file is not part of the token";
  EXPECT_EQ(last_sts_scope(), "https://www.googleapis.com/auth/devstorage.read_write");

  // The file is read again at every refresh (the platform rotates it).
  write_text(dir_.sub("subject-token"), "rotated-subject-token");
  gcs->invalidate();
  EXPECT_EQ(gcs->get()->token, "sts-2");
  EXPECT_EQ(last_subject_token(), "rotated-subject-token");
}

TEST_F(GcsCredentialsTest, ExternalAccountWithJsonSourceAndImpersonation) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_external_account_file(/*impersonate=*/true, /*json=*/true));
  auto token = provider()->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "ya29.impersonated-1");
  EXPECT_EQ(token->expires_at, fake_.now() + 1h);
  EXPECT_EQ(last_subject_token(), k_subject_token);
  EXPECT_EQ(last_sts_scope(), "https://www.googleapis.com/auth/cloud-platform");
  EXPECT_EQ(sts_requests_, 1);
  EXPECT_EQ(impersonation_requests_, 1);
}

TEST_F(GcsCredentialsTest, MetadataServerIsAskedWithMetadataFlavor) {
  fake_.set("GCE_METADATA_HOST", server_.host_port());
  auto gcs = provider();
  EXPECT_THAT(gcs->describe(), HasSubstr("metadata server at " + server_.host_port()));
  auto token = gcs->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "ya29.gce-1");
  EXPECT_EQ(metadata_requests_, 1);
  EXPECT_EQ(metadata_refused_, 0);
}

TEST_F(GcsCredentialsTest, ApplicationDefaultCredentialsOrder) {
  // All three sources present: $GOOGLE_APPLICATION_CREDENTIALS wins.
  fake_.set("GCE_METADATA_HOST", server_.host_port());
  write_authorized_user_file(dir_.sub("home/.config/gcloud/application_default_credentials.json"));
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  EXPECT_THAT(provider()->describe(), HasSubstr("service account key file"));

  // Without it: gcloud's ADC file under ~/.config/gcloud.
  fake_.unset("GOOGLE_APPLICATION_CREDENTIALS");
  auto from_home = provider();
  EXPECT_THAT(from_home->describe(), HasSubstr("authorized user file " +
                                               dir_.sub("home/.config/gcloud/application_default_credentials.json")));
  EXPECT_EQ(from_home->get()->token, "ya29.user-1");

  // $CLOUDSDK_CONFIG moves gcloud's directory; an empty one there means: no ADC file, so the metadata server.
  std::filesystem::create_directories(dir_.sub("gcloud-config"));
  fake_.set("CLOUDSDK_CONFIG", dir_.sub("gcloud-config"));
  EXPECT_THAT(provider()->describe(), HasSubstr("metadata server"));
  write_authorized_user_file(dir_.sub("gcloud-config/application_default_credentials.json"));
  EXPECT_THAT(provider()->describe(), HasSubstr(dir_.sub("gcloud-config/application_default_credentials.json")));

  // An emulator, or a tier that says so: no credentials at all.
  fake_.set("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9199");
  auto none = make_gcs_token_provider({}, fake_.env(), http_);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, nullptr);
  fake_.unset("STORAGE_EMULATOR_HOST");
  auto anonymous = make_gcs_token_provider({.anonymous = true}, fake_.env(), http_);
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(*anonymous, nullptr);
}

TEST_F(GcsCredentialsTest, NothingFoundIsPermissionDeniedListingWhatWasTried) {
  auto gcs = provider();  // no variable, no ADC file, a metadata host that refuses connections
  auto token = gcs->get();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(token.error().message, HasSubstr("$GOOGLE_APPLICATION_CREDENTIALS is not set"));
  EXPECT_THAT(token.error().message, HasSubstr("no gcloud ADC file at " +
                                               dir_.sub("home/.config/gcloud/application_default_credentials.json")));
  EXPECT_THAT(token.error().message, HasSubstr("the GCE metadata server at 127.0.0.1:"));
}

TEST_F(GcsCredentialsTest, MalformedCredentialFilesAreConfigErrorsThatQuoteNoValue) {
  auto error_for = [&](const json& content) {
    write_text(dir_.sub("bad.json"), content.dump());
    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", dir_.sub("bad.json"));
    auto made = make_gcs_token_provider({}, fake_.env(), http_);
    EXPECT_FALSE(made);
    return made ? Error{} : made.error();
  };
  auto missing = error_for({{"type", "service_account"}, {"private_key", "PRIVATE-KEY-TEXT"}});
  EXPECT_EQ(missing.code, ErrorCode::config);
  EXPECT_THAT(missing.message, HasSubstr("\"client_email\""));
  EXPECT_THAT(missing.message, Not(HasSubstr("PRIVATE-KEY-TEXT")));
  EXPECT_THAT(error_for({{"type", "impersonated_service_account"}}).message, HasSubstr("not supported"));
  EXPECT_THAT(error_for({{"type", "external_account"},
                         {"audience", "a"},
                         {"subject_token_type", "t"},
                         {"token_url", "http://127.0.0.1:1/sts"},
                         {"credential_source", {{"url", "http://127.0.0.1:1/token"}}}})
                  .message,
              HasSubstr("credential_source.url is not supported"));
  write_text(dir_.sub("bad.json"), "{not json");
  auto not_json = make_gcs_token_provider({}, fake_.env(), http_);
  ASSERT_FALSE(not_json);
  EXPECT_THAT(not_json.error().message, HasSubstr(dir_.sub("bad.json")));
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", dir_.sub("missing.json"));
  EXPECT_FALSE(make_gcs_token_provider({}, fake_.env(), http_)) << "a named file that is missing is not skipped";
}

TEST_F(GcsCredentialsTest, RequestAuthRepeatsOnceAfterA401WithARefreshedToken) {
  fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
  sa_lifetime_ = 3600;
  auto auth = cloud::make_bearer_auth(provider());
  ASSERT_TRUE(auth);
  net::HttpClient client;
  net::HttpRequest request;
  request.url = server_.url() + "/storage/v1/b/bucket/o/object";
  request.auth = auth.get();
  auto response = client.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "object bytes");
  EXPECT_EQ(response->attempts, 2) << "one repeat, with the refreshed token";
  EXPECT_EQ(sa_tokens_, 2);
  EXPECT_EQ(resource_requests_, 2);

  // A credential the server keeps refusing: one repeat, then the 401 is the answer.
  always_refuse_ = true;
  resource_requests_ = 0;
  auto refused = client.perform(request);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(resource_requests_, 2);
}

TEST_F(GcsCredentialsTest, NoSecretAppearsInTheDebugLog) {
  const auto saved = log::level();
  log::set_level(log::Level::debug);
  std::vector<std::string> errors;
  std::string captured;
  {
    credtest::StderrCapture capture(dir_.sub("stderr.txt"));
    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa.json"));
    auto sa = provider();
    (void)sa->get();
    auto auth = cloud::make_bearer_auth(sa);
    net::HttpClient client;
    net::HttpRequest request;
    request.url = server_.url() + "/storage/v1/b/bucket/o/object";
    request.auth = auth.get();
    (void)client.perform(request);

    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_authorized_user_file(dir_.sub("user.json")));
    (void)provider()->get();
    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_external_account_file(true, false));
    (void)provider()->get();
    // Failures too: a refused JWT, a refused refresh token.
    replace_key();
    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", write_service_account_file("sa2.json"));
    replace_key();
    if (auto failed = provider()->get(); !failed) errors.push_back(failed.error().message);
    write_text(dir_.sub("user.json"), json{{"type", "authorized_user"},
                                           {"client_id", "other"},
                                           {"client_secret", k_client_secret},
                                           {"refresh_token", k_refresh_token},
                                           {"token_uri", server_.url() + "/authorized"}}
                                          .dump());
    fake_.set("GOOGLE_APPLICATION_CREDENTIALS", dir_.sub("user.json"));
    if (auto failed = provider()->get(); !failed) errors.push_back(failed.error().message);
    captured = capture.text();
  }
  log::set_level(saved);
  EXPECT_THAT(captured, HasSubstr("DEBUG")) << "the debug log was not captured";
  EXPECT_EQ(errors.size(), 2u);
  std::vector<std::string> secrets = {
      k_client_secret, k_refresh_token, k_subject_token, "ya29.", "sts-1", "BEGIN PRIVATE KEY", "MII"};
  for (const auto& secret : secrets) {
    EXPECT_THAT(captured, Not(HasSubstr(secret))) << "the log shows " << secret;
    for (const auto& message : errors) EXPECT_THAT(message, Not(HasSubstr(secret))) << message;
  }
}

}  // namespace
}  // namespace datavo::gcs
