#include "tier/azure/azure_auth.hpp"

#include <arpa/inet.h>

#include <map>

#include "tier/azure/azure_credentials.hpp"
#include "tier/azure/shared_key.hpp"
#include "tier/cloud/bearer_auth.hpp"
#include "util/log.hpp"
#include "util/text.hpp"

namespace datavo::azure {
namespace {

constexpr const char* k_development_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
constexpr const char* k_development_endpoint = "http://127.0.0.1:10000/devstoreaccount1";

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

// Whether a refusal says the bearer token is stale: a 401, or a 403 that names an expired or revoked token
// (AuthorizationPermissionMismatch, a missing role, is not worth a new token).
bool stale_token(long status, const net::HttpHeaders& headers, std::string_view body) {
  if (status == 401) return true;
  if (status != 403) return false;
  const std::string code(net::find_header(headers, "x-ms-error-code").value_or(""));
  return code == "AuthenticationFailed" || code == "InvalidAuthenticationInfo" ||
         body.find("<Code>AuthenticationFailed</Code>") != std::string_view::npos ||
         body.find("<Code>InvalidAuthenticationInfo</Code>") != std::string_view::npos;
}

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
    const auto part = util::trim(text.substr(0, semicolon));
    text = semicolon == std::string_view::npos ? std::string_view() : text.substr(semicolon + 1);
    if (part.empty()) continue;
    const auto equals = part.find('=');  // the first one: base64 keys end in '='
    if (equals == std::string_view::npos || equals == 0)
      return Error{ErrorCode::config, origin + ": a part of the connection string is not Name=value"};
    out.fields[util::to_lower(util::trim(part.substr(0, equals)))] = std::string(util::trim(part.substr(equals + 1)));
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

Result<std::optional<StorageAccountKey>> storage_key_from_env(const cloud::CredentialEnv& env) {
  if (auto text = env.get("AZURE_STORAGE_CONNECTION_STRING")) {
    const std::string origin = "$AZURE_STORAGE_CONNECTION_STRING";
    auto parsed = parse_connection_string(*text, origin);
    if (!parsed) return std::move(parsed).error();
    StorageAccountKey key;
    key.origin = origin;
    if (util::to_lower(parsed->get("usedevelopmentstorage").value_or("")) == "true") {
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
  if (is_ip_literal(host) || util::to_lower(host) == "localhost" || host.find('.') == std::string_view::npos) {
    // Path-style (emulators, IP endpoints): the first path segment is the account.
    std::string_view path = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
    if (path.empty() || path.front() != '/') return invalid("a path-style URL needs the account as its first segment");
    path.remove_prefix(1);
    const auto account = path.substr(0, path.find_first_of("/?#"));
    if (account.empty()) return invalid("a path-style URL needs the account as its first segment");
    return std::string(account);
  }
  return util::to_lower(host.substr(0, host.find('.')));
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
    const bool same_account = util::to_lower(candidate.account) == util::to_lower(*account);
    const bool same_endpoint =
        candidate.blob_endpoint && (url == *candidate.blob_endpoint || url.starts_with(*candidate.blob_endpoint + "/"));
    if (same_account || same_endpoint)
      key = candidate;
    else
      LOG_DEBUG("Azure: the key in " << candidate.origin << " is for account " << candidate.account << ", not "
                                     << *account << ": not used");
  }

  if (!config.sas_token.empty()) {
    std::string sas(util::trim(config.sas_token));
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
  cloud::BearerOptions bearer;
  bearer.decorate = [env](net::PreparedRequest& request) { set_date_and_version(request, env.now()); };
  bearer.stale = &stale_token;
  return AzureAuth{cloud::make_bearer_auth(provider, std::move(bearer)), AzureAuthMode::bearer,
                   "bearer tokens for account " + *account + " (DefaultAzureCredential)", provider};
}

}  // namespace datavo::azure
