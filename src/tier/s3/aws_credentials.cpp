#include "tier/s3/aws_credentials.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "tier/s3/aws_links.hpp"
#include "util/log.hpp"
#include "util/rfc3339.hpp"

namespace datavo::s3 {
namespace {

using Json = nlohmann::json;

std::string json_string(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

// The chain, with the AWS wording of its log line and errors.
class DefaultChain final : public cloud::ChainProvider<AwsCredentials> {
 public:
  using ChainProvider::ChainProvider;

 protected:
  Result<AwsCredentials> fetch() override {
    auto found = ChainProvider::fetch();
    if (!found) {
      Error error = std::move(found).error();
      error.message = "AWS credentials: " + error.message;
      return error;
    }
    LOG_DEBUG("AWS credentials from " << found->source << (found->expiration ? ", temporary" : ", long-term"));
    return found;
  }
};

class StaticCredentials final : public AwsCredentialProvider {
 public:
  explicit StaticCredentials(AwsCredentials credentials) : credentials_(std::move(credentials)) {}
  Result<AwsCredentials> get() override { return credentials_; }
  void invalidate() override {}
  std::string describe() const override { return credentials_.source; }

 private:
  const AwsCredentials credentials_;
};

}  // namespace

std::shared_ptr<AwsCredentialProvider> make_default_credential_chain(cloud::CredentialEnv env,
                                                                     AwsChainOptions options) {
  std::vector<std::unique_ptr<AwsLink>> links;
  links.push_back(make_environment_link(env));
  links.push_back(make_web_identity_link(env, options.profile));
  links.push_back(make_credentials_file_link(env, options.profile));
  links.push_back(make_process_link(env, options.profile));
  links.push_back(make_config_file_link(env, options.profile));
  links.push_back(make_container_link(env, std::move(options.container_host)));
  links.push_back(make_imds_link(env));
  return std::make_shared<DefaultChain>(std::move(env), "the AWS default credential chain", std::move(links),
                                        "none found");
}

std::shared_ptr<AwsCredentialProvider> make_static_credentials(AwsCredentials credentials) {
  if (credentials.source.empty()) credentials.source = "static credentials";
  return std::make_shared<StaticCredentials>(std::move(credentials));
}

Result<AwsCredentials> credentials_from_json(std::string_view text, const char* token_key, const std::string& source) {
  const Json answer = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object())
    return Error{ErrorCode::remote, source + ": the answer is not a JSON object"};
  AwsCredentials out;
  out.source = source;
  out.access_key_id = json_string(answer, "AccessKeyId");
  out.secret_access_key = json_string(answer, "SecretAccessKey");
  out.session_token = json_string(answer, token_key);
  if (out.access_key_id.empty() || out.secret_access_key.empty())
    return Error{ErrorCode::remote, source + ": the answer has no AccessKeyId or no SecretAccessKey"};
  if (const std::string expiration = json_string(answer, "Expiration"); !expiration.empty()) {
    out.expiration = util::parse_rfc3339(expiration);
    if (!out.expiration)
      return Error{ErrorCode::remote, source + ": the Expiration \"" + expiration + "\" is not an RFC 3339 time"};
  }
  return out;
}

}  // namespace datavo::s3
