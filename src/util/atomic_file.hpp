// AtomicFile: a file written under a temporary name beside its target and renamed into place. It is the one way
// anything in Datavo appears under a final name (cache entries, sidecars, stats, the origin's store), after
// ccache's AtomicFile: the destructor unlinks the temporary unless it was committed, so no error path can leave a
// partial file behind under a name a reader trusts. Temporary names follow util/temp_name.hpp.
//
// Thread safety: one thread at a time uses an AtomicFile. Movable, not copyable.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "datavo/result.hpp"
#include "util/fs.hpp"

namespace datavo::util {

class AtomicFile {
 public:
  AtomicFile() = default;
  // Creates `temp_path` exclusively (O_EXCL), open for reading and writing, with `mode` (subject to the umask).
  static Result<AtomicFile> create(std::string temp_path, mode_t mode);
  // Takes ownership of an existing file at `temp_path` (one the caller has just claimed, e.g. by renaming it to a
  // name of its own), open for reading and writing.
  static Result<AtomicFile> adopt(std::string temp_path);

  ~AtomicFile();
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // The temporary's path; empty once committed.
  const std::string& path() const { return path_; }

  // Appends all of `data`.
  Result<void> write(std::string_view data);
  // fdatasync(2): the data is on stable storage before the rename.
  Result<void> sync();

  enum class Replace { yes, no };
  // Renames the temporary to `target`. With Replace::no an existing target is never replaced (renameat2
  // RENAME_NOREPLACE; where the filesystem lacks it, link(2) then unlink(2); without hard links either, a stat
  // then rename(2), which only content-addressed files may rely on): the call then returns false and removes the
  // temporary. Returns true when this file is now at `target`. The descriptor stays open until
  // destruction, so the caller may go on reading the committed bytes. On an Error the temporary is left as it was.
  Result<bool> commit(const std::string& target, Replace replace);
  // Forgets the temporary without unlinking it (someone else renamed it away).
  void release();

 private:
  AtomicFile(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

}  // namespace datavo::util
