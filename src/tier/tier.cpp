// What the tier interface defines once for every tier: the shard handle, the counters' arithmetic, can_hold.
#include "datavo/tier.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

namespace datavo {

ShardHandle::~ShardHandle() {
  if (fd_ >= 0) ::close(fd_);
}

ShardHandle::ShardHandle(ShardHandle&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), size_(other.size_) {
  other.fd_ = -1;
}

ShardHandle& ShardHandle::operator=(ShardHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

Result<ShardHandle> ShardHandle::duplicate() const {
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::from_errno(errno, "cannot duplicate the descriptor of " + path_);
  return ShardHandle(fd, path_, size_);
}

TierStats& TierStats::operator+=(const TierStats& o) {
#define DATAVO_TIER_STATS_ADD(name, type, meaning) name += o.name;
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_ADD)
#undef DATAVO_TIER_STATS_ADD
  return *this;
}

bool TierStats::empty() const {
  bool zero = true;
  for_each([&zero](const char*, std::uint64_t count) { zero = zero && count == 0; });
  return zero;
}

bool TierStats::set(std::string_view field, std::uint64_t count) {
#define DATAVO_TIER_STATS_SET(name, type, meaning) \
  if (field == #name) {                            \
    name = detail::stat_from_count<type>(count);   \
    return true;                                   \
  }
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_SET)
#undef DATAVO_TIER_STATS_SET
  return false;
}

TierStats TierCounters::snapshot() const {
  TierStats s;
#define DATAVO_TIER_STATS_LOAD(name, type, meaning) s.name = detail::stat_from_count<type>(name.load());
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_LOAD)
#undef DATAVO_TIER_STATS_LOAD
  return s;
}

TierStats TierCounters::take() {
  TierStats s;
#define DATAVO_TIER_STATS_TAKE(name, type, meaning) s.name = detail::stat_from_count<type>(name.exchange(0));
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_TAKE)
#undef DATAVO_TIER_STATS_TAKE
  return s;
}

TierStatSet Tier::kept_stats() const { return TierStatSet::all().without(TierStat::evictions); }

TierStatSet LocalTier::kept_stats() const {
  return TierStatSet::all()
      .without(TierStat::uploads)
      .without(TierStat::upload_failures)
      .without(TierStat::uploads_present)
      .without(TierStat::upload_skips)
      .without(TierStat::lease_waits)
      .without(TierStat::hedges_sent)
      .without(TierStat::hedges_won);
}

const char* to_string(UploadMode mode) {
  switch (mode) {
    case UploadMode::background: return "background";
    case UploadMode::sync: return "sync";
  }
  return "background";
}

const char* to_string(VerifyDepth depth) {
  switch (depth) {
    case VerifyDepth::metadata: return "metadata";
    case VerifyDepth::full: return "full";
  }
  return "metadata";
}

bool Tier::can_hold(Bytes size) const {
  if (read_only()) return false;
  auto cap = max_bytes();
  return !cap || cap->count() == 0 || size <= *cap;
}

}  // namespace datavo
