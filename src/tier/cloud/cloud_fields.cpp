// The shards.yaml fields every cloud tier shares (CloudTierOptions), parsed once for S3, GCS and Azure Blob.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "datavo/cloud_tier.hpp"
#include "tier/registry.hpp"
#include "util/decimal.hpp"

namespace datavo {

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
  // A space typed for %20 would be sent raw, and the request line would end at it.
  const auto bad = std::find_if(url.begin(), url.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; });
  if (bad != url.end()) {
    return "must not contain whitespace or control characters (byte offset " + std::to_string(bad - url.begin()) +
           "; percent-encode a space as %20)";
  }
  if (rest.empty() || rest.front() == '/') return "has no host";
  if (rest.find_first_of("?#") != std::string::npos) return "must not have a query string";
  if (rest.substr(0, rest.find('/')).find('@') != std::string::npos) return "must not carry credentials";
  return "";
}

namespace {

// "p<N>" (N from 50 to 99), "<n>ms", or a parse_duration() value.
Result<void> parse_hedge_after(TierFields& fields, const std::string& text, HedgePolicy& out) {
  if (text.size() == 3 && text[0] == 'p' && std::isdigit(static_cast<unsigned char>(text[1])) &&
      std::isdigit(static_cast<unsigned char>(text[2])) && text[1] >= '5') {
    out.after.reset();
    out.percentile = (text[1] - '0') * 10 + (text[2] - '0');
    return {};
  }
  std::optional<Milliseconds> after;
  if (text.ends_with("ms")) {
    if (auto n = util::parse_decimal(std::string_view(text).substr(0, text.size() - 2)); n && *n <= 86'400'000)
      after = Milliseconds{static_cast<Milliseconds::rep>(*n)};
  } else if (auto seconds = parse_duration(text)) {
    after = std::chrono::duration_cast<Milliseconds>(*seconds);
  }
  if (!after || *after <= Milliseconds{0}) {
    return fields.fail("hedge_after",
                       "expected p50 to p99 (a percentile of the tier's recent ranged GETs) or a "
                       "positive duration (\"250ms\", \"2s\"), got \"" +
                           text + "\"");
  }
  out.after = after;
  return {};
}

// hedge (true / false), hedge_after and hedge_max_fraction ("<n>%", more than 0 and at most 100).
Result<void> parse_hedge_fields(TierFields& fields, HedgePolicy& out) {
  auto on = fields.optional_bool("hedge");
  if (!on) return std::move(on).error();
  if (*on) out.mode = **on ? Hedging::on : Hedging::off;
  fields.effective("hedge", out.mode == Hedging::on ? "true" : "false");

  auto after = fields.optional_string("hedge_after");
  if (!after) return std::move(after).error();
  if (*after) DATAVO_TRY(parse_hedge_after(fields, **after, out));
  fields.effective("hedge_after",
                   out.after ? std::to_string(out.after->count()) + "ms" : "p" + std::to_string(out.percentile));

  auto fraction = fields.optional_string("hedge_max_fraction");
  if (!fraction) return std::move(fraction).error();
  if (*fraction) {
    const std::string& text = **fraction;
    std::optional<double> percent;
    if (text.size() > 1 && text.back() == '%') {
      const std::string number = text.substr(0, text.size() - 1);
      char* end = nullptr;
      const double value = std::strtod(number.c_str(), &end);
      if (end == number.c_str() + number.size() && std::isfinite(value)) percent = value;
    }
    if (!percent || *percent <= 0.0 || *percent > 100.0) {
      return fields.fail("hedge_max_fraction", "expected a percentage more than 0% and at most 100% (\"5%\"), got \"" +
                                                   text + "\" (hedge: false turns hedging off)");
    }
    out.max_fraction = *percent / 100.0;
  }
  char shown[32];
  std::snprintf(shown, sizeof shown, "%g%%", out.max_fraction * 100.0);
  fields.effective("hedge_max_fraction", shown);
  return {};
}

}  // namespace

Result<void> parse_cloud_fields(TierFields& fields, const TierConfig& config, const PartSizeLimits& part_size_limits,
                                CloudTierOptions& out) {
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
    const PartSizeLimits& limits = part_size_limits;
    if (**part_size < limits.min || **part_size > limits.max ||
        (*part_size)->count() % limits.multiple_of.count() != 0) {
      const std::string multiple =
          limits.multiple_of == Bytes{1} ? "" : " and a multiple of " + format_byte_size(limits.multiple_of);
      return fields.fail("part_size", "must be from " + format_byte_size(limits.min) + " to " +
                                          format_byte_size(limits.max) + multiple + " (" + std::string(limits.whose) +
                                          ")");
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

  auto max_age = fields.max_age();
  if (!max_age) return std::move(max_age).error();
  out.max_age = *max_age;

  DATAVO_TRY(parse_hedge_fields(fields, out.hedge));

  auto single_flight = fields.optional_bool("single_flight");
  if (!single_flight) return std::move(single_flight).error();
  if (*single_flight) out.single_flight = **single_flight;
  fields.effective("single_flight", out.single_flight ? "true" : "false");
  return {};
}

}  // namespace datavo
