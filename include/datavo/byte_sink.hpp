// ByteSink: where a shard's bytes go on their way into the cache (a staging file, a test buffer).
//
// Two ways in:
//   - write(): sequential appends, the way one HTTP response or one file copy delivers bytes;
//   - positional(): for sinks that can take bytes at any offset (a staging file), so that parallel ranged
//     downloads write each range where it belongs.
// Thread safety: write() and restart() are called by one thread at a time. A PositionalSink may be used from
// several threads at once (each writing its own ranges), but never together with write()/restart().
#pragma once

#include <cstddef>
#include <cstdint>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// Writes at given offsets. The ranges written must not overlap. Thread-safe.
class PositionalSink {
 public:
  virtual ~PositionalSink() = default;
  virtual Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) = 0;
  // Declares that every byte of [0, size) has been written through write_at(): from now on the sink holds
  // exactly them (written() == size). Called once, after the last write_at(), from one thread; it may also be
  // called with a growing size as the written prefix grows, so that work that trails the bytes (hashing) can start.
  virtual Result<void> prefix_complete(Bytes size) = 0;
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends `size` bytes.
  virtual Result<void> write(const void* data, std::size_t size) = 0;
  virtual Bytes written() const = 0;
  // Discards every byte written so far, so that a retry can start from scratch.
  virtual Result<void> restart() = 0;
  // Told by a verifying decorator (net::ChunkVerifyingSink) that the first `prefix` bytes written (of a shard of
  // `total` bytes) match the ticket's chunk digests, so that readers may use them before the whole shard is in
  // (docs/hierarchy.md, "Reading while fetching"). Called after the write that completed them; `prefix` only grows
  // until restart(). A sink that passes bytes on passes this on too; the default ignores it.
  virtual void verified_prefix(Bytes /*prefix*/, Bytes /*total*/) {}
  // Copies `size` bytes that the sink holds, from byte `offset` (REQUIRES: offset + size <= written()), into `out`:
  // so that a verifying decorator can check the bytes it inherits (a download continued from the staging file of a
  // process that died). A sink that passes bytes on passes this on too; the default cannot (ErrorCode::unsupported).
  virtual Result<void> read_back(std::uint64_t /*offset*/, void* /*out*/, std::size_t /*size*/) {
    return Error{ErrorCode::unsupported, "this sink cannot read back its bytes"};
  }
  // The positional interface of this sink, or nullptr when it only takes appends. Before it is used the sink must
  // be empty (restart() it); afterwards only prefix_complete() makes the bytes count as written.
  virtual PositionalSink* positional() { return nullptr; }
};

}  // namespace datavo
