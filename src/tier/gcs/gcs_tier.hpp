// The GCS tier with an injected environment: what make_gcs_tier() (datavo/gcs_tier.hpp) does with the process's
// environment, for the tests of the request builder, which run it against a fake GCS server and fake token
// endpoints on loopback and must not depend on the real environment.
#pragma once

#include <memory>

#include "datavo/gcs_tier.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::gcs {

// make_gcs_tier(), with $STORAGE_EMULATOR_HOST and the Application Default Credentials looked up in `env`.
Result<std::shared_ptr<Tier>> make_gcs_tier_with_env(GcsTierOptions options, cloud::CredentialEnv env);

}  // namespace datavo::gcs
