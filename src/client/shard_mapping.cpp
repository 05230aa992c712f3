#include <sys/mman.h>

#include <cerrno>

#include "datavo/sample_stream.hpp"

namespace datavo {

Result<std::shared_ptr<const ShardMapping>> ShardMapping::map(const ShardHandle& handle, std::string name) {
  if (!handle.valid()) return Error{ErrorCode::internal, "shard " + name + ": mapping an invalid handle"};
  const std::size_t size = static_cast<std::size_t>(handle.size().count());
  // mmap refuses a zero length; an empty shard is simply an empty span (the tar reader reports it).
  if (size == 0) return std::shared_ptr<const ShardMapping>(new ShardMapping(nullptr, 0, std::move(name)));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, handle.fd(), 0);
  if (data == MAP_FAILED) return Error::from_errno(errno, "cannot map shard " + name);
  // Samples are read front to back once; WILLNEED starts readahead while the previous shard is still being read.
  ::madvise(data, size, MADV_SEQUENTIAL);
  ::madvise(data, size, MADV_WILLNEED);
  return std::shared_ptr<const ShardMapping>(new ShardMapping(data, size, std::move(name)));
}

Result<std::shared_ptr<const ShardMapping>> ShardMapping::map_growing(const ShardHandle& handle, Bytes total,
                                                                      std::string name) {
  if (!handle.valid()) return Error{ErrorCode::internal, "shard " + name + ": mapping an invalid handle"};
  const std::size_t size = static_cast<std::size_t>(total.count());
  if (size == 0) return std::shared_ptr<const ShardMapping>(new ShardMapping(nullptr, 0, std::move(name)));
  // MAP_SHARED: the page cache pages themselves, so that bytes the writer adds after the map are seen. No
  // WILLNEED: readahead past the file's end is pointless, and the pages come in as they are written.
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, handle.fd(), 0);
  if (data == MAP_FAILED) return Error::from_errno(errno, "cannot map staging file of shard " + name);
  ::madvise(data, size, MADV_SEQUENTIAL);
  return std::shared_ptr<const ShardMapping>(new ShardMapping(data, size, std::move(name)));
}

std::shared_ptr<const ShardMapping> ShardMapping::own(std::vector<std::byte> bytes, std::string name) {
  return std::shared_ptr<const ShardMapping>(new ShardMapping(std::move(bytes), std::move(name)));
}

ShardMapping::~ShardMapping() {
  if (data_ != nullptr && owned_.empty()) ::munmap(data_, size_);
}

std::span<const std::byte> SampleView::field(std::string_view key) const {
  for (const auto& f : fields)
    if (f.key == key) return f.data;
  return {};
}

}  // namespace datavo
