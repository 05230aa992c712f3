// Tests of src/tier/s3/credentials.cpp: each link of the default chain against fakes on 127.0.0.1 (STS, ECS,
// IMDSv2, a credential_process script, profile files in a fresh temp dir), the chain's order, caching, refresh
// ahead of expiry and after invalidate(), and that no secret reaches an Error message or a log line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>

#include "support/temp_dir.hpp"
#include "tier/s3/credentials.hpp"
#include "unit/tier/s3/fake_aws.hpp"
#include "util/log.hpp"

namespace datavo::s3 {
namespace {

using namespace std::chrono_literals;
using s3test::FakeClock;
using s3test::FakeEcs;
using s3test::LoopbackServer;
using s3test::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

const std::chrono::system_clock::time_point k_now = std::chrono::sys_days{std::chrono::year{2030} / 1 / 2} + 3h;

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.clock = clock_;
    fake_.home = dir_.sub("home");
    // Nothing may reach 169.254.169.254 from a test: IMDS stays off unless a test points it at a fake.
    fake_.vars["AWS_EC2_METADATA_DISABLED"] = "true";
  }

  std::shared_ptr<AwsCredentialProvider> chain(std::optional<std::string> profile = {}) {
    return make_default_credential_chain(fake_.env(), std::move(profile));
  }
  std::string home_file(const std::string& relative) { return fake_.home + "/" + relative; }
  void enable_imds(const LoopbackServer& imds) {
    fake_.vars.erase("AWS_EC2_METADATA_DISABLED");
    fake_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url();
  }

  shardtest::TempDir dir_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>(k_now);
  s3test::FakeEnvironment fake_;
};

// --- A fake STS and a fake IMDSv2 --------------------------------------------------------------------------

// AssumeRoleWithWebIdentity: checks the form fields, answers credentials valid for an hour.
class FakeSts {
 public:
  FakeSts(std::shared_ptr<FakeClock> clock, std::string expected_token, std::string expected_role)
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
  const std::shared_ptr<FakeClock> clock_;
  const std::string token_;
  const std::string role_;
  std::mutex mutex_;
  std::string last_session_name;
  LoopbackServer server_;
};

// IMDSv2: PUT /latest/api/token (with a TTL header) gives a session token; every GET must carry it.
class FakeImds {
 public:
  explicit FakeImds(std::shared_ptr<FakeClock> clock) : clock_(std::move(clock)) {
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
  const LoopbackServer& server() const { return server_; }

  std::atomic<int> token_requests{0}, gets{0}, refused{0};
  std::atomic<bool> no_role{false};

 private:
  const std::shared_ptr<FakeClock> clock_;
  LoopbackServer server_;
};

// --- Environment -------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, EnvironmentKeysComeFirst) {
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  fake_.vars["AWS_SESSION_TOKEN"] = "env-token";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDENV");
  EXPECT_EQ(found->secret_access_key, "env-secret");
  EXPECT_EQ(found->session_token, "env-token");
  EXPECT_FALSE(found->expiration);
  EXPECT_EQ(found->source, "environment");
}

TEST_F(CredentialsTest, HalfTheEnvironmentKeysIsAConfigError) {
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "";  // empty counts as unset
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::config);
  EXPECT_THAT(found.error().message, HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("AKIDENV")));
}

// --- Web identity ------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, WebIdentityFromTheEnvironmentThroughSts) {
  const std::string role = "arn:aws:iam::123456789012:role/datavo-ci";
  FakeSts sts(clock_, "eyJ.web-identity.token", role);
  write_text(dir_.sub("token.jwt"), "eyJ.web-identity.token\n");  // as a projected token file may end
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
  fake_.vars["AWS_ROLE_ARN"] = role;
  fake_.vars["AWS_ROLE_SESSION_NAME"] = "ci-run-7";
  fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  fake_.vars["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9/";  // the STS-specific one wins
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIASTSKEY");
  EXPECT_EQ(found->secret_access_key, "sts-secret");
  EXPECT_EQ(found->session_token, "sts-session-token");
  ASSERT_TRUE(found->expiration);
  EXPECT_EQ(*found->expiration, k_now + 1h);
  EXPECT_THAT(found->source, HasSubstr("web identity"));
  EXPECT_THAT(found->source, HasSubstr(role));
  EXPECT_EQ(sts.session_name(), "ci-run-7");
  EXPECT_EQ(sts.requests.load(), 1);
}

