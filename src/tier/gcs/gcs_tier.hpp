// The GCS tier with an injected environment: what make_gcs_tier() (datavo/gcs_tier.hpp) does with the process's
// environment, for the tests of the request builder, which run it against a fake GCS server and fake token
// endpoints on loopback and must not depend on the real environment.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "datavo/gcs_tier.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::gcs {

// make_gcs_tier(), with $STORAGE_EMULATOR_HOST and the Application Default Credentials looked up in `env`.
Result<std::shared_ptr<Tier>> make_gcs_tier_with_env(GcsTierOptions options, cloud::CredentialEnv env);

// The sentence for a GCS JSON API error response ({"error": {"code", "message"}}): what went wrong and what to do,
// keeping the service's code; "" when `body` is not such a response. The HttpRequest::describe_error_body of every
// request of the tier, so that no raw body reaches a message.
std::string describe_gcs_error(long status, std::string_view body);

}  // namespace datavo::gcs
