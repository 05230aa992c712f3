#include "core/progress_follower.hpp"

namespace datavo::core {

ProgressFollower::ProgressFollower(LocalTier& tier, const ShardKey& key, LandingObserver& observer)
    : tier_(tier), key_(key), observer_(observer), thread_([this] { run(); }) {}

ProgressFollower::~ProgressFollower() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressFollower::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    poll();
    lock.lock();
    wake_.wait_for(lock, k_poll, [this] { return stop_; });
  }
}

void ProgressFollower::poll() {
  const auto progress = tier_.landing_progress(key_);
  if (!progress) return;
  const std::pair<std::uint64_t, std::uint64_t> file{progress->device, progress->inode};
  if (file_ != file) {
    auto opened = tier_.open_landing(*progress);
    if (!opened) return;  // gone from its path (installed, taken over, abandoned): nothing new to read there
    file_ = file;
    told_ = Bytes{0};
    observer_.staging(std::move(*opened));
  }
  if (progress->verified > told_ && progress->total.count() > 0) {
    told_ = progress->verified;
    observer_.verified(progress->verified, progress->total);
  }
}

}  // namespace datavo::core
