// Small POSIX file helpers shared by the tiers, the CLI and the tests. Project-agnostic.
// Thread safety: all functions are reentrant.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::util {

// Owns a file descriptor; closes it on destruction. Movable only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// mkdir -p with `mode`, subject to the umask except for the bits in `always` (e.g. group rwx and setgid for a
// directory shared by a group: a writer's umask 077 must not lock the group out). Special bits such as setgid are
// applied with chmod on the directories it creates. Existing directories are left as they are.
Result<void> make_dirs(const std::string& path, mode_t mode, mode_t always = 0);
// Writes all of `data`, retrying on EINTR and short writes.
Result<void> write_all(int fd, const void* data, std::size_t size, const std::string& what);
// Reads exactly `size` bytes at `offset`; io error on a short read.
Result<void> pread_all(int fd, void* data, std::size_t size, off_t offset, const std::string& what);
// The one chunked read loop: reads [offset, offset + length) of `fd` with pread, or from `offset` to the end of
// the file when `length` is nullopt, in chunks of at most 1 MiB, and hands each chunk to `consume` in order. Stops
// at the first Error of `consume`. An io Error naming `what` on a read failure, or on a file shorter than `length`.
using ChunkConsumer = std::function<Result<void>(std::span<const char> chunk)>;
Result<void> read_chunks(int fd, off_t offset, std::optional<std::uint64_t> length, const std::string& what,
                         const ChunkConsumer& consume);
// The SHA-256 of the whole file open as `fd` (read_chunks from offset 0).
Result<Sha256> sha256_of_fd(int fd);
// Copies `size` bytes from offset 0 of `in` to the current offset of `out`, with copy_file_range where the
// kernel allows it and read/write otherwise.
Result<void> copy_fd(int in, int out, Bytes size, const std::string& what);
// Reads a whole (small) file. A directory is an io Error with sys_errno EISDIR; a file longer than `max_bytes`
// (when given) is an io Error saying so. Errors name the path and carry the errno (not_found for ENOENT).
Result<std::string> read_file(const std::string& path, std::optional<std::size_t> max_bytes = std::nullopt);
// Whether write_file_atomic fsyncs the data before the rename. Without it a crash may leave the old content or
// an empty file under `path`, never a partial one of the new content... on filesystems that order data before
// metadata (ext4 data=ordered); use it only for best-effort files such as counters.
enum class Sync { yes, no };
// Writes `data` to `path` atomically (an AtomicFile beside it, (fdatasync,) rename). The file gets `mode` subject
// to the umask, except for the bits in `always`.
Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode, Sync sync = Sync::yes,
                               mode_t always = 0);

// This machine's host name, sanitised to [A-Za-z0-9-] (cached).
const std::string& host_name();
// `bytes` random bytes from /dev/urandom (getrandom), hex-encoded.
std::string random_hex(std::size_t bytes);
// The process umask, read once (at the first call) and cached: reading it means setting it, which is unsafe
// while other threads create files, so call it early (FolderTier::create does).
mode_t process_umask();
// Whether process `pid` of this host lives: it exists and is not exiting. A process that was killed but is not
// yet reaped by its parent (a zombie), or is still exiting, is dead here: its descriptors, and so its locks, are
// released or about to be, and it can write nothing more. Where /proc cannot tell (not mounted, another PID
// namespace's, or hidden), a process that exists is alive. Thread-safe.
bool process_alive(pid_t pid);

}  // namespace datavo::util
