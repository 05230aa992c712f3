// Placeholder factories until the backends land; removed by the commits that add them.
#include "datavo/azure_blob_tier.hpp"
#include "datavo/gcs_tier.hpp"
#include "datavo/s3_tier.hpp"
#include "tier/registry.hpp"

namespace datavo {
namespace {
Error not_built(const std::string& name, const char* type) {
  return Error{ErrorCode::unsupported,
               "tier '" + name + "' has type " + type + ", which this build of datavo does not provide yet"};
}
}  // namespace

bool tier_type_is_placeholder(std::string_view type) { return type == "s3" || type == "gcs" || type == "azure_blob"; }

Result<std::shared_ptr<Tier>> make_s3_tier(S3TierOptions options) { return not_built(options.remote.name, "s3"); }
Result<std::shared_ptr<Tier>> make_gcs_tier(GcsTierOptions options) { return not_built(options.remote.name, "gcs"); }
Result<std::shared_ptr<Tier>> make_azure_blob_tier(AzureBlobTierOptions options) {
  return not_built(options.remote.name, "azure_blob");
}
}  // namespace datavo
