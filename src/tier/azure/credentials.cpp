#include "tier/azure/credentials.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/subprocess.hpp"

namespace datavo::azure {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* k_default_authority = "https://login.microsoftonline.com";
constexpr const char* k_default_imds = "http://169.254.169.254";
constexpr const char* k_imds_token_path = "/metadata/identity/oauth2/token";
constexpr const char* k_development_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
constexpr const char* k_development_endpoint = "http://127.0.0.1:10000/devstoreaccount1";
constexpr Milliseconds k_token_deadline{30'000};
// IMDS and the App Service endpoint are local hops: a machine without them must learn it quickly.
constexpr Milliseconds k_identity_connect_timeout{1'000};
constexpr Milliseconds k_identity_deadline{5'000};
// azure-identity gives the CLI 10 s too; it is a Python program that may refresh its own token first.
constexpr Milliseconds k_cli_timeout{10'000};
constexpr std::size_t k_max_cli_message = 300;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool valid_header_value(std::string_view text) { return text.find_first_of("\r\n") == std::string_view::npos; }

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

net::HttpClient make_identity_client() {
  TransportOptions options;
  options.connect_timeout = k_identity_connect_timeout;
  options.stall_timeout = Seconds{3};
  options.max_attempts = 3;
  options.initial_backoff = Milliseconds{100};
  options.max_backoff = Milliseconds{1'000};
  return net::HttpClient(options);
}

// One link of the chain. fetch() returns a token, nullopt when the link does not apply here (with the reason in
// *why), or an Error that ends the chain.
class Link {
 public:
  virtual ~Link() = default;
  virtual std::string name() const = 0;
  virtual Result<std::optional<AccessToken>> fetch(std::string* why) = 0;
};

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
  Result<std::optional<AccessToken>> fetch(std::string* why) override {
    if (!tenant_ || !client_id_ || !secret_) {
      *why = "$AZURE_TENANT_ID, $AZURE_CLIENT_ID and $AZURE_CLIENT_SECRET are not all set";
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
  Result<std::optional<AccessToken>> fetch(std::string* why) override {
    if (!tenant_ || !client_id_ || !token_file_) {
      *why = "$AZURE_FEDERATED_TOKEN_FILE, $AZURE_CLIENT_ID and $AZURE_TENANT_ID are not all set";
      return std::optional<AccessToken>();
    }
    const std::string what = name() + " (client " + *client_id_ + ", token file " + *token_file_ + ")";
    auto assertion = util::read_file(*token_file_);
    if (!assertion)
      return Error{ErrorCode::permission_denied, what + ": cannot read the token file: " + assertion.error().message};
    const std::string text(trim(*assertion));
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
      : env_(env), client_id_(std::move(client_id)), http_(make_identity_client()) {
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

  Result<std::optional<AccessToken>> fetch(std::string* why) override {
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
      *why = response.error().message;
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
  text = trim(text);
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

std::optional<long long> unix_seconds(const json& value) {
  if (value.is_number_integer()) return value.get<long long>();
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  long long out = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return out;
}

class AzureCliLink final : public Link {
 public:
  explicit AzureCliLink(const cloud::CredentialEnv& env) : env_(env) {}
  std::string name() const override { return "the Azure CLI"; }
  Result<std::optional<AccessToken>> fetch(std::string* why) override {
    const auto az = util::find_in_path("az", env_.get("PATH").value_or(""));
    if (!az) {
      *why = "no az in $PATH";
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
        *why = *az + " is not logged in (" + message + ")";
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

class DefaultAzureCredential final : public AzureTokenProvider {
 public:
  DefaultAzureCredential(const cloud::CredentialEnv& env, std::vector<std::unique_ptr<Link>> links)
      : env_(env), links_(std::move(links)) {}

  Result<AccessToken> get() override {
    auto token = cache_.get(
        env_.now(), [this] { return fetch(); }, describe());
    if (token && !valid_header_value(token->token))
      return Error{ErrorCode::remote, describe() + ": the access token contains a line break"};
    return token;
  }
  void invalidate() override { cache_.invalidate(); }
  std::string describe() const override {
    std::lock_guard lock(chosen_mutex_);
    return chosen_ != nullptr ? chosen_->name() : "the DefaultAzureCredential chain";
  }

 private:
  // Called under the cache's lock only, so links are never fetched from concurrently.
  Result<AccessToken> fetch() {
    Link* chosen = nullptr;
    {
      std::lock_guard lock(chosen_mutex_);
      chosen = chosen_;
    }
    if (chosen != nullptr) {
      std::string why;
      auto token = chosen->fetch(&why);
      if (!token) return std::move(token).error();
      if (!*token) return Error{ErrorCode::permission_denied, chosen->name() + " no longer gives tokens: " + why};
      return std::move(**token);
    }
    std::string tried;
    for (const auto& link : links_) {
      std::string why;
      auto token = link->fetch(&why);
      if (!token) return std::move(token).error();
      if (*token) {
        LOG_INFO("Azure credentials: " << link->name());
        std::lock_guard lock(chosen_mutex_);
        chosen_ = link.get();
        return std::move(**token);
      }
      tried += (tried.empty() ? "" : "; ") + link->name() + ": " + why;
    }
    return Error{ErrorCode::permission_denied,
                 "no Azure credentials found (no sas_token, no account key for the "
                 "account in the environment): tried " +
                     tried};
  }

  cloud::CredentialEnv env_;
  std::vector<std::unique_ptr<Link>> links_;
  cloud::TokenCache cache_;
  mutable std::mutex chosen_mutex_;
  Link* chosen_ = nullptr;  // guarded by chosen_mutex_; points into links_
};

// --- the request auth objects ---------------------------------------------------------------------------------

class SharedKeyAuth final : public net::RequestAuth {
 public:
  SharedKeyAuth(SharedKey key, cloud::CredentialEnv env) : key_(std::move(key)), env_(std::move(env)) {}
  Result<void> prepare(net::PreparedRequest& request, int) override {
    return sign_shared_key(request, key_, env_.now());
  }

 private:
  const SharedKey key_;
  const cloud::CredentialEnv env_;
};

class SasAuth final : public net::RequestAuth {
 public:
  SasAuth(std::string sas, cloud::CredentialEnv env) : sas_(std::move(sas)), env_(std::move(env)) {}
  Result<void> prepare(net::PreparedRequest& request, int) override {
    set_date_and_version(request, env_.now());
    const auto hash = request.url.find('#');
    const std::string fragment = hash == std::string::npos ? "" : request.url.substr(hash);
    std::string url = request.url.substr(0, hash);
    url += url.find('?') == std::string::npos ? "?" : (url.back() == '?' || url.back() == '&' ? "" : "&");
    request.url = url + sas_ + fragment;
    return ok();
  }

 private:
  const std::string sas_;
  const cloud::CredentialEnv env_;
};

class BearerAuth final : public net::RequestAuth {
 public:
  BearerAuth(std::shared_ptr<AzureTokenProvider> provider, cloud::CredentialEnv env)
      : provider_(std::move(provider)), env_(std::move(env)) {}
  Result<void> prepare(net::PreparedRequest& request, int) override {
    auto token = provider_->get();
    if (!token) return std::move(token).error();
    set_date_and_version(request, env_.now());
    request.headers.push_back({"Authorization", "Bearer " + token->token});
    return ok();
  }
  bool refresh_after_refusal(long status, const net::HttpHeaders& headers, std::string_view body) override {
    bool stale = status == 401;
    if (status == 403) {
      // An expired or revoked token; AuthorizationPermissionMismatch (a missing role) is not worth a new token.
      const std::string code(net::find_header(headers, "x-ms-error-code").value_or(""));
      stale = code == "AuthenticationFailed" || code == "InvalidAuthenticationInfo" ||
              body.find("<Code>AuthenticationFailed</Code>") != std::string_view::npos ||
              body.find("<Code>InvalidAuthenticationInfo</Code>") != std::string_view::npos;
    }
    if (stale) provider_->invalidate();
    return stale;
  }

 private:
  std::shared_ptr<AzureTokenProvider> provider_;
  const cloud::CredentialEnv env_;
};

struct ConnectionString {
  std::map<std::string, std::string> fields;  // lowercased names
  std::optional<std::string> get(const char* name) const {
    auto it = fields.find(name);
    if (it == fields.end() || it->second.empty()) return std::nullopt;
    return it->second;
  }
};

Result<ConnectionString> parse_connection_string(std::string_view text, const std::string& origin) {
  ConnectionString out;
  while (!text.empty()) {
    const auto semicolon = text.find(';');
    const auto part = trim(text.substr(0, semicolon));
    text = semicolon == std::string_view::npos ? std::string_view() : text.substr(semicolon + 1);
    if (part.empty()) continue;
    const auto equals = part.find('=');  // the first one: base64 keys end in '='
    if (equals == std::string_view::npos || equals == 0)
      return Error{ErrorCode::config, origin + ": a part of the connection string is not Name=value"};
    out.fields[lower(trim(part.substr(0, equals)))] = std::string(trim(part.substr(equals + 1)));
  }
  return out;
}

bool is_ip_literal(std::string_view host) {
  if (!host.empty() && host.front() == '[') return true;  // IPv6
  in_addr address{};
  return ::inet_pton(AF_INET, std::string(host).c_str(), &address) == 1;
}

std::string without_trailing_slash(std::string text) {
  while (!text.empty() && text.back() == '/') text.pop_back();
  return text;
}

}  // namespace

const char* to_string(AzureAuthMode mode) {
  switch (mode) {
    case AzureAuthMode::sas: return "sas";
    case AzureAuthMode::shared_key: return "shared_key";
    case AzureAuthMode::bearer: return "bearer";
  }
  return "bearer";
}

std::shared_ptr<AzureTokenProvider> make_default_azure_credential(const DefaultCredentialOptions& options,
                                                                  const cloud::CredentialEnv& env,
                                                                  std::shared_ptr<net::HttpClient> http) {
  std::vector<std::unique_ptr<Link>> links;
  links.push_back(std::make_unique<EnvironmentSecretLink>(env, http));
  links.push_back(std::make_unique<WorkloadIdentityLink>(env, http));
  links.push_back(std::make_unique<ManagedIdentityLink>(env, options.managed_identity_client_id));
  links.push_back(std::make_unique<AzureCliLink>(env));
  return std::make_shared<DefaultAzureCredential>(env, std::move(links));
}

Result<std::optional<StorageAccountKey>> storage_key_from_env(const cloud::CredentialEnv& env) {
  if (auto text = env.get("AZURE_STORAGE_CONNECTION_STRING")) {
    const std::string origin = "$AZURE_STORAGE_CONNECTION_STRING";
    auto parsed = parse_connection_string(*text, origin);
    if (!parsed) return std::move(parsed).error();
    StorageAccountKey key;
    key.origin = origin;
    if (lower(parsed->get("usedevelopmentstorage").value_or("")) == "true") {
      key.account = k_development_account;
      key.key_base64 = k_development_key;
      key.blob_endpoint = k_development_endpoint;
      return std::optional<StorageAccountKey>(std::move(key));
    }
    auto account = parsed->get("accountname");
    auto account_key = parsed->get("accountkey");
    if (!account || !account_key) {
      LOG_DEBUG(origin << " has no AccountName and AccountKey: no SharedKey from it");
      return std::optional<StorageAccountKey>();
    }
    key.account = *account;
    key.key_base64 = *account_key;
    if (auto endpoint = parsed->get("blobendpoint")) {
      key.blob_endpoint = without_trailing_slash(*endpoint);
    } else {
      const std::string protocol = parsed->get("defaultendpointsprotocol").value_or("https");
      const std::string suffix = parsed->get("endpointsuffix").value_or("core.windows.net");
      key.blob_endpoint = protocol + "://" + *account + ".blob." + suffix;
    }
    return std::optional<StorageAccountKey>(std::move(key));
  }
  auto account = env.get("AZURE_STORAGE_ACCOUNT");
  auto account_key = env.get("AZURE_STORAGE_KEY");
  if (account && account_key)
    return std::optional<StorageAccountKey>(
        StorageAccountKey{*account, *account_key, std::nullopt, "$AZURE_STORAGE_ACCOUNT/$AZURE_STORAGE_KEY"});
  return std::optional<StorageAccountKey>();
}

Result<std::string> account_of_url(std::string_view url) {
  auto invalid = [&](const std::string& why) {
    return Error{ErrorCode::invalid_argument, "container URL " + log::redact_url(url) + ": " + why};
  };
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return invalid("not an absolute URL");
  auto rest = url.substr(scheme + 3);
  const auto path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string_view host = authority;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else if (const auto colon = host.find(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty()) return invalid("no host");
  if (is_ip_literal(host) || lower(host) == "localhost" || host.find('.') == std::string_view::npos) {
    // Path-style (emulators, IP endpoints): the first path segment is the account.
    std::string_view path = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
    if (path.empty() || path.front() != '/') return invalid("a path-style URL needs the account as its first segment");
    path.remove_prefix(1);
    const auto account = path.substr(0, path.find_first_of("/?#"));
    if (account.empty()) return invalid("a path-style URL needs the account as its first segment");
    return std::string(account);
  }
  return lower(host.substr(0, host.find('.')));
}

Result<AzureAuth> make_azure_auth(const AzureAuthConfig& config, const cloud::CredentialEnv& env,
                                  std::shared_ptr<net::HttpClient> http) {
  auto account = account_of_url(config.container_url);
  if (!account) return std::move(account).error();
  auto env_key = storage_key_from_env(env);
  if (!env_key) return std::move(env_key).error();

  std::optional<StorageAccountKey> key;
  if (*env_key) {
    const auto& candidate = **env_key;
    const std::string url = config.container_url;
    const bool same_account = lower(candidate.account) == lower(*account);
    const bool same_endpoint =
        candidate.blob_endpoint && (url == *candidate.blob_endpoint || url.starts_with(*candidate.blob_endpoint + "/"));
    if (same_account || same_endpoint)
      key = candidate;
    else
      LOG_DEBUG("Azure: the key in " << candidate.origin << " is for account " << candidate.account << ", not "
                                     << *account << ": not used");
  }

  if (!config.sas_token.empty()) {
    std::string sas(trim(config.sas_token));
    if (sas.starts_with("?")) sas.erase(0, 1);
    if (sas.empty() || sas.find_first_of(" \t\r\n#") != std::string::npos)
      return Error{ErrorCode::config, "sas_token is not a query string (it is empty or holds spaces or '#')"};
    if (sas.find("sig=") == std::string::npos)
      return Error{ErrorCode::config, "sas_token has no sig= parameter: it is not a SAS"};
    if (key)
      LOG_INFO("Azure: the tier's sas_token takes precedence over the key for account " << key->account << " in "
                                                                                        << key->origin);
    return AzureAuth{std::make_shared<SasAuth>(std::move(sas), env), AzureAuthMode::sas,
                     "SAS for " + log::redact_url(config.container_url)};
  }
  if (key) {
    auto shared = make_shared_key(key->account, key->key_base64, key->origin);
    if (!shared) return std::move(shared).error();
    std::string description = "SharedKey for account " + key->account + " (" + key->origin + ")";
    return AzureAuth{std::make_shared<SharedKeyAuth>(std::move(*shared), env), AzureAuthMode::shared_key,
                     std::move(description)};
  }
  auto provider = make_default_azure_credential({config.managed_identity_client_id}, env, std::move(http));
  return AzureAuth{std::make_shared<BearerAuth>(std::move(provider), env), AzureAuthMode::bearer,
                   "bearer tokens for account " + *account + " (DefaultAzureCredential)"};
}

}  // namespace datavo::azure
