// StagingFile: one in-flight install in a folder tier's .staging/, internal to the folder tier and the hierarchy.
//
// A staging file is named <host>.<pid>.<random>.<instance>.<content_hash>.tmp, so that
//   - sweeps can tell a dead writer's file from a live one (host and pid, util::process_alive), and
//   - a download killed half-way can be continued: FolderTier::adopt_partial() finds the dead writer's file of
//     the same key, renames it to a name of its own (the claim: only one renamer wins) and hands it back holding
//     the bytes it had.
// The bytes are hashed by a background thread that reads them back as they are written (trailing_digest.hpp), so
// write() costs a write(2) and no hashing. The file is unlinked on destruction unless committed.
//
// Thread safety: write(), restart(), digest() and adopt() from one thread at a time. The PositionalSink
// interface (write_at) may be used by several threads at once, with prefix_complete() called by one at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/folder_tier.hpp"
#include "util/atomic_file.hpp"

namespace datavo::folder {

class TrailingDigest;

// The staging-name part that stands for an instance: its name when short, else a digest of it (a file name must
// stay under 255 bytes, and an instance name may have up to 255 on its own).
std::string staging_instance_part(const Instance& instance);
// "<instance part>.<hash>.tmp": the suffix every staging file of `key` ends with.
std::string staging_suffix(const ShardKey& key);
// A fresh staging file name for `key` in `staging_dir`, owned by this host and process.
std::string new_staging_path(const std::string& staging_dir, const ShardKey& key);

class StagingFile final : public ByteSink, public PositionalSink {
 public:
  StagingFile() = default;
  ~StagingFile() override;
  StagingFile(StagingFile&& other) noexcept;
  StagingFile& operator=(StagingFile&& other) noexcept;

  // ByteSink.
  Result<void> write(const void* data, std::size_t size) override;
  Bytes written() const override { return written_; }
  Result<void> restart() override;
  PositionalSink* positional() override { return this; }
  // PositionalSink.
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override;
  Result<void> prefix_complete(Bytes size) override;

  int fd() const { return file_.fd(); }
  const std::string& path() const { return file_.path(); }
  // How many bytes the file already held when it was adopted from a dead writer (0 for a new file).
  Bytes resumed_from() const { return resumed_from_; }
  // The SHA-256 of everything written so far, as read back from the file (an I/O error if it cannot be). Waits
  // for the background hash to catch up; the answer is remembered until the next write or restart.
  Result<Sha256> digest();
  // Adopts bytes written into fd() by other means (copy_file_range): sets the size and digest directly.
  void adopt(Bytes size, const Sha256& digest);

 private:
  friend class datavo::FolderTier;
  StagingFile(util::AtomicFile file, Durability durability, Bytes existing);
  util::AtomicFile& file() { return file_; }

  util::AtomicFile file_;
  Bytes written_;
  Bytes resumed_from_;
  std::unique_ptr<TrailingDigest> hasher_;
  std::optional<Sha256> digest_;  // known: finished, or adopted
};

}  // namespace datavo::folder
