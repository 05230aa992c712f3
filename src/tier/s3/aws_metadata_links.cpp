// The links of the AWS chain that ask a metadata service on the machine's own network: the ECS (and EKS Pod
// Identity) container endpoint and EC2's instance metadata service, IMDSv2 only. Both are absent on most machines
// and answer in milliseconds where they exist: short timeouts keep an absent one from stalling a tier for long.
#include <arpa/inet.h>

#include <nlohmann/json.hpp>

#include "tier/s3/aws_links.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/text.hpp"

namespace datavo::s3 {
namespace {

using Found = Result<std::optional<AwsCredentials>>;

constexpr Milliseconds k_metadata_connect_timeout{1000};
constexpr Milliseconds k_imds_probe_deadline{2000};
constexpr Milliseconds k_metadata_deadline{5000};
constexpr Seconds k_metadata_stall{2};
constexpr int k_metadata_attempts = 2;
// IMDSv2 session tokens may live up to 6 h; one is fetched per credential fetch, so any value works.
constexpr const char* k_imds_token_ttl = "21600";
constexpr const char* k_imds_default_endpoint = "http://169.254.169.254";
// An authorization token file holds a token of a few KiB.
constexpr std::size_t k_max_authorization_token_file = 64 * 1024;

TransportOptions metadata_options() {
  TransportOptions options;
  options.connect_timeout = k_metadata_connect_timeout;
  options.stall_timeout = k_metadata_stall;
  options.max_attempts = k_metadata_attempts;
  options.initial_backoff = Milliseconds{100};
  options.max_backoff = Milliseconds{500};
  return options;
}

bool is_loopback_or_container_host(const std::string& host) {
  if (host == "localhost" || host == "[::1]" || host == "169.254.170.2" || host == "169.254.170.23" ||
      host == "[fd00:ec2::23]")
    return true;
  // 127.0.0.0/8, as an address: "127.0.0.1.example.com" is a name anyone may own.
  struct in_addr address {};
  return ::inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

// The host of an http(s) URL, lowercased, brackets kept; empty when there is none.
std::string url_host(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  if (!rest.empty() && rest.front() == '[') return util::to_lower(rest.substr(0, rest.find(']') + 1));
  return util::to_lower(rest.substr(0, rest.find(':')));
}

class ContainerLink final : public AwsLink {
 public:
  ContainerLink(const cloud::CredentialEnv& env, std::string container_host)
      : env_(env), container_host_(std::move(container_host)), http_(metadata_options(), env.clock) {}
  std::string name() const override { return "ECS container"; }

  Found fetch(std::string& why) override {
    auto url = endpoint(why);
    if (!url) return std::move(url).error();
    if (url->empty()) return std::optional<AwsCredentials>();
    const std::string source = "ECS container endpoint " + log::redact_url(*url);
    net::HttpRequest request;
    request.url = *url;
    request.headers = {{"Accept", "application/json"}};
    auto token = authorization_token(source);
    if (!token) return std::move(token).error();
    if (*token) request.headers.push_back({"Authorization", **token});
    request.deadline = k_metadata_deadline;
    auto response = http_.perform(request);
    // The transport's message names the URL already.
    if (!response) return Error{response.error().code, "ECS container endpoint: " + response.error().message};
    auto found = credentials_from_json(response->body, "Token", source);
    if (!found) return std::move(found).error();
    return std::optional<AwsCredentials>(std::move(*found));
  }

 private:
  // The endpoint's URL; "" (with `why`) when none is configured.
  Result<std::string> endpoint(std::string& why) const {
    if (auto relative = env_.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"))
      return container_host_ + (relative->front() == '/' ? "" : "/") + *relative;
    auto full = env_.get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!full) {
      why = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set";
      return std::string();
    }
    // The SDKs' rule: plain http only to this machine or the ECS / EKS agent, so that a token (and the
    // credentials) never cross a network in the clear.
    const std::string scheme = util::to_lower(full->substr(0, full->find("://")));
    if (scheme != "https" && !(scheme == "http" && is_loopback_or_container_host(url_host(*full))))
      return Error{ErrorCode::config, "AWS_CONTAINER_CREDENTIALS_FULL_URI " + log::redact_url(*full) +
                                          " must be https, or http to a loopback address or the ECS/EKS agent"};
    return *full;
  }

  // The Authorization header's value, when one is configured. The file is read for every fetch: EKS Pod Identity
  // rotates it.
  Result<std::optional<std::string>> authorization_token(const std::string& source) const {
    std::optional<std::string> token;
    if (auto token_file = env_.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
      auto text = util::read_file(*token_file, k_max_authorization_token_file);
      if (!text)
        return Error{text.error().code, source + ": AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: " + text.error().message};
      token = std::string(util::trim(*text));
    } else {
      token = env_.get("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    }
    if (token && token->find_first_of("\r\n") != std::string::npos)
      return Error{ErrorCode::config, source + ": the authorization token contains a line break"};
    return token;
  }

  const cloud::CredentialEnv env_;
  const std::string container_host_;
  net::HttpClient http_;
};

class ImdsLink final : public AwsLink {
 public:
  explicit ImdsLink(const cloud::CredentialEnv& env) : env_(env), http_(metadata_options(), env.clock) {}
  std::string name() const override { return "EC2 instance metadata"; }

  Found fetch(std::string& why) override {
    if (auto disabled = env_.get("AWS_EC2_METADATA_DISABLED"); disabled && util::iequals(*disabled, "true")) {
      why = "disabled by AWS_EC2_METADATA_DISABLED";
      return std::optional<AwsCredentials>();
    }
    endpoint_ = env_.get("AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or(k_imds_default_endpoint);
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
    const std::string source = "EC2 instance metadata " + log::redact_url(endpoint_);
    net::HttpRequest token_request;
    token_request.method = net::HttpMethod::put;
    token_request.url = endpoint_ + "/latest/api/token";
    token_request.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", k_imds_token_ttl}};
    token_request.deadline = k_imds_probe_deadline;
    auto token = http_.perform(token_request);
    if (!token) {
      // The usual answer off EC2: nobody there. (IMDSv1 without a token is not used: IMDSv2 is on every
      // instance type, and v1 is what SSRF attacks reach.)
      why = "no IMDSv2 session token from " + log::redact_url(endpoint_) + " (" + token.error().message + ")";
      return std::optional<AwsCredentials>();
    }
    const net::HttpHeaders with_token = {{"X-aws-ec2-metadata-token", std::string(util::trim(token->body))}};
    auto role = role_name(with_token);
    if (!role) return std::move(role).error();
    if (role->empty()) {
      why = log::redact_url(endpoint_) + ": no IAM role is attached to this instance";
      return std::optional<AwsCredentials>();
    }
    return role_credentials(*role, with_token, source);
  }

 private:
  // The instance's role; "" when none is attached.
  Result<std::string> role_name(const net::HttpHeaders& with_token) {
    net::HttpRequest request;
    request.url = endpoint_ + "/latest/meta-data/iam/security-credentials/";
    request.headers = with_token;
    request.accepted_statuses = {404};
    request.deadline = k_metadata_deadline;
    auto roles = http_.perform(request);
    if (!roles) return Error{roles.error().code, "EC2 instance metadata: " + roles.error().message};
    if (roles->status == 404) return std::string();
    return std::string(util::trim(std::string_view(roles->body).substr(0, roles->body.find('\n'))));
  }

  Found role_credentials(const std::string& role, const net::HttpHeaders& with_token, const std::string& source) {
    net::HttpRequest request;
    request.url = endpoint_ + "/latest/meta-data/iam/security-credentials/" + util::percent_encode(role);
    request.headers = with_token;
    request.deadline = k_metadata_deadline;
    auto answer = http_.perform(request);
    if (!answer) return Error{answer.error().code, "EC2 instance metadata: " + answer.error().message};
    const auto parsed = nlohmann::json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("Code") && parsed["Code"].is_string() &&
        parsed["Code"].get<std::string>() != "Success")
      return Error{ErrorCode::remote, source + ": role " + role + ": Code " + parsed["Code"].get<std::string>()};
    auto found = credentials_from_json(answer->body, "Token", source + " (role " + role + ")");
    if (!found) return std::move(found).error();
    return std::optional<AwsCredentials>(std::move(*found));
  }

  const cloud::CredentialEnv env_;
  std::string endpoint_;  // of the fetch in progress
  net::HttpClient http_;
};

}  // namespace

std::unique_ptr<AwsLink> make_container_link(const cloud::CredentialEnv& env, std::string container_host) {
  return std::make_unique<ContainerLink>(env, std::move(container_host));
}

std::unique_ptr<AwsLink> make_imds_link(const cloud::CredentialEnv& env) { return std::make_unique<ImdsLink>(env); }

}  // namespace datavo::s3
