// AWS credentials for the S3 tier: the AWS SDKs' default credential chain, and the region / endpoint resolution
// that goes with it.
//
// The chain (make_default_credential_chain) looks, in this order, at:
//   1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (both or neither), AWS_SESSION_TOKEN;
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME), else the profile's
//      web_identity_token_file + role_arn (+ role_session_name), exchanged for temporary credentials through an
//      unsigned STS AssumeRoleWithWebIdentity (endpoint: see sts_endpoint());
//   3. the shared files, for the profile named by the explicit argument, else AWS_PROFILE, else "default":
//      static keys in AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials, sections "[name]"), then the
//      profile's credential_process (run without a shell; its JSON answer must have "Version": 1), then static
//      keys in AWS_CONFIG_FILE (default ~/.aws/config, sections "[profile name]", and "[default]");
//   4. ECS container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on 169.254.170.2) or
//      AWS_CONTAINER_CREDENTIALS_FULL_URI (https, or http to a loopback or the ECS/EKS link-local address), with
//      the token of AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or AWS_CONTAINER_AUTHORIZATION_TOKEN;
//   5. EC2 instance metadata, IMDSv2 only (a session token from PUT /latest/api/token, then the role's credentials),
//      at AWS_EC2_METADATA_SERVICE_ENDPOINT or http://169.254.169.254, unless AWS_EC2_METADATA_DISABLED=true.
// Empty environment variables count as unset. A profile that is named explicitly (argument or AWS_PROFILE) but
// missing from both files is a config Error, as in the SDKs; a missing "default" profile is simply skipped.
// A profile that asks for AssumeRole from another profile (role_arn with source_profile or credential_source) is
// an unsupported Error rather than being silently answered with another identity.
//
// The metadata services are absent on most machines, so their requests have short timeouts (about 2 s in all
// for an IMDS that does not answer).
//
// Secrets (secret keys, session tokens, web identity tokens, the answers of credential endpoints and processes)
// never appear in log lines or Error messages.
//
// Thread safety: AwsCredentialProvider implementations are thread-safe; the chain serializes its fetches, so
// concurrent callers of get() wait for one fetch instead of starting several.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "net/http_client.hpp"

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

class AwsCredentialProvider {
 public:
  virtual ~AwsCredentialProvider() = default;
  // Credentials that are valid now (refreshed ahead of their expiry). permission_denied when none can be found.
  virtual Result<AwsCredentials> get() = 0;
  // The credentials last returned were refused: the next get() fetches new ones.
  virtual void invalidate() = 0;
};

// Where the chain reads its configuration, so that tests never depend on the real environment.
struct AwsEnvironment {
  // The value of an environment variable, nullopt when unset. nullptr: the process environment (std::getenv).
  std::function<std::optional<std::string>(const std::string& name)> getenv;
  // The home directory for ~/.aws. Empty: $HOME (through getenv), else the passwd entry.
  std::string home;
  // Wall time for expiry and SigV4 dates, sleeps for the retry backoff. nullptr: net::system_clock().
  std::shared_ptr<net::Clock> clock;
  // The ECS agent behind AWS_CONTAINER_CREDENTIALS_RELATIVE_URI; tests point it at loopback.
  std::string container_host = "http://169.254.170.2";

  // getenv through the seam; empty values are nullopt.
  std::optional<std::string> var(const std::string& name) const;
  std::shared_ptr<net::Clock> clock_or_system() const;
};

// The default chain described at the top of this file. `profile` overrides AWS_PROFILE. Does no I/O until get().
std::shared_ptr<AwsCredentialProvider> make_default_credential_chain(AwsEnvironment env = {},
                                                                     std::optional<std::string> profile = {});

// Fixed credentials (tests, or keys given in a tier's configuration). invalidate() does nothing.
std::shared_ptr<AwsCredentialProvider> make_static_credentials(AwsCredentials credentials);

// The profile in use: `explicit_profile`, else AWS_PROFILE, else "default".
std::string profile_name(const AwsEnvironment& env, const std::optional<std::string>& explicit_profile = {});

// The `region` of the profile in use (config file first, then credentials file); nullopt when not set.
// An Error only when a file exists but cannot be read.
Result<std::optional<std::string>> profile_region(const AwsEnvironment& env,
                                                  const std::optional<std::string>& explicit_profile = {});

// The S3 tier's region: `field` (from the tier's configuration), else AWS_REGION, else AWS_DEFAULT_REGION, else
// the profile's region; nullopt when none is set.
Result<std::optional<std::string>> resolve_region(const std::optional<std::string>& field, const AwsEnvironment& env,
                                                  const std::optional<std::string>& explicit_profile = {});

// The S3 tier's endpoint: `field`, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; nullopt for AWS's own.
std::optional<std::string> resolve_endpoint(const std::optional<std::string>& field, const AwsEnvironment& env);

// The STS endpoint for web identity: AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else https://sts.<region>.
// amazonaws.com when a region is known, else the global https://sts.amazonaws.com.
std::string sts_endpoint(const AwsEnvironment& env, const std::optional<std::string>& region);

// Parses an ISO 8601 UTC time as the credential services write it ("2024-05-01T12:00:00Z", optionally with
// fractional seconds or a "+hh:mm" offset). nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text);

}  // namespace datavo::s3
