#include "tier/gcs/google_credentials.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tier/cloud/oauth.hpp"
#include "tier/gcs/jwt.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/rfc3339.hpp"
#include "util/text.hpp"

namespace datavo::gcs {
namespace {

using cloud::AccessToken;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* k_default_token_uri = "https://oauth2.googleapis.com/token";
constexpr const char* k_cloud_platform_scope = "https://www.googleapis.com/auth/cloud-platform";
constexpr const char* k_default_metadata_host = "169.254.169.254";
constexpr const char* k_metadata_token_path = "/computeMetadata/v1/instance/service-accounts/default/token";
constexpr const char* k_adc_file_name = "application_default_credentials.json";
// A self-signed JWT may live at most an hour (Google's limit); the token it buys lives as long.
constexpr std::chrono::seconds k_jwt_lifetime = 1h;
// Token endpoints are remote services: generous, but bounded, so that a hung endpoint cannot park a tier.
constexpr Milliseconds k_token_deadline{30'000};
// The metadata server is a link-local hop away when it exists at all: a machine that is not on GCE must learn that
// quickly (Google's libraries also give it a few seconds).
constexpr Milliseconds k_metadata_connect_timeout{1'000};
constexpr Milliseconds k_metadata_deadline{3'000};

Error config_error(const std::string& file, const std::string& message) {
  return Error{ErrorCode::config, file + ": " + message};
}

// The string field `name` of `object`, or nullopt when absent, not a string or empty.
std::optional<std::string> string_field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return std::nullopt;
  return it->get<std::string>();
}

Result<std::string> required_field(const json& object, const char* name, const std::string& file,
                                   const std::string& type) {
  auto value = string_field(object, name);
  if (!value) return config_error(file, "a \"" + type + "\" credential needs the string field \"" + name + "\"");
  return *value;
}

bool valid_header_value(std::string_view text) { return text.find_first_of("\r\n") == std::string_view::npos; }

// A POST of an application/x-www-form-urlencoded body to a token endpoint, and its OAuth token response.
Result<AccessToken> exchange_form(net::HttpClient& http, const std::string& url,
                                  const std::vector<std::pair<std::string, std::string>>& fields, std::string_view what,
                                  cloud::WallClock::time_point now, net::HttpHeaders extra_headers = {}) {
  net::HttpRequest request;
  request.method = net::HttpMethod::post;
  request.url = url;
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}};
  for (auto& header : extra_headers) request.headers.push_back(std::move(header));
  request.body = cloud::form_encode(fields);
  request.idempotent = true;  // a token request changes nothing on the server: safe to repeat after a 5xx
  request.deadline = k_token_deadline;
  auto response = http.perform(request);
  if (!response) {
    // 400 invalid_grant, 401 invalid_client: the endpoint refused the credential itself.
    const ErrorCode code =
        response.error().code == ErrorCode::invalid_argument ? ErrorCode::permission_denied : response.error().code;
    return Error{code, std::string(what) + ": " + response.error().message};
  }
  return cloud::parse_token_response(response->body, now, what);
}

// The part every provider shares: the cache in front of fetch().
using CachingProvider = cloud::CachingProvider<AccessToken>;

class ServiceAccountProvider final : public CachingProvider {
 public:
  ServiceAccountProvider(cloud::CredentialEnv env, std::shared_ptr<net::HttpClient> http, std::string file,
                         std::string client_email, std::string private_key, std::optional<std::string> key_id,
                         std::string token_uri)
      : CachingProvider(std::move(env)),
        http_(std::move(http)),
        file_(std::move(file)),
        client_email_(std::move(client_email)),
        private_key_(std::move(private_key)),
        key_id_(std::move(key_id)),
        token_uri_(std::move(token_uri)) {}

  std::string describe() const override { return "service account key file " + file_ + " (" + client_email_ + ")"; }

