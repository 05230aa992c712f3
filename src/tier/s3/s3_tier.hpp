// The S3 tier with an injected environment: what make_s3_tier() (datavo/s3_tier.hpp) does with the process's
// environment, for tests that run it against fake or emulated servers and fake credential endpoints on loopback
// and must not depend on the real environment.
#pragma once

#include <memory>

#include "datavo/s3_tier.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::s3 {

// make_s3_tier(), with the region, the endpoint and the AWS credential chain looked up in `env`.
Result<std::shared_ptr<Tier>> make_s3_tier_with_env(S3TierOptions options, cloud::CredentialEnv env);

}  // namespace datavo::s3
