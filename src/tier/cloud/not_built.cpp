// Placeholder factories until the backends land; removed by the commits that add them.
#include "datavo/azure_blob_tier.hpp"
#include "datavo/gcs_tier.hpp"

namespace datavo {
namespace {
Error not_built(const std::string& name, const char* type) {
  return Error{ErrorCode::unsupported,
               "tier '" + name + "' has type " + type + ", which this build of datavo does not provide yet"};
}
}  // namespace
Result<std::shared_ptr<Tier>> make_gcs_tier(GcsTierOptions options) { return not_built(options.remote.name, "gcs"); }
Result<std::shared_ptr<Tier>> make_azure_blob_tier(AzureBlobTierOptions options) {
  return not_built(options.remote.name, "azure_blob");
}
}  // namespace datavo
