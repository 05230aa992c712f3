// Google Cloud Storage credentials: Application Default Credentials (ADC) as Google's client libraries find them.
// The GCS tier puts their tokens on its requests with cloud::make_bearer_auth (a 401 refreshes the token once).
//
// make_gcs_token_provider() looks, in this order (the first one found is used; nothing falls through to the next
// one when a found credential then fails):
//   0. nothing at all when GcsCredentialOptions::anonymous is set or $STORAGE_EMULATOR_HOST is set (an emulator or
//      a public bucket): the provider is nullptr and requests go unauthenticated;
//   1. $GOOGLE_APPLICATION_CREDENTIALS, a JSON file of one of these "type"s:
//      - "service_account": a self-signed RS256 JWT (iss = client_email, scope = devstorage.read_write, aud =
//        token_uri, iat, exp = iat + 1 h) exchanged at its token_uri (grant_type jwt-bearer, RFC 7523);
//      - "authorized_user": the refresh-token grant at its token_uri (default https://oauth2.googleapis.com/token);
//      - "external_account" (workload identity federation) with a file-sourced subject token
//        (credential_source.file, format text, or json with subject_token_field_name; the file is read again at
//        every refresh): an RFC 8693 token exchange at token_url, then, when service_account_impersonation_url is
//        given, generateAccessToken at that URL. URL- and executable-sourced subject tokens are unsupported;
//   2. gcloud's ADC file, $CLOUDSDK_CONFIG/application_default_credentials.json, else
//      ~/.config/gcloud/application_default_credentials.json (written by `gcloud auth application-default login`;
//      the same types as above);
//   3. the GCE metadata server: GET http://$GCE_METADATA_HOST/computeMetadata/v1/instance/service-accounts/default/
//      token with "Metadata-Flavor: Google" (host default 169.254.169.254: the address metadata.google.internal
//      resolves to on GCE, used directly as Google's Go library does, so that no DNS lookup can stall a machine
//      that is not on GCE), with short timeouts. Only probed when a token is first needed; when it does not answer,
//      get() fails with permission_denied naming every place that was tried.
// A file that is found but unreadable, not JSON, of an unsupported type or missing a field is a config Error from
// make_gcs_token_provider() (naming the file and the field, never a value).
//
// Tokens are cached and refreshed by the rule of cloud/credential_provider.hpp (when less than min(5 min, half the
// token's lifetime) is left, and after invalidate()). ADC is not a chain of links: the first place that holds a
// credential file decides, without any network I/O, and a file found there that then fails is an error.
//
// Secrets (private keys, client secrets, refresh tokens, subject tokens, access tokens) never appear in a log line
// or an Error message.
// Thread safety: providers are thread-safe; one serves every request of a tier.
#pragma once

#include <memory>
#include <string>

#include "datavo/result.hpp"
#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::gcs {

// The OAuth scope requested for every token: read and write objects, nothing else.
inline constexpr const char* k_storage_scope = "https://www.googleapis.com/auth/devstorage.read_write";

struct GcsCredentialOptions {
  bool anonymous = false;  // the tier says so: send no credentials
};

// Finds the credentials in the order at the top of this file. No network I/O (files are read). A nullptr value
// means "no credentials" (step 0). `http` carries the token requests (not the metadata server's: that one gets
// its own client with short timeouts); REQUIRES: http != nullptr.
// Errors of get(): permission_denied when no credential works (the metadata server does not answer, an endpoint
// refuses the credential), remote / timeout when a token endpoint fails.
Result<std::shared_ptr<cloud::TokenProvider>> make_gcs_token_provider(const GcsCredentialOptions& options,
                                                                      const cloud::CredentialEnv& env,
                                                                      std::shared_ptr<net::HttpClient> http);

}  // namespace datavo::gcs
