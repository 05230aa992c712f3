// The S3 tier (type: s3): AWS S3 and the servers that speak its API (MinIO, Ceph RGW, Cloudflare R2, moto).
// docs/config.md, "S3 tiers", documents every field, the endpoint and region resolution and the credential
// order. Constructing a tier does no I/O and needs no credentials; they are resolved at first use.
//
// Thread safety: the tier is safe to use from any number of threads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datavo/cloud_tier.hpp"
#include "datavo/tier.hpp"

namespace datavo {

// How a bucket appears in request URLs: https://bucket.host/key (virtual) or https://host/bucket/key (path).
// auto: virtual-hosted on AWS, path-style on a custom endpoint, as boto3 does.
enum class AddressingStyle { automatic, path, virtual_hosted };
const char* to_string(AddressingStyle style);

struct S3TierOptions {
  CloudTierOptions remote;
  std::string bucket;
  // nullopt: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1.
  std::optional<std::string> region;
  // nullopt: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS's own endpoint for the region.
  std::optional<std::string> endpoint_url;
  AddressingStyle addressing_style = AddressingStyle::automatic;
  // nullopt: AWS_PROFILE, else "default".
  std::optional<std::string> profile;
};

// invalid_argument for a bad bucket name or option; never does I/O.
Result<std::shared_ptr<Tier>> make_s3_tier(S3TierOptions options);

}  // namespace datavo
