#include "cli/warm_progress.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/cli.hpp"
#include "util/human.hpp"

namespace datavo::cli {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The redrawn bar: a ticker thread draws it a few times a second until the bar is destroyed, which joins the thread
// and ends the bar's line.
class WarmProgress::Bar {
 public:
  Bar(std::size_t total, const std::atomic<std::size_t>& done)
      : total_(total), done_(done), started_(Clock::now()), ticker_([this] { tick(); }) {}
  ~Bar() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    ticker_.join();
    draw();
    std::cerr << "\n";
  }
  Bar(const Bar&) = delete;
  Bar& operator=(const Bar&) = delete;

  void add_bytes(std::int64_t delta) { origin_bytes_.fetch_add(delta, std::memory_order_relaxed); }

 private:
  void tick() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      draw();
      // A few redraws a second keep the rate readable without flooding a slow terminal.
      wake_.wait_for(lock, std::chrono::milliseconds(250));
    }
  }

  void draw() {
    constexpr int k_width = 30;
    const std::size_t done = done_.load();
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    const auto bytes = std::uint64_t(std::max<std::int64_t>(0, origin_bytes_.load()));
    const int filled = total_ == 0 ? k_width : int(double(k_width) * double(done) / double(total_));
    std::string bar = std::string(std::size_t(filled), '#') + std::string(std::size_t(k_width - filled), '-');
    std::string eta = "--";
    if (done > 0 && done < total_) eta = util::fixed_point(elapsed / double(done) * double(total_ - done), 0) + " s";
    if (done == total_) eta = "0 s";
    std::cerr << "\r[" << bar << "] " << done << "/" << total_ << " shards  " << human_bytes(bytes) << " fetched  "
              << human_bytes(std::uint64_t(elapsed > 0 ? double(bytes) / elapsed : 0)) << "/s  ETA " << eta << "\033[K"
              << std::flush;
  }

  const std::size_t total_;
  const std::atomic<std::size_t>& done_;
  const Clock::time_point started_;
  std::atomic<std::int64_t> origin_bytes_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread ticker_;     // last: started once every other member is initialised
};

WarmProgress::WarmProgress() : style_(::isatty(STDERR_FILENO) ? Style::bar : Style::lines) {}
WarmProgress::~WarmProgress() = default;

void WarmProgress::started(std::size_t shards) {
  total_ = shards;
  if (style_ == Style::bar) bar_ = std::make_unique<Bar>(total_, done_);
}

void WarmProgress::origin_bytes(std::int64_t delta) {
  if (bar_) bar_->add_bytes(delta);
}

void WarmProgress::shard_done(const WarmShardOutcome& outcome) {
  const std::size_t done = done_.fetch_add(1) + 1;
  if (style_ != Style::lines) return;
  std::string line = "shard " + std::to_string(outcome.shard_index) + ": ";
  if (outcome.served) {
    line += std::string(to_string(outcome.served->source)) + ", " + human_bytes(outcome.served->size.count()) +
            " in tier " + outcome.served->tier;
  } else {
    line += "FAILED: " + outcome.error->message;
  }
  std::lock_guard lock(lines_mu_);
  std::cerr << "datavo: warm: [" << done << "/" << total_ << "] " << line << std::endl;
}

void WarmProgress::waiting_for_region(std::size_t deferred, Seconds left) {
  const bool redraw = bar_ != nullptr;
  bar_.reset();  // ends the bar's line; a new bar goes on below for the shards that arrive from the region
  {
    std::lock_guard lock(lines_mu_);
    std::cerr << "datavo: warm: " << deferred << " shard(s) of the region's other members deferred; waiting up to "
              << left.count() << " s for their uploads" << std::endl;
  }
  if (redraw) bar_ = std::make_unique<Bar>(total_, done_);
}

void WarmProgress::finished() { bar_.reset(); }

}  // namespace datavo::cli
