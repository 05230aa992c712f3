// Test support for the Azure credential tests (test_azure_auth.cpp, test_azure_credentials.cpp): the fixture below
// and its fake endpoints. Nothing here talks off loopback.
// Thread safety: the server's handlers run on its threads; what they share with the test is atomic or guarded by
// mutex_.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "tier/azure/azure_auth.hpp"
#include "tier/azure/azure_credentials.hpp"
#include "unit/tier/credential_test_support.hpp"

namespace datavo::azure::identity_test {

inline constexpr const char* k_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
inline constexpr const char* k_client_secret = "aad-client-secret-Qx8~";
inline constexpr const char* k_identity_header = "identity-header-Jd72";
inline constexpr const char* k_mi_client_id = "11111111-2222-3333-4444-555555555555";
inline constexpr const char* k_sas =
    "sv=2021-12-02&ss=b&srt=sco&sp=rl&se=2030-01-01T00%3A00%3A00Z&sig=SAS-SIGNATURE-Zz9%3D";

// Fake identity endpoints on loopback (IMDS, App Service, AAD's token endpoint), a blob that only a refreshed token
// may read, a fake `az` on a test PATH, and a fake environment that reaches nothing else.
class AzureCredentialsTest : public ::testing::Test {
 protected:
  using json = nlohmann::json;

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
          std::chrono::duration_cast<std::chrono::seconds>((fake_.now() + std::chrono::hours(1)).time_since_epoch())
              .count();
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
      const auto form = credtest::form_of(req);
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
    credtest::write_text(path,
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

  std::shared_ptr<cloud::TokenProvider> chain(std::string client_id = "") {
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
  credtest::FakeEnvironment fake_;
  std::shared_ptr<net::HttpClient> http_ = credtest::fast_http_client();
  std::atomic<int> imds_requests_{0}, imds_tokens_{0}, app_service_requests_{0}, aad_requests_{0}, aad_tokens_{0};
  std::atomic<int> lifetime_{3600};
  std::atomic<bool> fail_first_with_503_{false};
  std::mutex mutex_;
  std::vector<Seen> seen_;           // guarded by mutex_
  std::string last_assertion_;       // guarded by mutex_
  credtest::FakeHttpServer server_;  // last: stopped first, before what its handlers use is destroyed
};

}  // namespace datavo::azure::identity_test
