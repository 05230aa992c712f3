// Prefetcher: loads items 0..count-1 in order on one background thread, at most `depth` items ahead of the
// consumer (an item being loaded counts), and hands them over in order.
//
// With depth 0 there is no thread: next() loads the item itself. The first Error ends the sequence: it is
// returned by next() in its place, and again by every later call. The destructor cancels (the flag passed to the
// loader turns true, and no new item is started) and joins the thread.
//
// Thread safety: next() and max_ahead() are called by one consumer thread; the loader runs on the prefetcher's
// thread (or on the consumer's, with depth 0).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "datavo/result.hpp"

namespace datavo::client {

template <typename T>
class Prefetcher {
 public:
  // Loads item `ordinal`. Should return early (with any Error) once `cancelled` is true.
  using Loader = std::function<Result<T>(std::size_t ordinal, const std::atomic<bool>& cancelled)>;

  Prefetcher(std::size_t count, std::size_t depth, Loader load) : count_(count), depth_(depth), load_(std::move(load)) {
    if (depth_ > 0 && count_ > 0) thread_ = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard lock(mu_);
      cancelled_.store(true);
    }
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next item in order, std::nullopt after the last one, or the sticky Error.
  Result<std::optional<T>> next() {
    if (error_) return *error_;
    if (depth_ == 0) {
      if (taken_ == count_) return std::optional<T>{};
      auto item = load_(taken_++, cancelled_);
      if (!item) return fail(std::move(item).error());
      return std::optional<T>{std::move(*item)};
    }
    std::unique_lock lock(mu_);
    ready_cv_.wait(lock, [&] { return !ready_.empty() || finished_; });
    if (ready_.empty()) return std::optional<T>{};
    Result<T> item = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    space_.notify_one();
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

  void run() {
    for (std::size_t ordinal = 0; ordinal < count_; ++ordinal) {
      {
        std::unique_lock lock(mu_);
        space_.wait(lock, [&] { return cancelled_.load() || ready_.size() < depth_; });
        if (cancelled_.load()) break;
        max_ahead_ = std::max(max_ahead_, ready_.size() + 1);
      }
      Result<T> item = load_(ordinal, cancelled_);
      const bool failed = !item;
      {
        std::lock_guard lock(mu_);
        ready_.push_back(std::move(item));
      }
      ready_cv_.notify_one();
      if (failed) break;
    }
    {
      std::lock_guard lock(mu_);
      finished_ = true;
    }
    ready_cv_.notify_all();
  }

  const std::size_t count_;
  const std::size_t depth_;
  Loader load_;
  std::atomic<bool> cancelled_{false};

  mutable std::mutex mu_;
  std::condition_variable space_;     // the consumer took an item, or cancellation
  std::condition_variable ready_cv_;  // an item is ready, or the thread finished
  std::deque<Result<T>> ready_;       // guarded by mu_
  bool finished_ = false;             // guarded by mu_
  std::size_t max_ahead_ = 0;         // guarded by mu_

  // Consumer-only state.
  std::size_t taken_ = 0;
  std::optional<Error> error_;

  std::thread thread_;  // last: started after every other member is initialised
};

}  // namespace datavo::client
