#include "datavo/tier.hpp"

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

TierStats& TierStats::operator+=(const TierStats& o) {
  hits += o.hits;
  misses += o.misses;
  promotions += o.promotions;
  installs += o.installs;
  capacity_skips += o.capacity_skips;
  evictions += o.evictions;
  errors += o.errors;
  bytes_served += o.bytes_served;
  bytes_installed += o.bytes_installed;
  return *this;
}

TierStats TierCounters::snapshot() const {
  TierStats s;
  s.hits = hits.load();
  s.misses = misses.load();
  s.promotions = promotions.load();
  s.installs = installs.load();
  s.capacity_skips = capacity_skips.load();
  s.evictions = evictions.load();
  s.errors = errors.load();
  s.bytes_served = Bytes{bytes_served.load()};
  s.bytes_installed = Bytes{bytes_installed.load()};
  return s;
}

TierStats TierCounters::take() {
  TierStats s;
  s.hits = hits.exchange(0);
  s.misses = misses.exchange(0);
  s.promotions = promotions.exchange(0);
  s.installs = installs.exchange(0);
  s.capacity_skips = capacity_skips.exchange(0);
  s.evictions = evictions.exchange(0);
  s.errors = errors.exchange(0);
  s.bytes_served = Bytes{bytes_served.exchange(0)};
  s.bytes_installed = Bytes{bytes_installed.exchange(0)};
  return s;
}

bool Tier::can_hold(Bytes size) const {
  if (read_only()) return false;
  auto cap = max_bytes();
  return !cap || cap->count() == 0 || size <= *cap;
}

}  // namespace datavo
