// Azure AD bearer tokens for the Azure Blob tier: the DefaultAzureCredential chain (azure-identity's order, the
// links that make sense for a server process), a cloud::ChainProvider of these links:
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
// Tokens are cached and refreshed by the rule of cloud/credential_provider.hpp (when less than min(5 min, half the
// lifetime) is left, and after invalidate()). Secrets (client secrets, assertions, identity headers, tokens) never
// appear in a log line or an Error message.
// Thread safety: the provider is thread-safe; one instance serves every request of a tier.
#pragma once

#include <memory>
#include <string>

#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::azure {

// The resource (v1 endpoints) whose "/.default" scope (v2 endpoints) bearer tokens are requested for.
inline constexpr const char* k_storage_resource = "https://storage.azure.com/";

struct DefaultCredentialOptions {
  std::string managed_identity_client_id;  // a user-assigned managed identity; empty: the system-assigned one
};

// The chain described at the top of this file. No I/O until get(). REQUIRES: http != nullptr (it carries the AAD
// requests; IMDS and App Service get their own client with short timeouts).
std::shared_ptr<cloud::TokenProvider> make_default_azure_credential(const DefaultCredentialOptions& options,
                                                                    const cloud::CredentialEnv& env,
                                                                    std::shared_ptr<net::HttpClient> http);

}  // namespace datavo::azure
