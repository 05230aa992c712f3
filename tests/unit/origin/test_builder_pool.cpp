// The builder pool (src/origin/builder_pool.cpp): one build per content hash, bounded waits, and stopping with
// builds queued; with a build function of the test's own, and through the server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <variant>

#include "origin/builder_pool.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;
using origin::KeyGroupTar;

class OriginBuilderPoolTest : public ServerTest {};

// More builds than builder threads, all queued at once: every one is built in the end.
TEST_F(OriginBuilderPoolTest, ManyShardsPreparingAtOnceAreAllBuilt) {
  OriginServerOptions options;
  options.ticket_wait = Milliseconds{0};
  start(options);
  const std::size_t shards = manifest()["shards"].size();
  ASSERT_GE(shards, 3u);
  std::vector<std::string> bodies;
  for (std::size_t shard = 0; shard < shards; ++shard) {
    for (const char* key : {"audio.wav", "transcript.txt"}) {
      bodies.push_back(
          json{{"dataset", "voice"}, {"split", "train"}, {"revision", 1}, {"shard_index", shard}, {"keys", {key}}}
              .dump());
      EXPECT_EQ(post_ticket(bodies.back()).status, 202);
    }
  }
  for (const auto& body : bodies) {
    HttpResult r = post_ticket(body);
    for (int i = 0; i < 400 && r.status == 202; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      r = post_ticket(body);
    }
    ASSERT_EQ(r.status, 200) << body << ": " << r.body;
    json t = json_of(r);
    EXPECT_EQ(sha256_hex(download(t)), t["sha256"]);
  }
}

