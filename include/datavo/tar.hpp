// WebDataset tar shards: a zero-copy reader over an in-memory archive, grouping of members into samples, and a
// deterministic streaming writer. The formats accepted and refused are listed in docs/tar.md.
//
// A shard is a tar archive whose members are named `<sample_id>.<key>`, e.g. `utt_0001.audio.wav` and
// `utt_0001.transcript.txt`. In the member's path, the sample id is the directory part plus the basename up to
// its FIRST dot, and the key is everything after that dot: `train/utt_0001.audio.wav` has id `train/utt_0001`
// and key `audio.wav`. Consecutive members with the same sample id form one sample.
//
// Reader, in short:
//   - ustar (prefix + name), GNU ('L' long names, 'K' long link names, base-256 sizes), pax ('x' and 'g'
//     headers: `path` and `size` are honoured, other keywords ignored) and old V7 headers.
//   - Regular files ('0', '\0' and '7') are yielded; directories, links, devices, FIFOs and unknown types are
//     skipped (their payload, if any, is stepped over) and counted by kind (TarReader::skipped()). GNU sparse
//     members are refused as unsupported.
//   - A compressed archive (gzip, zstd, bzip2, xz) is recognised by its magic bytes and refused as unsupported,
//     saying so, rather than read as a header with a bad checksum.
//   - Every header checksum is verified; GNU tar's two sums (bytes as unsigned and as signed char) are accepted.
//   - Nothing is allocated from a size a header claims: every size is checked against the bytes that remain in
//     the buffer before it is used, and pax records are parsed in place.
//   - A member name that is absolute, has a `..` component, is empty or contains a NUL byte is refused, so no
//     sample id can escape a directory. Leading "./" components are dropped ("./a.txt" reads as "a.txt").
//
// Errors: every malformed input gives Error{ErrorCode::integrity} (GNU sparse members and compressed archives:
// ErrorCode::unsupported) whose message names the shard, the member when its name is known and the byte offset of
// the offending header, e.g.
//   shard 3f2a.tar: member "utt_0002.audio.wav" at byte offset 1536: header checksum mismatch (stored 0o7312,
//   computed 0o7313)
// Names in messages are escaped (quotes, backslashes and bytes outside printable ASCII as \xNN) and cut to a
// bounded length with "…" in the middle, so a garbage header cannot flood a terminal.
// Branch on TarReader::fault() / SampleIterator::fault(), never on the message text.
//
// Thread safety: a TarReader, SampleIterator or TarWriter is used by one thread at a time. Distinct objects
// over the same buffer may be used from different threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// Whether an archive must end with the end-of-archive marker (two 512-byte zero blocks).
//   required: an archive that stops at a member boundary without the marker is an integrity error with
//             TarFault::missing_end_marker, whose message says that the archive was cut short or written by a
//             tool that omits the marker. This is the default: Datavo's origin always writes the marker, so a
//             shard without it was cut short (a torn download or copy), and every member read so far is suspect
//             of being followed by members that were lost.
//   optional: EOF at a member boundary, or a single zero block, ends the archive cleanly. For archives written
//             by tools that omit the marker (`datavo pack --allow-missing-end-marker`).
// In both modes EOF inside a header or inside a member's padded payload is an error (TarFault::truncated), and
// anything after the marker is ignored (tar pads archives to its record size).
enum class EndMarker { required, optional };

struct TarReaderOptions {
  EndMarker end_marker = EndMarker::required;
};

// Why the last call failed: a closed set to branch on, next to the human-readable Error.
enum class TarFault {
  none,                 // no failure
  truncated,            // a header, payload or padding runs past the end of the buffer (a size that lies)
  bad_checksum,         // a header's checksum does not match its bytes
  bad_number,           // a numeric header field has bad octal digits, a negative or an overflowing value
  bad_pax_record,       // a pax record is malformed or its length runs past its extended header
  bad_extended_header,  // an extended header ('x', 'L', 'K') is not followed by a member header
  unsafe_name,          // absolute path, `..` component, empty name or NUL byte in a member name
  missing_end_marker,   // EndMarker::required and the archive stops without two zero blocks
  duplicate_key,        // SampleIterator only: one sample has the same key twice
  unsupported,          // a GNU sparse member (ErrorCode::unsupported)
  compressed,           // the archive is gzip, zstd, bzip2 or xz data, not a tar (ErrorCode::unsupported)
};

// The members stepped over instead of being yielded, by kind. Only regular files carry a sample's bytes: a
// directory has none, and a link's target is another member or lies outside the archive.
struct TarSkips {
  std::uint64_t directories = 0;
  std::uint64_t symlinks = 0;    // type '2'
  std::uint64_t hard_links = 0;  // type '1': how tar stores each name of a file after the first
  std::uint64_t other = 0;       // devices, FIFOs, volume labels and unknown types
  // Regular files whose name has no <sample_id>.<key> split (README, dot-files). Counted by SampleIterator and by
  // `datavo pack`, never by TarReader, which does not look at names that way.
  std::uint64_t unnamed = 0;

