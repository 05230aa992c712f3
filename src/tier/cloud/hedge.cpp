#include "tier/cloud/hedge.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <system_error>

#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::cloud {

void HedgeDeadline::record(Milliseconds first_byte) {
  if (fixed_) return;
  std::lock_guard lock(mu_);
  if (window_.size() < k_hedge_window) {
    window_.push_back(first_byte);
  } else {
    window_[next_] = first_byte;
    next_ = (next_ + 1) % k_hedge_window;
  }
}

Milliseconds HedgeDeadline::current() const {
  if (fixed_) return *fixed_;
  std::vector<Milliseconds> sorted;
  {
    std::lock_guard lock(mu_);
    if (window_.size() < k_hedge_min_samples) return k_hedge_default_after;
    sorted = window_;
  }
  // The nearest-rank percentile: the smallest sample that at least percentile_% of the samples do not exceed.
  const auto rank = std::size_t(std::ceil(double(percentile_) / 100.0 * double(sorted.size())));
  const std::size_t at = std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(at), sorted.end());
  return std::max(k_hedge_floor, sorted[at]);
}

void HedgeBudget::earn() {
  std::lock_guard lock(mu_);
  tokens_ = std::min(k_hedge_burst, tokens_ + fraction_);
}

bool HedgeBudget::try_spend() {
  std::lock_guard lock(mu_);
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

// One ranged GET and its hedge, shared by the caller and the threads of both requests (which may outlive the
// call: see the top of hedge.hpp).
struct HedgedReader::Race {
  enum class Winner { none, first, hedge };
  struct Attempt {
    util::StopToken stop;
    bool done = false;                                        // guarded by mu
    std::optional<Result<std::optional<ObjectInfo>>> result;  // guarded by mu until done
    std::atomic<bool> ended{false};                           // the thread's last act
  };

  using Clock = std::chrono::steady_clock;

  Race(std::shared_ptr<BlobBackend> b, const std::string& n, ByteRange r, const std::string* p, ByteSink& sink)
      : backend(std::move(b)),
        name(n),
        range(r),
        pin(p ? std::optional<std::string>(*p) : std::nullopt),
        started(Clock::now()),
        target(&sink) {}

  // Runs one request to its end and, when it answered first, makes it the winner and stops the other.
  void run(Attempt& attempt, ByteSink& sink, Winner me) {
    {
      util::StopScope scope(attempt.stop);
      auto got = backend->get(name, range, pin ? &*pin : nullptr, sink);
      bool won = false;
      {
        std::lock_guard lock(mu);
        if (got && winner == Winner::none) {
          winner = me;
          won = true;
          // From here on the first request cannot reach the caller's sink (FencedSink).
          if (me == Winner::hedge) target = nullptr;
        }
        attempt.result = std::move(got);
        attempt.done = true;
      }
      cv.notify_all();
      if (won) (me == Winner::first ? hedge : first).stop.request_stop();
    }
    attempt.ended.store(true, std::memory_order_release);
  }
  void run_first();
  void run_hedge();
  class FencedSink;
  class BufferSink;

  const std::shared_ptr<BlobBackend> backend;
  const std::string name;
  const ByteRange range;
  const std::optional<std::string> pin;
  const Clock::time_point started;  // the first request's
  std::mutex mu;
  std::condition_variable cv;
  Winner winner = Winner::none;  // guarded by mu
  ByteSink* target;              // the caller's sink; nullptr once the hedge won. Guarded by mu
  // When the first request's first and latest body bytes reached the sink. Guarded by mu
  std::optional<Clock::time_point> first_byte;
  std::optional<Clock::time_point> last_byte;
  std::string buffer;  // the hedge's bytes: its thread's until it is done, then the caller's
  Attempt first;
  Attempt hedge;
};

namespace {

Error fenced_off(const std::string& name) {
  return Error{ErrorCode::cancelled, name + ": a hedged request answered first"};
}

}  // namespace

// The first request's way into the caller's sink: every write and restart happens under the race's lock, and none
// after the hedge won. It keeps its own count, so that it never reads the sink once it may be gone.
class HedgedReader::Race::FencedSink final : public ByteSink {
 public:
  explicit FencedSink(Race& race) : race_(race) {}
  Result<void> write(const void* data, std::size_t size) override {
    std::lock_guard lock(race_.mu);
    if (race_.target == nullptr) return fenced_off(race_.name);
    DATAVO_TRY(race_.target->write(data, size));
    written_ += Bytes{size};
    race_.last_byte = Clock::now();
    if (!race_.first_byte) race_.first_byte = race_.last_byte;
    return {};
  }
  Bytes written() const override { return written_; }
  Result<void> restart() override {
    std::lock_guard lock(race_.mu);
    if (race_.target == nullptr) return fenced_off(race_.name);
    DATAVO_TRY(race_.target->restart());
    written_ = Bytes{0};
    return {};
  }

 private:
  Race& race_;
  Bytes written_;
};

// The hedge's own buffer.
class HedgedReader::Race::BufferSink final : public ByteSink {
 public:
  explicit BufferSink(std::string& buffer) : buffer_(buffer) {}
  Result<void> write(const void* data, std::size_t size) override {
    buffer_.append(static_cast<const char*>(data), size);
    return {};
  }
  Bytes written() const override { return Bytes{buffer_.size()}; }
  Result<void> restart() override {
    buffer_.clear();
    return {};
  }

 private:
  std::string& buffer_;
};

void HedgedReader::Race::run_first() {
  FencedSink sink(*this);
  run(first, sink, Winner::first);
}

void HedgedReader::Race::run_hedge() {
  BufferSink sink(buffer);
  run(hedge, sink, Winner::hedge);
}

HedgedReader::HedgedReader(const HedgePolicy& policy, std::shared_ptr<BlobBackend> backend, TierCounters& counters)
    : policy_(policy),
      backend_(std::move(backend)),
      counters_(counters),
      deadline_(policy),
      budget_(policy.max_fraction) {}

HedgedReader::~HedgedReader() {
  std::vector<Straggler> left;
  {
    std::lock_guard lock(stragglers_mu_);
    left.swap(stragglers_);
  }
  for (auto& straggler : left) {
    straggler.race->first.stop.request_stop();
    straggler.race->hedge.stop.request_stop();
    straggler.thread.join();
  }
}

void HedgedReader::keep_or_join(std::thread thread, const std::shared_ptr<Race>& race, const std::atomic<bool>& ended) {
  if (!thread.joinable()) return;
  if (ended.load(std::memory_order_acquire)) {
    thread.join();
    return;
  }
  std::lock_guard lock(stragglers_mu_);
  std::erase_if(stragglers_, [](Straggler& s) {
    if (!s.ended->load(std::memory_order_acquire)) return false;
    s.thread.join();
    return true;
  });
  stragglers_.push_back(Straggler{std::move(thread), race, &ended});
}

Result<std::optional<ObjectInfo>> HedgedReader::get(const std::string& name, ByteRange range, const std::string* pin,
                                                    ByteSink& sink) {
  if (policy_.mode == Hedging::off) return backend_->get(name, range, pin, sink);
  budget_.earn();
  auto race = std::make_shared<Race>(backend_, name, range, pin, sink);
  std::thread first;
  try {
    first = std::thread([race] { race->run_first(); });
  } catch (const std::system_error& e) {
    LOG_DEBUG(name << ": no thread for a hedged read (" << e.what() << "); reading without a hedge");
    return backend_->get(name, range, pin, sink);
  }
  std::thread hedge;
  {
    std::unique_lock lock(race->mu);
    const bool silent = wait_for_silence(*race, lock);
    // A first request that is retrying was answered (a 503 with Retry-After, a reset): its server is failing or
    // overloaded, not slow, and the transport's backoff is the cure; a second request would only add load.
    if (silent && !race->first.stop.retried() && !util::must_stop() && budget_.try_spend()) {
      try {
        hedge = std::thread([race] { race->run_hedge(); });
        counters_.hedges_sent.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::system_error&) {
        // No second request then: the first one goes on.
      }
    }
  }
  auto result = settle(*race, sink, hedge.joinable());
  keep_or_join(std::move(first), race, race->first.ended);
  keep_or_join(std::move(hedge), race, race->hedge.ended);
  return result;
}

bool HedgedReader::wait_for_silence(Race& race, std::unique_lock<std::mutex>& lock) {
  for (;;) {
    const auto quiet_since = race.last_byte.value_or(race.started);
    const auto due = quiet_since + deadline_.current();
    if (race.cv.wait_until(lock, due, [&] { return race.first.done; })) return false;
    // Bytes arrived while we waited (the sink does not wake us: a flowing transfer would, thousands of times).
    if (race.last_byte.value_or(race.started) == quiet_since) return true;
  }
}

Result<std::optional<ObjectInfo>> HedgedReader::settle(Race& race, ByteSink& sink, bool hedged) {
  std::unique_lock lock(race.mu);
  race.cv.wait(lock,
               [&] { return race.winner != Race::Winner::none || (race.first.done && (!hedged || race.hedge.done)); });
  // A first request that received no byte (it lost before its first byte, or its range was empty) waited at least
  // this long for one.
  const auto first_byte =
      std::chrono::duration_cast<Milliseconds>(race.first_byte.value_or(Race::Clock::now()) - race.started);
  switch (race.winner) {
    case Race::Winner::first: deadline_.record(first_byte); return std::move(*race.first.result);
    case Race::Winner::none: return std::move(*race.first.result);
    case Race::Winner::hedge: break;
  }
  // The first request is fenced off and the hedge is done: the buffer is ours alone.
  lock.unlock();
  deadline_.record(first_byte);
  counters_.hedges_won.fetch_add(1, std::memory_order_relaxed);
  DATAVO_TRY(sink.restart());
  DATAVO_TRY(sink.write(race.buffer.data(), race.buffer.size()));
  return std::move(*race.hedge.result);
}

}  // namespace datavo::cloud
