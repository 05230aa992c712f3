// The LRU candidates of one eviction pass of a folder tier (src/tier/folder/eviction.cpp): a max-heap by age that
// holds only the oldest entries seen so far that together free the bytes the pass must free, so that a pass over
// millions of entries holds about the entries it will evict, not every entry of the tier.
// Internal to the folder tier. Thread safety: none (one pass, one thread).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/units.hpp"

namespace datavo::folder {

// One entry held: 56 bytes. The path is rebuilt from the instance's name and the hash when it is evicted.
struct OldEntry {
  std::int64_t mtime_ns = 0;            // since the epoch
  std::uint64_t size = 0;               // bytes
  std::uint32_t instance = 0;           // index into OldestEntries::instance_name()
  std::array<std::uint8_t, 32> hash{};  // the content hash, binary (its hex is the entry's file name)
};

class OldestEntries {
 public:
  // Holds the oldest entries whose sizes add up to at least `to_free` (none when it is 0).
  explicit OldestEntries(Bytes to_free);

  // Offers a committed entry. `hash_hex` is 64 lowercase hex characters (the folder scan checked them). Entries are
  // ordered by mtime, then instance name, then hash, so that ties are broken the same way on every pass and every
  // filesystem whatever the order of readdir. The entry is kept when it is among the fewest oldest offered so far
  // that reach `to_free`; entries that are no longer needed to reach it are dropped.
  void offer(std::string_view instance, std::string_view hash_hex, Bytes size,
             std::chrono::system_clock::time_point mtime);

  // Entries held now, and the most held at once since construction (the pass's memory: 56 bytes each, plus the
  // vector's slack).
  std::size_t size() const { return heap_.size(); }
  std::size_t peak() const { return peak_; }
  // The bytes of the entries held: at least `to_free` once enough was offered.
  Bytes bytes_held() const { return Bytes{held_bytes_}; }

  // The entries held, oldest first. Leaves this empty.
  std::vector<OldEntry> take_oldest_first();
  const std::string& instance_name(const OldEntry& e) const { return instances_[e.instance]; }
  static std::string hash_hex(const OldEntry& e);

 private:
  // true when a is evicted before b.
  bool older(const OldEntry& a, const OldEntry& b) const;
  std::uint32_t intern(std::string_view instance);

  std::uint64_t to_free_;
  std::uint64_t held_bytes_ = 0;
  std::size_t peak_ = 0;
  std::vector<OldEntry> heap_;          // std::push_heap order: the newest held entry at the front
  std::vector<std::string> instances_;  // the instance names met, in the order met (a tier has a few)
};

}  // namespace datavo::folder
