// The S3 tier's entry in the tier registry: its shards.yaml fields, their parser and its factory.
#include "tier/s3/s3_type.hpp"

#include <algorithm>

#include "datavo/s3_tier.hpp"
#include "tier/registry.hpp"

namespace datavo {

std::string s3::bucket_name_problem(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return "must be 3 to 63 characters";
  for (char c : bucket) {
    if (!is_lower_alnum(c) && c != '.' && c != '-') return "may contain only a-z, 0-9, '.' and '-'";
  }
  if (!is_lower_alnum(bucket.front()) || !is_lower_alnum(bucket.back())) {
    return "must start and end with a letter or digit";
  }
  if (bucket.find("..") != std::string::npos || bucket.find(".-") != std::string::npos ||
      bucket.find("-.") != std::string::npos) {
    return "must not contain \"..\", \".-\" or \"-.\"";
  }
  if (looks_like_ipv4(bucket)) return "must not look like an IP address";
  return "";
}

namespace {

Result<void> parse_s3(TierFields& fields, TierConfig& config) {
  S3TierOptions options;
  auto bucket = fields.required_string("bucket");
  if (!bucket) return std::move(bucket).error();
  if (auto problem = s3::bucket_name_problem(*bucket); !problem.empty()) {
    return fields.fail("bucket", "invalid S3 bucket name \"" + *bucket + "\": " + problem);
  }
  options.bucket = std::move(*bucket);
  fields.effective("bucket", options.bucket);
  if (config.name.empty()) config.name = options.bucket;

  auto region = fields.optional_string("region");
  if (!region) return std::move(region).error();
  // R2's region is "auto"; AWS's are like us-east-1.
  if (*region &&
      !std::all_of((*region)->begin(), (*region)->end(), [](char c) { return is_lower_alnum(c) || c == '-'; })) {
    return fields.fail("region", "invalid region \"" + **region + "\" (expected e.g. us-east-1, or auto for R2)");
  }
  options.region = std::move(*region);
  fields.effective("region", options.region.value_or("(AWS_REGION, AWS_DEFAULT_REGION, the profile, else us-east-1)"),
                   "resolved at first use");

  auto endpoint = fields.optional_string("endpoint_url");
  if (!endpoint) return std::move(endpoint).error();
  if (*endpoint) {
    if (auto problem = endpoint_problem(**endpoint); !problem.empty()) {
      return fields.fail("endpoint_url", "invalid endpoint_url \"" + **endpoint + "\": " + problem);
    }
    while ((*endpoint)->back() == '/') (*endpoint)->pop_back();
  }
  options.endpoint_url = std::move(*endpoint);
  fields.effective("endpoint_url", options.endpoint_url.value_or("(AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)"),
                   "resolved at first use");

  auto style = fields.choice<AddressingStyle>("addressing_style",
                                              {{"auto", AddressingStyle::automatic},
                                               {"path", AddressingStyle::path},
                                               {"virtual", AddressingStyle::virtual_hosted}},
                                              AddressingStyle::automatic);
  if (!style) return std::move(style).error();
  options.addressing_style = *style;
  fields.effective("addressing_style", to_string(options.addressing_style));

  auto profile = fields.optional_string("profile");
  if (!profile) return std::move(profile).error();
  options.profile = std::move(*profile);
  fields.effective("profile", options.profile.value_or("(AWS_PROFILE, else default)"), "resolved at first use");

  // S3 takes parts of 5 MiB to 5 GiB.
  constexpr PartSizeLimits k_part_size{k_min_part_size, GiB(5), Bytes{1}, "S3's multipart part limits"};
  DATAVO_TRY(parse_cloud_fields(fields, config, k_part_size, options.remote));
  config.backend = std::move(options);
  return {};
}

Result<std::shared_ptr<Tier>> make_s3(const TierConfig& config) {
  return make_cloud_tier<S3TierOptions>(config, "S3", &make_s3_tier);
}

}  // namespace

const char* to_string(AddressingStyle style) {
  switch (style) {
    case AddressingStyle::automatic: return "auto";
    case AddressingStyle::path: return "path";
    case AddressingStyle::virtual_hosted: return "virtual";
  }
  return "auto";
}

const TierType& s3_tier_type() {
  static const TierType type{
      "s3",
      "an",
      {"bucket", "region", "endpoint_url", "addressing_style", "profile", "prefix", "part_size", "concurrency",
       "upload", "single_flight", "lease_duration", "hedge", "hedge_after", "hedge_max_fraction", "max_age"},
      {},
      &parse_s3,
      &make_s3};
  return type;
}

}  // namespace datavo