TEST_F(CredentialsTest, WebIdentityFromAProfileUsesTheGenericEndpoint) {
  const std::string role = "arn:aws:iam::123456789012:role/from-profile";
  FakeSts sts(clock_, "profile.jwt", role);
  write_text(dir_.sub("p.jwt"), "profile.jwt");
  write_text(home_file(".aws/config"), "[profile ci]\nweb_identity_token_file = " + dir_.sub("p.jwt") +
                                           "\nrole_arn = " + role + "\nregion = eu-west-3\n");
  fake_.vars["AWS_PROFILE"] = "ci";
  fake_.vars["AWS_ENDPOINT_URL"] = sts.url();
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIASTSKEY");
  EXPECT_THAT(found->source, HasSubstr("profile ci"));
  EXPECT_THAT(sts.session_name(), HasSubstr("datavo-"));  // no role_session_name: one is made up
}

TEST_F(CredentialsTest, AStsRefusalIsAnErrorThatNamesNoToken) {
  FakeSts sts(clock_, "the.secret.jwt", "arn:aws:iam::1:role/r");
  sts.refuse = true;
  write_text(dir_.sub("token.jwt"), "the.secret.jwt");
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
  fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("AccessDenied"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("the.secret.jwt")));
}

TEST_F(CredentialsTest, AMissingWebIdentityTokenFileIsAnError) {
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("absent.jwt");
  fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::not_found);
  EXPECT_THAT(found.error().message, HasSubstr("absent.jwt"));
}

TEST(StsEndpoint, SpecificThenGenericThenRegionalThenGlobal) {
  s3test::FakeEnvironment fake;
  EXPECT_EQ(sts_endpoint(fake.env(), std::nullopt), "https://sts.amazonaws.com");
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "https://sts.eu-central-1.amazonaws.com");
  fake.vars["AWS_ENDPOINT_URL"] = "http://localstack:4566";
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "http://localstack:4566");
  fake.vars["AWS_ENDPOINT_URL_STS"] = "http://sts.local";
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "http://sts.local");
}

// --- Shared files ------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, StaticKeysFromTheCredentialsFile) {
  write_text(home_file(".aws/credentials"),
             "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n"
             "[dev]\r\nAWS_ACCESS_KEY_ID=AKIDDEV\r\naws_secret_access_key =  dev-secret  \r\n"
             "aws_session_token = dev-token\r\n");
  fake_.vars["AWS_PROFILE"] = "dev";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDDEV");
  EXPECT_EQ(found->secret_access_key, "dev-secret");
  EXPECT_EQ(found->session_token, "dev-token");
  EXPECT_THAT(found->source, HasSubstr("profile dev"));

  // The explicit profile argument overrides AWS_PROFILE.
  found = chain("default")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDDEFAULT");
}

TEST_F(CredentialsTest, ConfigFileSectionsAreProfileNameOrDefault) {
  write_text(dir_.sub("cfg"),
             "[dev]\naws_access_key_id = AKIDNOTAPROFILE\naws_secret_access_key = wrong\n"
             "[profile   dev]\naws_access_key_id = AKIDCONFIGDEV\naws_secret_access_key = config-secret\n"
             "s3 =\n  addressing_style = path\n"
             "[default]\naws_access_key_id = AKIDCONFIGDEFAULT\naws_secret_access_key = d\n"
             "[sso-session dev]\nsso_region = us-east-1\n");
  fake_.vars["AWS_CONFIG_FILE"] = dir_.sub("cfg");
  fake_.vars["AWS_SHARED_CREDENTIALS_FILE"] = dir_.sub("no-such-file");
  auto found = chain("dev")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCONFIGDEV");
  EXPECT_EQ(found->secret_access_key, "config-secret");
  found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCONFIGDEFAULT");
}

