#include "tier/cloud/chunk_metadata.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "tier/cloud/checksums.hpp"
#include "util/base64.hpp"
#include "util/decimal.hpp"

namespace datavo::cloud {

std::optional<Bytes> object_chunk_size(Bytes size) {
  for (Bytes chunk = k_min_object_chunk; chunk <= k_max_chunk_size; chunk = Bytes{chunk.count() * 2}) {
    if (ChunkDigests::count_for(size, chunk) <= k_max_object_chunks) return chunk;
  }
  return std::nullopt;
}

std::string encode_chunk_metadata(const ChunkDigests& chunks) {
  std::string raw;
  raw.reserve(chunks.digests.size() * 32);
  for (const Sha256& digest : chunks.digests)
    raw.append(reinterpret_cast<const char*>(digest.raw().data()), digest.raw().size());
  return std::to_string(chunks.chunk_size.count()) + " " + util::base64_encode(raw);
}

Result<ChunkDigests> decode_chunk_metadata(std::string_view value, Bytes size) {
  const auto space = value.find(' ');
  const auto chunk_size = util::parse_decimal(value.substr(0, space));
  if (space == std::string_view::npos || !chunk_size) {
    return Error{ErrorCode::integrity, "datavo-chunks is not \"<chunk size> <base64 digests>\""};
  }
  const auto expected = object_chunk_size(size);
  if (!expected || *chunk_size != expected->count()) {
    return Error{ErrorCode::integrity, "datavo-chunks names chunks of " + std::to_string(*chunk_size) +
                                           " bytes, but an object of " + std::to_string(size.count()) + " bytes has " +
                                           (expected ? std::to_string(expected->count()) : std::string("no")) +
                                           " chunk digests recorded"};
  }
  std::string raw;
  if (value.size() > space + 1) {
    auto decoded = util::base64_decode(value.substr(space + 1));
    if (!decoded) return Error{ErrorCode::integrity, "datavo-chunks: the digests are not base64"};
    raw = std::move(*decoded);
  }
  if (raw.size() % 32 != 0) {
    return Error{ErrorCode::integrity,
                 "datavo-chunks: " + std::to_string(raw.size()) + " bytes of digests, not a multiple of 32"};
  }
  ChunkDigests chunks{*expected, {}};
  for (std::size_t at = 0; at < raw.size(); at += 32) {
    Sha256::Raw digest{};
    std::memcpy(digest.data(), raw.data() + at, digest.size());
    chunks.digests.emplace_back(digest);
  }
  DATAVO_TRY(chunks.check_covers(size, ErrorCode::integrity, "datavo-chunks"));
  return chunks;
}

Result<std::optional<ChunkDigests>> object_chunk_digests(const ShardHandle& source) {
  const auto chunk_size = object_chunk_size(source.size());
  if (!chunk_size) return std::optional<ChunkDigests>{};
  const std::uint64_t count = ChunkDigests::count_for(source.size(), *chunk_size);
  ChunkDigests out{*chunk_size, std::vector<Sha256>(count)};
  std::vector<std::optional<Error>> failures(count);
  std::atomic<std::uint64_t> next{0};
  const auto hash_chunks = [&] {
    for (std::uint64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      const std::uint64_t first = i * chunk_size->count();
      const std::uint64_t length = std::min(chunk_size->count(), source.size().count() - first);
      auto digest = sha256_of_range(source.fd(), first, length);
      if (digest) {
        out.digests[i] = *digest;
      } else {
        Error error = std::move(digest).error();
        failures[i] = Error{error.code, source.path() + " (for its chunk digests): " + error.message, error.sys_errno};
      }
    }
  };
  // The chunks are independent, so they are hashed on several cores: the pass comes before the upload's first
  // request (the digests go in the request that starts it), and would otherwise delay it by the whole object's
  // SHA-256 time.
  const auto helpers = std::min<std::uint64_t>(count, k_hash_threads) - std::min<std::uint64_t>(count, 1);
  std::vector<std::thread> threads;
  threads.reserve(helpers);
  for (std::uint64_t t = 0; t < helpers; ++t) {
    try {
      threads.emplace_back(hash_chunks);
    } catch (const std::system_error&) {
      break;  // fewer helpers: this thread hashes what they would have
    }
  }
  hash_chunks();
  for (auto& thread : threads) thread.join();
  for (auto& failure : failures)
    if (failure) return std::move(*failure);
  return std::optional<ChunkDigests>{std::move(out)};
}

}  // namespace datavo::cloud
