// The GCS tier's entry in the tier registry: its shards.yaml fields, their parser and its factory.
#include <algorithm>

#include "datavo/gcs_tier.hpp"
#include "tier/registry.hpp"

namespace datavo {
namespace {

// Roughly Google's bucket naming rules; an empty string means valid.
std::string gcs_bucket_problem(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 222) return "must be 3 to 222 characters";
  for (char c : bucket) {
    if (!is_lower_alnum(c) && c != '.' && c != '-' && c != '_') return "may contain only a-z, 0-9, '.', '-' and '_'";
  }
  if (!is_lower_alnum(bucket.front()) || !is_lower_alnum(bucket.back())) {
    return "must start and end with a letter or digit";
  }
  if (bucket.find("..") != std::string::npos) return "must not contain \"..\"";
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = bucket.find('.', start);
    std::size_t end = dot == std::string::npos ? bucket.size() : dot;
    if (end - start > 63) return "each dot-separated part must be at most 63 characters";
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (bucket.rfind("goog", 0) == 0) return "must not start with \"goog\"";
  if (looks_like_ipv4(bucket)) return "must not look like an IP address";
  return "";
}

Result<void> parse_gcs(TierFields& fields, TierConfig& config) {
  GcsTierOptions options;
  auto bucket = fields.required_string("bucket");
  if (!bucket) return std::move(bucket).error();
  if (auto problem = gcs_bucket_problem(*bucket); !problem.empty()) {
    return fields.fail("bucket", "invalid GCS bucket name \"" + *bucket + "\": " + problem);
  }
  options.bucket = std::move(*bucket);
  fields.effective("bucket", options.bucket);
  if (config.name.empty()) config.name = options.bucket;

  auto project = fields.optional_string("project");
  if (!project) return std::move(project).error();
  if (*project && !std::all_of((*project)->begin(), (*project)->end(),
                               [](char c) { return is_lower_alnum(c) || c == '-' || c == '.' || c == ':'; })) {
    return fields.fail("project", "invalid project id \"" + **project + "\" (expected e.g. datavo-prod)");
  }
  options.project = std::move(*project);
  fields.effective("project", options.project.value_or("(none: no userProject)"));

  auto endpoint = fields.optional_string("endpoint_url");
  if (!endpoint) return std::move(endpoint).error();
  if (*endpoint) {
    if (auto problem = endpoint_problem(**endpoint); !problem.empty()) {
      return fields.fail("endpoint_url", "invalid endpoint_url \"" + **endpoint + "\": " + problem);
    }
    while ((*endpoint)->back() == '/') (*endpoint)->pop_back();
  }
  options.endpoint_url = std::move(*endpoint);
  fields.effective("endpoint_url",
                   options.endpoint_url.value_or("(STORAGE_EMULATOR_HOST, else https://storage.googleapis.com)"),
                   "resolved at first use");

  // GCS's resumable uploads take chunks in multiples of 256 KiB; its objects may be larger than 5 GiB, a chunk
  // is kept below that as on the other clouds.
  constexpr PartSizeLimits k_part_size{k_min_part_size, GiB(5), KiB(256),
                                       "GCS takes resumable-upload chunks in multiples of 256 KiB; 5 MiB to 5 GiB "
                                       "are the cloud tiers' bounds"};
  DATAVO_TRY(parse_cloud_fields(fields, config, k_part_size, options.remote));
  config.backend = std::move(options);
  return {};
}

Result<std::shared_ptr<Tier>> make_gcs(const TierConfig& config) {
  return make_cloud_tier<GcsTierOptions>(config, "GCS", &make_gcs_tier);
}

}  // namespace

const TierType& gcs_tier_type() {
  static const TierType type{
      "gcs",
      "a",
      {"bucket", "project", "endpoint_url", "prefix", "part_size", "concurrency", "upload", "single_flight",
       "lease_duration", "hedge", "hedge_after", "hedge_max_fraction", "max_age"},
      {},
      &parse_gcs,
      &make_gcs};
  return type;
}

}  // namespace datavo
