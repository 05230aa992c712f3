// The progress of `datavo warm` on stderr, as a WarmObserver: a redrawn bar on a terminal (shards, bytes fetched
// from the origin, rate, ETA), one line per shard otherwise.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "datavo/warm.hpp"

namespace datavo::cli {

class WarmProgress final : public WarmObserver {
 public:
  enum class Style { bar, lines };

  WarmProgress();  // the bar when stderr is a terminal
  ~WarmProgress() override;
  WarmProgress(const WarmProgress&) = delete;
  WarmProgress& operator=(const WarmProgress&) = delete;

  Style style() const { return style_; }

  void started(std::size_t shards) override;
  void origin_bytes(std::int64_t delta) override;
  void shard_done(const WarmShardOutcome& outcome) override;
  // One line, with either style (the bar goes on below it): without it the warm would seem stalled.
  void waiting_for_region(std::size_t deferred, Seconds left) override;
  // Ends the bar: its ticker thread joined, its line closed.
  void finished() override;

  class Bar;

 private:
  const Style style_;
  std::size_t total_ = 0;
  std::unique_ptr<Bar> bar_;  // while a warm runs, with Style::bar
  std::atomic<std::size_t> done_{0};
  std::mutex lines_mu_;  // one line of Style::lines at a time: the workers report concurrently
};

}  // namespace datavo::cli
