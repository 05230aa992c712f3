// The chunk digests a cloud tier records in an entry object's metadata (docs/protocol.md, "Where a cloud tier's
// chunk list lives"), so that a streamed read can check the object's bytes chunk by chunk with no request to the
// origin. Object metadata is small (S3: 2 KB for all of it), so the list is bounded instead of the chunk size: the
// chunk size is derived from the object's size, the smallest power of two of at least k_min_object_chunk that
// makes at most k_max_object_chunks chunks (a 100 MiB shard: 4 MiB chunks; 1 GiB: 32 MiB), and the value is
// "<chunk_size> <base64 of the raw digests, concatenated>": at most 1,380 bytes.
//
// Thread safety: pure functions; object_chunk_digests reads at its own offsets (pread), so the handle may be shared.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "datavo/chunk_digests.hpp"
#include "datavo/result.hpp"
#include "datavo/tier.hpp"
#include "datavo/units.hpp"

namespace datavo::cloud {

inline constexpr std::uint64_t k_max_object_chunks = 32;
inline constexpr Bytes k_min_object_chunk = KiB(64);

// The chunk size of an object of `size` bytes; nullopt when even k_max_chunk_size makes too many chunks (objects
// above 32 GiB are recorded without chunk digests).
std::optional<Bytes> object_chunk_size(Bytes size);

// The metadata value for `chunks` (see the top of this file).
std::string encode_chunk_metadata(const ChunkDigests& chunks);
// The digests back from a metadata value, refused (ErrorCode::integrity, the message naming what is wrong) unless
// it is "<decimal> <base64>" and the list covers an object of `size` bytes with the chunk size that
// object_chunk_size(size) gives.
Result<ChunkDigests> decode_chunk_metadata(std::string_view value, Bytes size);

// The threads object_chunk_digests hashes on (the caller's included), at most.
inline constexpr std::uint64_t k_hash_threads = 4;

// The chunk digests of the bytes `source` reads, at object_chunk_size(source.size()), hashed on up to
// k_hash_threads threads (the caller's and short-lived helpers, joined before it returns); nullopt for an object
// too large to record them. An Error when the file cannot be read.
Result<std::optional<ChunkDigests>> object_chunk_digests(const ShardHandle& source);

}  // namespace datavo::cloud
