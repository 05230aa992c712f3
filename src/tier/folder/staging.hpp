// StagingFile: the folder tier's ShardTransaction, one in-flight install in its .staging/. Internal to the folder
// tier; the hierarchy holds it as a ShardTransaction (datavo/tier.hpp).
//
// A staging file is named util::temp_name_in(".staging", "<instance part>.<content_hash>"), that is
// <host>.<pid>.<random>.<instance part>.<content_hash>.tmp (docs/layout.md), so that
//   - sweeps can tell a dead writer's file from a live one (util::written_by_dead_local_process), and
//   - a download killed half-way can be continued: FolderTier::begin(key, size, Resume::partial) finds the dead
//     writer's file of the same key (its name ends with staging_suffix(key)), renames it to a name of its own (the
//     claim: only one renamer wins) and hands it back holding the bytes it had.
// A staging file is never truncated or rewritten in place, since readers may have mapped its verified bytes
// (docs/hierarchy.md, "Reading while fetching"): restart() abandons it (unlinks it; a mapping keeps reading the old
// bytes) and goes on in a new staging file of a new name.
// The bytes are hashed by a background thread that reads them back as they are written (trailing_digest.hpp), so
// write() costs a write(2) and no hashing. The file is unlinked on destruction unless committed.
//
// Thread safety: write(), restart(), digest(), adopt() and commit() from one thread at a time. The PositionalSink
// interface (write_at) may be used by several threads at once, with prefix_complete() called by one at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

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

class StagingFile final : public ShardTransaction {
 public:
  // A transaction of `tier` for `key` over `file`, which already holds `existing` bytes (adopted from a writer that
  // died) or none. REQUIRES: `tier` outlives it.
  StagingFile(FolderTier::Impl& tier, ShardKey key, util::AtomicFile file, Durability durability, Bytes existing);
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
  // ShardTransaction.
  Bytes resumed_from() const override { return resumed_from_; }
  Result<Sha256> digest() override;
  Result<ShardHandle> open_staged() override;
  Result<ShardHandle> commit() override;

  const ShardKey& key() const { return key_; }
  int fd() const { return file_.fd(); }
  const std::string& path() const { return file_.path(); }
  // fdatasync(2) of the staged bytes.
  Result<void> sync() { return file_.sync(); }
  // Adopts bytes written into fd() by other means (copy_file_range): sets the size and digest directly.
  void adopt(Bytes size, const Sha256& digest);
  // Renames the staged file to `target` unless something is there (util::AtomicFile::commit, Replace::no).
  Result<bool> rename_to(const std::string& target) { return file_.commit(target, util::AtomicFile::Replace::no); }

 private:
  FolderTier::Impl* tier_;
  ShardKey key_;
  util::AtomicFile file_;
  Bytes written_;
  Bytes resumed_from_;
  std::unique_ptr<TrailingDigest> hasher_;
  std::optional<Sha256> digest_;  // known: finished, or adopted
};

}  // namespace datavo::folder