  // Every member skipped but directories (which every `tar cf x.tar dir` holds, and which carry no bytes).
  std::uint64_t notable() const { return symlinks + hard_links + other + unnamed; }
  TarSkips& operator+=(const TarSkips& more);
  bool operator==(const TarSkips&) const = default;
};

// The notable skips in words, e.g. "2 symbolic links, 1 hard link, 1 file not named <sample_id>.<key>"; empty
// when skips.notable() is 0.
std::string describe_skips(const TarSkips& skips);

// A regular-file member of an archive.
struct TarMember {
  // The member's path after pax / GNU long-name resolution and removal of leading "./". Points into the
  // archive buffer or into the reader; valid until the next call to TarReader::next().
  std::string_view name;
  // The payload: a view into the archive buffer, valid as long as the buffer.
  std::span<const std::byte> data;
  // Byte offset of the member's first header block (its pax or GNU extended header, if it has one).
  std::uint64_t header_offset = 0;
};

// Iterates the regular-file members of a tar archive held in memory (typically an mmapped shard).
// Does not own the buffer: REQUIRES: `archive` outlives the reader and every span it returned.
class TarReader {
 public:
  // `shard_name` is only used in error messages (e.g. the shard's file name).
  TarReader(std::span<const std::byte> archive, std::string shard_name, TarReaderOptions options = {});

  // Returns the next regular-file member, std::nullopt at the end of the archive, or an Error. After the end
  // or an error, every further call returns the same outcome.
  Result<std::optional<TarMember>> next();

  // The kind of the error next() returned; TarFault::none before any error.
  TarFault fault() const { return fault_; }
  const std::string& shard_name() const { return shard_name_; }
  // The members next() has stepped over so far (`unnamed` stays 0).
  const TarSkips& skipped() const { return skipped_; }

 private:
  struct Extended;  // what the extended headers before a member say about it (reader.cpp)
  struct Header;    // a member header whose checksum holds, its name and size resolved (reader.cpp)

  // Each returns false once the archive has ended (done_) or failed (error_).
  bool header_follows(const Extended& extended);
  bool read_header(const Extended& extended, Header& header);
  bool verify_checksum(const std::byte* block, std::string_view shown_name);
  bool take_payload(const Header& header, std::span<const std::byte>& payload);
  bool read_extended(char type, std::string_view records, std::size_t header_offset, Extended& extended);
  // Whether the member `header` describes is one to yield; counts it in skipped_ when it is not.
  bool yields(const Header& header, const Extended& extended);
  Error fail(TarFault fault, std::size_t offset, std::string_view member, std::string_view what);
  // fail() for a block that is not a valid header: at offset 0, a compressed archive is named as such.
  Error fail_header(TarFault fault, std::size_t offset, std::string_view member, std::string_view what);

  std::span<const std::byte> archive_;
  std::string shard_name_;
  TarReaderOptions options_;
  std::size_t offset_ = 0;  // next header block to read
  bool done_ = false;
  TarFault fault_ = TarFault::none;
  std::optional<Error> error_;
  std::string name_scratch_;      // ustar prefix + "/" + name, at most 256 bytes
  std::string_view global_path_;  // from the latest pax 'g' header, a view into archive_
  std::optional<std::uint64_t> global_size_;
  TarSkips skipped_;
};

// One field of a sample: the member `<id>.<key>`.
struct SampleField {
  std::string_view key;             // e.g. "audio.wav"; valid until the next SampleIterator::next()
  std::span<const std::byte> data;  // view into the archive buffer
  std::uint64_t header_offset = 0;  // as TarMember::header_offset
};

// A group of consecutive members sharing a sample id.
struct Sample {
  std::string_view id;              // e.g. "train/utt_0001"; valid until the next SampleIterator::next()
  std::vector<SampleField> fields;  // archive order; never empty
};

// Groups the members of an archive into samples by the WebDataset convention above.
// A member whose basename has no dot, starts with a dot or ends with a dot has no (id, key) and is skipped, as
// WebDataset does; skipped().unnamed counts them. The same key twice within one sample is an integrity error
// (TarFault::duplicate_key). An id that reappears after another sample starts a new sample; it is not detected.
// REQUIRES: `archive` outlives the iterator and every span it returned.
class SampleIterator {
 public:
  SampleIterator(std::span<const std::byte> archive, std::string shard_name, TarReaderOptions options = {});

  // Returns the next sample, nullptr after the last one, or an Error (sticky, as TarReader::next()). The Sample
  // is owned by the iterator and valid until the next call.
  Result<const Sample*> next();

