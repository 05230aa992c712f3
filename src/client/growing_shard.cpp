#include "client/growing_shard.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "util/log.hpp"

namespace datavo::client {
namespace {

struct Flight {
  std::weak_ptr<GrowingShard> leader;
  std::vector<std::weak_ptr<GrowingShard>> members;
};
// The flights of this process, by shard key.
struct Flights {
  std::mutex mu;
  std::unordered_map<std::string, Flight> by_key;
};
Flights& flights() {
  static Flights all;
  return all;
}

}  // namespace

void GrowingShard::join_flight() {
  if (flight_.empty()) return;
  std::shared_ptr<GrowingShard> leader;
  {
    Flights& all = flights();
    std::lock_guard lock(all.mu);
    Flight& flight = all.by_key[flight_];
    flight.members.push_back(weak_from_this());
    leader = flight.leader.lock();
  }
  if (leader && leader.get() != this) mirror(leader->view());
}

void GrowingShard::leave_flight() {
  if (flight_.empty()) return;
  Flights& all = flights();
  std::lock_guard lock(all.mu);
  auto found = all.by_key.find(flight_);
  if (found == all.by_key.end()) return;
  Flight& flight = found->second;
  std::erase_if(flight.members, [this](const std::weak_ptr<GrowingShard>& m) {
    auto member = m.lock();
    return !member || member.get() == this;
  });
  if (auto leader = flight.leader.lock(); !leader || leader.get() == this) flight.leader.reset();
  if (flight.members.empty()) all.by_key.erase(found);
}

void GrowingShard::lead(const GrowingView& view) {
  if (flight_.empty()) return;
  std::vector<std::shared_ptr<GrowingShard>> followers;
  {
    Flights& all = flights();
    std::lock_guard lock(all.mu);
    auto found = all.by_key.find(flight_);
    if (found == all.by_key.end()) return;
    found->second.leader = weak_from_this();
    for (const auto& m : found->second.members)
      if (auto member = m.lock(); member && member.get() != this) followers.push_back(std::move(member));
  }
  for (const auto& follower : followers) follower->mirror(view);
}

void GrowingShard::mirror(const GrowingView& leader) {
  {
    std::lock_guard lock(mu_);
    if (own_file_ || view_.complete || error_ || leader.complete) return;
    // Only forward on one file: an older report of the same file comes late, and a new file starts at 0.
    if (leader.mapping == view_.mapping && leader.verified <= view_.verified) return;
    view_.mapping = leader.mapping;
    view_.verified = leader.verified;
    if (leader.verified > 0) ++published_;
  }
  changed_.notify_all();
}

GrowingView GrowingShard::view() const {
  std::lock_guard lock(mu_);
  return view_;
}

void GrowingShard::staging(ShardHandle staged) {
  {
    std::lock_guard lock(mu_);
    own_file_ = true;
    unmapped_ = std::move(staged);
    // The new file's bytes are the same as the last one's, but none of them is verified yet.
    view_.mapping.reset();
    view_.verified = 0;
  }
  lead(GrowingView{});
}

void GrowingShard::verified(Bytes prefix, Bytes total) {
  GrowingView shared;
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
    shared = view_;
  }
  changed_.notify_all();
  lead(shared);
}

bool GrowingShard::all_verified() const {
  std::lock_guard lock(mu_);
  return view_.complete || (view_.mapping && view_.verified == view_.mapping->bytes().size());
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
      std::optional<Result<GrowingView>> view;
      while (!view) {
        if (stop_ != nullptr && stop_->load()) {
          return *(error_ = Error{ErrorCode::cancelled, "shard " + name_ + ": reading it was cancelled"});
        }
        view = shard_->wait_beyond_for(need_, k_stop_poll);
      }
      if (!*view) return *(error_ = std::move(*view).error());
      base_ = next_sample_;
      restart_at_base(**view);
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
