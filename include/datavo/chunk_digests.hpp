// Chunk digests (docs/protocol.md, "Chunk digests"): the SHA-256 of every fixed-size chunk of a shard, so that a
// download can be checked chunk by chunk as its bytes arrive instead of only once the whole shard is in. Chunk i
// covers bytes [i * chunk_size, min((i + 1) * chunk_size, size)): every chunk is chunk_size bytes but the last, which
// may be shorter. A shard of 0 bytes has no chunks.
//
// The canonical list is the text of the digests in chunk order, each as 64 lowercase hex characters followed by
// "\n"; its SHA-256 (ChunkDigests::binding()) is what a ticket carries as `chunks_sha256`, so that a list that
// reached a client by another way would be used only when it is the ticket's. (A cloud tier keeps its own list
// in each object's metadata: docs/protocol.md, "Where a cloud tier's chunk list lives".)
//
// Thread safety: ChunkDigests is a value type; a ChunkHasher belongs to one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// The chunk size the reference origin uses: 4 MiB, so a 1 GiB shard has 256 digests (17 KiB of ticket).
inline constexpr Bytes k_default_chunk_size = MiB(4);
// The chunk sizes a ticket may name: smaller ones would make lists too long to send, larger ones verify too late.
inline constexpr Bytes k_min_chunk_size = KiB(4);
inline constexpr Bytes k_max_chunk_size = GiB(1);

struct ChunkDigests {
  Bytes chunk_size;
  std::vector<Sha256> digests;  // digests[i] is the SHA-256 of chunk i

  // ceil(size / chunk_size); 0 for an empty shard. REQUIRES: chunk_size > 0.
  static std::uint64_t count_for(Bytes size, Bytes chunk_size);
  // The canonical list (see the top of this file).
  std::string canonical() const;
  // The SHA-256 of canonical(): a ticket's `chunks_sha256`.
  Sha256 binding() const;
  // A canonical list back, refused (`code`, naming `what`) unless every line is 64 lowercase hex characters
  // followed by "\n".
  static Result<ChunkDigests> parse_canonical(Bytes chunk_size, std::string_view text, ErrorCode code,
                                              std::string_view what);
  // Refused (`code`, the message naming `what` and the numbers) unless chunk_size is within [k_min_chunk_size,
  // k_max_chunk_size] and there is exactly one digest per chunk of a shard of `size` bytes.
  Result<void> check_covers(Bytes size, ErrorCode code, std::string_view what) const;
  bool operator==(const ChunkDigests&) const = default;
};

// Hashes a byte stream chunk by chunk. update() as the bytes come; digests() holds the digest of every chunk
// completed so far; finish() adds the last, short chunk (if any bytes of it came) and returns them all.
class ChunkHasher {
 public:
  explicit ChunkHasher(Bytes chunk_size) : chunk_size_(chunk_size) {}
  void update(const void* data, std::size_t size);
  const std::vector<Sha256>& digests() const { return digests_; }
  ChunkDigests finish();

 private:
  Bytes chunk_size_;
  Sha256Hasher hasher_;
  std::uint64_t in_chunk_ = 0;  // bytes of the current chunk hashed so far
  std::vector<Sha256> digests_;
};

}  // namespace datavo
