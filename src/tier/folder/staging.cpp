#include "tier/folder/staging.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "tier/folder/internal.hpp"
#include "tier/folder/trailing_digest.hpp"
#include "util/fs.hpp"
#include "util/temp_name.hpp"

namespace datavo::folder {
namespace {

// Longer instance names are replaced by a digest in staging names: the writer tag (host <= 64, pid, random) plus
// this plus the hash must stay well under NAME_MAX (255).
constexpr std::size_t k_max_instance_part = 64;

std::string staging_stem(const ShardKey& key) { return staging_instance_part(key.instance) + "." + key.hash.hex(); }

}  // namespace

std::string staging_instance_part(const Instance& instance) {
  const std::string& name = instance.name();
  if (name.size() <= k_max_instance_part) return name;
  Sha256Hasher hasher;
  hasher.update(name.data(), name.size());
  return "x" + hasher.finish().hex().substr(0, 16);
}

std::string staging_suffix(const ShardKey& key) { return "." + staging_stem(key) + ".tmp"; }

std::string new_staging_path(const std::string& staging_dir, const ShardKey& key) {
  return util::temp_name_in(staging_dir, staging_stem(key));
}

StagingFile::StagingFile(FolderTier::Impl& tier, ShardKey key, util::AtomicFile file, Durability durability,
                         Bytes existing)
    : tier_(&tier),
      key_(std::move(key)),
      file_(std::move(file)),
      written_(existing),
      resumed_from_(existing),
      hasher_(std::make_unique<TrailingDigest>(file_.fd(), durability)) {
  if (existing.count() > 0) hasher_->appended(existing);
}

StagingFile::~StagingFile() {
  hasher_.reset();  // joins its thread before the fd it reads goes away
}

StagingFile::StagingFile(StagingFile&& other) noexcept
    : tier_(other.tier_),
      key_(std::move(other.key_)),
      file_(std::move(other.file_)),
      written_(other.written_),
      resumed_from_(other.resumed_from_),
      hasher_(std::move(other.hasher_)),
      digest_(other.digest_) {}

StagingFile& StagingFile::operator=(StagingFile&& other) noexcept {
  if (this != &other) {
    hasher_.reset();
    tier_ = other.tier_;
    key_ = std::move(other.key_);
    file_ = std::move(other.file_);
    written_ = other.written_;
    resumed_from_ = other.resumed_from_;
    hasher_ = std::move(other.hasher_);
    digest_ = other.digest_;
  }
  return *this;
}

Result<void> StagingFile::write(const void* data, std::size_t size) {
  if (digest_) {
    // Bytes after a finished or adopted digest: hash everything again from the file.
    hasher_->reset();
    digest_.reset();
  }
  DATAVO_TRY(util::write_all(file_.fd(), data, size, "staging file " + file_.path()));
  written_ += Bytes{size};
  hasher_->appended(written_);
  return {};
}

Result<void> StagingFile::write_at(std::uint64_t offset, const void* data, std::size_t size) {
  return util::pwrite_all(file_.fd(), data, size, off_t(offset), "staging file " + file_.path());
}

Result<void> StagingFile::prefix_complete(Bytes size) {
  if (size < written_) return Error{ErrorCode::internal, "staging file prefix shrank"};
  digest_.reset();
  written_ = size;
  hasher_->appended(written_);
  // Appends after positional writes go after the whole prefix.
  if (::lseek(file_.fd(), off_t(size.count()), SEEK_SET) < 0)
    return Error::from_errno(errno, "cannot seek in staging file " + file_.path());
  return {};
}

Result<void> StagingFile::restart() {
  // Never truncated or rewritten in place: a reader in this or another process may have mapped the verified bytes
  // of this file (the holder published them, or a writer that died did before this one adopted its file), and a
  // page cut from under a mapping faults (SIGBUS). The file is abandoned instead (unlinked: a mapping keeps reading
  // it) and the bytes start over in a new one.
  auto fresh = tier_->new_staging(key_);
  if (!fresh) return std::move(fresh).error();
  *this = std::move(*fresh);
  return {};
}

Result<Sha256> StagingFile::digest() {
  if (!digest_) {
    auto computed = hasher_->finish(written_);
    if (!computed) {
      return Error{computed.error().code, "cannot hash staging file " + path() + ": " + computed.error().message};
    }
    digest_ = *computed;
  }
  return *digest_;
}

void StagingFile::adopt(Bytes size, const Sha256& digest) {
  hasher_->reset();
  written_ = size;
  digest_ = digest;
}

Result<ShardHandle> StagingFile::open_staged() {
  if (path().empty()) return Error{ErrorCode::internal, "the staged bytes of " + key_.hash.hex() + " are committed"};
  const int fd = ::open(path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "cannot reopen " + path());
  return ShardHandle(fd, path(), written_);
}

Result<ShardHandle> StagingFile::commit() {
  auto committed = tier_->commit(*this);
  if (!committed) return std::move(committed).error();
  return std::move(committed->first);
}

}  // namespace datavo::folder
