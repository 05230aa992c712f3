// The shards.yaml fields every cloud tier shares (CloudTierOptions), parsed once for S3, GCS and Azure Blob.
#include "datavo/cloud_tier.hpp"
#include "tier/registry.hpp"

namespace datavo {
namespace {

// S3's limit on one part (and well above what anyone wants as a parallel-read unit).
constexpr Bytes k_max_part_size = GiB(5);

}  // namespace

bool looks_like_ipv4(std::string_view text) {
  int dots = 0;
  for (char c : text) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

std::string endpoint_problem(const std::string& url) {
  const auto scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return "expected an http:// or https:// URL";
  const std::string rest = url.substr(scheme_end + 3);
  if (rest.empty() || rest.front() == '/') return "has no host";
  if (rest.find_first_of("?#") != std::string::npos) return "must not have a query string";
  if (rest.substr(0, rest.find('/')).find('@') != std::string::npos) return "must not carry credentials";
  return "";
}

Result<void> parse_cloud_fields(TierFields& fields, const TierConfig& config, CloudTierOptions& out) {
  out.name = config.name;
  out.max_bytes = config.max_bytes;
  out.access = config.access;

  auto prefix = fields.optional_string("prefix");
  if (!prefix) return std::move(prefix).error();
  if (*prefix) {
    std::string text = **prefix;
    // Normalised: "/team-a/" and "team-a" name the same objects.
    while (!text.empty() && text.front() == '/') text.erase(text.begin());
    while (!text.empty() && text.back() == '/') text.pop_back();
    if (text.find("..") != std::string::npos)
      return fields.fail("prefix", "invalid prefix \"" + **prefix + "\": must not contain \"..\"");
    if (text.find("//") != std::string::npos)
      return fields.fail("prefix", "invalid prefix \"" + **prefix + "\": must not contain \"//\"");
    if (!text.empty()) out.prefix = std::move(text);
  }
  fields.effective("prefix", out.prefix.value_or("(none)"));

  auto part_size = fields.optional_size("part_size");
  if (!part_size) return std::move(part_size).error();
  if (*part_size) {
    if (**part_size < k_min_part_size || **part_size > k_max_part_size) {
      return fields.fail("part_size", "must be from " + format_byte_size(k_min_part_size) + " to " +
                                          format_byte_size(k_max_part_size) +
                                          " (S3's part limits, which every cloud tier keeps)");
    }
    out.part_size = **part_size;
  }
  fields.effective("part_size", format_byte_size(out.part_size));

  auto concurrency = fields.optional_integer("concurrency", 1, k_max_concurrency);
  if (!concurrency) return std::move(concurrency).error();
  if (*concurrency) out.concurrency = std::size_t(**concurrency);
  fields.effective("concurrency", std::to_string(out.concurrency));

  auto upload = fields.choice<UploadMode>(
      "upload", {{"background", UploadMode::background}, {"sync", UploadMode::sync}}, UploadMode::background);
  if (!upload) return std::move(upload).error();
  out.upload = *upload;
  fields.effective("upload", to_string(out.upload));

  auto lease = fields.optional_duration("lease_duration");
  if (!lease) return std::move(lease).error();
  if (*lease) {
    if (**lease < Seconds{3}) return fields.fail("lease_duration", "must be at least 3s");
    out.lease_duration = **lease;
  }
  fields.effective("lease_duration", format_duration(out.lease_duration));

  auto single_flight = fields.optional_bool("single_flight");
  if (!single_flight) return std::move(single_flight).error();
  if (*single_flight) out.single_flight = **single_flight;
  fields.effective("single_flight", out.single_flight ? "true" : "false");
  return {};
}

}  // namespace datavo
