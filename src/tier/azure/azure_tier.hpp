// The Azure Blob tier with an injected environment: what make_azure_blob_tier() (datavo/azure_blob_tier.hpp) does
// with the process's environment, for the tests of the request builder, which run it against a fake blob server
// and fake token endpoints on loopback and must not depend on the real environment.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/azure_blob_tier.hpp"
#include "tier/cloud/blob_backend.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::azure {

// make_azure_blob_tier(), with the account keys and the DefaultAzureCredential chain looked up in `env`.
Result<std::shared_ptr<Tier>> make_azure_blob_tier_with_env(AzureBlobTierOptions options, cloud::CredentialEnv env);

// The sentence for an Azure Blob error response (<Error> with <Code> and <Message>): what went wrong and what to do,
// keeping the service's code; "" when `body` is not such a response. The HttpRequest::describe_error_body of every
// request of the tier, so that no raw body reaches a message.
std::string describe_azure_error(long status, std::string_view body);

// One page of List Blobs (the XML body of GET <container>?restype=container&comp=list).
struct BlobListPage {
  std::vector<cloud::ListedObject> blobs;  // name, Content-Length and Last-Modified of each <Blob>
  std::string next_marker;                 // empty on the last page
};
// Parses a page. remote error, naming the container and the blob, for malformed XML or a blob whose
// Content-Length or Last-Modified (an RFC 1123 date) cannot be read.
Result<BlobListPage> parse_blob_list(const std::string& body, const std::string& container);

}  // namespace datavo::azure
