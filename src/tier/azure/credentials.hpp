// Azure Blob Storage credentials: the one factory that picks how a tier authorizes its requests
// (make_azure_auth), the account keys of the environment, and the DefaultAzureCredential chain for bearer tokens.
//
// make_azure_auth() picks, for the container URL of a tier, the first of:
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
//   3. bearer tokens (Authorization: Bearer) from the DefaultAzureCredential chain below, for resource
//      https://storage.azure.com/. A 401 (or a 403 AuthenticationFailed / InvalidAuthenticationInfo) refreshes the
//      token and the request is repeated once.
// In every mode the auth object sets x-ms-date and x-ms-version (k_storage_api_version, >= 2017-11-09 as bearer
// tokens need) on every attempt.
//
// The DefaultAzureCredential chain (azure-identity's order, the parts that make sense for a server process):
//   a. environment client secret: $AZURE_TENANT_ID + $AZURE_CLIENT_ID + $AZURE_CLIENT_SECRET, client-credentials
//      grant at $AZURE_AUTHORITY_HOST (default https://login.microsoftonline.com)/<tenant>/oauth2/v2.0/token;
//   b. workload identity: $AZURE_FEDERATED_TOKEN_FILE + $AZURE_CLIENT_ID + $AZURE_TENANT_ID, the same endpoint
//      with the file's content as client_assertion (read again at every refresh: Kubernetes rotates it);
//   c. managed identity: App Service / Functions when $IDENTITY_ENDPOINT and $IDENTITY_HEADER are set
//      (api-version 2019-08-01, header X-IDENTITY-HEADER), else IMDS at $AZURE_POD_IDENTITY_AUTHORITY_HOST
//      (default http://169.254.169.254)/metadata/identity/oauth2/token?api-version=2018-02-01 (header
//      Metadata: true, short timeouts); pinned to managed_identity_client_id (client_id=...) when given;
//   d. the Azure CLI: `az account get-access-token --resource https://storage.azure.com/ -o json`, only when `az`
//      is in an absolute directory of $PATH; run without a shell, killed after 10 s.
// A link whose settings are absent is skipped; so is IMDS when it does not answer or has no such identity, and the
// CLI when it is missing or not logged in. A link that is configured but fails ends the chain with its Error (a
// misconfigured identity is reported, never silently replaced by another). The first link that returns a token is
// used from then on (as azure-identity does). When no link applies, get() fails with permission_denied listing
// what was tried. Client certificates, username/password and the developer-tool links beyond the CLI are not
// supported.
//
// Tokens are cached and refreshed ahead of expiry (cloud::TokenCache: when less than min(5 min, half the
// lifetime) is left) and after invalidate(). Secrets (keys, SAS signatures, client secrets, assertions, identity
// headers, tokens) never appear in a log line or an Error message.
// Thread safety: everything returned is thread-safe; one instance serves every request of a tier.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "net/http_client.hpp"
#include "tier/azure/shared_key.hpp"
#include "tier/cloud/credentials.hpp"

namespace datavo::azure {

using AccessToken = cloud::AccessToken;

// The resource (v1 endpoints) whose "/.default" scope (v2 endpoints) bearer tokens are requested for.
inline constexpr const char* k_storage_resource = "https://storage.azure.com/";
// Azurite's development account (public, documented by Microsoft), for UseDevelopmentStorage=true.
inline constexpr const char* k_development_account = "devstoreaccount1";

class AzureTokenProvider {
 public:
  virtual ~AzureTokenProvider() = default;
  virtual Result<AccessToken> get() = 0;
  virtual void invalidate() = 0;
  // Which credential serves the tokens ("the Azure CLI", "managed identity (IMDS at ...)"), or the chain when none
  // has yet. No secret.
  virtual std::string describe() const = 0;
};

struct DefaultCredentialOptions {
  std::string managed_identity_client_id;  // a user-assigned managed identity; empty: the system-assigned one
};

// The chain described at the top of this file. No network I/O until get(). REQUIRES: http != nullptr (it carries
// the AAD requests; IMDS and App Service get their own client with short timeouts).
std::shared_ptr<AzureTokenProvider> make_default_azure_credential(const DefaultCredentialOptions& options,
                                                                  const cloud::CredentialEnv& env,
                                                                  std::shared_ptr<net::HttpClient> http);

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
};

// Picks the mode as the top of this file says. No network I/O. Errors: invalid_argument for a container URL
// without an account, config for a malformed sas_token, connection string or key. REQUIRES: http != nullptr.
Result<AzureAuth> make_azure_auth(const AzureAuthConfig& config, const cloud::CredentialEnv& env,
                                  std::shared_ptr<net::HttpClient> http);

}  // namespace datavo::azure
