// An in-memory remote tier: supports_direct_read() == false, entries held in process memory. It exists as a
// test double for the remote-tier path of the hierarchy (materialization through a folder tier) and proves
// nothing about a real cloud tier. Like a cloud tier's object metadata, read_into() reports the SHA-256 that
// install_copy() was given, not one computed from the bytes: a test can store bytes whose record lies, and see the
// hierarchy refuse them. Thread-safe.
#pragma once

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
};

std::shared_ptr<Tier> make_memory_tier(MemoryTierOptions options);

}  // namespace datavo