  TarFault fault() const { return fault_ != TarFault::none ? fault_ : reader_.fault(); }
  // Where the sample after the one next() last returned begins: the header_offset of its first member (the member
  // that ended the returned sample). nullopt before the first sample, at the end and after an error. Lets a reader of
  // an archive that is still arriving start a new iterator there once more bytes are in.
  std::optional<std::uint64_t> next_sample_offset() const {
    if (error_ || !lookahead_) return std::nullopt;
    return lookahead_->header_offset;
  }
  // The members skipped so far: the reader's, and the regular files without an (id, key) in `unnamed`.
  TarSkips skipped() const;

 private:
  struct PendingField {
    std::size_t name_begin = 0;  // offsets into arena_: views are built only once arena_ stops growing
    std::size_t id_size = 0;
    std::size_t name_size = 0;
    std::span<const std::byte> data;
    std::uint64_t header_offset = 0;
  };

  TarReader reader_;
  Sample sample_;
  std::vector<PendingField> pending_;      // fields of the sample being assembled
  std::optional<PendingField> lookahead_;  // first member of the next sample, its name at the end of arena_
  std::string arena_;                      // member names of pending_ and lookahead_
  std::uint64_t unnamed_ = 0;
  TarFault fault_ = TarFault::none;
  std::optional<Error> error_;
  bool done_ = false;
};

// Calls `visit` for every sample of `archive`, in order. Stops at the first error, from the archive or returned
// by `visit` (which is passed through unchanged). The Sample and its views are valid only during the call.
Result<void> for_each_sample(std::span<const std::byte> archive, std::string shard_name,
                             const std::function<Result<void>(const Sample&)>& visit, TarReaderOptions options = {});

// Splits a member name into (sample id, key) by the WebDataset convention; std::nullopt when the basename has
// no dot, starts with a dot or ends with a dot.
struct SampleName {
  std::string_view id;
  std::string_view key;
};
std::optional<SampleName> split_sample_name(std::string_view member_name);

// Receives the archive bytes a TarWriter produces, in order. An Error stops the writer.
using TarSink = std::function<Result<void>(std::span<const std::byte>)>;

// A member to be written: its name and payload size.
struct TarEntryInfo {
  std::string_view name;
  Bytes size;
};

// Writes a deterministic tar archive to a sink, streaming: a member is begun with its name and size, then its
// payload is written in any number of pieces, so a server can stream a large shard with bounded memory.
//
// Determinism rules (the same (name, payload) sequence always gives the same bytes):
//   - ustar headers: mode 0644, uid/gid 0, uname/gname empty, mtime 0, typeflag '0', devmajor/devminor
//     left NUL (as Python's tarfile writes them).
//   - A name of at most 100 bytes goes in the name field; a longer one is split at the leftmost '/' that leaves
//     at most 155 bytes of prefix and 100 of name (Python tarfile's rule). A name that cannot be split, or that
//     has a byte >= 0x80, gets a pax 'x' header named "././@PaxHeader" with its `path` record; the ustar name
//     field then holds the name with such bytes replaced by '?', split or cut to fit.
//   - A size of 8 GiB or more (beyond 11 octal digits) gets a pax `size` record and 0 in the size field.
//   - Payloads are padded with zeros to 512 bytes; finish() writes two zero blocks and nothing else (no padding
//     to a 10 KiB record).
// Names are checked as the reader checks them, and also refused when the reader would not return them verbatim:
// empty, absolute, a `..` component, a NUL byte, a leading "./" or a trailing '/' give invalid_argument.
//
// Usage: begin_member(name, size); write(...) until `size` bytes; ... ; finish().
// After any Error the writer is failed and every further call returns that Error.
class TarWriter {
 public:
  explicit TarWriter(TarSink sink);

  // Writes the header(s) of a member. REQUIRES: the previous member's payload is complete (invalid_argument
  // otherwise).
  Result<void> begin_member(std::string_view name, Bytes size);
  // Writes payload bytes of the current member; padding follows automatically after its last byte.
  // invalid_argument when this would exceed the size given to begin_member().
  Result<void> write(std::span<const std::byte> data);
  // begin_member() + write() for a payload held in memory.
  Result<void> add_member(std::string_view name, std::span<const std::byte> data);
  // Writes the end-of-archive marker. REQUIRES: the current member's payload is complete.
  Result<void> finish();

  // Archive bytes handed to the sink so far.
  Bytes bytes_written() const { return Bytes{written_}; }

 private:
  Result<void> emit(std::span<const std::byte> bytes);
  Result<void> fail(Error error);

  TarSink sink_;
  std::uint64_t written_ = 0;
  std::uint64_t remaining_ = 0;  // payload bytes still owed by the current member
  std::uint64_t padding_ = 0;    // zero bytes to write after them
  bool finished_ = false;
  std::optional<Error> error_;
};

// The exact size of the archive TarWriter produces for `entries` (headers, payloads, padding, end marker),
// without writing it, e.g. for a Content-Length. invalid_argument for a name TarWriter would refuse.
Result<Bytes> tar_archive_size(std::span<const TarEntryInfo> entries);

}  // namespace datavo
