// The Azure Blob tier's entry in the tier registry: its shards.yaml fields, their parser and its factory.
#include <algorithm>
#include <cctype>

#include "datavo/azure_blob_tier.hpp"
#include "tier/registry.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

// The URL up to its query string or fragment: what may appear in logs and in a default tier name.
std::string without_query(const std::string& url) { return url.substr(0, url.find_first_of("?#")); }

std::string container_url_problem(const std::string& url) {
  std::string scheme_end = "://";
  std::size_t scheme_length = url.find(scheme_end);
  std::string scheme = scheme_length == std::string::npos ? "" : url.substr(0, scheme_length);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https") return "expected an http:// or https:// URL";
  if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; })) {
    return "must not contain spaces or control characters";
  }
  std::string rest = without_query(url.substr(scheme_length + scheme_end.size()));
  std::size_t slash = rest.find('/');
  if (slash == 0 || rest.empty()) return "has no host";
  if (slash == std::string::npos || slash + 1 >= rest.size()) {
    return "names no container (expected e.g. https://<account>.blob.core.windows.net/<container>)";
  }
  return "";
}

Result<void> parse_azure(TierFields& fields, TierConfig& config) {
  AzureBlobTierOptions options;
  auto url = fields.required_string("container_url");
  if (!url) return std::move(url).error();
  if (auto problem = container_url_problem(*url); !problem.empty()) {
    return fields.fail("container_url", "invalid container_url \"" + log::redact_url(*url) + "\": " + problem);
  }
  while (url->back() == '/') url->pop_back();
  options.container_url = std::move(*url);
  fields.effective("container_url", options.container_url);
  if (config.name.empty()) config.name = without_query(options.container_url);

  auto sas_token = fields.optional_string("sas_token", Secret::yes);
  if (!sas_token) return std::move(sas_token).error();
  options.sas_token = std::move(*sas_token);
  fields.effective("sas_token", options.sas_token ? "<redacted>" : "(none)", "default", Secret::no);

  auto client_id = fields.optional_string("managed_identity_client_id");
  if (!client_id) return std::move(client_id).error();
  if (*client_id &&
      std::any_of((*client_id)->begin(), (*client_id)->end(), [](unsigned char c) { return std::isspace(c) != 0; })) {
    return fields.fail("managed_identity_client_id", "must not contain spaces");
  }
  options.managed_identity_client_id = std::move(*client_id);
  fields.effective("managed_identity_client_id", options.managed_identity_client_id.value_or("(none)"));

  constexpr PartSizeLimits k_part_size{k_min_part_size, MiB(4000), Bytes{1},
                                       "Azure's largest block is 4000 MiB; 5 MiB is the cloud tiers' smallest part"};
  DATAVO_TRY(parse_cloud_fields(fields, config, k_part_size, options.remote));
  config.backend = std::move(options);
  return {};
}

Result<std::shared_ptr<Tier>> make_azure(const TierConfig& config) {
  return make_cloud_tier<AzureBlobTierOptions>(config, "Azure Blob", &make_azure_blob_tier);
}

}  // namespace

const TierType& azure_blob_tier_type() {
  static const TierType type{
      "azure_blob",
      "an",
      {"container_url", "sas_token", "managed_identity_client_id", "prefix", "part_size", "concurrency", "upload",
       "single_flight", "lease_duration", "hedge", "hedge_after", "hedge_max_fraction", "max_age"},
      {},
      &parse_azure,
      &make_azure};
  return type;
}

}  // namespace datavo
