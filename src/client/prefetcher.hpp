// Prefetcher: loads items 0..count-1 ahead of one consumer and hands them over in order. The window bounds what is
// loaded or loading beyond the items the consumer has taken: at most `window.items` of them, and, with
// `window.bytes`, at most that many bytes by the sizes of the items loaded so far (an item still loading counts as
// the mean of those; until the first one is loaded only one is started). One item is always allowed, so that a
// window smaller than an item still moves. Up to min(window.items, max_parallel) items load concurrently, on that
// many background threads.
//
// With window.items 0 there is no thread: next() loads the item itself. The first Error ends the sequence: every
// item before it is still handed over, then the Error in its place, and again on every later call; no item after it
// is started. cancel() (from any thread) and the destructor cancel: the flag passed to the loader turns true, no new
// item is started, and every next() from then on (one waiting for an item included) returns a cancelled Error. The
// destructor then joins the threads. The loader runs inside a util::StopScope whose token cancel() stops, so that
// what it waits for without looking at the flag (a transfer, a backoff, another process's shard lock) ends too.
//
// Thread safety: next() is called by one consumer thread; max_ahead(), max_ahead_bytes() and cancel() by any
// thread, at any time. The loader runs on the prefetcher's threads (several at once when max_parallel > 1; it must
// be thread-safe), or on the consumer's with window.items 0. `size_of` runs on them too, under the prefetcher's
// lock: it must be cheap.
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
#include "datavo/units.hpp"
#include "util/cancel.hpp"

namespace datavo::client {

template <typename T>
class Prefetcher {
 public:
  // Loads item `ordinal`. Should return early (with any Error) once `cancelled` is true.
  using Loader = std::function<Result<T>(std::size_t ordinal, const std::atomic<bool>& cancelled)>;
  // The size of a loaded item, for the byte bound of the window.
  using Sizer = std::function<Bytes(const T&)>;
  struct Window {
    std::size_t items = 0;       // 0: no thread
    std::optional<Bytes> bytes;  // nullopt: items only (then `size_of` is not needed)
  };

  Prefetcher(std::size_t count, Window window, Loader load, std::size_t max_parallel = 1, Sizer size_of = {})
      : count_(count), window_(window), load_(std::move(load)), size_of_(std::move(size_of)) {
    if (!size_of_) window_.bytes.reset();
    const std::size_t threads = std::min({window_.items, count_, std::max<std::size_t>(max_parallel, 1)});
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  Prefetcher(std::size_t count, std::size_t depth, Loader load, std::size_t max_parallel = 1)
      : Prefetcher(count, Window{depth, std::nullopt}, std::move(load), max_parallel) {}
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
    stop_.request_stop();
    space_.notify_all();
    ready_cv_.notify_all();  // a consumer waiting in next()
  }

  // The next item in order, std::nullopt after the last one, or the sticky Error (cancelled after cancel()).
  Result<std::optional<T>> next() {
    if (error_) return *error_;
    if (cancelled_.load()) return fail(Error{ErrorCode::cancelled, "cancelled"});
    if (window_.items == 0) {
      if (taken_ == count_) return std::optional<T>{};
      util::StopScope scope(stop_);
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
    Result<T> item = std::move(found->second.item);
    ready_bytes_ -= found->second.size;
    ready_.erase(found);
    ++taken_;
    lock.unlock();
    space_.notify_all();
    if (!item) return fail(std::move(item).error());
    return std::optional<T>{std::move(*item)};
  }

  // The most items that were ever loaded or loading ahead of the consumer at once (never above window.items).
  std::size_t max_ahead() const {
    std::lock_guard lock(mu_);
    return max_ahead_;
  }
  // The most bytes of loaded items that ever waited for the consumer at once (0 without a byte bound).
  Bytes max_ahead_bytes() const {
    std::lock_guard lock(mu_);
    return Bytes{max_ready_bytes_};
  }

 private:
  Result<std::optional<T>> fail(Error error) {
    error_ = error;
    return error;
  }

  // REQUIRES: mu_ held.
  bool no_more_starts() const { return next_to_start_ == count_ || failed_; }

  // REQUIRES: mu_ held. Whether the window has room for one more item (see the top of this file).
  bool room_for_next() const {
    const std::size_t ahead = next_to_start_ - taken_;
    if (ahead >= window_.items) return false;
    if (!window_.bytes || ahead == 0) return true;
    if (sized_ == 0) return false;  // nothing to estimate the next one by: wait for the first
    const std::uint64_t estimate = sized_bytes_ / sized_;
    return ready_bytes_ + (in_flight_ + 1) * estimate <= window_.bytes->count();
  }

  void run() {
    util::StopScope scope(stop_);
    for (;;) {
      std::size_t ordinal = 0;
      {
        std::unique_lock lock(mu_);
        space_.wait(lock, [&] { return cancelled_.load() || no_more_starts() || room_for_next(); });
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
        std::uint64_t size = 0;
        if (window_.bytes && item) {
          size = size_of_(*item).count();
          ++sized_;
          sized_bytes_ += size;
          ready_bytes_ += size;
          max_ready_bytes_ = std::max(max_ready_bytes_, ready_bytes_);
        }
        ready_.emplace(ordinal, Ready{std::move(item), size});
      }
      ready_cv_.notify_one();
      space_.notify_all();  // a failure releases the other threads waiting for room
    }
    ready_cv_.notify_one();
  }

  struct Ready {
    Result<T> item;
    std::uint64_t size = 0;  // counted in ready_bytes_
  };

  const std::size_t count_;
  Window window_;
  Loader load_;
  Sizer size_of_;
  std::atomic<bool> cancelled_{false};
  util::StopToken stop_;  // stopped with cancelled_: the loads' StopScope

  mutable std::mutex mu_;
  std::condition_variable space_;       // the consumer took an item, an item failed, or cancellation
  std::condition_variable ready_cv_;    // an item is ready, or a thread stopped
  std::map<std::size_t, Ready> ready_;  // guarded by mu_: loaded items not yet taken, by ordinal
  std::uint64_t ready_bytes_ = 0;       // guarded by mu_: their sizes (with a byte bound)
  std::uint64_t max_ready_bytes_ = 0;   // guarded by mu_
  std::uint64_t sized_ = 0;             // guarded by mu_: items loaded and sized so far
  std::uint64_t sized_bytes_ = 0;       // guarded by mu_: their sizes
  std::size_t next_to_start_ = 0;       // guarded by mu_
  std::size_t in_flight_ = 0;           // guarded by mu_
  std::size_t taken_ = 0;               // guarded by mu_ (written by the consumer only)
  bool failed_ = false;                 // guarded by mu_: an item failed, start no more
  std::size_t max_ahead_ = 0;           // guarded by mu_

  std::optional<Error> error_;  // consumer only

  std::vector<std::thread> threads_;  // last: started after every other member is initialised
};

}  // namespace datavo::client
