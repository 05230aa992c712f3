// What the credential providers of the cloud tiers (src/tier/gcs/credentials.hpp, src/tier/azure/credentials.hpp)
// share: the environment seam they read, the access token they return, the cache that refreshes it ahead of its
// expiry, form encoding and the parsing of OAuth 2.0 token responses.
//
// Secrets: an AccessToken's text, and whatever a provider reads to get one (keys, client secrets, refresh tokens,
// assertions), never appear in a log line or an Error message; providers name files, variables and (redacted)
// URLs instead.
//
// Thread safety: CredentialEnv is a value whose functions must be callable from any thread; TokenCache is
// thread-safe; the free functions are reentrant.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/result.hpp"

namespace datavo::cloud {

using WallClock = std::chrono::system_clock;

// Where the providers look: environment variables, the home directory and the time. Tests give their own, so that
// nothing depends on the real environment; from_process() is the real one.
struct CredentialEnv {
  // The value of an environment variable, nullopt when unset.
  std::function<std::optional<std::string>(const std::string& name)> getenv;
  std::string home;  // the user's home directory (for ~/.config/gcloud), "" when unknown
  std::function<WallClock::time_point()> now;

  // ::getenv, $HOME (else the passwd entry), std::chrono::system_clock::now.
  static CredentialEnv from_process();

  // getenv(name), with an empty value treated as unset (as the cloud SDKs do).
  std::optional<std::string> get(const std::string& name) const;
};

// A bearer token and when it stops working. `token` is a secret: never log it.
struct AccessToken {
  std::string token;
  WallClock::time_point expires_at;
};

// How long before its expiry a token of `lifetime` is refreshed: min(5 min, lifetime / 2). Five minutes, as the
// Azure SDKs and gcloud do, for ordinary one-hour tokens; half the lifetime for short ones, so that a token
// living a few seconds (tests, very short STS tokens) is still refreshed before it expires.
WallClock::duration refresh_margin(WallClock::duration lifetime);

// One cached token and its refresh policy.
class TokenCache {
 public:
  using Fetch = std::function<Result<AccessToken>()>;

  // The cached token, unless there is none, it was invalidated, or less than refresh_margin(its lifetime) is left
  // of it at `now`: then fetch() is called (under the lock, so concurrent callers wait for one fetch) and its
  // token cached. When a refresh ahead of expiry fails while the cached token is still valid, the cached token is
  // returned (and the failure logged at WARNING), so that a flaky token endpoint costs nothing until the token
  // really expires. `what` names the credential in that log line.
  Result<AccessToken> get(WallClock::time_point now, const Fetch& fetch, std::string_view what);
  // Forgets the cached token: the next get() fetches a new one (after a refusal of the current one).
  void invalidate();

 private:
  std::mutex mutex_;
  std::optional<AccessToken> token_;   // guarded by mutex_
  WallClock::time_point obtained_at_;  // guarded by mutex_
};

// Percent-decoding ('+' is a space, as in forms); nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view text);
// application/x-www-form-urlencoded: name=value pairs, percent-encoded, joined by '&'.
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

// Parses an OAuth 2.0 token response (RFC 6749 section 5.1, and the Azure managed identity variants): the token
// from `token_field` ("access_token", or "accessToken" for the Azure CLI and IAM Credentials), the expiry from
// "expires_in" (seconds from `now`, a number or a numeric string) or else "expires_on" (Unix seconds, a number or
// a numeric string). Errors (ErrorCode::remote) name `what` and the missing field, never a value.
Result<AccessToken> parse_token_response(std::string_view body, WallClock::time_point now, std::string_view what,
                                         std::string_view token_field = "access_token");

// RFC 3339 UTC time ("2024-05-01T12:00:00Z", optional fraction); nullopt when it is not one.
std::optional<WallClock::time_point> parse_rfc3339_utc(std::string_view text);

}  // namespace datavo::cloud