TEST_F(CredentialsTest, ANamedProfileThatDoesNotExistIsAConfigError) {
  write_text(home_file(".aws/credentials"), "[other]\naws_access_key_id = A\naws_secret_access_key = B\n");
  fake_.vars["AWS_PROFILE"] = "missing";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::config);
  EXPECT_THAT(found.error().message, HasSubstr("missing"));
}

TEST_F(CredentialsTest, AssumeRoleFromASourceProfileIsUnsupportedNotIgnored) {
  write_text(home_file(".aws/config"),
             "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n"
             "aws_access_key_id = A\naws_secret_access_key = B\n");
  auto found = chain("r")->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::unsupported);
}

// A credential_process script written into the test's temp dir: prints its first argument as the key id.
std::string write_process_script(const shardtest::TempDir& dir, const std::string& body) {
  const std::string path = dir.sub("cred-proc.sh");
  write_text(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0700);
  return path;
}

TEST_F(CredentialsTest, CredentialProcessRunsWithoutAShellAndItsJsonIsRead) {
  const std::string script =
      write_process_script(dir_,
                           "printf '{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"proc-secret\", "
                           "\"SessionToken\": \"%s\", \"Expiration\": \"%s\"}' \"$1\" \"$3\" \"$2\"\n");
  write_text(home_file(".aws/config"),
             "[profile proc]\ncredential_process = " + script + " 'AKID PROC' \"2030-01-02T04:00:00.000Z\" $HOME\n");
  auto found = chain("proc")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKID PROC");  // quoted: one argument, blank kept
  EXPECT_EQ(found->secret_access_key, "proc-secret");
  EXPECT_EQ(found->session_token, "$HOME");  // no shell: nothing is expanded
  ASSERT_TRUE(found->expiration);
  EXPECT_EQ(*found->expiration, k_now + 1h);
  EXPECT_THAT(found->source, HasSubstr("credential_process"));
}

TEST_F(CredentialsTest, StaticKeysOfTheCredentialsFileBeatCredentialProcessWhichBeatsConfigKeys) {
  const std::string script = write_process_script(
      dir_, "echo '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \"SecretAccessKey\": \"s\"}'\n");
  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + script +
                                           "\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = c\n");
  write_text(home_file(".aws/credentials"), "[default]\naws_access_key_id = AKIDCREDS\naws_secret_access_key = k\n");
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCREDS");

  write_text(home_file(".aws/credentials"), "[default]\nregion = us-east-2\n");
  found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDPROC");
}

TEST_F(CredentialsTest, AFailingCredentialProcessIsAnErrorWithoutItsOutput) {
  std::string script = write_process_script(dir_, "echo '{\"SecretAccessKey\": \"LEAKED-SECRET\"}'\nexit 3\n");
  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + script + "\n");
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("exited with status 3"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("LEAKED-SECRET")));

  write_process_script(dir_,
                       "echo '{\"Version\": 2, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"LEAKED-SECRET\"}'\n");
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("Version"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("LEAKED-SECRET")));

  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + dir_.sub("no-such-program") + "\n");
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("no-such-program"));
}

// --- ECS container credentials -----------------------------------------------------------------------------

TEST_F(CredentialsTest, EcsFullUriWithAnAuthorizationToken) {
  FakeEcs ecs(clock_, 6h, "ecs-authorization-token");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "ecs-authorization-token";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ECSKEY1");
  EXPECT_EQ(found->session_token, "ecs-token-1");
  EXPECT_EQ(*found->expiration, k_now + 6h);
  EXPECT_THAT(found->source, HasSubstr("ECS container endpoint"));

  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "wrong-token";  // the fake refuses it
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, Not(HasSubstr("wrong-token")));
}

