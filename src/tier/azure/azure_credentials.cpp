#include "tier/azure/azure_credentials.hpp"

#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "tier/cloud/credential_chain.hpp"
#include "tier/cloud/oauth.hpp"
#include "util/decimal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace datavo::azure {
namespace {

using cloud::AccessToken;

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* k_default_authority = "https://login.microsoftonline.com";
constexpr const char* k_default_imds = "http://169.254.169.254";
constexpr const char* k_imds_token_path = "/metadata/identity/oauth2/token";
constexpr Milliseconds k_token_deadline{30'000};
// IMDS and the App Service endpoint are local hops: a machine without them must learn it quickly.
constexpr Milliseconds k_identity_connect_timeout{1'000};
constexpr Milliseconds k_identity_deadline{5'000};
// azure-identity gives the CLI 10 s too; it is a Python program that may refresh its own token first.
constexpr Milliseconds k_cli_timeout{10'000};
constexpr std::size_t k_max_cli_message = 300;

// A tenant id goes into a URL path: only what tenant ids and domain names are made of.
bool valid_tenant(std::string_view tenant) {
  if (tenant.empty() || !std::isalnum(static_cast<unsigned char>(tenant.front()))) return false;
  for (char c : tenant)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  return true;
}

std::string authority_host(const cloud::CredentialEnv& env) {
  std::string host = env.get("AZURE_AUTHORITY_HOST").value_or(k_default_authority);
  if (host.find("://") == std::string::npos) host = "https://" + host;
  while (!host.empty() && host.back() == '/') host.pop_back();
  return host;
}

TransportOptions identity_options() {
  TransportOptions options;
  options.connect_timeout = k_identity_connect_timeout;
  options.stall_timeout = Seconds{3};
  options.max_attempts = 3;
  options.initial_backoff = Milliseconds{100};
  options.max_backoff = Milliseconds{1'000};
  return options;
}

using Link = cloud::CredentialLink<AccessToken>;

// The client-credentials grant of the Microsoft identity platform (v2 endpoint), with a secret or an assertion.
Result<AccessToken> client_credentials(net::HttpClient& http, const cloud::CredentialEnv& env,
                                       const std::string& tenant, const std::string& client_id,
                                       std::vector<std::pair<std::string, std::string>> credential,
                                       const std::string& what) {
  if (!valid_tenant(tenant))
    return Error{ErrorCode::config, what + ": $AZURE_TENANT_ID is not a tenant id (letters, digits, '-', '.')"};
  std::vector<std::pair<std::string, std::string>> fields = {{"grant_type", "client_credentials"},
                                                             {"client_id", client_id},
                                                             {"scope", std::string(k_storage_resource) + ".default"}};
  for (auto& field : credential) fields.push_back(std::move(field));
  net::HttpRequest request;
  request.method = net::HttpMethod::post;
  request.url = authority_host(env) + "/" + tenant + "/oauth2/v2.0/token";
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}};
  request.body = cloud::form_encode(fields);
  request.idempotent = true;  // a token request changes nothing: safe to repeat after a 5xx
  request.deadline = k_token_deadline;
  LOG_DEBUG(what << ": client-credentials grant at " << log::redact_url(request.url));
  const auto now = env.now();
  auto response = http.perform(request);
  if (!response) {
    // 400 invalid_client / invalid_grant (AADSTS...): the endpoint refused the credential itself.
    const ErrorCode code =
        response.error().code == ErrorCode::invalid_argument ? ErrorCode::permission_denied : response.error().code;
    return Error{code, what + ": " + response.error().message};
  }
  return cloud::parse_token_response(response->body, now, what);
}

class EnvironmentSecretLink final : public Link {
 public:
  EnvironmentSecretLink(const cloud::CredentialEnv& env, std::shared_ptr<net::HttpClient> http)
      : env_(env),
        http_(std::move(http)),
        tenant_(env.get("AZURE_TENANT_ID")),
        client_id_(env.get("AZURE_CLIENT_ID")),
        secret_(env.get("AZURE_CLIENT_SECRET")) {}
  std::string name() const override { return "environment client secret"; }
  Result<std::optional<AccessToken>> fetch(std::string& why) override {
    if (!tenant_ || !client_id_ || !secret_) {
      why = "$AZURE_TENANT_ID, $AZURE_CLIENT_ID and $AZURE_CLIENT_SECRET are not all set";
      return std::optional<AccessToken>();
    }
    auto token = client_credentials(*http_, env_, *tenant_, *client_id_, {{"client_secret", *secret_}},
                                    name() + " (client " + *client_id_ + ")");
    if (!token) return std::move(token).error();
    return std::optional<AccessToken>(std::move(*token));
  }

 private:
  cloud::CredentialEnv env_;
  std::shared_ptr<net::HttpClient> http_;
  std::optional<std::string> tenant_, client_id_, secret_;
};

class WorkloadIdentityLink final : public Link {
 public:
  WorkloadIdentityLink(const cloud::CredentialEnv& env, std::shared_ptr<net::HttpClient> http)
      : env_(env),
        http_(std::move(http)),
        tenant_(env.get("AZURE_TENANT_ID")),
        client_id_(env.get("AZURE_CLIENT_ID")),
        token_file_(env.get("AZURE_FEDERATED_TOKEN_FILE")) {}
  std::string name() const override { return "workload identity"; }
  Result<std::optional<AccessToken>> fetch(std::string& why) override {
    if (!tenant_ || !client_id_ || !token_file_) {
      why = "$AZURE_FEDERATED_TOKEN_FILE, $AZURE_CLIENT_ID and $AZURE_TENANT_ID are not all set";
      return std::optional<AccessToken>();
    }
    const std::string what = name() + " (client " + *client_id_ + ", token file " + *token_file_ + ")";
    auto assertion = util::read_file(*token_file_);
    if (!assertion)
      return Error{ErrorCode::permission_denied, what + ": cannot read the token file: " + assertion.error().message};
    const std::string text(util::trim(*assertion));
    if (text.empty()) return Error{ErrorCode::permission_denied, what + ": the token file is empty"};
    auto token =
        client_credentials(*http_, env_, *tenant_, *client_id_,
                           {{"client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
                            {"client_assertion", text}},
                           what);
    if (!token) return std::move(token).error();
    return std::optional<AccessToken>(std::move(*token));
  }

 private:
  cloud::CredentialEnv env_;
  std::shared_ptr<net::HttpClient> http_;
  std::optional<std::string> tenant_, client_id_, token_file_;
};

class ManagedIdentityLink final : public Link {
 public:
  ManagedIdentityLink(const cloud::CredentialEnv& env, std::string client_id)
      : env_(env), client_id_(std::move(client_id)), http_(identity_options(), env.clock) {
    identity_endpoint_ = env.get("IDENTITY_ENDPOINT");
    identity_header_ = env.get("IDENTITY_HEADER");
    imds_ = env.get("AZURE_POD_IDENTITY_AUTHORITY_HOST").value_or(k_default_imds);
    while (!imds_.empty() && imds_.back() == '/') imds_.pop_back();
  }

  std::string name() const override {
    std::string out = app_service()
                          ? "managed identity (App Service endpoint " + log::redact_url(*identity_endpoint_) + ")"
                          : "managed identity (IMDS at " + imds_ + ")";
    if (!client_id_.empty()) out += " for client " + client_id_;
    return out;
  }

  Result<std::optional<AccessToken>> fetch(std::string& why) override {
    net::HttpRequest request;
    std::string query;
    if (app_service()) {
      query = "api-version=2019-08-01&resource=" + util::percent_encode(k_storage_resource);
      request.headers = {{"X-IDENTITY-HEADER", *identity_header_}};
      request.url = *identity_endpoint_ + (identity_endpoint_->find('?') == std::string::npos ? "?" : "&");
    } else {
      query = "api-version=2018-02-01&resource=" + util::percent_encode(k_storage_resource);
      request.headers = {{"Metadata", "true"}};
      request.url = imds_ + k_imds_token_path + "?";
    }
    if (!client_id_.empty()) query += "&client_id=" + util::percent_encode(client_id_);
    request.url += query;
    request.headers.push_back({"Accept", "application/json"});
    request.deadline = k_identity_deadline;
    const auto now = env_.now();
    auto response = http_.perform(request);
    if (!response) {
      // App Service's endpoint is configured explicitly: its failure is an error. IMDS may simply not be there
      // (not an Azure VM) or have no such identity (400): the chain goes on.
      if (app_service()) return Error{response.error().code, name() + ": " + response.error().message};
      why = response.error().message;
      return std::optional<AccessToken>();
    }
    auto token = cloud::parse_token_response(response->body, now, name());
    if (!token) return std::move(token).error();
    return std::optional<AccessToken>(std::move(*token));
  }

 private:
  bool app_service() const { return identity_endpoint_.has_value() && identity_header_.has_value(); }

  cloud::CredentialEnv env_;
  std::string client_id_;
  std::optional<std::string> identity_endpoint_, identity_header_;
  std::string imds_;
  net::HttpClient http_;
};

// The first line of `text`, bounded: for messages quoting the CLI's stderr (which holds no token).
std::string first_line(std::string_view text) {
  text = util::trim(text);
  text = text.substr(0, text.find('\n'));
  if (text.size() > k_max_cli_message) return std::string(text.substr(0, k_max_cli_message)) + "...";
  return std::string(text);
}

// "2024-05-01 12:00:00.123456", the local time that older CLIs give in expiresOn.
std::optional<cloud::WallClock::time_point> parse_cli_local_time(const std::string& text) {
  std::tm tm{};
  if (::strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm) == nullptr) return std::nullopt;
  tm.tm_isdst = -1;
  const std::time_t seconds = std::mktime(&tm);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return cloud::WallClock::from_time_t(seconds);
}

std::optional<std::uint64_t> unix_seconds(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (!value.is_string()) return std::nullopt;
  return util::parse_decimal(value.get_ref<const std::string&>());
}

class AzureCliLink final : public Link {
 public:
  explicit AzureCliLink(const cloud::CredentialEnv& env) : env_(env) {}
  std::string name() const override { return "the Azure CLI"; }
  Result<std::optional<AccessToken>> fetch(std::string& why) override {
    const auto az = util::find_in_path("az", env_.get("PATH").value_or(""));
    if (!az) {
      why = "no az in $PATH";
      return std::optional<AccessToken>();
    }
    const std::string what = name() + " (" + *az + ")";
    LOG_DEBUG(what << ": az account get-access-token --resource " << k_storage_resource);
    util::RunOptions options;
    options.timeout = k_cli_timeout;
    auto run = util::run_program(
        *az, {"az", "account", "get-access-token", "--resource", k_storage_resource, "-o", "json"}, options);
    if (!run) return Error{run.error().code, what + ": " + run.error().message};
    if (run->exit_code != 0) {
      const std::string message = first_line(run->err);
      if (message.find("az login") != std::string::npos) {
        why = *az + " is not logged in (" + message + ")";
        return std::optional<AccessToken>();
      }
      return Error{ErrorCode::permission_denied,
                   what + ": exit status " + std::to_string(run->exit_code) + (message.empty() ? "" : ": " + message)};
    }
    const auto body = json::parse(run->out, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("accessToken") || !body["accessToken"].is_string())
      return Error{ErrorCode::remote, what + ": the output is not JSON with an accessToken"};
    AccessToken token;
    token.token = body["accessToken"].get<std::string>();
    if (const auto on = body.find("expires_on"); on != body.end()) {
      // CLI 2.54+: Unix seconds.
      auto seconds = unix_seconds(*on);
      if (!seconds) return Error{ErrorCode::remote, what + ": expires_on is not a number"};
      token.expires_at = cloud::WallClock::time_point(std::chrono::seconds(*seconds));
    } else if (const auto local = body.find("expiresOn"); local != body.end() && local->is_string()) {
      auto parsed = parse_cli_local_time(local->get<std::string>());
      if (!parsed) return Error{ErrorCode::remote, what + ": expiresOn is not a time"};
      token.expires_at = *parsed;
    } else {
      return Error{ErrorCode::remote, what + ": the output has neither expires_on nor expiresOn"};
    }
    return std::optional<AccessToken>(std::move(token));
  }

 private:
  cloud::CredentialEnv env_;
};

}  // namespace

std::shared_ptr<cloud::TokenProvider> make_default_azure_credential(const DefaultCredentialOptions& options,
                                                                    const cloud::CredentialEnv& env,
                                                                    std::shared_ptr<net::HttpClient> http) {
  std::vector<std::unique_ptr<Link>> links;
  links.push_back(std::make_unique<EnvironmentSecretLink>(env, http));
  links.push_back(std::make_unique<WorkloadIdentityLink>(env, http));
  links.push_back(std::make_unique<ManagedIdentityLink>(env, options.managed_identity_client_id));
  links.push_back(std::make_unique<AzureCliLink>(env));
  return std::make_shared<cloud::ChainProvider<AccessToken>>(
      env, "the DefaultAzureCredential chain", std::move(links),
      "no Azure credentials found (no sas_token, no account key for the account in the environment)");
}

}  // namespace datavo::azure
