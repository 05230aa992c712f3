// The folder tier's persisted statistics: .stats.json holds the sum of every process's counters.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using util::UniqueFd;

nlohmann::json stats_to_json(const TierStats& s) {
  nlohmann::json out = nlohmann::json::object();
  s.for_each([&out](const char* name, std::uint64_t count) { out[name] = count; });
  return out;
}

// Unknown fields (from a newer Datavo) and values of the wrong type are ignored: counters are best effort.
TierStats stats_from_json(const nlohmann::json& j) {
  TierStats s;
  for (const auto& [name, value] : j.items()) {
    if (value.is_number_unsigned()) s.set(name, value.get<std::uint64_t>());
  }
  return s;
}

// A missing or unparsable stats file counts as zero: statistics must never fail a read.
TierStats read_stats_file(const std::string& path) {
  auto text = util::read_file(path);
  if (!text) return {};
  auto parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return {};
  return stats_from_json(parsed);
}

}  // namespace

Result<TierStats> FolderTier::cumulative_stats() {
  TierStats total = read_stats_file(impl_->stats_file);
  total += counters().snapshot();
  return total;
}

Result<void> FolderTier::flush_stats(LockWait wait) {
  if (read_only()) return {};
  {
    // Nothing counted: touch nothing on disk (a command that failed early leaves the tier as it was).
    if (counters().snapshot().empty()) return {};
  }
  auto made = impl_->ensure_dir(impl_->locks_dir);
  if (!made) return made;
  UniqueFd fd(::open(impl_->lock_path(".stats").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, folder::entry_mode()));
  if (fd.valid()) ::fchmod(fd.get(), folder::entry_mode());  // open(2) applies the umask; group members lock too
  if (fd.valid()) {
    int how = wait == LockWait::skip_if_busy ? LOCK_EX | LOCK_NB : LOCK_EX;
    int rc;
    while ((rc = ::flock(fd.get(), how)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno == EWOULDBLOCK) return {};  // another process is flushing; ours go next time
  }
  TierStats delta = counters().take();
  if (delta.empty()) return {};
  TierStats total = read_stats_file(impl_->stats_file);
  total += delta;
  // Counters are best effort: no fsync, which would put a disk flush on the hit path every few seconds.
  return util::write_file_atomic(impl_->stats_file, stats_to_json(total).dump() + "\n", folder::entry_mode(),
                                 util::Sync::no, folder::k_entry_group_bits);
}

Result<void> FolderTier::reset_stats() {
  counters().take();
  if (read_only()) return {};
  if (::unlink(impl_->stats_file.c_str()) != 0 && errno != ENOENT) {
    return Error::from_errno(errno, "cannot reset " + impl_->stats_file);
  }
  return {};
}

}  // namespace datavo