TEST_F(CredentialsTest, EcsTokenFileWinsOverTheTokenVariable) {
  FakeEcs ecs(clock_, 6h, "token-from-file");
  write_text(dir_.sub("ecs-token"), "token-from-file\n");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = dir_.sub("ecs-token");
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "token-from-variable";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ECSKEY1");
}

TEST_F(CredentialsTest, EcsRelativeUriGoesToTheContainerAgent) {
  FakeEcs ecs(clock_, 6h);
  fake_.container_host = ecs.url("");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/v2/credentials/0a1b2c";
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:9/ignored";  // relative wins
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(ecs.paths_seen(), (std::vector<std::string>{"/v2/credentials/0a1b2c"}));
}

TEST_F(CredentialsTest, EcsFullUriOverPlainHttpMustStayOnTheMachine) {
  // Refused before any connection is tried (TEST-NET-3, and names that only look like loopback).
  for (const char* url : {"http://203.0.113.7/creds", "http://127.0.0.1.example.com/creds",
                          "http://localhost.example.com/creds", "ftp://127.0.0.1/creds"}) {
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = url;
    auto found = chain()->get();
    ASSERT_FALSE(found) << url;
    EXPECT_EQ(found.error().code, ErrorCode::config) << url;
    EXPECT_THAT(found.error().message, HasSubstr("https")) << url;
  }
}

// --- EC2 instance metadata (IMDSv2) ------------------------------------------------------------------------

TEST_F(CredentialsTest, ImdsV2UsesTheSessionTokenForEveryRead) {
  FakeImds imds(clock_);
  {
    // The fake refuses a read without the token, as IMDSv2-only instances do.
    net::HttpClient plain;
    net::HttpRequest request;
    request.url = imds.server().url("/latest/meta-data/iam/security-credentials/");
    auto refused = plain.perform(request);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
    ASSERT_EQ(imds.refused.load(), 1);
  }
  enable_imds(imds.server());
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIAIMDSKEY");
  EXPECT_EQ(found->secret_access_key, "imds-secret");
  EXPECT_EQ(found->session_token, "imds-token");
  EXPECT_EQ(*found->expiration, k_now + 6h);
  EXPECT_THAT(found->source, HasSubstr("datavo-role"));
  EXPECT_EQ(imds.token_requests.load(), 1);
  EXPECT_EQ(imds.gets.load(), 3);  // the probe above, the role list, the role's credentials
  EXPECT_EQ(imds.refused.load(), 1);
}

TEST_F(CredentialsTest, ImdsWithoutARoleIsNotFound) {
  FakeImds imds(clock_);
  imds.no_role = true;
  enable_imds(imds.server());
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("no IAM role"));
}

