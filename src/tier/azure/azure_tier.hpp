// The Azure Blob tier with an injected environment: what make_azure_blob_tier() (datavo/azure_blob_tier.hpp) does
// with the process's environment, for the tests of the request builder, which run it against a fake blob server
// and fake token endpoints on loopback and must not depend on the real environment.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "datavo/azure_blob_tier.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::azure {

// make_azure_blob_tier(), with the account keys and the DefaultAzureCredential chain looked up in `env`.
Result<std::shared_ptr<Tier>> make_azure_blob_tier_with_env(AzureBlobTierOptions options, cloud::CredentialEnv env);

// The sentence for an Azure Blob error response (<Error> with <Code> and <Message>): what went wrong and what to do,
// keeping the service's code; "" when `body` is not such a response. The HttpRequest::describe_error_body of every
// request of the tier, so that no raw body reaches a message.
std::string describe_azure_error(long status, std::string_view body);

}  // namespace datavo::azure
