// Test support for the tests of the AWS credential chain (tests/unit/tier/s3/test_aws_*.cpp): a fixture with a
// fresh home directory and a fake environment per case, a fake STS (AssumeRoleWithWebIdentity) and a fake IMDSv2,
// all on 127.0.0.1.
// Thread safety: the fakes' handlers run on their servers' threads; counters are atomics, the rest is guarded by
// each fake's mutex.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "support/temp_dir.hpp"
#include "tier/s3/aws_credentials.hpp"
#include "unit/tier/s3/fake_aws.hpp"

namespace datavo::s3::chain_test {

using namespace std::chrono_literals;

inline const std::chrono::system_clock::time_point k_now = std::chrono::sys_days{std::chrono::year{2030} / 1 / 2} + 3h;

// A fresh home directory and fake environment per case, IMDS disabled unless a case points it at a fake.
class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.clock = clock_;
    fake_.home = dir_.sub("home");
    // Nothing may reach 169.254.169.254 from a test: IMDS stays off unless a test points it at a fake.
    fake_.vars["AWS_EC2_METADATA_DISABLED"] = "true";
  }

  std::shared_ptr<AwsCredentialProvider> chain(std::optional<std::string> profile = {}) {
    return make_default_credential_chain(fake_.env(), {std::move(profile), fake_.container_host});
  }
  std::string home_file(const std::string& relative) { return fake_.home + "/" + relative; }
  void enable_imds(const s3test::LoopbackServer& imds) {
    fake_.vars.erase("AWS_EC2_METADATA_DISABLED");
    fake_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url();
  }

  shardtest::TempDir dir_;
  std::shared_ptr<s3test::FakeClock> clock_ = std::make_shared<s3test::FakeClock>(k_now);
  s3test::FakeEnvironment fake_;
};

// AssumeRoleWithWebIdentity: checks the form fields, answers credentials valid for an hour.
class FakeSts {
 public:
  FakeSts(std::shared_ptr<s3test::FakeClock> clock, std::string expected_token, std::string expected_role)
      : clock_(std::move(clock)), token_(std::move(expected_token)), role_(std::move(expected_role)) {
    server_.server().Post("/", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      std::lock_guard lock(mutex_);
      last_session_name = req.get_param_value("RoleSessionName");
      const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
      if (!form || req.get_param_value("Action") != "AssumeRoleWithWebIdentity" ||
          req.get_param_value("Version") != "2011-06-15" || req.has_header("Authorization")) {
        res.status = 400;
        res.set_content("<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>", "text/xml");
        return;
      }
      if (refuse || req.get_param_value("WebIdentityToken") != token_ || req.get_param_value("RoleArn") != role_) {
        res.status = 403;
        res.set_content(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>"
            "<Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>"
            "</Error><RequestId>r</RequestId></ErrorResponse>",
            "text/xml");
        return;
      }
      res.set_content(
          "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
          "  <AssumeRoleWithWebIdentityResult>\n"
          "    <SubjectFromWebIdentityToken>system:serviceaccount:ns:sa</SubjectFromWebIdentityToken>\n"
          "    <Credentials>\n"
          "      <SessionToken>sts-session-token</SessionToken>\n"
          "      <SecretAccessKey>sts-secret</SecretAccessKey>\n"
          "      <Expiration>" +
              s3test::iso8601(clock_->wall_now() + 1h) +
              "</Expiration>\n"
              "      <AccessKeyId>ASIASTSKEY</AccessKeyId>\n"
              "    </Credentials>\n"
              "  </AssumeRoleWithWebIdentityResult>\n"
              "</AssumeRoleWithWebIdentityResponse>\n",
          "text/xml");
    });
    server_.start();
  }
  std::string url() const { return server_.url("/"); }
  std::string session_name() {
    std::lock_guard lock(mutex_);
    return last_session_name;
  }

  std::atomic<int> requests{0};
  std::atomic<bool> refuse{false};

 private:
  const std::shared_ptr<s3test::FakeClock> clock_;
  const std::string token_;
  const std::string role_;
  std::mutex mutex_;
  std::string last_session_name;
  s3test::LoopbackServer server_;
};

// IMDSv2: PUT /latest/api/token (with a TTL header) gives a session token; every GET must carry it.
class FakeImds {
 public:
  explicit FakeImds(std::shared_ptr<s3test::FakeClock> clock) : clock_(std::move(clock)) {
    server_.server().Put("/latest/api/token", [this](const httplib::Request& req, httplib::Response& res) {
      ++token_requests;
      if (!req.has_header("X-aws-ec2-metadata-token-ttl-seconds")) {
        res.status = 400;
        return;
      }
      res.set_content("imds-session-token", "text/plain");
    });
    server_.server().Get(R"(/latest/meta-data/iam/security-credentials/(.*))",
                         [this](const httplib::Request& req, httplib::Response& res) {
                           ++gets;
                           if (req.get_header_value("X-aws-ec2-metadata-token") != "imds-session-token") {
                             ++refused;
                             res.status = 401;
                             return;
                           }
                           const std::string role = req.matches[1];
                           if (role.empty()) {
                             if (no_role) {
                               res.status = 404;
                               return;
                             }
                             res.set_content("datavo-role\n", "text/plain");
                           } else if (role == "datavo-role") {
                             res.set_content(
                                 "{\"Code\":\"Success\",\"LastUpdated\":\"2030-01-01T00:00:00Z\","
                                 "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIAIMDSKEY\","
                                 "\"SecretAccessKey\":\"imds-secret\",\"Token\":\"imds-token\","
                                 "\"Expiration\":\"" +
                                     s3test::iso8601(clock_->wall_now() + 6h) + "\"}",
                                 "application/json");
                           } else {
                             res.status = 404;
                           }
                         });
    server_.start();
  }
  const s3test::LoopbackServer& server() const { return server_; }

  std::atomic<int> token_requests{0}, gets{0}, refused{0};
  std::atomic<bool> no_role{false};

 private:
  const std::shared_ptr<s3test::FakeClock> clock_;
  s3test::LoopbackServer server_;
};

}  // namespace datavo::s3::chain_test
