// ChunkVerifyingSink: a ByteSink decorator that checks a download chunk by chunk against its ChunkDigests as the
// bytes stream through it, with no second pass over them.
//
// Every write() is hashed before it is passed on. The write that completes a chunk (the last chunk completes when
// the sink holds `size` bytes) compares its digest with the list; the first chunk that differs fails that write with
// ErrorCode::integrity naming `what` (the shard), the chunk's index and its byte range, and none of that write's
// bytes reach the inner sink; the transport ends the transfer on it at once, without a retry. Bytes past `size`
// fail the same way. Whole-shard verification (size and SHA-256) stays the caller's.
//
// Resume: the transport continues a cut transfer at written(), so the hash of the chunk in progress simply goes on.
// restart() starts over at byte 0. An inner sink that already holds P bytes at construction (a download a killed
// process left half-done, continued with Range) is read back (ByteSink::read_back) and its P bytes are hashed and
// checked at once, as if they had come through here: the sink reports their verified prefix and goes on hashing the
// chunk in progress. When a chunk among them does not match, the inner sink is restarted (the whole-shard check
// would refuse them after the rest of the download), and the download starts over at byte 0. When the inner sink
// cannot read back (or cannot restart), chunks that begin before P are not checked chunk by chunk (only by the
// whole-shard SHA-256, which a continued download must then pass), and checking starts at the first chunk boundary at
// or after P; chunks_skipped() says how many. Inherited bytes past
// the ticket's size restart the inner sink too.
//
// Progress: after each write that completes chunks (and after an inherited prefix checked at construction), the
// inner sink is told the verified prefix (ByteSink::verified_prefix): the bytes of every chunk from the first up to
// the last one verified. A sink that skipped chunks (chunks_skipped() > 0) never reports one: its first bytes were
// not checked here.
//
// Thread safety: as ByteSink (one thread at a time). Sequential writes only: positional() is nullptr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "datavo/byte_sink.hpp"
#include "datavo/chunk_digests.hpp"

namespace datavo::net {

class ChunkVerifyingSink final : public ByteSink {
 public:
  // REQUIRES: chunks.check_covers(size) holds. `inner`, `chunks` are borrowed and must outlive the sink. `whose`
  // names the list's source in errors ("the ticket's chunk list gives ...").
  ChunkVerifyingSink(ByteSink& inner, const ChunkDigests& chunks, Bytes size, std::string what,
                     std::string whose = "the ticket's");

  Result<void> write(const void* data, std::size_t size) override;
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override;

  // Chunks verified so far, and chunks that could not be checked one by one (see resume above).
  std::uint64_t chunks_verified() const { return verified_; }
  std::uint64_t chunks_skipped() const { return skipped_; }

 private:
  static constexpr std::uint64_t k_read_back_block = 4u << 20;

  // Positions the hashing at the first chunk boundary at or after the inner sink's bytes.
  void start_at(std::uint64_t offset);
  // Reads back and checks the `inherited` bytes the inner sink held at construction (see resume above).
  void check_inherited(std::uint64_t inherited);
  // Restarts the inner sink, whose inherited bytes are wrong; when it cannot, checks from the next boundary.
  void start_over(std::uint64_t inherited);
  // Tells the inner sink the verified prefix.
  void report_verified();
  Result<void> check_completed();

  ByteSink& inner_;
  const ChunkDigests& chunks_;
  const Bytes size_;
  const std::string what_;
  const std::string whose_;
  std::uint64_t first_chunk_ = 0;  // index of the chunk the hasher's first digest belongs to
  std::uint64_t unhashed_ = 0;     // bytes still to pass unhashed before first_chunk_ begins
  std::optional<ChunkHasher> hasher_;
  std::uint64_t hashed_ = 0;  // bytes given to the hasher since first_chunk_ began
  std::uint64_t verified_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace datavo::net
