#include "tier/cloud/credentials.hpp"

#include <pwd.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "util/log.hpp"
#include "util/percent.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;

constexpr WallClock::duration k_max_refresh_margin = 5min;

std::optional<long long> as_integer(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<long long>();
  if (value.is_number_float()) return static_cast<long long>(value.get<double>());
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    long long out = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec == std::errc() && end == text.data() + text.size()) return out;
  }
  return std::nullopt;
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

CredentialEnv CredentialEnv::from_process() {
  CredentialEnv env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    env.home = home;
  } else if (const passwd* entry = ::getpwuid(::getuid()); entry != nullptr && entry->pw_dir != nullptr) {
    env.home = entry->pw_dir;
  }
  env.now = [] { return WallClock::now(); };
  return env;
}

std::optional<std::string> CredentialEnv::get(const std::string& name) const {
  if (!getenv) return std::nullopt;
  auto value = getenv(name);
  if (!value || value->empty()) return std::nullopt;
  return value;
}

WallClock::duration refresh_margin(WallClock::duration lifetime) {
  if (lifetime <= WallClock::duration::zero()) return WallClock::duration::zero();
  return std::min(k_max_refresh_margin, lifetime / 2);
}

Result<AccessToken> TokenCache::get(WallClock::time_point now, const Fetch& fetch, std::string_view what) {
  std::lock_guard lock(mutex_);
  if (token_) {
    const auto margin = refresh_margin(token_->expires_at - obtained_at_);
    if (now + margin < token_->expires_at) return *token_;
  }
  auto fresh = fetch();
  if (!fresh) {
    if (token_ && now < token_->expires_at) {
      LOG_WARNING(what << ": refreshing the access token ahead of its expiry failed (" << fresh.error().message
                       << "); using the current one until it expires");
      return *token_;
    }
    token_.reset();
    return std::move(fresh).error();
  }
  token_ = std::move(*fresh);
  obtained_at_ = now;
  return *token_;
}

void TokenCache::invalidate() {
  std::lock_guard lock(mutex_);
  token_.reset();
}

std::optional<std::string> percent_decode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex(text[i + 1]), low = hex(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

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
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object())
    return Error{ErrorCode::remote, std::string(what) + ": the token response is not a JSON object"};
  const auto token = json.find(std::string(token_field));
  if (token == json.end() || !token->is_string() || token->get_ref<const std::string&>().empty())
    return Error{ErrorCode::remote,
                 std::string(what) + ": the token response has no \"" + std::string(token_field) + "\" string"};
  AccessToken out;
  out.token = token->get<std::string>();
  if (auto in = json.find("expires_in"); in != json.end()) {
    const auto seconds = as_integer(*in);
    if (!seconds || *seconds < 0)
      return Error{ErrorCode::remote, std::string(what) + ": \"expires_in\" in the token response is not a number"};
    out.expires_at = now + std::chrono::seconds(*seconds);
  } else if (auto on = json.find("expires_on"); on != json.end()) {
    const auto epoch = as_integer(*on);
    if (!epoch)
      return Error{ErrorCode::remote, std::string(what) + ": \"expires_on\" in the token response is not a number"};
    out.expires_at = WallClock::time_point(std::chrono::seconds(*epoch));
  } else {
    return Error{ErrorCode::remote, std::string(what) + ": the token response has neither expires_in nor expires_on"};
  }
  return out;
}

std::optional<WallClock::time_point> parse_rfc3339_utc(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':' || (text.back() != 'Z' && text.back() != 'z'))
    return std::nullopt;
  auto number = [&](std::size_t at, std::size_t size) -> std::optional<int> {
    const auto part = text.substr(at, size);
    if (!all_digits(part)) return std::nullopt;
    int out = 0;
    std::from_chars(part.data(), part.data() + part.size(), out);
    return out;
  };
  const auto year = number(0, 4), month = number(5, 2), day = number(8, 2);
  const auto hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  const auto rest = text.substr(19, text.size() - 20);
  if (!rest.empty() && (rest[0] != '.' || !all_digits(rest.substr(1)))) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const time_t seconds = ::timegm(&tm);
  if (seconds == static_cast<time_t>(-1)) return std::nullopt;
  return WallClock::from_time_t(seconds);
}

}  // namespace datavo::cloud
