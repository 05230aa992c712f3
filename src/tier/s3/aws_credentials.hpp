// AWS credentials for the S3 tier: the AWS SDKs' default credential chain, a cloud::ChainProvider whose links are
// (in this order; each in an aws_*_link(s).cpp file):
//   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (both or neither), AWS_SESSION_TOKEN;
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME), else the profile's
//      web_identity_token_file + role_arn (+ role_session_name), exchanged for temporary credentials through an
//      unsigned STS AssumeRoleWithWebIdentity (endpoint: see sts_endpoint() in aws_links.hpp);
//   3. shared files, for the profile named by the explicit argument, else AWS_PROFILE, else "default"
//      (aws_config.hpp reads them): static keys in AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials), then
//   4. the profile's credential_process (run without a shell, through util::run_program, the program found in an
//      absolute directory of $PATH; its JSON answer must have "Version": 1), then
//   5. static keys in AWS_CONFIG_FILE (default ~/.aws/config);
//   6. ECS container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on 169.254.170.2) or
//      AWS_CONTAINER_CREDENTIALS_FULL_URI (https, or http to a loopback or the ECS/EKS link-local address), with
//      the token of AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or AWS_CONTAINER_AUTHORIZATION_TOKEN;
//   7. EC2 instance metadata, IMDSv2 only (a session token from PUT /latest/api/token, then the role's credentials),
//      at AWS_EC2_METADATA_SERVICE_ENDPOINT or http://169.254.169.254, unless AWS_EC2_METADATA_DISABLED=true.
// Empty environment variables count as unset. A profile that is named explicitly (argument or AWS_PROFILE) but
// missing from both files is a config Error, as in the SDKs; a missing "default" profile is simply skipped.
// A profile that asks for AssumeRole from another profile (role_arn with source_profile or credential_source) is
// an unsupported Error rather than being silently answered with another identity.
//
// The chain keeps the first link that gives credentials, and caches and refreshes them by the one rule of
// cloud/credential_provider.hpp (when less than min(5 min, half their lifetime) is left, and after invalidate()).
// The metadata services are absent on most machines, so their requests have short timeouts (about 2 s in all
// for an IMDS that does not answer).
//
// Secrets (secret keys, session tokens, web identity tokens, the answers of credential endpoints and processes)
// never appear in log lines or Error messages.
// Thread safety: providers are thread-safe; concurrent callers of get() wait for one fetch.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::s3 {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys
  // When temporary credentials stop working; nullopt for long-term keys.
  std::optional<std::chrono::system_clock::time_point> expiration;
  // Where they came from, for log lines and messages: "environment", "profile dev (credentials file)", ...
  std::string source;
};
// The expiry hook of cloud::CredentialCache.
inline std::optional<cloud::WallClock::time_point> expiry_of(const AwsCredentials& credentials) {
  return credentials.expiration;
}

using AwsCredentialProvider = cloud::CredentialProvider<AwsCredentials>;

struct AwsChainOptions {
  // The profile of the shared files; nullopt: AWS_PROFILE, else "default".
  std::optional<std::string> profile;
  // The ECS agent behind AWS_CONTAINER_CREDENTIALS_RELATIVE_URI; tests point it at loopback.
  std::string container_host = "http://169.254.170.2";
};

// The default chain described at the top of this file. Does no I/O until get(); the metadata and STS requests go
// through clients of their own (on env's clock).
std::shared_ptr<AwsCredentialProvider> make_default_credential_chain(cloud::CredentialEnv env,
                                                                     AwsChainOptions options = {});

// Fixed credentials (tests, or keys given in a tier's configuration). invalidate() does nothing.
std::shared_ptr<AwsCredentialProvider> make_static_credentials(AwsCredentials credentials);

}  // namespace datavo::s3
