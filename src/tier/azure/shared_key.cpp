#include "tier/azure/shared_key.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <vector>

#include "util/base64.hpp"
#include "util/percent.hpp"
#include "util/text.hpp"

namespace datavo::azure {
namespace {

// The path and the query of an absolute http(s) URL; nullopt when it has no "scheme://host".
struct UrlParts {
  std::string_view path;
  std::string_view query;
};
std::optional<UrlParts> split_url(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos || scheme == 0) return std::nullopt;
  auto rest = url.substr(scheme + 3);
  if (const auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  const auto path_start = rest.find_first_of("/?");
  if (path_start == 0) return std::nullopt;  // no host
  UrlParts parts;
  if (path_start == std::string_view::npos) return parts;
  rest = rest.substr(path_start);
  const auto question = rest.find('?');
  parts.path = rest.substr(0, question);
  if (question != std::string_view::npos) parts.query = rest.substr(question + 1);
  return parts;
}

}  // namespace

Result<SharedKey> make_shared_key(std::string account, std::string_view key_base64, std::string_view origin) {
  auto invalid = [&] {
    return Error{ErrorCode::config, "the account key in " + std::string(origin) + " is not base64"};
  };
  const auto text = util::trim(key_base64);
  auto decoded = util::base64_decode(text);
  if (text.empty() || !decoded) return invalid();
  if (account.empty())
    return Error{ErrorCode::config, "the account name for the key in " + std::string(origin) + " is empty"};
  return SharedKey{std::move(account), std::move(*decoded)};
}

std::string http_date(cloud::WallClock::time_point time) {
  const std::time_t seconds = cloud::WallClock::to_time_t(time);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  // strftime's %a and %b follow the locale; the header wants the English names.
  static constexpr const char* k_days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* k_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%s, %02d %s %04d %02d:%02d:%02d GMT", k_days[tm.tm_wday], tm.tm_mday,
                k_months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buffer;
}

Result<std::string> canonicalized_resource(std::string_view url, std::string_view account) {
  const auto parts = split_url(url);
  if (!parts) return Error{ErrorCode::invalid_argument, "not an absolute URL with a host"};
  std::string out = "/" + std::string(account) + (parts->path.empty() ? std::string("/") : std::string(parts->path));
  std::map<std::string, std::vector<std::string>> parameters;
  std::string_view query = parts->query;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto equals = pair.find('=');
    auto name = util::percent_decode(pair.substr(0, equals), util::Plus::space);
    auto value = util::percent_decode(equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1),
                                      util::Plus::space);
    if (!name || !value) return Error{ErrorCode::invalid_argument, "malformed percent-escape in the query string"};
    parameters[util::to_lower(*name)].push_back(std::move(*value));
  }
  for (auto& [name, values] : parameters) {
    std::sort(values.begin(), values.end());
    out += "\n" + name + ":";
    for (std::size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : ",") + values[i];
  }
  return out;
}

std::string canonicalized_headers(const net::HttpHeaders& headers) {
  std::map<std::string, std::string> ms;
  for (const auto& header : headers) {
    std::string name = util::to_lower(util::trim(header.name));
    if (!name.starts_with("x-ms-")) continue;
    auto [it, inserted] = ms.emplace(name, std::string(util::trim(header.value)));
    if (!inserted) it->second += "," + std::string(util::trim(header.value));
  }
  std::string out;
  for (const auto& [name, value] : ms) out += name + ":" + value + "\n";
  return out;
}

Result<std::string> string_to_sign(const net::PreparedRequest& request, std::string_view account) {
  auto header = [&](std::string_view name) {
    return std::string(net::find_header(request.headers, name).value_or(""));
  };
  std::string content_length = header("Content-Length");
  if (!net::find_header(request.headers, "Content-Length") && request.body_size > 0)
    content_length = std::to_string(request.body_size);
  if (content_length == "0") content_length.clear();

  auto resource = canonicalized_resource(request.url, account);
  if (!resource) return std::move(resource).error();
  std::string out = std::string(net::to_string(request.method)) + "\n";
  out += header("Content-Encoding") + "\n";
  out += header("Content-Language") + "\n";
  out += content_length + "\n";
  out += header("Content-MD5") + "\n";
  out += header("Content-Type") + "\n";
  out += header("Date") + "\n";
  out += header("If-Modified-Since") + "\n";
  out += header("If-Match") + "\n";
  out += header("If-None-Match") + "\n";
  out += header("If-Unmodified-Since") + "\n";
  out += header("Range") + "\n";
  out += canonicalized_headers(request.headers);
  out += *resource;
  return out;
}

std::string hmac_sha256_base64(std::string_view key, std::string_view text) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()),
       text.size(), mac, &size);
  return util::base64_encode(std::string_view(reinterpret_cast<const char*>(mac), size));
}

void set_date_and_version(net::PreparedRequest& request, cloud::WallClock::time_point now) {
  auto& headers = request.headers;
  headers.erase(std::remove_if(headers.begin(), headers.end(),
                               [](const net::HttpHeader& h) { return util::to_lower(h.name) == "x-ms-date"; }),
                headers.end());
  headers.push_back({"x-ms-date", http_date(now)});
  if (!net::find_header(headers, "x-ms-version")) headers.push_back({"x-ms-version", k_storage_api_version});
}

Result<void> sign_shared_key(net::PreparedRequest& request, const SharedKey& key, cloud::WallClock::time_point now) {
  set_date_and_version(request, now);
  auto text = string_to_sign(request, key.account);
  if (!text) return Error{text.error().code, "SharedKey signing: " + text.error().message};
  request.headers.push_back({"Authorization", "SharedKey " + key.account + ":" + hmac_sha256_base64(key.key, *text)});
  return ok();
}

}  // namespace datavo::azure
