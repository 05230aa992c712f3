#include "tier/folder/oldest_entries.hpp"

#include <algorithm>

namespace datavo::folder {
namespace {

std::uint8_t nibble(char c) { return std::uint8_t(c <= '9' ? c - '0' : c - 'a' + 10); }

std::int64_t to_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

OldestEntries::OldestEntries(Bytes to_free) : to_free_(to_free.count()) {}

bool OldestEntries::older(const OldEntry& a, const OldEntry& b) const {
  if (a.mtime_ns != b.mtime_ns) return a.mtime_ns < b.mtime_ns;
  if (a.instance != b.instance) return instances_[a.instance] < instances_[b.instance];
  return a.hash < b.hash;  // byte order of the binary hash is the order of its lowercase hex
}

std::uint32_t OldestEntries::intern(std::string_view instance) {
  // Entries come directory by directory: the last instance is the likely one.
  for (std::size_t i = instances_.size(); i-- > 0;) {
    if (instances_[i] == instance) return std::uint32_t(i);
  }
  instances_.emplace_back(instance);
  return std::uint32_t(instances_.size() - 1);
}

void OldestEntries::offer(std::string_view instance, std::string_view hash_hex, Bytes size,
                          std::chrono::system_clock::time_point mtime) {
  if (to_free_ == 0) return;
  const std::int64_t mtime_ns = to_ns(mtime);
  const bool enough = held_bytes_ >= to_free_;
  // Most entries of a large tier are newer than every entry held: rejected on their mtime alone.
  if (enough && mtime_ns > heap_.front().mtime_ns) return;
  OldEntry e;
  e.mtime_ns = mtime_ns;
  e.size = size.count();
  e.instance = intern(instance);
  for (std::size_t i = 0; i < e.hash.size(); ++i) {
    e.hash[i] = std::uint8_t(nibble(hash_hex[2 * i]) << 4 | nibble(hash_hex[2 * i + 1]));
  }
  auto newer = [this](const OldEntry& a, const OldEntry& b) { return older(a, b); };
  if (enough && !older(e, heap_.front())) return;
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), newer);
  held_bytes_ += e.size;
  peak_ = std::max(peak_, heap_.size());
  // Drop the newest held entries while the others still reach to_free.
  while (held_bytes_ - heap_.front().size >= to_free_) {
    held_bytes_ -= heap_.front().size;
    std::pop_heap(heap_.begin(), heap_.end(), newer);
    heap_.pop_back();
  }
}

std::vector<OldEntry> OldestEntries::take_oldest_first() {
  std::sort_heap(heap_.begin(), heap_.end(), [this](const OldEntry& a, const OldEntry& b) { return older(a, b); });
  held_bytes_ = 0;
  std::vector<OldEntry> out;
  out.swap(heap_);
  return out;
}

std::string OldestEntries::hash_hex(const OldEntry& e) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (std::size_t i = 0; i < e.hash.size(); ++i) {
    out[2 * i] = k_digits[e.hash[i] >> 4];
    out[2 * i + 1] = k_digits[e.hash[i] & 0xf];
  }
  return out;
}

}  // namespace datavo::folder
