#include "datavo/chunk_digests.hpp"

#include <algorithm>

namespace datavo {
namespace {

bool is_lower_hex_line(std::string_view line) {
  return line.size() == 64 &&
         std::all_of(line.begin(), line.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::uint64_t ChunkDigests::count_for(Bytes size, Bytes chunk_size) {
  return (size.count() + chunk_size.count() - 1) / chunk_size.count();
}

std::string ChunkDigests::canonical() const {
  std::string text;
  text.reserve(digests.size() * 65);
  for (const Sha256& digest : digests) {
    text += digest.hex();
    text += '\n';
  }
  return text;
}

Sha256 ChunkDigests::binding() const {
  const std::string text = canonical();
  Sha256Hasher hasher;
  hasher.update(text.data(), text.size());
  return hasher.finish();
}

Result<ChunkDigests> ChunkDigests::parse_canonical(Bytes chunk_size, std::string_view text, ErrorCode code,
                                                   std::string_view what) {
  ChunkDigests out{chunk_size, {}};
  std::size_t line_number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    if (end == std::string_view::npos || !is_lower_hex_line(line)) {
      return Error{code, std::string(what) + ": line " + std::to_string(line_number + 1) +
                             " is not 64 lowercase hex characters and a line feed"};
    }
    out.digests.push_back(Sha256::parse(line).value());
    text.remove_prefix(end + 1);
    ++line_number;
  }
  return out;
}

Result<void> ChunkDigests::check_covers(Bytes size, ErrorCode code, std::string_view what) const {
  if (chunk_size < k_min_chunk_size || chunk_size > k_max_chunk_size) {
    return Error{code, std::string(what) + ": chunk_size " + std::to_string(chunk_size.count()) + " is outside [" +
                           std::to_string(k_min_chunk_size.count()) + ", " + std::to_string(k_max_chunk_size.count()) +
                           "]"};
  }
  const std::uint64_t want = count_for(size, chunk_size);
  if (digests.size() != want) {
    return Error{code, std::string(what) + ": " + std::to_string(digests.size()) + " chunk digests, but " +
                           std::to_string(size.count()) + " bytes in chunks of " + std::to_string(chunk_size.count()) +
                           " make " + std::to_string(want)};
  }
  return ok();
}

void ChunkHasher::update(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(size, chunk_size_.count() - in_chunk_));
    hasher_.update(bytes, take);
    in_chunk_ += take;
    bytes += take;
    size -= take;
    if (in_chunk_ == chunk_size_.count()) {
      digests_.push_back(hasher_.finish());
      in_chunk_ = 0;
    }
  }
}

ChunkDigests ChunkHasher::finish() {
  if (in_chunk_ > 0) {
    digests_.push_back(hasher_.finish());
    in_chunk_ = 0;
  }
  return ChunkDigests{chunk_size_, std::move(digests_)};
}

}  // namespace datavo
