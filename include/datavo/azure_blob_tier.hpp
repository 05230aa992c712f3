// The Azure Blob tier (type: azure_blob). docs/config.md, "Azure Blob tiers", documents every field and the
// credential order. Constructing a tier does no I/O and needs no credentials.
//
// Thread safety: the tier is safe to use from any number of threads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datavo/cloud_tier.hpp"
#include "datavo/tier.hpp"

namespace datavo {

struct AzureBlobTierOptions {
  CloudTierOptions remote;
  // https://<account>.blob.core.windows.net/<container>, or a custom host such as Azurite's
  // http://127.0.0.1:10000/devstoreaccount1/<container>.
  std::string container_url;
  // A secret: never logged, never shown. With or without its leading '?'.
  std::optional<std::string> sas_token;
  std::optional<std::string> managed_identity_client_id;
};

Result<std::shared_ptr<Tier>> make_azure_blob_tier(AzureBlobTierOptions options);

}  // namespace datavo
