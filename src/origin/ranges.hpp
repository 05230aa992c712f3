// The conditional parts of a shard GET (docs/protocol.md, "GET <ticket url>"): one byte range of a Range header,
// and the entity tags of If-None-Match.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace datavo::origin {

struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;  // inclusive
};
enum class RangeOutcome { whole, partial, unsatisfiable };

// A single "bytes=a-b" / "bytes=a-" / "bytes=-n" range against an entity of `size` bytes, into `out` when
// partial. `b` past the end is clipped; a range that starts at or past the end, or "bytes=-0", is unsatisfiable.
// Anything else (another unit, several ranges, a malformed value) is `whole`: the whole entity is sent, as RFC
// 9110 allows.
RangeOutcome parse_range(std::string_view header, std::uint64_t size, ByteRange& out);

// Whether an If-None-Match header value matches `etag`: a comma-separated list of entity tags, "W/" prefixes
// ignored, "*" matching anything.
bool etag_matches(std::string_view header, std::string_view etag);

}  // namespace datavo::origin
