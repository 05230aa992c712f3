// TrailingDigest: the SHA-256 of a staging file, computed while the file is still being written.
//
// A download writes into a staging file on one thread; a thread of this object reads the bytes back from the page
// cache (pread) and hashes them, trailing the writer, so that receiving and hashing use two cores instead of one.
// With Durability::fsync_before_commit it also starts writeback (sync_file_range) of every range it has hashed,
// so that the fdatasync before the commit waits only for the tail.
//
// The digest is of the bytes in the file, not of the buffers handed to write(): what is verified is what gets
// committed.
//
// Contract:
//   - `fd` must stay open and readable for the lifetime of this object; only the owner writes to it, and only by
//     appending. The owner calls appended(total) after each write with the file's new length.
//   - Files under k_background_threshold never start a thread: finish() hashes them inline. So does a file whose
//     thread could not be started (no memory or threads left): appended() never throws.
//   - reset() must be called before the file is truncated; it stops the thread and forgets every byte.
//   - Not thread-safe: one owner thread calls every method. The destructor stops and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::folder {

class TrailingDigest {
 public:
  // Below this size a thread costs more than it saves.
  static constexpr Bytes k_background_threshold{4u << 20};

  TrailingDigest(int fd, Durability durability);
  ~TrailingDigest();
  TrailingDigest(const TrailingDigest&) = delete;
  TrailingDigest& operator=(const TrailingDigest&) = delete;

  // The file now holds `total` bytes.
  void appended(Bytes total);
  // Waits for the thread, hashes whatever it has not, and returns the SHA-256 of the first `total` bytes. An I/O
  // error reading the file back is returned as such. Call once; reset() to start again.
  Result<Sha256> finish(Bytes total);
  // Stops the thread and starts over from byte 0.
  void reset();

 private:
  enum class StopCheck { never, between_chunks };
  void run();
  void stop();
  // Hashes [hashed_, end) with pread on the calling thread; with between_chunks, stops early once stop() asks.
  Result<void> hash_up_to(std::uint64_t end, std::vector<char>& buffer, StopCheck check);

  const int fd_;
  const Durability durability_;
  Sha256Hasher hasher_;
  std::uint64_t hashed_ = 0;        // owned by the thread while it runs, by the owner otherwise
  std::uint64_t writeback_ = 0;     // end of the range whose writeback has been started
  std::optional<Error> error_;      // the thread's read error, reported by finish()
  std::uint64_t notified_ = 0;      // owner only: the length last published
  bool background_failed_ = false;  // owner only: no thread could be started; finish() hashes everything
  std::vector<char> buffer_;        // the thread's while it runs, the owner's otherwise

  std::mutex mutex_;
  std::condition_variable wake_;
  std::uint64_t available_ = 0;        // guarded by mutex_
  std::atomic<bool> stopping_{false};  // written under mutex_; read without it between chunks
  std::thread thread_;
};

}  // namespace datavo::folder
