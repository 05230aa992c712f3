// The AWS configuration the S3 tier reads besides its own fields: the shared files (~/.aws/credentials and
// ~/.aws/config, their profiles) and the resolution of the region and the endpoint, as the AWS SDKs do.
//
// The shared files are the SDKs' INI dialect: "[section]" ("[name]" in the credentials file; "[profile name]" or
// "[default]" in the config file), "key = value" with keys case-insensitive, '#' and ';' comments. Indented lines
// continue a value or form a nested section ("s3 =\n  addressing_style = path"); no key read here lives there,
// so they are skipped. No Debian INI library speaks this dialect; it is a few dozen lines.
//
// Thread safety: reentrant (the files are read at each call).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::s3 {

using ProfileSection = std::map<std::string, std::string>;  // lowercased key -> value

// One profile as the two shared files describe it.
struct AwsProfile {
  std::string name;
  std::string credentials_path;                    // "" without a home directory and AWS_SHARED_CREDENTIALS_FILE
  std::string config_path;                         // likewise for AWS_CONFIG_FILE
  std::optional<ProfileSection> from_credentials;  // nullopt: no such section (or no such file)
  std::optional<ProfileSection> from_config;

  bool exists() const { return from_credentials || from_config; }
  // A non-empty value of the profile, the credentials file first (as the SDKs merge them).
  std::optional<std::string> get(const std::string& key) const;
  // "<credentials path> or <config path>", for messages.
  std::string where() const;
};

// The profile in use: `explicit_profile`, else AWS_PROFILE, else "default".
std::string profile_name(const cloud::CredentialEnv& env, const std::optional<std::string>& explicit_profile = {});
// Whether the profile in use was named (by the argument or AWS_PROFILE) rather than defaulted.
bool profile_named(const cloud::CredentialEnv& env, const std::optional<std::string>& explicit_profile);

// Reads profile `name` from the shared files. An Error only when a file exists but cannot be read (or is over
// 1 MiB); a missing file or section is an absent part of the profile.
Result<AwsProfile> load_profile(const cloud::CredentialEnv& env, const std::string& name);

// The `region` of the profile in use (config file first, then credentials file); nullopt when not set.
Result<std::optional<std::string>> profile_region(const cloud::CredentialEnv& env,
                                                  const std::optional<std::string>& explicit_profile = {});

// The S3 tier's region: `field` (from the tier's configuration), else AWS_REGION, else AWS_DEFAULT_REGION, else
// the profile's region; nullopt when none is set.
Result<std::optional<std::string>> resolve_region(const std::optional<std::string>& field,
                                                  const cloud::CredentialEnv& env,
                                                  const std::optional<std::string>& explicit_profile = {});

// The S3 tier's endpoint: `field`, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; nullopt for AWS's own.
std::optional<std::string> resolve_endpoint(const std::optional<std::string>& field, const cloud::CredentialEnv& env);

}  // namespace datavo::s3
