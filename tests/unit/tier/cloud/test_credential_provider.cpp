// Tests of src/tier/cloud/credential_provider.cpp: the refresh margin, the credential cache (refresh ahead of
// expiry, the cached credential kept when a refresh ahead of expiry fails, one fetch for concurrent callers
// whatever its outcome, invalidate, credentials that never expire) and the caching provider over it, which
// refuses a credential that is expired when it arrives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tier/cloud/credential_provider.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallClock::time_point k_t0 = WallClock::time_point(std::chrono::seconds(1'700'000'000));

TEST(RefreshMargin, IsFiveMinutesOrHalfTheLifetime) {
  EXPECT_EQ(refresh_margin(1h), WallClock::duration(5min));
  EXPECT_EQ(refresh_margin(10min), WallClock::duration(5min));
  EXPECT_EQ(refresh_margin(4s), WallClock::duration(2s));
  EXPECT_EQ(refresh_margin(0s), WallClock::duration(0s));
  EXPECT_EQ(refresh_margin(-3s), WallClock::duration(0s));
}

TEST(CredentialCache, RefreshesAheadOfExpiryAndAfterInvalidate) {
  TokenCache cache;
  int fetches = 0;
  WallClock::time_point now = k_t0;
  auto fetch = [&]() -> Result<AccessToken> { return AccessToken{"t" + std::to_string(++fetches), now + 10s}; };
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t1");
  now += 4s;  // 6 s of 10 left, margin 5 s
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t1");
  now += 2s;  // 4 s left
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t2");
  cache.invalidate();
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t3");
  EXPECT_EQ(fetches, 3);
}

TEST(CredentialCache, AFailedRefreshKeepsTheValidCredentialButNotAnExpiredOne) {
  TokenCache cache;
  WallClock::time_point now = k_t0;
  bool fail = false;
  auto fetch = [&]() -> Result<AccessToken> {
    if (fail) return Error{ErrorCode::remote, "token endpoint down"};
    return AccessToken{"good", now + 10s};
  };
  ASSERT_TRUE(cache.get(now, fetch, "test"));
  fail = true;
  now += 7s;  // inside the margin, not expired
  auto kept = cache.get(now, fetch, "test");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->token, "good");
  now += 4s;  // expired
  auto failed = cache.get(now, fetch, "test");
  ASSERT_FALSE(failed);
  EXPECT_THAT(failed.error().message, HasSubstr("token endpoint down"));
  // After an invalidate() the refused credential is not handed out again either.
  fail = false;
  now = k_t0 + 1h;
  ASSERT_TRUE(cache.get(now, fetch, "test"));
  fail = true;
  cache.invalidate();
  EXPECT_FALSE(cache.get(now, fetch, "test"));
}

TEST(CredentialCache, ConcurrentCallersShareOneFetch) {
  TokenCache cache;
  std::atomic<int> fetches{0};
  auto fetch = [&]() -> Result<AccessToken> {
    ++fetches;
    std::this_thread::sleep_for(50ms);
    return AccessToken{"shared", k_t0 + 1h};
  };
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (auto token = cache.get(k_t0, fetch, "test"); token && token->token == "shared") ++right;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(fetches, 1);
  EXPECT_EQ(right, 8);
}

TEST(CredentialCache, ConcurrentCallersShareAFailedFetchToo) {
  TokenCache cache;
  std::atomic<int> fetches{0};
  auto fetch = [&]() -> Result<AccessToken> {
    ++fetches;
    std::this_thread::sleep_for(200ms);  // long enough for the other threads to start waiting
    return Error{ErrorCode::permission_denied, "refused"};
  };
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (auto token = cache.get(k_t0, fetch, "test"); !token && token.error().message == "refused") ++failed;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed, 8);
  EXPECT_LT(fetches, 8) << "callers that waited for a fetch took its failure instead of fetching again";
  // A caller that comes after the failure tries again.
  const int before = fetches;
  EXPECT_FALSE(cache.get(k_t0, fetch, "test"));
  EXPECT_EQ(fetches, before + 1);
}

// A credential without an expiry, as long-term keys are.
struct Key {
  std::string id;
};
std::optional<WallClock::time_point> expiry_of(const Key&) { return std::nullopt; }

TEST(CredentialCache, ACredentialWithoutExpiryIsFetchedOnceUntilInvalidated) {
  CredentialCache<Key> cache;
  int fetches = 0;
  auto fetch = [&]() -> Result<Key> { return Key{"k" + std::to_string(++fetches)}; };
  EXPECT_EQ(cache.get(k_t0, fetch, "test")->id, "k1");
  EXPECT_EQ(cache.get(k_t0 + 24h * 365, fetch, "test")->id, "k1");
  cache.invalidate();
  EXPECT_EQ(cache.get(k_t0, fetch, "test")->id, "k2");
}

// A provider on a settable clock whose fetch() hands out tokens of a given lifetime.
class Clock final : public net::Clock {
 public:
  std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point wall_now() override { return wall; }
  void sleep_for(Milliseconds) override {}
  std::atomic<WallClock::time_point> wall{k_t0};
};

class CountingProvider final : public CachingProvider<AccessToken> {
 public:
  // Hands out tokens that expire `lifetime` after they are fetched (negative: expired already).
  CountingProvider(CredentialEnv env, WallClock::duration lifetime)
      : CachingProvider(std::move(env)), lifetime_(lifetime) {}
  std::string describe() const override { return "the counting provider"; }
  int fetches = 0;

 protected:
  Result<AccessToken> fetch() override {
    ++fetches;
    return AccessToken{"t" + std::to_string(fetches), env_.now() + lifetime_};
  }

 private:
  const WallClock::duration lifetime_;
};

TEST(CachingProvider, CachesOnTheEnvironmentsClock) {
  auto clock = std::make_shared<Clock>();
  CredentialEnv env;
  env.clock = clock;
  CountingProvider provider(env, 1h);
  EXPECT_EQ(provider.get()->token, "t1");
  clock->wall = k_t0 + 54min;  // 6 min left: not due
  EXPECT_EQ(provider.get()->token, "t1");
  clock->wall = k_t0 + 56min;  // 4 min left: due
  EXPECT_EQ(provider.get()->token, "t2");
  provider.invalidate();
  EXPECT_EQ(provider.get()->token, "t3");
  EXPECT_EQ(provider.fetches, 3);
}

TEST(CachingProvider, ACredentialThatArrivesExpiredIsRefused) {
  auto clock = std::make_shared<Clock>();
  CredentialEnv env;
  env.clock = clock;
  for (const auto lifetime : {WallClock::duration(-90s), WallClock::duration(0s)}) {
    CountingProvider provider(env, lifetime);
    auto token = provider.get();
    ASSERT_FALSE(token);
    EXPECT_EQ(token.error().code, ErrorCode::permission_denied);
    EXPECT_THAT(token.error().message, HasSubstr("the counting provider: the credentials it gave expired at "));
    EXPECT_THAT(token.error().message, HasSubstr(lifetime < 0s ? ", 90 s ago" : ", 0 s ago"));
  }
  CountingProvider valid(env, 1s);
  EXPECT_TRUE(valid.get());
}

}  // namespace
}  // namespace datavo::cloud
