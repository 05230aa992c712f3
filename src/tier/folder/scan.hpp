// Directory scans of a folder tier: usage accounting, the entry list for LRU eviction, and the sweep of
// leftovers (staging files of dead writers, orphaned lock files). Internal to the folder tier.
// Thread safety: reentrant; concurrent changes by other processes are tolerated (vanished files are skipped).
#pragma once

#include <dirent.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::folder {

struct ScannedEntry {
  std::string instance;
  std::string hash_hex;
  std::string path;
  Bytes size;
  std::chrono::system_clock::time_point mtime;
  bool has_sidecar = false;  // a <hash>.sha256 digest sidecar sits beside it
};

enum class ScanDetail { totals, entries };

struct ScanResult {
  Bytes used;                         // every regular file under the tier root, one level deep, but .locks/
  std::uint64_t entry_count = 0;      // committed entries
  std::vector<ScannedEntry> entries;  // filled for ScanDetail::entries only
};

// A committed entry met by walk_tier(). The views are valid during the visit only.
struct EntryVisit {
  std::string_view instance;
  std::string_view hash_hex;
  std::string_view name;  // <hash_hex>.tar
  int dir_fd = -1;        // the instance directory, open for the walk: the visitor may unlinkat() through it
  Bytes size;
  std::chrono::system_clock::time_point mtime;
};
using EntryVisitor = std::function<void(const EntryVisit&)>;

// readdir(3) that tells the end of the directory from an error: nullptr at either, with *error set to the errno
// of a failure (0 at the end). A directory whose listing failed half-way must not pass for a shorter one.
struct dirent* next_dir_entry(DIR* dir, int* error);

// Scans `root`. A root that does not exist yet is an empty tier.
Result<ScanResult> scan_tier(const std::string& root, ScanDetail detail);
// Scans `root` as scan_tier(ScanDetail::totals) does, and visits each committed entry as it is listed, holding
// nothing per entry: the memory of a walk does not grow with the tier. Sidecars are not matched to their entries
// (that would hold a directory's names). `used` and `entry_count` count what was listed, before any visitor's
// removal; a file the visitor removes before it is listed is not counted.
Result<ScanResult> walk_tier(const std::string& root, const EntryVisitor& visit);
// The bytes of the files in one directory (not recursive): the staging files of a tier. 0 when it does not exist.
Result<Bytes> directory_bytes(const std::string& dir);

struct SweepResult {
  std::uint64_t staging_files = 0;
  std::uint64_t lock_files = 0;
};

// Removes staging files whose writer (host.pid in the name) is this host and dead, or that have not been
// written for `stale_staging_age` (a hung writer, or a pid reused since); and lock files
// that no process holds and that are older than `orphan_lock_age`, and so are the progress records of such locks
// (counted with them). Ages are measured against `now`, the time by
// the clock that stamped the files (FolderTier::Impl::now()). With dry_run nothing is removed, only counted.
Result<SweepResult> sweep_leftovers(const std::string& staging_dir, const std::string& locks_dir,
                                    Seconds stale_staging_age, Seconds orphan_lock_age,
                                    std::chrono::system_clock::time_point now, bool dry_run);

}  // namespace datavo::folder
