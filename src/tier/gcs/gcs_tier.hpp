// The GCS tier with an injected environment: what make_gcs_tier() (datavo/gcs_tier.hpp) does with the process's
// environment, for the tests of the request builder, which run it against a fake GCS server and fake token
// endpoints on loopback and must not depend on the real environment.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/gcs_tier.hpp"
#include "tier/cloud/blob_backend.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::gcs {

// make_gcs_tier(), with $STORAGE_EMULATOR_HOST and the Application Default Credentials looked up in `env`.
Result<std::shared_ptr<Tier>> make_gcs_tier_with_env(GcsTierOptions options, cloud::CredentialEnv env);

// The sentence for a GCS JSON API error response ({"error": {"code", "message"}}): what went wrong and what to do,
// keeping the service's code; "" when `body` is not such a response. The HttpRequest::describe_error_body of every
// request of the tier, so that no raw body reaches a message.
std::string describe_gcs_error(long status, std::string_view body);

// One page of objects.list (the JSON body of GET /storage/v1/b/<bucket>/o).
struct ObjectListPage {
  std::vector<cloud::ListedObject> objects;    // name, size and `updated` (RFC 3339) of each item
  std::optional<std::string> next_page_token;  // nullopt on the last page
};
// Parses a page. remote error, naming `location` and the object, for a body that is not a JSON object or an item
// whose size or `updated` time cannot be read. Items without a name are skipped.
Result<ObjectListPage> parse_object_list(const std::string& body, const std::string& location);

}  // namespace datavo::gcs