 protected:
  Result<AccessToken> fetch() override {
    const auto now = env_.now();
    const auto iat = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    json header = {{"alg", "RS256"}, {"typ", "JWT"}};
    if (key_id_) header["kid"] = *key_id_;
    const json claims = {{"iss", client_email_},
                         {"scope", k_storage_scope},
                         {"aud", token_uri_},
                         {"iat", iat},
                         {"exp", iat + k_jwt_lifetime.count()}};
    auto jwt = sign_jwt_rs256(header.dump(), claims.dump(), private_key_);
    if (!jwt) return Error{jwt.error().code, describe() + ": " + jwt.error().message};
    LOG_DEBUG(describe() << ": exchanging a signed JWT at " << log::redact_url(token_uri_));
    return exchange_form(*http_, token_uri_,
                         {{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"}, {"assertion", *jwt}},
                         describe(), now);
  }

 private:
  std::shared_ptr<net::HttpClient> http_;
  std::string file_, client_email_, private_key_;
  std::optional<std::string> key_id_;
  std::string token_uri_;
};

class AuthorizedUserProvider final : public CachingProvider {
 public:
  AuthorizedUserProvider(cloud::CredentialEnv env, std::shared_ptr<net::HttpClient> http, std::string file,
                         std::string client_id, std::string client_secret, std::string refresh_token,
                         std::string token_uri)
      : CachingProvider(std::move(env)),
        http_(std::move(http)),
        file_(std::move(file)),
        client_id_(std::move(client_id)),
        client_secret_(std::move(client_secret)),
        refresh_token_(std::move(refresh_token)),
        token_uri_(std::move(token_uri)) {}

  std::string describe() const override { return "authorized user file " + file_ + " (client " + client_id_ + ")"; }

 protected:
  Result<AccessToken> fetch() override {
    LOG_DEBUG(describe() << ": refresh-token grant at " << log::redact_url(token_uri_));
    return exchange_form(*http_, token_uri_,
                         {{"grant_type", "refresh_token"},
                          {"client_id", client_id_},
                          {"client_secret", client_secret_},
                          {"refresh_token", refresh_token_}},
                         describe(), env_.now());
  }

 private:
  std::shared_ptr<net::HttpClient> http_;
  std::string file_, client_id_, client_secret_, refresh_token_, token_uri_;
};

struct ExternalAccountConfig {
  std::string file;
  std::string audience;
  std::string subject_token_type;
  std::string token_url;
  std::string source_file;
  std::optional<std::string> json_field;  // format "json": the field holding the subject token
  std::optional<std::string> impersonation_url;
};

class ExternalAccountProvider final : public CachingProvider {
 public:
  ExternalAccountProvider(cloud::CredentialEnv env, std::shared_ptr<net::HttpClient> http, ExternalAccountConfig config)
      : CachingProvider(std::move(env)), http_(std::move(http)), config_(std::move(config)) {}

  std::string describe() const override {
    return "external account file " + config_.file + " (subject token from " + config_.source_file + ")";
  }

 protected:
  Result<AccessToken> fetch() override {
    auto subject_token = read_subject_token();
    if (!subject_token) return std::move(subject_token).error();
    const auto now = env_.now();
    // With impersonation the federated token only has to call the IAM Credentials API (Google's libraries ask
    // for cloud-platform there); the storage scope is requested for the impersonated token.
    const std::string sts_scope = config_.impersonation_url ? k_cloud_platform_scope : k_storage_scope;
    LOG_DEBUG(describe() << ": token exchange at " << log::redact_url(config_.token_url));
    auto federated = exchange_form(*http_, config_.token_url,
                                   {{"grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"},
                                    {"audience", config_.audience},
                                    {"scope", sts_scope},
                                    {"requested_token_type", "urn:ietf:params:oauth:token-type:access_token"},
                                    {"subject_token_type", config_.subject_token_type},
                                    {"subject_token", *subject_token}},
                                   describe() + ": STS token exchange", now);
    if (!federated || !config_.impersonation_url) return federated;
    return impersonate(federated->token);
  }

 private:
  Result<std::string> read_subject_token() const {
    auto text = util::read_file(config_.source_file);
    if (!text)
      return Error{ErrorCode::permission_denied,
                   describe() + ": cannot read the subject token file: " + text.error().message};
    if (!config_.json_field) {
      std::string token(util::trim_right(*text));
      if (token.empty()) return Error{ErrorCode::permission_denied, describe() + ": the subject token file is empty"};
      return token;
    }
    const auto parsed = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object())
      return Error{ErrorCode::permission_denied, describe() + ": the subject token file is not a JSON object"};
    auto token = string_field(parsed, config_.json_field->c_str());
    if (!token)
      return Error{ErrorCode::permission_denied,
                   describe() + ": the subject token file has no string field \"" + *config_.json_field + "\""};
    return *token;
  }

  Result<AccessToken> impersonate(const std::string& federated_token) {
    const std::string what = describe() + ": service account impersonation";
    if (!valid_header_value(federated_token))
      return Error{ErrorCode::remote, what + ": the federated token contains a line break"};
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = *config_.impersonation_url;
    request.headers = {{"Content-Type", "application/json"},
                       {"Accept", "application/json"},
                       {"Authorization", "Bearer " + federated_token}};
    request.body = json{{"scope", json::array({k_storage_scope})}, {"lifetime", "3600s"}}.dump();
    request.idempotent = true;
    request.deadline = k_token_deadline;
    LOG_DEBUG(what << " at " << log::redact_url(request.url));
    auto response = http_->perform(request);
    if (!response) return Error{response.error().code, what + ": " + response.error().message};
    const auto body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    auto token = body.is_object() ? string_field(body, "accessToken") : std::nullopt;
    auto expire_time = body.is_object() ? string_field(body, "expireTime") : std::nullopt;
    if (!token || !expire_time) return Error{ErrorCode::remote, what + ": the answer has no accessToken/expireTime"};
    auto expires_at = util::parse_rfc3339(*expire_time);
    if (!expires_at) return Error{ErrorCode::remote, what + ": expireTime is not an RFC 3339 time"};
    return AccessToken{std::move(*token), *expires_at};
  }

  std::shared_ptr<net::HttpClient> http_;
  ExternalAccountConfig config_;
};

TransportOptions metadata_options() {
  TransportOptions options;
  options.connect_timeout = k_metadata_connect_timeout;
  options.stall_timeout = Seconds{2};
  options.max_attempts = 2;
  options.initial_backoff = Milliseconds{100};
  options.max_backoff = Milliseconds{500};
  return options;
}

class MetadataServerProvider final : public CachingProvider {
 public:
  MetadataServerProvider(cloud::CredentialEnv env, std::string host, std::string tried)
      : CachingProvider(env), host_(std::move(host)), tried_(std::move(tried)), http_(metadata_options(), env.clock) {}

