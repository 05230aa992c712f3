// The links of the AWS default credential chain (aws_credentials.hpp has their order and rules), one factory per
// link, each defined in the aws_*_link(s).cpp file named beside it, and what several links share.
// Thread safety: a link is fetched by one thread at a time (the chain's); the functions are reentrant.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tier/cloud/credential_chain.hpp"
#include "tier/s3/aws_credentials.hpp"

namespace datavo::s3 {

using AwsLink = cloud::CredentialLink<AwsCredentials>;

// aws_static_links.cpp: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); the static keys of the
// profile in the shared credentials file (which also checks that a named profile exists and is not an AssumeRole
// profile), and in the shared config file.
std::unique_ptr<AwsLink> make_environment_link(const cloud::CredentialEnv& env);
std::unique_ptr<AwsLink> make_credentials_file_link(const cloud::CredentialEnv& env,
                                                    std::optional<std::string> profile);
std::unique_ptr<AwsLink> make_config_file_link(const cloud::CredentialEnv& env, std::optional<std::string> profile);

// aws_process_link.cpp: the profile's credential_process.
std::unique_ptr<AwsLink> make_process_link(const cloud::CredentialEnv& env, std::optional<std::string> profile);

// aws_web_identity_link.cpp: STS AssumeRoleWithWebIdentity.
std::unique_ptr<AwsLink> make_web_identity_link(const cloud::CredentialEnv& env, std::optional<std::string> profile);
// The STS endpoint for web identity: AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else https://sts.<region>.
// amazonaws.com when a region is known, else the global https://sts.amazonaws.com.
std::string sts_endpoint(const cloud::CredentialEnv& env, const std::optional<std::string>& region);

// aws_metadata_links.cpp: the ECS container endpoint (relative URIs on `container_host`) and EC2's IMDSv2.
std::unique_ptr<AwsLink> make_container_link(const cloud::CredentialEnv& env, std::string container_host);
std::unique_ptr<AwsLink> make_imds_link(const cloud::CredentialEnv& env);

// The credentials of a JSON answer (ECS, IMDS, credential_process), whose fields are named alike: AccessKeyId,
// SecretAccessKey, `token_key` ("Token" or "SessionToken"), Expiration (RFC 3339, optional). remote Error when a
// key is missing or the Expiration is malformed; the message never quotes the answer (it holds secrets).
Result<AwsCredentials> credentials_from_json(std::string_view text, const char* token_key, const std::string& source);

}  // namespace datavo::s3
