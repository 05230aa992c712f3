// The builder pool of the origin server (docs/protocol.md, "Preparing"): key-group tars built for ticket requests
// on threads of their own, one build per content hash whoever asks, a fixed number at a time, the rest queued. A
// request waits for its build for a bounded time; a build still going on then is answered "preparing" and goes on
// in the background, and the next request for that content hash collects its outcome.
//
// Thread safety: request() and stop() may be called from any thread at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "datavo/units.hpp"
#include "origin/responses.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"

namespace datavo::origin {

class BuilderPool {
 public:
  // Builds one key group: its tar or a refusal. Called on the pool's threads; an exception it throws becomes a
  // 500 refusal.
  using Build = std::function<std::variant<KeyGroupTar, Refusal>(const TicketFields&)>;
  // The build goes on: ask again later.
  struct Pending {};
  using Outcome = std::variant<KeyGroupTar, Refusal, Pending>;

  // Starts `threads` (>= 1) builder threads.
  BuilderPool(int threads, Build build);
  ~BuilderPool();
  BuilderPool(const BuilderPool&) = delete;
  BuilderPool& operator=(const BuilderPool&) = delete;

  // Queues the build of fields.content_hash unless one is queued or under way, and waits for it up to `wait`:
  // the tar, the build's refusal, or Pending. A zero wait on the request that queues the build is always Pending,
  // however fast the build threads are. After stop(), a 503 refusal.
  Outcome request(const TicketFields& fields, Milliseconds wait);

  // Refuses every later request, answers the waiters of queued builds 503 at once, and joins the threads once the
  // builds under way have finished. Idempotent.
  void stop();

 private:
  struct Preparation {
    TicketFields fields;
    std::mutex mu;
    std::condition_variable finished;
    bool done = false;                                     // guarded by mu
    std::variant<KeyGroupTar, Refusal> result{Refusal{}};  // guarded by mu; set once, with done
  };
  void run();
  std::variant<KeyGroupTar, Refusal> build(const TicketFields& fields);
  void finish(Preparation& preparation, std::variant<KeyGroupTar, Refusal> result);

  Build build_;
  std::mutex mu_;
  std::condition_variable wanted_;
  // A preparation is in preparing_ from the request that queues it until its build finishes; waiters hold it by
  // shared_ptr beyond that.
  std::map<std::string, std::shared_ptr<Preparation>> preparing_;  // by content hash; guarded by mu_
  std::deque<std::shared_ptr<Preparation>> queue_;                 // guarded by mu_
  bool stopping_ = false;                                          // guarded by mu_
  std::mutex stop_mu_;                                             // serialises stop()
  std::vector<std::thread> threads_;
};

}  // namespace datavo::origin