  std::string describe() const override { return "the GCE metadata server at " + host_; }

 protected:
  Result<AccessToken> fetch() override {
    net::HttpRequest request;
    request.url = "http://" + host_ + k_metadata_token_path;
    request.headers = {{"Metadata-Flavor", "Google"}, {"Accept", "application/json"}};
    request.deadline = k_metadata_deadline;
    auto response = http_.perform(request);
    if (!response) return nothing_found(response.error().message);
    // The real server says who it is; anything else listening at that address is not a credential source.
    const auto flavor = response->header("Metadata-Flavor");
    if (!flavor || *flavor != "Google") return nothing_found("the answer has no \"Metadata-Flavor: Google\" header");
    return cloud::parse_token_response(response->body, env_.now(), describe());
  }

 private:
  Error nothing_found(const std::string& why) const {
    return Error{ErrorCode::permission_denied, "no GCS credentials found: " + tried_ + "; " + describe() + ": " + why};
  }

  std::string host_;
  std::string tried_;  // what was looked at before the metadata server, for the error
  net::HttpClient http_;
};

// The provider for the credential file at `path` (named by `origin` in errors).
Result<std::shared_ptr<cloud::TokenProvider>> load_credential_file(const std::string& path,
                                                                   const cloud::CredentialEnv& env,
                                                                   const std::shared_ptr<net::HttpClient>& http) {
  auto text = util::read_file(path);
  if (!text) return config_error(path, "cannot read the credential file: " + text.error().message);
  const auto file = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!file.is_object()) return config_error(path, "the credential file is not a JSON object");
  const auto type = string_field(file, "type");
  if (!type) return config_error(path, "the credential file has no \"type\"");

