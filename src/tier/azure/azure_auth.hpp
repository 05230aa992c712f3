// How the Azure Blob tier authorizes its requests: make_azure_auth picks, for the container URL of a tier, the
// first of:
//   1. SAS, when the tier's sas_token is set: appended (without its leading '?') to the URL of every attempt.
//      An explicit setting of the tier beats an ambient one: a SAS is usually narrower on purpose (read-only, one
//      container), and a stray key in a CI environment must not widen it silently (logged at INFO when a key for
//      the account is in the environment too);
//   2. SharedKey, when the environment holds a key for the URL's account: $AZURE_STORAGE_CONNECTION_STRING
//      (AccountName + AccountKey; its BlobEndpoint, else DefaultEndpointsProtocol + EndpointSuffix; or
//      UseDevelopmentStorage=true for Azurite's well-known account), else $AZURE_STORAGE_ACCOUNT +
//      $AZURE_STORAGE_KEY. "For the URL's account": the key's account is the URL's (the first host label, or the
//      first path segment of a path-style URL whose host is an IP address or localhost, as with Azurite), or the
//      URL starts with the key's blob endpoint. A key for another account is ignored. This is the mode of
//      emulators and CI; requests are signed as shared_key.hpp describes;
//   3. bearer tokens (Authorization: Bearer, cloud::make_bearer_auth) from the DefaultAzureCredential chain
//      (azure_credentials.hpp). A 401 (or a 403 AuthenticationFailed / InvalidAuthenticationInfo) refreshes the
//      token and the request is repeated once.
// In every mode the auth object sets x-ms-date and x-ms-version (k_storage_api_version, >= 2017-11-09 as bearer
// tokens need) on every attempt.
//
// Secrets (keys, SAS signatures, tokens) never appear in a log line or an Error message.
// Thread safety: everything returned is thread-safe; one instance serves every request of a tier.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "datavo/result.hpp"
#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::azure {

// Azurite's development account (public, documented by Microsoft), for UseDevelopmentStorage=true.
inline constexpr const char* k_development_account = "devstoreaccount1";

// An account key found in the environment.
struct StorageAccountKey {
  std::string account;
  std::string key_base64;                    // a secret
  std::optional<std::string> blob_endpoint;  // from the connection string, without a trailing '/'
  std::string origin;                        // "$AZURE_STORAGE_CONNECTION_STRING", for messages
};

// The key in $AZURE_STORAGE_CONNECTION_STRING, else $AZURE_STORAGE_ACCOUNT + $AZURE_STORAGE_KEY; nullopt when
// neither holds one. config Error for a malformed connection string (naming the field, never the value).
Result<std::optional<StorageAccountKey>> storage_key_from_env(const cloud::CredentialEnv& env);

// The storage account a container URL addresses (see make_azure_auth, step 2). invalid_argument when the URL has
// no host, or is path-style without a first path segment.
Result<std::string> account_of_url(std::string_view container_url);

enum class AzureAuthMode { sas, shared_key, bearer };
const char* to_string(AzureAuthMode mode);

struct AzureAuthConfig {
  std::string container_url;               // https://<account>.blob.core.windows.net/<container>, or path-style
  std::string sas_token;                   // a SAS query string, with or without its leading '?'; a secret
  std::string managed_identity_client_id;  // see DefaultCredentialOptions
};

struct AzureAuth {
  std::shared_ptr<net::RequestAuth> auth;  // never nullptr
  AzureAuthMode mode = AzureAuthMode::bearer;
  std::string description;  // "SharedKey for account devstoreaccount1 ($AZURE_STORAGE_...)"
  // The bearer mode's tokens (the one `auth` uses), so that `cache check` can obtain one before any request;
  // nullptr in the other modes.
  std::shared_ptr<cloud::TokenProvider> tokens{};
};

// Picks the mode as the top of this file says. No network I/O. Errors: invalid_argument for a container URL
// without an account, config for a malformed sas_token, connection string or key. REQUIRES: http != nullptr.
Result<AzureAuth> make_azure_auth(const AzureAuthConfig& config, const cloud::CredentialEnv& env,
                                  std::shared_ptr<net::HttpClient> http);

}  // namespace datavo::azure