TEST_F(CredentialsTest, ImdsDisabledIsNotAsked) {
  FakeImds imds(clock_);
  enable_imds(imds.server());
  fake_.vars["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("disabled by AWS_EC2_METADATA_DISABLED"));
  EXPECT_EQ(imds.token_requests.load() + imds.gets.load(), 0);
}

TEST_F(CredentialsTest, AnAbsentImdsIsNotFoundQuickly) {
  LoopbackServer closed;  // bound, then stopped: its port refuses connections
  closed.start();
  closed.stop();
  enable_imds(closed);
  const auto started = std::chrono::steady_clock::now();
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("no IMDSv2 session token"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

// --- The chain ---------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, EnvironmentBeatsProfileBeatsEcsBeatsImds) {
  FakeImds imds(clock_);
  FakeEcs ecs(clock_, 6h);
  enable_imds(imds.server());
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  write_text(home_file(".aws/credentials"), "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = p\n");
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "e";

  auto source = [&] {
    auto found = chain()->get();
    EXPECT_TRUE(found) << found.error().message;
    return found ? found->access_key_id : std::string();
  };
  EXPECT_EQ(source(), "AKIDENV");
  fake_.vars.erase("AWS_ACCESS_KEY_ID");
  fake_.vars.erase("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(source(), "AKIDPROFILE");
  EXPECT_EQ(ecs.requests.load() + imds.token_requests.load(), 0);  // not asked while a link above answers
  std::filesystem::remove(home_file(".aws/credentials"));
  EXPECT_EQ(source(), "ECSKEY1");
  EXPECT_EQ(imds.token_requests.load(), 0);
  fake_.vars.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  EXPECT_EQ(source(), "ASIAIMDSKEY");
}

TEST_F(CredentialsTest, NothingFoundIsPermissionDeniedListingEverySource) {
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  const std::string& message = found.error().message;
  for (const char* source : {"environment:", "web identity:", "shared files: no profile default in",
                             "ECS container:", "EC2 instance metadata: disabled"})
    EXPECT_THAT(message, HasSubstr(source));
  EXPECT_THAT(message, HasSubstr(home_file(".aws/credentials")));
}

TEST_F(CredentialsTest, ShortLivedCredentialsAreRefreshedAheadOfExpiry) {
  FakeEcs ecs(clock_, 4s);  // refreshed when less than min(5 min, 4 s / 4) = 1 s is left
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  auto first = provider->get();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->access_key_id, "ECSKEY1");
  clock_->advance(2s);
  EXPECT_EQ(provider->get()->access_key_id, "ECSKEY1");  // cached
  EXPECT_EQ(ecs.fetches.load(), 1);
  clock_->advance(1500ms);  // 0.5 s left: due
  auto second = provider->get();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->access_key_id, "ECSKEY2");
  EXPECT_EQ(*second->expiration, k_now + 7s);  // 3.5 s + 4 s, in the fake's whole seconds
  EXPECT_EQ(ecs.fetches.load(), 2);
}

TEST_F(CredentialsTest, InvalidateForcesARefetch) {
  FakeEcs ecs(clock_, 6h);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  ASSERT_TRUE(provider->get());
  ASSERT_TRUE(provider->get());
  EXPECT_EQ(ecs.fetches.load(), 1);
  provider->invalidate();
  auto again = provider->get();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->access_key_id, "ECSKEY2");
  EXPECT_EQ(ecs.fetches.load(), 2);
}

TEST_F(CredentialsTest, AFailedEarlyRefreshKeepsTheCurrentCredentialsUntilTheyExpire) {
  FakeEcs ecs(clock_, 60s);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  ASSERT_TRUE(provider->get());
  ecs.failing = true;
  clock_->advance(50s);  // 10 s left, under the 15 s margin: a refresh is tried, and fails
  auto kept = provider->get();
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->access_key_id, "ECSKEY1");
  clock_->advance(11s);  // expired
  auto gone = provider->get();
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::remote);
  // After an invalidate() the refused credentials are not handed out again either.
  ecs.failing = false;
  ASSERT_TRUE(provider->get());
  ecs.failing = true;
  provider->invalidate();
  EXPECT_FALSE(provider->get());
}

TEST_F(CredentialsTest, ConcurrentGetsShareOneFetch) {
  FakeEcs ecs(clock_, 6h);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { ok += provider->get().has_value() ? 1 : 0; });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(ecs.fetches.load(), 1);
}

// --- Region and endpoint -----------------------------------------------------------------------------------

TEST_F(CredentialsTest, RegionIsTheFieldThenAwsRegionThenAwsDefaultRegionThenTheProfile) {
  write_text(home_file(".aws/config"), "[default]\nregion = ap-south-1\n[profile eu]\nregion = eu-north-1\n");
  auto region = [&](std::optional<std::string> field, std::optional<std::string> profile = {}) {
    auto resolved = resolve_region(field, fake_.env(), profile);
    EXPECT_TRUE(resolved) << resolved.error().message;
    return resolved ? resolved->value_or("<none>") : std::string();
  };
  EXPECT_EQ(region(std::nullopt), "ap-south-1");
  EXPECT_EQ(region(std::nullopt, "eu"), "eu-north-1");
  fake_.vars["AWS_PROFILE"] = "eu";
  EXPECT_EQ(region(std::nullopt), "eu-north-1");
  fake_.vars["AWS_DEFAULT_REGION"] = "us-west-1";
  EXPECT_EQ(region(std::nullopt), "us-west-1");
  fake_.vars["AWS_REGION"] = "us-west-2";
  EXPECT_EQ(region(std::nullopt), "us-west-2");
  EXPECT_EQ(region("sa-east-1"), "sa-east-1");
  std::filesystem::remove(home_file(".aws/config"));
  fake_.vars.erase("AWS_REGION");
  fake_.vars.erase("AWS_DEFAULT_REGION");
  EXPECT_EQ(region(std::nullopt), "<none>");
}

