// The folder tier's verify: every entry re-hashed against the size and SHA-256 recorded at install.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "util/cancel.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {

Result<VerifyReport> FolderTier::verify(Repair repair) {
  VerifyReport report;
  auto entries = list();
  if (!entries) return std::move(entries).error();
  for (const auto& e : *entries) {
    // Between entries: a stop leaves nothing half-done (a quarantine is one rename).
    if (util::must_stop()) return util::stopped_error("verify of tier '" + name() + "'");
    auto instance = Instance::parse(e.instance);
    if (!instance) continue;
    ShardKey key{*instance, e.hash};
    // Opened directly, not through open(): without --repair, verify must move nothing.
    const std::string path = impl_->entry_path(key);
    util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // evicted meanwhile
      return Error::from_errno(errno, "cannot open " + path);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
    ++report.checked;
    auto record = record_of_fd(key, fd.get(), RecordPart::all);
    if (!record) return std::move(record).error();
    std::string problem;
    if (record->key && *record->key != folder::key_record(key)) {
      problem = "was installed as " + *record->key + ", not as this entry (renamed over its name?)";
    } else if (record->size && record->size->count() != std::uint64_t(st.st_size)) {
      problem = "has " + std::to_string(st.st_size) + " bytes but " + std::to_string(record->size->count()) +
                " were recorded at install";
    } else if (!record->sha256) {
      ++report.unverifiable;
      continue;
    } else {
      auto actual = util::sha256_of_fd(fd.get());
      if (!actual) return std::move(actual).error();
      if (*actual == *record->sha256) {
        ++report.ok;
        continue;
      }
      problem = "does not match its recorded SHA-256 " + record->sha256->hex() + " (actual " + actual->hex() + ")";
    }
    ++report.bad;
    report.bad_paths.push_back(path);
    if (repair == Repair::yes && !read_only()) {
      quarantine(key, path, problem);
      ++report.quarantined;
    } else {
      LOG_WARNING("tier '" << name() << "': " << path << " " << problem);
    }
  }
  return report;
}

}  // namespace datavo
