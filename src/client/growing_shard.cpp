#include "client/growing_shard.hpp"

#include "util/log.hpp"

namespace datavo::client {

void GrowingShard::staging(ShardHandle staged) {
  std::lock_guard lock(mu_);
  unmapped_ = std::move(staged);
  // The new file's bytes are the same as the last one's, but none of them is verified yet.
  view_.mapping.reset();
  view_.verified = 0;
}

void GrowingShard::verified(Bytes prefix, Bytes total) {
  {
    std::lock_guard lock(mu_);
    if (view_.complete || error_) return;
    if (unmapped_) {
      auto mapped = ShardMapping::map_growing(*unmapped_, total, name_);
      unmapped_.reset();
      if (!mapped) {
        // Not fatal: the reader waits for the installed file instead.
        LOG_DEBUG("shard " << name_ << ": cannot map the staging file (" << mapped.error().message
                           << "); reading it once installed");
        return;
      }
      view_.mapping = std::move(*mapped);
    }
    if (!view_.mapping || prefix.count() > view_.mapping->bytes().size()) return;
    view_.verified = prefix.count();
    ++published_;
  }
  changed_.notify_all();
}

void GrowingShard::complete(std::shared_ptr<const ShardMapping> installed) {
  {
    std::lock_guard lock(mu_);
    unmapped_.reset();
    view_.verified = installed->bytes().size();
    view_.mapping = std::move(installed);
    view_.complete = true;
  }
  changed_.notify_all();
}

void GrowingShard::fail(Error error) {
  {
    std::lock_guard lock(mu_);
    unmapped_.reset();
    error_ = std::move(error);
  }
  changed_.notify_all();
}

Result<GrowingView> GrowingShard::answer(std::uint64_t than) const {
  // Bytes verified before the fetch failed stay good: a reader gets them, and the Error once it needs more.
  if (view_.complete || view_.verified > than || !error_) return view_;
  return *error_;
}

Result<GrowingView> GrowingShard::wait_beyond(std::uint64_t than) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return ready(than); });
  return answer(than);
}

std::optional<Result<GrowingView>> GrowingShard::wait_beyond_for(std::uint64_t than, std::chrono::milliseconds bound) {
  std::unique_lock lock(mu_);
  if (!changed_.wait_for(lock, bound, [&] { return ready(than); })) return std::nullopt;
  return answer(than);
}

std::uint64_t GrowingShard::prefixes_published() const {
  std::lock_guard lock(mu_);
  return published_;
}

void GrowingSamples::restart_at_base(const GrowingView& view) {
  mapping_ = view.mapping;
  complete_ = view.complete;
  iterator_end_ = view.verified;
  iterator_.emplace(mapping_->bytes().first(view.verified).subspan(base_), name_);
}

Result<const Sample*> GrowingSamples::next() {
  if (error_) return *error_;
  for (;;) {
    if (!iterator_) {
      auto view = shard_->wait_beyond(need_);
      if (!view) return *(error_ = std::move(view).error());
      base_ = next_sample_;
      restart_at_base(*view);
    }
    auto sample = iterator_->next();
    if (!sample) {
      const TarFault fault = iterator_->fault();
      const bool wants_more = fault == TarFault::truncated || fault == TarFault::missing_end_marker;
      if (complete_ || !wants_more) return *(error_ = std::move(sample).error());
      // Out of verified bytes: wait for more, then read the unfinished sample again from its first header.
      need_ = iterator_end_;
      iterator_.reset();
      continue;
    }
    // Without a next sample the iterator has ended: it answers the next call itself.
    if (*sample != nullptr) {
      if (const auto after = iterator_->next_sample_offset()) next_sample_ = base_ + *after;
    }
    return sample;
  }
}

}  // namespace datavo::client
