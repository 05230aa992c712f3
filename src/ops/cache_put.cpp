#include <fcntl.h>

#include <cerrno>

#include "datavo/operations.hpp"
#include "util/cancel.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

Result<Bytes> append_fd(ByteSink& sink, int fd, const std::string& path) {
  Bytes appended;
  auto copied = util::read_chunks(fd, 0, std::nullopt, path, [&](std::span<const char> chunk) -> Result<void> {
    if (util::cancel_requested()) return util::cancelled_error("copying " + path);
    DATAVO_TRY(sink.write(chunk.data(), chunk.size()));
    appended += Bytes{chunk.size()};
    return ok();
  });
  if (!copied) return std::move(copied).error();
  return appended;
}

Result<util::UniqueFd> open_for_reading(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "cannot open " + path);
  return fd;
}

}  // namespace

Result<Bytes> append_file(ByteSink& sink, const std::string& path) {
  auto fd = open_for_reading(path);
  if (!fd) return std::move(fd).error();
  return append_fd(sink, fd->get(), path);
}

Result<CacheInstallReport> cache_put(ShardCacheHierarchy& cache, const ShardKey& key, const std::string& path) {
  // Opened first, so that a file that cannot be read is refused whether or not the hash is cached.
  auto fd = open_for_reading(path);
  if (!fd) return std::move(fd).error();
  Fetcher from_file = [&](ByteSink& sink) -> Result<Expectation> {
    if (sink.written().count() > 0) DATAVO_TRY(sink.restart());  // a dead writer's partial copy: start over
    DATAVO_TRY(append_fd(sink, fd->get(), path));
    return Expectation{};
  };
  auto result = cache.get_or_fetch(key, from_file);
  if (!result) return std::move(result).error();
  // A fetched shard went up with the install; a cached one may miss from a remote tier (an outage, a bucket added
  // since): that is what backfill is for.
  if (result->source != ServedFrom::fetched) {
    auto backfilled = cache.backfill(key);
    if (!backfilled) return std::move(backfilled).error();
  }
  return CacheInstallReport{key.hash, std::move(*result), wait_for_uploads(cache)};
}

}  // namespace datavo
