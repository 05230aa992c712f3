// The Google Cloud Storage tier (type: gcs), over the JSON API. docs/config.md, "GCS tiers", documents every
// field and the Application Default Credentials order. Constructing a tier does no I/O and needs no credentials.
//
// Thread safety: the tier is safe to use from any number of threads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datavo/cloud_tier.hpp"
#include "datavo/tier.hpp"

namespace datavo {

struct GcsTierOptions {
  CloudTierOptions remote;
  std::string bucket;
  // Sent as userProject (requester pays) only when set.
  std::optional<std::string> project;
  // nullopt: STORAGE_EMULATOR_HOST (which also means no credentials), else https://storage.googleapis.com.
  std::optional<std::string> endpoint_url;
};

Result<std::shared_ptr<Tier>> make_gcs_tier(GcsTierOptions options);

}  // namespace datavo