  if (*type == "service_account") {
    auto email = required_field(file, "client_email", path, *type);
    if (!email) return std::move(email).error();
    auto key = required_field(file, "private_key", path, *type);
    if (!key) return std::move(key).error();
    const std::string token_uri = string_field(file, "token_uri").value_or(k_default_token_uri);
    return std::shared_ptr<cloud::TokenProvider>(std::make_shared<ServiceAccountProvider>(
        env, http, path, std::move(*email), std::move(*key), string_field(file, "private_key_id"), token_uri));
  }
  if (*type == "authorized_user") {
    auto client_id = required_field(file, "client_id", path, *type);
    if (!client_id) return std::move(client_id).error();
    auto client_secret = required_field(file, "client_secret", path, *type);
    if (!client_secret) return std::move(client_secret).error();
    auto refresh_token = required_field(file, "refresh_token", path, *type);
    if (!refresh_token) return std::move(refresh_token).error();
    const std::string token_uri = string_field(file, "token_uri").value_or(k_default_token_uri);
    return std::shared_ptr<cloud::TokenProvider>(std::make_shared<AuthorizedUserProvider>(
        env, http, path, std::move(*client_id), std::move(*client_secret), std::move(*refresh_token), token_uri));
  }
  if (*type == "external_account") {
    ExternalAccountConfig config;
    config.file = path;
    auto audience = required_field(file, "audience", path, *type);
    if (!audience) return std::move(audience).error();
    auto subject_token_type = required_field(file, "subject_token_type", path, *type);
    if (!subject_token_type) return std::move(subject_token_type).error();
    auto token_url = required_field(file, "token_url", path, *type);
    if (!token_url) return std::move(token_url).error();
    config.audience = std::move(*audience);
    config.subject_token_type = std::move(*subject_token_type);
    config.token_url = std::move(*token_url);
    config.impersonation_url = string_field(file, "service_account_impersonation_url");
    const auto source = file.find("credential_source");
    if (source == file.end() || !source->is_object())
      return config_error(path, "an \"external_account\" credential needs a \"credential_source\" object");
    auto source_file = string_field(*source, "file");
    if (!source_file) {
      for (const char* other : {"url", "executable", "environment_id"})
        if (source->contains(other))
          return config_error(path, std::string("credential_source.") + other +
                                        " is not supported; only file-sourced subject tokens are");
      return config_error(path, "credential_source needs a \"file\"");
    }
    config.source_file = std::move(*source_file);
    if (const auto format = source->find("format"); format != source->end()) {
      if (!format->is_object()) return config_error(path, "credential_source.format is not an object");
      const std::string format_type = string_field(*format, "type").value_or("text");
      if (format_type == "json") {
        config.json_field = string_field(*format, "subject_token_field_name");
        if (!config.json_field)
          return config_error(path, "credential_source.format of type json needs \"subject_token_field_name\"");
      } else if (format_type != "text") {
        return config_error(path, "credential_source.format.type \"" + format_type + "\" is not text or json");
      }
    }
    return std::shared_ptr<cloud::TokenProvider>(
        std::make_shared<ExternalAccountProvider>(env, http, std::move(config)));
  }
  return config_error(path, "credential type \"" + *type +
                                "\" is not supported (service_account, authorized_user, external_account are)");
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

}  // namespace

Result<std::shared_ptr<cloud::TokenProvider>> make_gcs_token_provider(const GcsCredentialOptions& options,
                                                                      const cloud::CredentialEnv& env,
                                                                      std::shared_ptr<net::HttpClient> http) {
  if (options.anonymous) {
    LOG_DEBUG("GCS credentials: none (the tier is anonymous)");
    return std::shared_ptr<cloud::TokenProvider>();
  }
  if (auto emulator = env.get("STORAGE_EMULATOR_HOST")) {
    LOG_DEBUG("GCS credentials: none ($STORAGE_EMULATOR_HOST is set: " << log::redact_url(*emulator) << ")");
    return std::shared_ptr<cloud::TokenProvider>();
  }
  std::string tried;
  Result<std::shared_ptr<cloud::TokenProvider>> found = std::shared_ptr<cloud::TokenProvider>();
  if (auto path = env.get("GOOGLE_APPLICATION_CREDENTIALS")) {
    found = load_credential_file(*path, env, http);
  } else {
    tried = "$GOOGLE_APPLICATION_CREDENTIALS is not set";
    std::string adc;
    if (auto config_dir = env.get("CLOUDSDK_CONFIG"))
      adc = *config_dir + "/" + k_adc_file_name;
    else if (!env.home.empty())
      adc = env.home + "/.config/gcloud/" + k_adc_file_name;
    if (!adc.empty() && file_exists(adc)) {
      found = load_credential_file(adc, env, http);
    } else {
      tried += adc.empty() ? "; no home directory for gcloud's ADC file" : "; no gcloud ADC file at " + adc;
      const std::string host = env.get("GCE_METADATA_HOST").value_or(k_default_metadata_host);
      found = std::shared_ptr<cloud::TokenProvider>(std::make_shared<MetadataServerProvider>(env, host, tried));
    }
  }
  if (found && *found) LOG_DEBUG("GCS credentials: " << (*found)->describe());
  return found;
}

}  // namespace datavo::gcs
