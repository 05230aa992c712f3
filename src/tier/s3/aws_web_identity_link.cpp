// The web identity link of the AWS chain: a token file and a role, exchanged at STS (AssumeRoleWithWebIdentity,
// unsigned: the token is the credential) for temporary credentials.
#include "tier/cloud/xml.hpp"
#include "tier/s3/aws_config.hpp"
#include "tier/s3/aws_links.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/rfc3339.hpp"
#include "util/text.hpp"

namespace datavo::s3 {
namespace {

using Found = Result<std::optional<AwsCredentials>>;

// STS is a real service on the Internet: normal timeouts, a bounded whole.
constexpr Milliseconds k_sts_deadline{30'000};
constexpr int k_sts_attempts = 3;
// A projected token is a JWT of a few KiB; the bound keeps a wrong path harmless.
constexpr std::size_t k_max_web_identity_token_file = 1024 * 1024;

TransportOptions sts_options() {
  TransportOptions options;
  options.max_attempts = k_sts_attempts;
  return options;
}

struct WebIdentity {
  std::string token_file;
  std::string role_arn;
  std::optional<std::string> session_name;
  std::string origin;  // "AWS_WEB_IDENTITY_TOKEN_FILE" or "profile <name>"
};

// The credentials of an AssumeRoleWithWebIdentity answer.
Found credentials_of_answer(std::string_view body, const std::string& source, const std::string& endpoint) {
  auto fields = cloud::xml_child_texts(body, "Credentials");
  AwsCredentials out;
  out.source = source;
  if (fields) {
    out.access_key_id = util::trim((*fields)["AccessKeyId"]);
    out.secret_access_key = util::trim((*fields)["SecretAccessKey"]);
    out.session_token = util::trim((*fields)["SessionToken"]);
    out.expiration = util::parse_rfc3339(util::trim((*fields)["Expiration"]));
  }
  if (out.access_key_id.empty() || out.secret_access_key.empty() || out.session_token.empty() || !out.expiration)
    return Error{ErrorCode::remote,
                 source + ": the STS answer from " + log::redact_url(endpoint) + " has no complete <Credentials>"};
  return std::optional<AwsCredentials>(std::move(out));
}

class WebIdentityLink final : public AwsLink {
 public:
  WebIdentityLink(const cloud::CredentialEnv& env, std::optional<std::string> profile)
      : env_(env), profile_(std::move(profile)), http_(sts_options(), env.clock) {}
  std::string name() const override { return "web identity"; }

  Found fetch(std::string& why) override {
    auto profile = load_profile(env_, profile_name(env_, profile_));
    if (!profile) return std::move(profile).error();
    auto identity = identity_of(*profile);
    if (!identity) {
      why =
          "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are not both set, nor web_identity_token_file and "
          "role_arn in profile " +
          profile->name;
      return std::optional<AwsCredentials>();
    }
    const std::string source = "web identity (" + identity->origin + ", role " + identity->role_arn + ")";
    auto token = util::read_file(identity->token_file, k_max_web_identity_token_file);
    if (!token) return Error{token.error().code, source + ": the web identity token file: " + token.error().message};
    const std::string jwt(util::trim(*token));
    if (jwt.empty()) return Error{ErrorCode::config, source + ": the token file " + identity->token_file + " is empty"};
    auto region = resolve_region(std::nullopt, env_, profile->name);
    if (!region) return std::move(region).error();
    return assume_role(*identity, jwt, sts_endpoint(env_, *region), source);
  }

 private:
  std::optional<WebIdentity> identity_of(const AwsProfile& profile) const {
    auto token_file = env_.get("AWS_WEB_IDENTITY_TOKEN_FILE");
    auto role_arn = env_.get("AWS_ROLE_ARN");
    if (token_file && role_arn)
      return WebIdentity{*token_file, *role_arn, env_.get("AWS_ROLE_SESSION_NAME"), "AWS_WEB_IDENTITY_TOKEN_FILE"};
    token_file = profile.get("web_identity_token_file");
    role_arn = profile.get("role_arn");
    if (token_file && role_arn)
      return WebIdentity{env_.expand_home(*token_file), *role_arn, profile.get("role_session_name"),
                         "profile " + profile.name};
    return std::nullopt;
  }

  Found assume_role(const WebIdentity& identity, const std::string& jwt, const std::string& endpoint,
                    const std::string& source) {
    std::string session_name = identity.session_name.value_or("");
    if (session_name.empty()) {
      const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(env_.now().time_since_epoch()).count();
      session_name = "datavo-" + std::to_string(millis);
    }
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = endpoint;
    request.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                       {"Accept", "application/xml"}};
    // In the body, not the URL: the token is a secret and URLs reach logs (redacted, but still).
    request.body =
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + util::percent_encode(identity.role_arn) +
        "&RoleSessionName=" + util::percent_encode(session_name) + "&WebIdentityToken=" + util::percent_encode(jwt);
    request.idempotent = true;  // assuming a role twice does no harm
    request.deadline = k_sts_deadline;
    auto response = http_.perform(request);
    if (!response)
      return Error{response.error().code,
                   source + ": STS AssumeRoleWithWebIdentity failed: " + response.error().message};
    return credentials_of_answer(response->body, source, endpoint);
  }

  const cloud::CredentialEnv env_;
  const std::optional<std::string> profile_;
  net::HttpClient http_;
};

}  // namespace

std::unique_ptr<AwsLink> make_web_identity_link(const cloud::CredentialEnv& env, std::optional<std::string> profile) {
  return std::make_unique<WebIdentityLink>(env, std::move(profile));
}

std::string sts_endpoint(const cloud::CredentialEnv& env, const std::optional<std::string>& region) {
  if (auto endpoint = env.get("AWS_ENDPOINT_URL_STS")) return *endpoint;
  if (auto endpoint = env.get("AWS_ENDPOINT_URL")) return *endpoint;
  if (region && !region->empty()) return "https://sts." + *region + ".amazonaws.com";
  return "https://sts.amazonaws.com";
}

}  // namespace datavo::s3
