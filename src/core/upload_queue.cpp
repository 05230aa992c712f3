#include "core/upload_queue.hpp"

#include <optional>

#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::core {

UploadQueue::~UploadQueue() {
  std::vector<std::thread> workers;
  std::deque<Job> dropped;  // destroyed after the lock: each releases its lease, a request
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    totals_.failed += jobs_.size();
    if (!jobs_.empty()) {
      LOG_WARNING(jobs_.size() << " upload(s) to remote tiers were still queued and are dropped; the shards stay "
                                  "cached locally and go up at their next read");
    }
    dropped.swap(jobs_);
    workers.swap(workers_);
  }
  changed_.notify_all();
  for (auto& worker : workers) worker.join();
  dropped.clear();
}

void UploadQueue::push(Job job) {
  std::unique_lock lock(mu_);
  if (workers_.empty()) {
    for (std::size_t i = 0; i < k_workers; ++i) workers_.emplace_back([this] { work(); });
  }
  changed_.wait(lock, [this] { return jobs_.size() < k_max_pending || stopping_; });
  if (stopping_) return;
  jobs_.push_back(std::move(job));
  changed_.notify_all();
}

void UploadQueue::count(const Tier& tier, BackfillOutcome outcome) {
  std::lock_guard lock(mu_);
  switch (outcome) {
    case BackfillOutcome::already_present: ++totals_.already_present; break;
    case BackfillOutcome::uploaded:
      ++totals_.uploaded;
      ++uploaded_into_[&tier];
      break;
    case BackfillOutcome::failed: ++totals_.failed; break;
    case BackfillOutcome::skipped: ++totals_.skipped; break;
  }
}

namespace {
std::string remembered(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex(); }
}  // namespace

std::uint64_t UploadQueue::uploaded_into(const Tier& tier) {
  std::lock_guard lock(mu_);
  auto found = uploaded_into_.find(&tier);
  return found == uploaded_into_.end() ? 0 : found->second;
}

bool UploadQueue::stored(const Tier& tier, const ShardKey& key) {
  std::lock_guard lock(mu_);
  return stored_.contains({&tier, remembered(key)});
}

void UploadQueue::remember_stored(const Tier& tier, const ShardKey& key) {
  std::lock_guard lock(mu_);
  if (stored_.size() < k_max_remembered) stored_.insert({&tier, remembered(key)});
}

void UploadQueue::run(Job job) {
  const std::string what = "upload of " + job.key.hash.hex() + " to tier '" + job.tier->name() + "'";
  if (util::cancel_requested()) {
    // Not begun: it would fail at its first request. Its lease is released here (a cleanup, sent anyway).
    job.lease.reset();
    std::lock_guard lock(mu_);
    ++totals_.failed;
    return;
  }
  auto installed = job.tier->install_copy(job.key, job.source, job.digest);
  job.lease.reset();  // released whatever the outcome: a waiting VM then reads the object or takes over
  std::lock_guard lock(mu_);
  if (!installed) {
    ++totals_.failed;
    job.tier->counters().upload_failures.fetch_add(1, std::memory_order_relaxed);
    job.tier->counters().errors.fetch_add(1, std::memory_order_relaxed);
    // An upload stopped by a cancellation is no failure worth a line: the command reports the interruption.
    if (installed.error().code != ErrorCode::cancelled)
      LOG_WARNING(what << " failed: " << installed.error().message << " (the read it served succeeded)");
    return;
  }
  if (stored_.size() < k_max_remembered) stored_.insert({job.tier.get(), remembered(job.key)});
  if (*installed == InstallOutcome::already_present) {
    ++totals_.already_present;
    job.tier->counters().uploads_present.fetch_add(1, std::memory_order_relaxed);
  } else {
    ++totals_.uploaded;
    ++uploaded_into_[job.tier.get()];
    job.tier->counters().uploads.fetch_add(1, std::memory_order_relaxed);
    job.tier->counters().bytes_installed.fetch_add(job.source.size().count(), std::memory_order_relaxed);
  }
}

void UploadQueue::work() {
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock lock(mu_);
      changed_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
      if (stopping_) return;
      job.emplace(std::move(jobs_.front()));
      jobs_.pop_front();
      ++running_;
      changed_.notify_all();
    }
    run(std::move(*job));
    std::lock_guard lock(mu_);
    --running_;
    changed_.notify_all();
  }
}

UploadSummary UploadQueue::flush(std::chrono::milliseconds bound) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, bound, [this] { return jobs_.empty() && running_ == 0; });
  UploadSummary out = totals_;
  out.pending = jobs_.size() + running_;
  return out;
}

UploadSummary UploadQueue::summary() {
  std::lock_guard lock(mu_);
  UploadSummary out = totals_;
  out.pending = jobs_.size() + running_;
  return out;
}

}  // namespace datavo::core
