// The folder tier's persisted statistics: .stats.json holds the sum of every process's counters, its own and those
// of the tiers it keeps for this machine (a remote tier's, under "kept_tiers").
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
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

// The persisted counters: the tier's own, and those of the tiers it keeps (FolderTier::keep_stats_of).
struct StatsFile {
  TierStats own;
  std::map<std::string, TierStats> kept;
};

constexpr const char* k_kept_key = "kept_tiers";

// A missing or unparsable stats file counts as zero: statistics must never fail a read.
StatsFile read_stats_file(const std::string& path) {
  auto text = util::read_file(path);
  if (!text) return {};
  auto parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return {};
  StatsFile out{stats_from_json(parsed), {}};
  if (auto kept = parsed.find(k_kept_key); kept != parsed.end() && kept->is_object()) {
    for (const auto& [name, stats] : kept->items()) {
      if (stats.is_object()) out.kept[name] = stats_from_json(stats);
    }
  }
  return out;
}

std::string stats_file_text(const StatsFile& file) {
  nlohmann::json out = stats_to_json(file.own);
  if (!file.kept.empty()) {
    nlohmann::json kept = nlohmann::json::object();
    for (const auto& [name, stats] : file.kept) kept[name] = stats_to_json(stats);
    out[k_kept_key] = std::move(kept);
  }
  return out.dump() + "\n";
}

}  // namespace

Result<TierStats> FolderTier::cumulative_stats() {
  TierStats total = read_stats_file(impl_->stats_file).own;
  total += counters().snapshot();
  return total;
}

bool FolderTier::keep_stats_of(std::shared_ptr<Tier> remote) {
  if (read_only() || remote == nullptr) return false;
  std::lock_guard lock(impl_->kept_mu);
  for (const auto& tier : impl_->kept) {
    if (tier == remote) return true;
  }
  impl_->kept.push_back(std::move(remote));
  return true;
}

Result<std::optional<TierStats>> FolderTier::kept_stats_of(const Tier& remote) {
  {
    std::lock_guard lock(impl_->kept_mu);
    if (std::none_of(impl_->kept.begin(), impl_->kept.end(), [&](const auto& tier) { return tier.get() == &remote; }))
      return std::optional<TierStats>{};
  }
  StatsFile file = read_stats_file(impl_->stats_file);
  TierStats total = file.kept[remote.name()];
  total += remote.counters().snapshot();
  return std::optional<TierStats>{total};
}

Result<void> FolderTier::flush_stats(LockWait wait) {
  if (read_only()) return {};
  std::vector<std::shared_ptr<Tier>> kept;
  {
    std::lock_guard lock(impl_->kept_mu);
    kept = impl_->kept;
  }
  // Nothing counted: touch nothing on disk (a command that failed early leaves the tier as it was).
  const auto counted = [](const Tier& tier) { return !tier.counters().snapshot().empty(); };
  if (!counted(*this) && std::none_of(kept.begin(), kept.end(), [&](const auto& t) { return counted(*t); })) return {};
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
  StatsFile file = read_stats_file(impl_->stats_file);
  bool changed = false;
  const auto add = [&changed](TierStats& total, TierStats delta) {
    if (delta.empty()) return;
    total += delta;
    changed = true;
  };
  add(file.own, counters().take());
  for (const auto& tier : kept) add(file.kept[tier->name()], tier->counters().take());
  if (!changed) return {};
  // Counters are best effort: no fsync, which would put a disk flush on the hit path every few seconds.
  return util::write_file_atomic(impl_->stats_file, stats_file_text(file), folder::entry_mode(), util::Sync::no,
                                 folder::k_entry_group_bits);
}

Result<void> FolderTier::reset_stats() {
  counters().take();
  {
    std::lock_guard lock(impl_->kept_mu);
    for (const auto& tier : impl_->kept) tier->counters().take();
  }
  if (read_only()) return {};
  if (::unlink(impl_->stats_file.c_str()) != 0 && errno != ENOENT) {
    return Error::from_errno(errno, "cannot reset " + impl_->stats_file);
  }
  return {};
}

}  // namespace datavo