TEST_F(CredentialsTest, EndpointIsTheFieldThenTheS3VariableThenTheGenericOne) {
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), std::nullopt);
  fake_.vars["AWS_ENDPOINT_URL"] = "http://generic:4566";
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), "http://generic:4566");
  fake_.vars["AWS_ENDPOINT_URL_S3"] = "http://minio:9000";
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), "http://minio:9000");
  EXPECT_EQ(resolve_endpoint("https://s3.example", fake_.env()), "https://s3.example");
}

TEST(Iso8601, TheFormsTheCredentialServicesWrite) {
  const auto base = std::chrono::sys_days{std::chrono::year{2024} / 5 / 1} + 12h;
  EXPECT_EQ(parse_iso8601("2024-05-01T12:00:00Z"), base);
  EXPECT_EQ(parse_iso8601("2024-05-01T12:00:00.123Z"), base);
  EXPECT_EQ(parse_iso8601("2024-05-01T14:30:00+02:30"), base);
  EXPECT_EQ(parse_iso8601("2024-05-01T10:00:00-02:00"), base);
  for (const char* bad : {"", "2024-05-01", "2024-05-01 12:00:00Z", "2024-13-01T12:00:00Z", "2024-05-01T12:00:00",
                          "2024-05-01T12:00:00.Z", "yesterday"})
    EXPECT_FALSE(parse_iso8601(bad)) << bad;
}

// --- Secrets ----------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, NoSecretReachesALogLineOrAnErrorMessage) {
  const auto previous = log::level();
  log::set_level(log::Level::debug);
  std::vector<std::string> messages;
  const std::string logged = s3test::capture_stderr([&] {
    // A successful fetch, logged at debug level.
    FakeEcs ecs(clock_, 6h, "ECS-AUTH-SECRET");
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
    fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "ECS-AUTH-SECRET";
    auto found = chain()->get();
    EXPECT_TRUE(found);
    // An endpoint whose answer is not what is expected, but holds secrets.
    LoopbackServer odd;
    odd.server().Get("/creds", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"AccessKeyId\": \"AKIDODD\", \"SecretAccessKey\": \"ODD-SECRET\", \"Expiration\": 5}x",
                      "application/json");
    });
    odd.start();
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = odd.url("/creds");
    auto broken = chain()->get();
    EXPECT_FALSE(broken);
    if (!broken) messages.push_back(broken.error().message);
    // STS refusing a web identity token.
    fake_.vars.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    FakeSts sts(clock_, "other", "arn:aws:iam::1:role/r");
    write_text(dir_.sub("token.jwt"), "WEB-IDENTITY-SECRET");
    fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
    fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
    fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
    auto refused = chain()->get();
    EXPECT_FALSE(refused);
    if (!refused) messages.push_back(refused.error().message);
  });
  log::set_level(previous);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_THAT(logged, HasSubstr("AWS credentials from ECS container endpoint"));  // debug lines were written
  for (const char* secret : {"ECS-AUTH-SECRET", "ecs-secret-1", "ecs-token-1", "ODD-SECRET", "WEB-IDENTITY-SECRET"}) {
    EXPECT_THAT(logged, Not(HasSubstr(secret)));
    for (const auto& message : messages) EXPECT_THAT(message, Not(HasSubstr(secret)));
  }
}

}  // namespace
}  // namespace datavo::s3
