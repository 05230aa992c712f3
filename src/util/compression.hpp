// Compressed streams: recognising gzip, zstd, bzip2 and xz by their magic bytes, and decompressing gzip and zstd.
// Recognition is header-only so that code without the codecs (the tar reader's fuzz target) can name what it was
// given; decompress() needs zlib and libzstd.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "datavo/result.hpp"
#include "util/fs.hpp"

namespace datavo::util {

enum class Compression { none, gzip, zstd, bzip2, xz };

// The format whose magic bytes start `data`: gzip 1f 8b, zstd 28 b5 2f fd, bzip2 "BZh" and a block size digit
// 1-9, xz fd "7zXZ" 00. Compression::none otherwise. Only the first six bytes are looked at, so a caller that
// also accepts an uncompressed format whose first bytes are free (a tar member may be named "BZh9...") must
// ask only once that format has failed to parse.
inline Compression sniff_compression(std::span<const std::byte> data) {
  const auto starts_with = [data](std::string_view magic) {
    if (data.size() < magic.size()) return false;
    for (std::size_t i = 0; i < magic.size(); ++i) {
      if (data[i] != static_cast<std::byte>(magic[i])) return false;
    }
    return true;
  };
  if (starts_with("\x1f\x8b")) return Compression::gzip;
  if (starts_with("\x28\xb5\x2f\xfd")) return Compression::zstd;
  if (starts_with(std::string_view("\xfd"
                                   "7zXZ\0",
                                   6)))
    return Compression::xz;
  if (starts_with("BZh") && data.size() > 3 && data[3] >= std::byte{'1'} && data[3] <= std::byte{'9'}) {
    return Compression::bzip2;
  }
  return Compression::none;
}

// "gzip", "zstd", "bzip2", "xz" or "uncompressed".
inline std::string_view compression_name(Compression format) {
  switch (format) {
    case Compression::none: return "uncompressed";
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    case Compression::bzip2: return "bzip2";
    case Compression::xz: return "xz";
  }
  return "unknown";
}

// Whether decompress() reads `format`: gzip and zstd.
inline bool can_decompress(Compression format) { return format == Compression::gzip || format == Compression::zstd; }

// Decompresses all of `input`, a `format` stream, handing the output to `consume` in order, in chunks of at most
// 1 MiB. The stream may be several gzip members or zstd frames one after another (as `cat a.gz b.gz` makes), and
// must end exactly at the end of `input`. `what` names the input in errors.
// Errors: integrity naming `what` and the compressed byte offset for a corrupt or truncated stream, or bytes after
// it that do not start another member or frame; unsupported for a format can_decompress() refuses; whatever
// `consume` returns, unchanged.
Result<void> decompress(std::span<const std::byte> input, Compression format, const std::string& what,
                        const ChunkConsumer& consume);

}  // namespace datavo::util
