// The links of the AWS chain that read keys without any network I/O: the environment, and the static keys of the
// profile in the shared credentials file and in the shared config file.
#include "tier/s3/aws_config.hpp"
#include "tier/s3/aws_links.hpp"

namespace datavo::s3 {
namespace {

using Found = Result<std::optional<AwsCredentials>>;

class EnvironmentLink final : public AwsLink {
 public:
  explicit EnvironmentLink(const cloud::CredentialEnv& env) : env_(env) {}
  std::string name() const override { return "environment"; }
  Found fetch(std::string& why) override {
    auto key = env_.get("AWS_ACCESS_KEY_ID");
    auto secret = env_.get("AWS_SECRET_ACCESS_KEY");
    if (!key && !secret) {
      why = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set";
      return std::optional<AwsCredentials>();
    }
    if (!key || !secret)
      return Error{ErrorCode::config, std::string(key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                                          " is set but " + (key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                                          " is not"};
    return std::optional<AwsCredentials>(
        AwsCredentials{*key, *secret, env_.get("AWS_SESSION_TOKEN").value_or(""), std::nullopt, "environment"});
  }

 private:
  const cloud::CredentialEnv env_;
};

// aws_access_key_id, aws_secret_access_key and aws_session_token of `section`: nullopt when it has neither key,
// a config Error when it has one without the other.
Found static_keys(const AwsProfile& profile, const std::optional<ProfileSection>& section, const std::string& file) {
  if (!section) return std::optional<AwsCredentials>();
  auto value = [&](const char* key) {
    auto it = section->find(key);
    return it == section->end() ? std::string() : it->second;
  };
  const std::string key = value("aws_access_key_id");
  const std::string secret = value("aws_secret_access_key");
  if (key.empty() && secret.empty()) return std::optional<AwsCredentials>();
  if (key.empty() || secret.empty())
    return Error{ErrorCode::config, "profile " + profile.name + " in " + file + " has " +
                                        (key.empty() ? "aws_secret_access_key but no aws_access_key_id"
                                                     : "aws_access_key_id but no aws_secret_access_key")};
  return std::optional<AwsCredentials>(AwsCredentials{key, secret, value("aws_session_token"), std::nullopt,
                                                      "profile " + profile.name + " (" + file + ")"});
}

enum class SharedFile { credentials, config };

// The static keys of the profile in one of the shared files. The credentials file's link comes first in the chain,
// so it is the one that refuses a named profile that exists nowhere and an AssumeRole profile.
class SharedFileLink final : public AwsLink {
 public:
  SharedFileLink(const cloud::CredentialEnv& env, std::optional<std::string> profile, SharedFile file)
      : env_(env), profile_(std::move(profile)), file_(file) {}
  std::string name() const override { return file_ == SharedFile::credentials ? "shared files" : "shared config file"; }
  Found fetch(std::string& why) override {
    auto profile = load_profile(env_, profile_name(env_, profile_));
    if (!profile) return std::move(profile).error();
    if (file_ == SharedFile::config) {
      auto found = static_keys(*profile, profile->from_config, profile->config_path);
      if (found && !*found) why = "profile " + profile->name + " has no static keys there";
      return found;
    }
    if (!profile->exists()) {
      if (profile_named(env_, profile_))
        return Error{ErrorCode::config, "the profile " + profile->name + " is in neither " + profile->where()};
      why = "no profile " + profile->name + " in " + profile->where();
      return std::optional<AwsCredentials>();
    }
    if (profile->get("role_arn") && (profile->get("source_profile") || profile->get("credential_source")))
      return Error{ErrorCode::unsupported, "profile " + profile->name +
                                               ": role_arn with source_profile or credential_source (AssumeRole) "
                                               "is not supported; use web_identity_token_file, "
                                               "credential_process or static keys"};
    auto found = static_keys(*profile, profile->from_credentials, profile->credentials_path);
    if (found && !*found) why = "profile " + profile->name + " has no static keys in " + profile->credentials_path;
    return found;
  }

 private:
  const cloud::CredentialEnv env_;
  const std::optional<std::string> profile_;
  const SharedFile file_;
};

}  // namespace

std::unique_ptr<AwsLink> make_environment_link(const cloud::CredentialEnv& env) {
  return std::make_unique<EnvironmentLink>(env);
}

std::unique_ptr<AwsLink> make_credentials_file_link(const cloud::CredentialEnv& env,
                                                    std::optional<std::string> profile) {
  return std::make_unique<SharedFileLink>(env, std::move(profile), SharedFile::credentials);
}

std::unique_ptr<AwsLink> make_config_file_link(const cloud::CredentialEnv& env, std::optional<std::string> profile) {
  return std::make_unique<SharedFileLink>(env, std::move(profile), SharedFile::config);
}

}  // namespace datavo::s3
