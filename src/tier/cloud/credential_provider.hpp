// Credentials that expire, served from a cache with one refresh rule, for every cloud tier: the OAuth access tokens
// of GCS and Azure (AccessToken, TokenProvider) and AWS's keys (s3/aws_credentials.hpp) alike.
//
// The refresh rule: a credential obtained at t0 that expires at t1 is served from the cache until less than
// refresh_margin(t1 - t0) = min(5 min, (t1 - t0) / 2) of it is left; then the next get() fetches a new one. Five
// minutes, as the AWS and Azure SDKs and gcloud do, for ordinary one-hour credentials; half the lifetime for short
// ones, so that a credential living a few seconds is still refreshed before it expires. A credential without an
// expiry (long-term keys) is fetched once, and again only after invalidate().
//   - A refresh ahead of expiry that fails while the cached credential is still valid returns the cached one (the
//     failure logged at WARNING): a flaky endpoint costs nothing until the credential really expires.
//   - A credential that is already expired when it is obtained is refused (permission_denied naming its expiry),
//     as botocore refuses it: it would only be refused by the service, request after request.
//   - Callers that wait while a fetch is in flight share its outcome, success or failure: one fetch serves them.
//
// Secrets: a credential's secret parts never appear in a log line or an Error message; providers name files,
// variables and (redacted) URLs instead.
// Thread safety: CredentialCache and CachingProvider are thread-safe; fetch() runs on one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "datavo/result.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::cloud {

// A bearer token and when it stops working. `token` is a secret: never log it.
struct AccessToken {
  std::string token;
  WallClock::time_point expires_at;
};
// When `token` expires: the hook by which the templates below learn a credential's expiry (found by
// argument-dependent lookup; nullopt for a credential that does not expire).
inline std::optional<WallClock::time_point> expiry_of(const AccessToken& token) { return token.expires_at; }

// min(5 min, lifetime / 2); zero for a lifetime that is not positive.
WallClock::duration refresh_margin(WallClock::duration lifetime);

// The permission_denied Error for a credential that `what` gave already expired.
Error expired_credential(std::string_view what, WallClock::time_point expired_at, WallClock::time_point now);
// The WARNING of a refresh that failed while the cached credential of `what` is still valid.
void log_kept_credential(std::string_view what, const Error& failure);

// One cached credential and the refresh rule above. REQUIRES: expiry_of(const Credential&) returning
// std::optional<WallClock::time_point>.
template <typename Credential>
class CredentialCache {
 public:
  using Fetch = std::function<Result<Credential>()>;

  // The cached credential, unless there is none, it was invalidated, or it is due for refresh at `now`: then
  // fetch() is called (under the lock) and what it returns is cached. `what` names the credential in the WARNING
  // of a failed refresh.
  Result<Credential> get(WallClock::time_point now, const Fetch& fetch, std::string_view what);
  // Forgets the cached credential (after a refusal of it): the next get() fetches a new one.
  void invalidate() {
    std::lock_guard lock(mutex_);
    cached_.reset();
  }

 private:
  bool due(WallClock::time_point now) const {
    const auto expiry = expiry_of(*cached_);
    return expiry && now + refresh_margin(*expiry - obtained_at_) >= *expiry;
  }
  bool valid(WallClock::time_point now) const {
    const auto expiry = expiry_of(*cached_);
    return !expiry || now < *expiry;
  }

  std::mutex mutex_;
  std::optional<Credential> cached_;       // guarded by mutex_
  WallClock::time_point obtained_at_;      // guarded by mutex_
  std::optional<Error> failure_;           // guarded by mutex_: the last fetch's Error when nothing valid was kept
  std::atomic<std::uint64_t> fetches_{0};  // fetches ended; changed under mutex_
};

using TokenCache = CredentialCache<AccessToken>;

template <typename Credential>
Result<Credential> CredentialCache<Credential>::get(WallClock::time_point now, const Fetch& fetch,
                                                    std::string_view what) {
  const std::uint64_t seen = fetches_.load(std::memory_order_acquire);
  std::lock_guard lock(mutex_);
  if (cached_ && !due(now)) return *cached_;
  if (fetches_.load(std::memory_order_relaxed) != seen) {
    // A fetch ended while this caller waited for the lock: its outcome is this caller's too.
    if (failure_) return *failure_;
    if (cached_ && valid(now)) return *cached_;
  }
  auto fresh = fetch();
  fetches_.fetch_add(1, std::memory_order_release);
  if (!fresh) {
    failure_.reset();
    if (cached_ && valid(now)) {
      log_kept_credential(what, fresh.error());
      return *cached_;
    }
    cached_.reset();
    failure_ = fresh.error();
    return std::move(fresh).error();
  }
  failure_.reset();
  cached_ = std::move(*fresh);
  obtained_at_ = now;
  return *cached_;
}

// Where a tier's requests get their credentials.
template <typename Credential>
class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  // A credential valid now (cached, or fetched now). Errors: permission_denied when none can be found, is refused
  // by its issuer or is expired; remote / timeout when an endpoint fails; config for a malformed setting.
  virtual Result<Credential> get() = 0;
  // The credential last returned was refused: the next get() fetches a new one.
  virtual void invalidate() = 0;
  // What serves the credentials, for logs and messages ("the Azure CLI", "profile dev (credentials file)"). No
  // secret.
  virtual std::string describe() const = 0;
};

using TokenProvider = CredentialProvider<AccessToken>;

// A provider that fetches through fetch() and caches by the rule at the top of this file.
template <typename Credential>
class CachingProvider : public CredentialProvider<Credential> {
 public:
  Result<Credential> get() override;
  void invalidate() override { cache_.invalidate(); }

 protected:
  explicit CachingProvider(CredentialEnv env) : env_(std::move(env)) {}
  // A new credential. Called by one thread at a time.
  virtual Result<Credential> fetch() = 0;

  const CredentialEnv env_;

 private:
  CredentialCache<Credential> cache_;
};

template <typename Credential>
Result<Credential> CachingProvider<Credential>::get() {
  auto checked_fetch = [this]() -> Result<Credential> {
    auto fresh = fetch();
    if (!fresh) return fresh;
    const auto now = env_.now();
    if (const auto expiry = expiry_of(*fresh); expiry && *expiry <= now)
      return expired_credential(this->describe(), *expiry, now);
    return fresh;
  };
  return cache_.get(env_.now(), checked_fetch, this->describe());
}

}  // namespace datavo::cloud
