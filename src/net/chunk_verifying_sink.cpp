#include "net/chunk_verifying_sink.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace datavo::net {

ChunkVerifyingSink::ChunkVerifyingSink(ByteSink& inner, const ChunkDigests& chunks, Bytes size, std::string what,
                                       std::string whose)
    : inner_(inner), chunks_(chunks), size_(size), what_(std::move(what)), whose_(std::move(whose)) {
  const std::uint64_t inherited = inner_.written().count();
  start_at(inherited);
  if (skipped_ > 0) check_inherited(inherited);
}

void ChunkVerifyingSink::check_inherited(std::uint64_t inherited) {
  if (inherited > size_.count()) return start_over(inherited);
  start_at(0);
  std::vector<std::byte> block(static_cast<std::size_t>(std::min<std::uint64_t>(k_read_back_block, inherited)));
  for (std::uint64_t at = 0; at < inherited; at += block.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), inherited - at));
    if (!inner_.read_back(at, block.data(), n)) return start_at(inherited);
    hasher_->update(block.data(), n);
    hashed_ += n;
  }
  if (!check_completed()) return start_over(inherited);
  report_verified();
}

void ChunkVerifyingSink::start_over(std::uint64_t inherited) {
  // Whole-shard verification would refuse these bytes after the rest of the download: drop them at once.
  if (inner_.restart()) return start_at(0);
  start_at(inherited);
}

void ChunkVerifyingSink::report_verified() {
  if (verified_ == 0) return;
  inner_.verified_prefix(Bytes{std::min(verified_ * chunks_.chunk_size.count(), size_.count())}, size_);
}

void ChunkVerifyingSink::start_at(std::uint64_t offset) {
  const std::uint64_t chunk = chunks_.chunk_size.count();
  first_chunk_ = (offset + chunk - 1) / chunk;
  unhashed_ = std::min(first_chunk_ * chunk, size_.count()) - std::min(offset, size_.count());
  skipped_ = first_chunk_;
  hasher_.emplace(chunks_.chunk_size);
  hashed_ = 0;
  verified_ = 0;
}

Result<void> ChunkVerifyingSink::restart() {
  DATAVO_TRY(inner_.restart());
  start_at(0);
  return ok();
}

Result<void> ChunkVerifyingSink::check_completed() {
  const bool at_end = first_chunk_ * chunks_.chunk_size.count() + hashed_ == size_.count();
  // The last chunk completes at the shard's end, however short it is; finish() hashes it.
  std::optional<ChunkDigests> finished;
  if (at_end) finished = hasher_->finish();
  const std::vector<Sha256>& done = finished ? finished->digests : hasher_->digests();
  for (; verified_ < done.size(); ++verified_) {
    const std::uint64_t index = first_chunk_ + verified_;
    if (done[verified_] == chunks_.digests.at(index)) continue;
    const std::uint64_t first = index * chunks_.chunk_size.count();
    const std::uint64_t last = std::min(first + chunks_.chunk_size.count(), size_.count()) - 1;
    return Error{ErrorCode::integrity, what_ + ": chunk " + std::to_string(index) + " (byte offset " +
                                           std::to_string(first) + ", bytes " + std::to_string(first) + "-" +
                                           std::to_string(last) + ") has SHA-256 " + done[verified_].hex() + " but " +
                                           whose_ + " chunk list gives " + chunks_.digests.at(index).hex() +
                                           "; download stopped at its end, nothing installed"};
  }
  if (at_end) hasher_.emplace(chunks_.chunk_size);
  return ok();
}

Result<void> ChunkVerifyingSink::write(const void* data, std::size_t size) {
  const std::uint64_t before = inner_.written().count();
  if (before + size > size_.count()) {
    return Error{ErrorCode::integrity, what_ + ": the server sent more than " + whose_ + " " +
                                           std::to_string(size_.count()) + " bytes; download stopped"};
  }
  const std::uint64_t verified_before = verified_;
  const std::size_t pass = static_cast<std::size_t>(std::min<std::uint64_t>(size, unhashed_));
  unhashed_ -= pass;
  if (size > pass) {
    hasher_->update(static_cast<const std::byte*>(data) + pass, size - pass);
    hashed_ += size - pass;
    DATAVO_TRY(check_completed());
  }
  DATAVO_TRY(inner_.write(data, size));
  // Only a prefix checked from byte 0 is reported.
  if (skipped_ == 0 && verified_ > verified_before) report_verified();
  return ok();
}

}  // namespace datavo::net
