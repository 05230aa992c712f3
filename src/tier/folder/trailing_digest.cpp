#include "tier/folder/trailing_digest.hpp"

#include <fcntl.h>

#include <algorithm>
#include <vector>

#include "util/fs.hpp"

namespace datavo::folder {
namespace {

// Large enough that a pread and a hash update amortise their call overhead, small enough to stay in L2.
constexpr std::uint64_t k_chunk = 1u << 20;
// Writeback is started in steps of this size: big enough for the block layer to merge, small enough that the
// dirty pages of a large download never pile up until the final fdatasync.
constexpr std::uint64_t k_writeback_step = 8u << 20;

}  // namespace

TrailingDigest::TrailingDigest(int fd, Durability durability) : fd_(fd), durability_(durability) {}

TrailingDigest::~TrailingDigest() { stop(); }

void TrailingDigest::appended(Bytes total) {
  const std::uint64_t now = total.count();
  // Publishing every 16 KiB write would cost a lock and a wake-up each; once per chunk is enough to keep up.
  if (now - notified_ < k_chunk) return;
  notified_ = now;
  if (!thread_.joinable()) {
    if (now < k_background_threshold.count() || background_failed_) return;
    available_ = now;
    // This runs inside libcurl's write callback, where an exception must not escape: without a thread (no
    // memory, no threads left) finish() simply hashes everything itself.
    try {
      buffer_.resize(k_chunk);
      thread_ = std::thread([this] { run(); });
    } catch (const std::exception&) {
      background_failed_ = true;
    }
    return;
  }
  {
    std::lock_guard lock(mutex_);
    available_ = now;
  }
  wake_.notify_one();
}

void TrailingDigest::run() {
  for (;;) {
    std::uint64_t end = 0;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || available_ >= hashed_ + k_chunk; });
      if (stopping_) return;
      end = available_;
    }
    if (auto done = hash_up_to(end, buffer_, StopCheck::between_chunks); !done) {
      error_ = std::move(done).error();
      return;
    }
    if (durability_ == Durability::fsync_before_commit && hashed_ >= writeback_ + k_writeback_step) {
      // Advisory: a failure here only means the final fdatasync has more to do, and that call reports errors.
      ::sync_file_range(fd_, off_t(writeback_), off_t(hashed_ - writeback_), SYNC_FILE_RANGE_WRITE);
      writeback_ = hashed_;
    }
  }
}

Result<void> TrailingDigest::hash_up_to(std::uint64_t end, std::vector<char>& buffer, StopCheck check) {
  while (hashed_ < end) {
    // A reset() or finish() should not wait for bytes the owner is about to discard or will hash itself.
    if (check == StopCheck::between_chunks && stopping_.load(std::memory_order_relaxed)) return {};
    const std::size_t want = std::size_t(std::min<std::uint64_t>(end - hashed_, buffer.size()));
    DATAVO_TRY(util::pread_all(fd_, buffer.data(), want, off_t(hashed_), "staging file (hashing)"));
    hasher_.update(buffer.data(), want);
    hashed_ += want;
  }
  return {};
}

void TrailingDigest::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);  // set under the lock, so that the thread cannot miss the wake-up
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  stopping_ = false;
}

Result<Sha256> TrailingDigest::finish(Bytes total) {
  stop();
  if (error_) return *error_;
  if (hashed_ < total.count() && buffer_.empty()) {
    buffer_.resize(std::size_t(std::min<std::uint64_t>(total.count() - hashed_, k_chunk)));
  }
  DATAVO_TRY(hash_up_to(total.count(), buffer_, StopCheck::never));
  return hasher_.finish();
}

void TrailingDigest::reset() {
  stop();
  hasher_ = Sha256Hasher();
  hashed_ = writeback_ = notified_ = available_ = 0;
  error_.reset();
  background_failed_ = false;
}

}  // namespace datavo::folder
