// The S3 tier with an injected environment: what make_s3_tier() (datavo/s3_tier.hpp) does with the process's
// environment, for tests that run it against fake or emulated servers and fake credential endpoints on loopback
// and must not depend on the real environment.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "datavo/s3_tier.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::s3 {

// make_s3_tier(), with the region, the endpoint and the AWS credential chain looked up in `env`.
Result<std::shared_ptr<Tier>> make_s3_tier_with_env(S3TierOptions options, cloud::CredentialEnv env);

// The sentence for an S3 error response (<Error> with <Code> and <Message>): what went wrong and what to do, keeping
// the service's code; "" when `body` is not such a response. The HttpRequest::describe_error_body of every request of
// the tier, so that no raw body reaches a message.
std::string describe_s3_error(long status, std::string_view body);

}  // namespace datavo::s3
