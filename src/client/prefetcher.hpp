// Prefetcher: loads items 0..count-1 ahead of one consumer and hands them over in order. At most `depth` items
// beyond those the consumer has taken are loaded or loading at any time, and up to min(depth, max_parallel) of
// them load concurrently, on that many background threads.
//
// With depth 0 there is no thread: next() loads the item itself. The first Error ends the sequence: every item
// before it is still handed over, then the Error in its place, and again on every later call; no item after it is
// started. cancel() (from any thread) and the destructor cancel: the flag passed to the loader turns true, no new
// item is started, and every next() from then on (one waiting for an item included) returns a cancelled Error. The
// destructor then joins the threads.
//
// Thread safety: next() is called by one consumer thread; max_ahead() and cancel() by any thread, at any time. The
// loader runs on the prefetcher's threads (several at once when max_parallel > 1; it must be thread-safe), or on
// the consumer's with depth 0.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "datavo/result.hpp"

namespace datavo::client {

template <typename T>
class Prefetcher {
 public:
  // Loads item `ordinal`. Should return early (with any Error) once `cancelled` is true.
  using Loader = std::function<Result<T>(std::size_t ordinal, const std::atomic<bool>& cancelled)>;

  Prefetcher(std::size_t count, std::size_t depth, Loader load, std::size_t max_parallel = 1)
      : count_(count), depth_(depth), load_(std::move(load)) {
    const std::size_t threads = std::min({depth_, count_, std::max<std::size_t>(max_parallel, 1)});
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  ~Prefetcher() {
    cancel();
    for (auto& thread : threads_) thread.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Stops the loads (see the top of this file). Idempotent; any thread.
  void cancel() {
    {
      std::lock_guard lock(mu_);
      cancelled_.store(true);
    }
    space_.notify_all();
    ready_cv_.notify_all();  // a consumer waiting in next()
  }

  // The next item in order, std::nullopt after the last one, or the sticky Error (cancelled after cancel()).
  Result<std::optional<T>> next() {
    if (error_) return *error_;
    if (cancelled_.load()) return fail(Error{ErrorCode::cancelled, "cancelled"});
    if (depth_ == 0) {
      if (taken_ == count_) return std::optional<T>{};
      auto item = load_(taken_++, cancelled_);
      if (!item) return fail(std::move(item).error());
      return std::optional<T>{std::move(*item)};
    }
    std::unique_lock lock(mu_);
    // Every item started below next_to_start_ ends up in ready_, so once nothing is loading and the consumer has
    // caught up with next_to_start_, nothing more will come.
    ready_cv_.wait(lock, [&] {
      return cancelled_.load() || ready_.contains(taken_) ||
             (in_flight_ == 0 && taken_ == next_to_start_ && no_more_starts());
    });
    if (cancelled_.load()) return fail(Error{ErrorCode::cancelled, "cancelled"});
    auto found = ready_.find(taken_);
    if (found == ready_.end()) return std::optional<T>{};
    Result<T> item = std::move(found->second);
    ready_.erase(found);
    ++taken_;
    lock.unlock();
    space_.notify_all();
    if (!item) return fail(std::move(item).error());
    return std::optional<T>{std::move(*item)};
  }

  // The most items that were ever loaded or loading ahead of the consumer at once (never above depth).
  std::size_t max_ahead() const {
    std::lock_guard lock(mu_);
    return max_ahead_;
  }

 private:
  Result<std::optional<T>> fail(Error error) {
    error_ = error;
    return error;
  }

  // REQUIRES: mu_ held.
  bool no_more_starts() const { return next_to_start_ == count_ || failed_; }

  void run() {
    for (;;) {
      std::size_t ordinal = 0;
      {
        std::unique_lock lock(mu_);
        space_.wait(lock, [&] { return cancelled_.load() || no_more_starts() || next_to_start_ < taken_ + depth_; });
        if (cancelled_.load() || no_more_starts()) break;
        ordinal = next_to_start_++;
        ++in_flight_;
        max_ahead_ = std::max(max_ahead_, next_to_start_ - taken_);
      }
      Result<T> item = load_(ordinal, cancelled_);
      {
        std::lock_guard lock(mu_);
        --in_flight_;
        if (!item) failed_ = true;
        ready_.emplace(ordinal, std::move(item));
      }
      ready_cv_.notify_one();
      space_.notify_all();  // a failure releases the other threads waiting for room
    }
    ready_cv_.notify_one();
  }

  const std::size_t count_;
  const std::size_t depth_;
  Loader load_;
  std::atomic<bool> cancelled_{false};

  mutable std::mutex mu_;
  std::condition_variable space_;           // the consumer took an item, an item failed, or cancellation
  std::condition_variable ready_cv_;        // an item is ready, or a thread stopped
  std::map<std::size_t, Result<T>> ready_;  // guarded by mu_: loaded items not yet taken, by ordinal
  std::size_t next_to_start_ = 0;           // guarded by mu_
  std::size_t in_flight_ = 0;               // guarded by mu_
  std::size_t taken_ = 0;                   // guarded by mu_ (written by the consumer only)
  bool failed_ = false;                     // guarded by mu_: an item failed, start no more
  std::size_t max_ahead_ = 0;               // guarded by mu_

  std::optional<Error> error_;  // consumer only

  std::vector<std::thread> threads_;  // last: started after every other member is initialised
};

}  // namespace datavo::client
