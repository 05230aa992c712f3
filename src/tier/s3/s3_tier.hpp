// The S3 tier with an injected environment: what make_s3_tier() (datavo/s3_tier.hpp) does with the process's
// environment, for the tests of the request builder, which run it against a fake S3 on loopback and must not
// depend on the real environment.
#pragma once

#include <memory>

#include "datavo/s3_tier.hpp"
#include "tier/cloud/credentials.hpp"

namespace datavo::s3 {

// make_s3_tier(), with the region, the endpoint and the default credential chain looked up in env.getenv and
// env.home. The chain keeps the system clock (env.now is not read).
Result<std::shared_ptr<Tier>> make_s3_tier_with_env(S3TierOptions options, cloud::CredentialEnv env);

}  // namespace datavo::s3
