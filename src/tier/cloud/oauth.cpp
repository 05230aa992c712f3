#include "tier/cloud/oauth.hpp"

#include <nlohmann/json.hpp>

#include "util/decimal.hpp"
#include "util/percent.hpp"

namespace datavo::cloud {
namespace {

// Larger counts of seconds (about 158 years) are not times a token endpoint means; the bound keeps the time point
// arithmetic far from overflowing.
constexpr std::uint64_t k_max_seconds = 5'000'000'000;

// A JSON number, or a string of decimal digits (IMDS writes its numbers as strings).
std::optional<std::uint64_t> as_count(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    const auto number = value.get<long long>();
    return number < 0 ? std::nullopt : std::optional<std::uint64_t>(std::uint64_t(number));
  }
  if (value.is_number_float()) {
    const auto number = value.get<double>();
    return number < 0 ? std::nullopt : std::optional<std::uint64_t>(std::uint64_t(number));
  }
  if (value.is_string()) return util::parse_decimal(value.get_ref<const std::string&>());
  return std::nullopt;
}

std::optional<std::uint64_t> as_seconds(const nlohmann::json& value) {
  const auto count = as_count(value);
  if (!count || *count > k_max_seconds) return std::nullopt;
  return count;
}

}  // namespace

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += '&';
    out += util::percent_encode(name);
    out += '=';
    out += util::percent_encode(value);
  }
  return out;
}

Result<AccessToken> parse_token_response(std::string_view body, WallClock::time_point now, std::string_view what,
                                         std::string_view token_field) {
  const std::string prefix = std::string(what) + ": ";
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return Error{ErrorCode::remote, prefix + "the token response is not a JSON object"};
  const auto token = json.find(std::string(token_field));
  if (token == json.end() || !token->is_string() || token->get_ref<const std::string&>().empty())
    return Error{ErrorCode::remote, prefix + "the token response has no \"" + std::string(token_field) + "\" string"};
  AccessToken out;
  out.token = token->get<std::string>();
  if (auto in = json.find("expires_in"); in != json.end()) {
    const auto seconds = as_seconds(*in);
    if (!seconds) return Error{ErrorCode::remote, prefix + "\"expires_in\" in the token response is not a number"};
    out.expires_at = now + std::chrono::seconds(*seconds);
  } else if (auto on = json.find("expires_on"); on != json.end()) {
    const auto epoch = as_seconds(*on);
    if (!epoch) return Error{ErrorCode::remote, prefix + "\"expires_on\" in the token response is not a number"};
    out.expires_at = WallClock::time_point(std::chrono::seconds(*epoch));
  } else {
    return Error{ErrorCode::remote, prefix + "the token response has neither expires_in nor expires_on"};
  }
  return out;
}

}  // namespace datavo::cloud
