// An in-memory remote tier: supports_direct_read() == false, entries held in process memory. It exists as a
// test double for the remote-tier path of the hierarchy (materialization through a folder tier) and proves
// nothing about a real cloud tier. Like a cloud tier's object metadata, read_into() reports the SHA-256 that
// install_copy() was given, not one computed from the bytes: a test can store bytes whose record lies, and see the
// hierarchy refuse them. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "datavo/tier.hpp"

namespace datavo {

struct MemoryTierOptions {
  std::string name = "memory";
  std::optional<Bytes> max_bytes;
  // When set, every operation fails with this error: the double for a remote that is down.
  std::optional<ErrorCode> fail_with;
  // The age past which `cache gc` removes an entry (Tier::max_age), as a cloud tier's max_age.
  std::optional<Seconds> max_age;
  // The time an install records as the entry's last modification (list()'s last_access): the seam that lets a test
  // make entries old without waiting.
  std::function<std::chrono::system_clock::time_point()> clock = [] { return std::chrono::system_clock::now(); };
};

std::shared_ptr<Tier> make_memory_tier(MemoryTierOptions options);

}  // namespace datavo
