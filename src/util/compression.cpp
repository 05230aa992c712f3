#include "util/compression.hpp"

#include <zlib.h>
#include <zstd.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace datavo::util {

namespace {

// The output chunk handed to the consumer, as read_chunks does.
constexpr std::size_t k_chunk = std::size_t{1} << 20;

Error corrupt(const std::string& what, Compression format, std::size_t offset, std::string_view detail) {
  return Error{ErrorCode::integrity, what + ": at compressed byte offset " + std::to_string(offset) + ": " +
                                         std::string(detail) + " (" + std::string(compression_name(format)) +
                                         " stream)"};
}

// zlib counts input in uInt: feed a large mapping in pieces.
constexpr std::size_t k_max_zlib_input = std::numeric_limits<uInt>::max();

Result<void> gunzip(std::span<const std::byte> input, const std::string& what, const ChunkConsumer& consume) {
  z_stream stream{};
  // 15 + 16: a 32 KiB window and a gzip wrapper (not zlib or raw deflate).
  if (inflateInit2(&stream, 15 + 16) != Z_OK) return Error{ErrorCode::internal, "zlib: cannot initialise inflate"};
  const std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, inflateEnd);
  std::vector<unsigned char> out(k_chunk);
  std::size_t consumed = 0;  // input bytes handed to zlib so far
  for (;;) {
    if (stream.avail_in == 0 && consumed < input.size()) {
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(input.data() + consumed));
      stream.avail_in = static_cast<uInt>(std::min(input.size() - consumed, k_max_zlib_input));
      consumed += stream.avail_in;
    }
    stream.next_out = out.data();
    stream.avail_out = static_cast<uInt>(out.size());
    const int status = inflate(&stream, Z_NO_FLUSH);
    const std::size_t offset = consumed - stream.avail_in;
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
      return corrupt(what, Compression::gzip, offset, stream.msg ? stream.msg : "corrupt data");
    }
    const std::size_t produced = out.size() - stream.avail_out;
    if (produced > 0) DATAVO_TRY(consume({reinterpret_cast<const char*>(out.data()), produced}));
    if (status == Z_STREAM_END) {
      if (offset == input.size()) return ok();
      // Another member may follow (gzip -dc reads them all); anything else is not gzip.
      if (sniff_compression(input.subspan(offset)) != Compression::gzip) {
        return corrupt(what, Compression::gzip, offset,
                       std::to_string(input.size() - offset) + " bytes after the end of the stream are not gzip");
      }
      if (inflateReset(&stream) != Z_OK) return Error{ErrorCode::internal, "zlib: cannot reset inflate"};
    } else if (status == Z_BUF_ERROR && produced == 0 && stream.avail_in == 0 && consumed == input.size()) {
      return corrupt(what, Compression::gzip, input.size(), "the stream is truncated");
    }
  }
}

Result<void> unzstd(std::span<const std::byte> input, const std::string& what, const ChunkConsumer& consume) {
  const std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context) return Error{ErrorCode::internal, "zstd: cannot create a decompression context"};
  std::vector<char> out(k_chunk);
  ZSTD_inBuffer in{input.data(), input.size(), 0};
  std::size_t hint = 1;  // 0 when the last frame is complete and flushed
  bool output_full = false;
  // With the input used up, the decoder may still hold output of the last frame: call it again while it fills
  // the buffer and has not said that the frame is done.
  while (in.pos < in.size || (output_full && hint != 0)) {
    ZSTD_outBuffer buffer{out.data(), out.size(), 0};
    hint = ZSTD_decompressStream(context.get(), &buffer, &in);
    if (ZSTD_isError(hint)) return corrupt(what, Compression::zstd, in.pos, ZSTD_getErrorName(hint));
    if (buffer.pos > 0) DATAVO_TRY(consume({out.data(), buffer.pos}));
    output_full = buffer.pos == buffer.size;
  }
  if (hint != 0) return corrupt(what, Compression::zstd, input.size(), "the stream is truncated");
  return ok();
}

}  // namespace

Result<void> decompress(std::span<const std::byte> input, Compression format, const std::string& what,
                        const ChunkConsumer& consume) {
  switch (format) {
    case Compression::gzip: return gunzip(input, what, consume);
    case Compression::zstd: return unzstd(input, what, consume);
    case Compression::none:
    case Compression::bzip2:
    case Compression::xz: break;
  }
  return Error{ErrorCode::unsupported,
               what + ": cannot decompress " + std::string(compression_name(format)) + " (gzip and zstd only)"};
}

}  // namespace datavo::util