// Stopping with builds queued and under way neither hangs nor leaves a temporary tar behind.
TEST_F(OriginBuilderPoolTest, StoppingWithBuildsQueuedReturnsAndLeavesNoTemporaries) {
  OriginServerOptions options;
  options.ticket_wait = Milliseconds{0};
  start(options);
  const std::size_t shards = manifest()["shards"].size();
  for (std::size_t shard = 0; shard < shards; ++shard) {
    EXPECT_EQ(post_ticket(json{{"dataset", "voice"},
                               {"split", "train"},
                               {"revision", 1},
                               {"shard_index", shard},
                               {"keys", {"audio.wav", "transcript.txt"}}}
                              .dump())
                  .status,
              202);
  }
  server_->stop();
  server_.reset();
  for (const auto& entry : std::filesystem::directory_iterator(store_root() + "/tars")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// A build function of the test's own: counts its calls and blocks until released.
class GatedBuild {
 public:
  std::variant<KeyGroupTar, origin::Refusal> operator()(const origin::TicketFields& fields) {
    ++calls;
    std::unique_lock lock(mu_);
    released_.wait(lock, [this] { return open_; });
    if (fields.dataset == "refused") return origin::Refusal{404, "no such shard"};
    if (fields.dataset == "throws") throw std::runtime_error("disk on fire");
    return KeyGroupTar{"/tars/" + fields.content_hash + ".tar", Bytes{10}, Sha256{}, {}};
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    released_.notify_all();
  }
  std::atomic<int> calls{0};

 private:
  std::mutex mu_;
  std::condition_variable released_;
  bool open_ = false;
};

origin::TicketFields fields_of(const std::string& dataset, char hash) {
  origin::TicketFields fields;
  fields.content_hash = std::string(64, hash);
  fields.dataset = dataset;
  return fields;
}

TEST(OriginBuilderPool, OneBuildPerContentHashWhoeverAsks) {
  GatedBuild gate;
  origin::BuilderPool pool(2, [&](const origin::TicketFields& f) { return gate(f); });
  EXPECT_TRUE(std::holds_alternative<origin::BuilderPool::Pending>(pool.request(fields_of("d", 'a'), Milliseconds{0})));
  while (gate.calls.load() == 0) std::this_thread::yield();
  // While the build is held in the gate, every request for that hash joins it: four askers at once, on a pool with
  // a second idle thread, are each answered "preparing" after their wait, and there is still one build.
  std::vector<std::thread> askers;
  std::vector<origin::BuilderPool::Outcome> outcomes(4, KeyGroupTar{});
  for (int i = 0; i < 4; ++i)
    askers.emplace_back([&, i] { outcomes[i] = pool.request(fields_of("d", 'a'), Milliseconds{50}); });
  for (auto& asker : askers) asker.join();
  for (const auto& outcome : outcomes) EXPECT_TRUE(std::holds_alternative<origin::BuilderPool::Pending>(outcome));
  EXPECT_EQ(gate.calls.load(), 1);
  // Once the build is let go, a waiter gets its tar (whether it joined that build or came after it).
  origin::BuilderPool::Outcome waited = origin::BuilderPool::Pending{};
  std::thread waiter([&] { waited = pool.request(fields_of("d", 'a'), Milliseconds{60'000}); });
  gate.release();
  waiter.join();
  ASSERT_TRUE(std::holds_alternative<KeyGroupTar>(waited));
  EXPECT_EQ(std::get<KeyGroupTar>(waited).path, "/tars/" + std::string(64, 'a') + ".tar");
}

TEST(OriginBuilderPool, RefusalsAndExceptionsReachTheirWaiters) {
  GatedBuild gate;
  gate.release();
  origin::BuilderPool pool(1, [&](const origin::TicketFields& f) { return gate(f); });
  auto refused = pool.request(fields_of("refused", 'b'), Milliseconds{60'000});
  ASSERT_TRUE(std::holds_alternative<origin::Refusal>(refused));
  EXPECT_EQ(std::get<origin::Refusal>(refused).status, 404);
  auto thrown = pool.request(fields_of("throws", 'c'), Milliseconds{60'000});
  ASSERT_TRUE(std::holds_alternative<origin::Refusal>(thrown));
  EXPECT_EQ(std::get<origin::Refusal>(thrown).status, 500);
  EXPECT_EQ(std::get<origin::Refusal>(thrown).message, "the store failed: internal");
  // A finished build is forgotten: the next request of that hash builds again.
  pool.request(fields_of("refused", 'b'), Milliseconds{60'000});
  EXPECT_EQ(gate.calls.load(), 3);
}

TEST(OriginBuilderPool, StopAnswersQueuedBuildsAndLaterRequests503) {
  GatedBuild gate;
  origin::BuilderPool pool(1, [&](const origin::TicketFields& f) { return gate(f); });
  pool.request(fields_of("d", 'a'), Milliseconds{0});  // under way, blocked in the gate
  while (gate.calls.load() == 0) std::this_thread::yield();
  origin::BuilderPool::Outcome queued = origin::BuilderPool::Pending{};
  std::thread waiter([&] { queued = pool.request(fields_of("d", 'b'), Milliseconds{60'000}); });
  std::thread stopper([&] { pool.stop(); });
  // stop() waits for the build under way; release it once the queued waiter has been answered.
  waiter.join();
  gate.release();
  stopper.join();
  ASSERT_TRUE(std::holds_alternative<origin::Refusal>(queued));
  EXPECT_EQ(std::get<origin::Refusal>(queued).status, 503);
  auto later = pool.request(fields_of("d", 'c'), Milliseconds{0});
  ASSERT_TRUE(std::holds_alternative<origin::Refusal>(later));
  EXPECT_EQ(std::get<origin::Refusal>(later).status, 503);
  EXPECT_EQ(gate.calls.load(), 1);
}

// A zero wait on the request that queues a build is "preparing" however fast the build is: the server's answer to a
// first ticket does not depend on the scheduler. A request that may wait gets the tar.
TEST(OriginBuilderPool, AZeroWaitOnTheQueuingRequestIsAlwaysPending) {
  std::atomic<int> built{0};
  origin::BuilderPool pool(2, [&](const origin::TicketFields& f) -> std::variant<KeyGroupTar, origin::Refusal> {
    ++built;
    return KeyGroupTar{"/tars/" + f.content_hash + ".tar", Bytes{10}, Sha256{}, {}};
  });
  for (int i = 0; i < 200; ++i) {
    // A content hash of its own per request: with a hash asked again, a builder thread held up between the build
    // and its bookkeeping (TSan on a loaded machine) leaves the earlier build looking under way, so no build is
    // queued and the wait below never ends.
    auto fields = fields_of("d", 'a');
    const std::string id = std::to_string(1000 + i);
    fields.content_hash = std::string(64 - id.size(), 'a') + id;
    auto outcome = pool.request(fields, Milliseconds{0});
    EXPECT_TRUE(std::holds_alternative<origin::BuilderPool::Pending>(outcome)) << "request " << i;
    while (built.load() <= i) std::this_thread::yield();
  }
  auto waited = pool.request(fields_of("d", 'y'), Milliseconds{60'000});
  EXPECT_TRUE(std::holds_alternative<KeyGroupTar>(waited));
}

}  // namespace
}  // namespace datavo
