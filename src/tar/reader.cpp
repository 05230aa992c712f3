#include <algorithm>
#include <cstdio>
#include <limits>

#include "datavo/tar.hpp"
#include "tar/format.hpp"
#include "util/compression.hpp"
#include "util/decimal.hpp"

namespace datavo {

using namespace tar_format;

namespace {

std::string_view chars(const std::byte* block, Field field) {
  return {reinterpret_cast<const char*>(block) + field.offset, field.size};
}

// A NUL-terminated field, or the whole field when it has no NUL (a 100-byte name fills its field).
std::string_view c_string(std::string_view field) { return field.substr(0, field.find('\0')); }

bool is_zero_block(const std::byte* block) {
  return std::all_of(block, block + k_block, [](std::byte b) { return b == std::byte{0}; });
}

std::string octal(std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0o%llo", static_cast<unsigned long long>(value));
  return text;
}

struct Number {
  std::uint64_t value = 0;
  std::string error;  // empty when value is valid
};

enum class Base256 { allowed, refused };

// Octal as GNU tar reads it: optional leading spaces, digits, then only spaces or NULs. An empty field is 0, as
// Python's tarfile reads it. With Base256::allowed, a first byte with the high bit set starts a big-endian
// base-256 number whose first byte keeps 6 value bits (bit 6 is the sign: negative values are refused).
Number parse_number(std::string_view field, Base256 base256) {
  Number out;
  if (field.empty()) return out;
  const auto first = static_cast<unsigned char>(field.front());
  if (base256 == Base256::allowed && (first & 0x80) != 0) {
    if ((first & 0x40) != 0) {
      out.error = "negative base-256 value";
      return out;
    }
    std::uint64_t value = first & 0x3f;
    for (std::size_t i = 1; i < field.size(); ++i) {
      if (value > (std::numeric_limits<std::uint64_t>::max() >> 8)) {
        out.error = "base-256 value overflows 64 bits";
        return out;
      }
      value = (value << 8) | static_cast<unsigned char>(field[i]);
    }
    out.value = value;
    return out;
  }
  std::size_t i = 0;
  while (i < field.size() && field[i] == ' ') ++i;
  std::uint64_t value = 0;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (std::numeric_limits<std::uint64_t>::max() >> 3)) {
      out.error = "octal value overflows 64 bits";
      return out;
    }
    value = (value << 3) | static_cast<std::uint64_t>(field[i] - '0');
  }
  for (; i < field.size(); ++i) {
    if (field[i] != ' ' && field[i] != '\0') {
      out.error = "bad octal digit '" + escape_name(field.substr(i, 1)) + "'";
      return out;
    }
  }
  out.value = value;
  return out;
}

// The pax keywords Datavo honours, parsed in place: the views point into the archive buffer.
struct PaxValues {
  std::optional<std::string_view> path;
  std::optional<std::uint64_t> size;
  bool sparse = false;
};

// One pax record, "<length> <keyword>=<value>\n", parsed in place.
struct PaxRecord {
  std::string_view keyword;
  std::string_view value;
  std::size_t length = 0;  // of the whole record
};

// The record that starts `rest`, or what is wrong with it.
std::string parse_pax_record(std::string_view rest, PaxRecord& record) {
  const std::size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
  if (digits == 0 || digits >= rest.size() || rest[digits] != ' ') return "bad record length";
  const std::optional<std::uint64_t> length = util::parse_decimal(rest.substr(0, digits));
  if (!length) return "bad record length";
  if (*length > rest.size()) {
    return "record length " + std::to_string(*length) + " runs past the end of the extended header (" +
           std::to_string(rest.size()) + " bytes remain)";
  }
  // The shortest record is "<digits> k=\n".
  if (*length < digits + 4) return "record length " + std::to_string(*length) + " is too short";
  const std::string_view text = rest.substr(0, static_cast<std::size_t>(*length));
  if (text.back() != '\n') return "record does not end with a newline";
  const std::string_view body = text.substr(digits + 1, text.size() - digits - 2);
  const std::size_t equals = body.find('=');
  if (equals == std::string_view::npos || equals == 0) return "record has no keyword";
  record = PaxRecord{body.substr(0, equals), body.substr(equals + 1), text.size()};
  return {};
}

// Applies one record to `values`. An empty value unsets the keyword (POSIX).
std::string apply_pax_record(const PaxRecord& record, PaxValues& values) {
  if (record.keyword == "path") {
    values.path = record.value.empty() ? std::nullopt : std::optional<std::string_view>(record.value);
  } else if (record.keyword == "size") {
    if (record.value.empty()) {
      values.size.reset();
    } else if (const auto size = util::parse_decimal(record.value)) {
      values.size = *size;
    } else {
      return "bad size value \"" + escape_name(record.value) + "\"";
    }
  } else if (record.keyword.starts_with("GNU.sparse.")) {
    values.sparse = true;
  }
  return {};
}

// Parses the records of a pax header into `values`. Returns an empty string, or what is wrong.
std::string parse_pax(std::string_view records, PaxValues& values) {
  for (std::size_t pos = 0; pos < records.size();) {
    PaxRecord record;
    std::string problem = parse_pax_record(records.substr(pos), record);
    if (problem.empty()) problem = apply_pax_record(record, values);
    if (!problem.empty()) return "pax record at offset " + std::to_string(pos) + " of the extended header: " + problem;
    pos += record.length;
  }
  return {};
}

// Pax ('x', 'g') and GNU ('L', 'K') headers describe the member that follows, or every later one ('g').
bool is_extended(char type) { return type == 'x' || type == 'g' || type == 'L' || type == 'K'; }

std::string_view strip_dot_slash(std::string_view name) {
  while (name.starts_with("./")) name.remove_prefix(2);
  return name;
}

}  // namespace

TarSkips& TarSkips::operator+=(const TarSkips& more) {
  directories += more.directories;
  symlinks += more.symlinks;
  hard_links += more.hard_links;
  other += more.other;
  unnamed += more.unnamed;
  return *this;
}

std::string describe_skips(const TarSkips& skips) {
  std::string out;
  const auto add = [&out](std::uint64_t count, std::string_view one, std::string_view many) {
    if (count == 0) return;
    if (!out.empty()) out += ", ";
    out += std::to_string(count) + " " + std::string(count == 1 ? one : many);
  };
  add(skips.symlinks, "symbolic link", "symbolic links");
  add(skips.hard_links, "hard link", "hard links");
  add(skips.other, "device, FIFO or other special member", "devices, FIFOs or other special members");
  add(skips.unnamed, "file not named <sample_id>.<key>", "files not named <sample_id>.<key>");
  return out;
}

// What the extended headers ('x', 'L', 'K') before a member say about it, up to that member's header.
struct TarReader::Extended {
  PaxValues pax;
  std::optional<std::string_view> long_name;  // from a GNU 'L' header
  std::optional<std::size_t> offset;          // of the first of them, when there is one
};

struct TarReader::Header {
  std::size_t offset = 0;  // of this header block
  char type = '0';
  // The member's name with pax, GNU and global names applied; for an extended header, the best name known so far,
  // for messages.
  std::string_view name;
  std::uint64_t size = 0;  // payload bytes that follow the header, pax sizes applied; 0 for a directory
  bool regular = false;    // a regular file ('0', '\0', '7'), the only type yielded
  bool directory = false;  // '5', or a regular type named with a trailing slash
};

TarReader::TarReader(std::span<const std::byte> archive, std::string shard_name, TarReaderOptions options)
    : archive_(archive), shard_name_(std::move(shard_name)), options_(options) {}

Error TarReader::fail(TarFault fault, std::size_t offset, std::string_view member, std::string_view what) {
  const bool unsupported = fault == TarFault::unsupported || fault == TarFault::compressed;
  error_ = Error{unsupported ? ErrorCode::unsupported : ErrorCode::integrity,
                 error_message(shard_name_, member, offset, what)};
  fault_ = fault;
  done_ = true;
  return *error_;
}

Error TarReader::fail_header(TarFault fault, std::size_t offset, std::string_view member, std::string_view what) {
  // Asked only once the first block failed as a header: a tar may name its first member "BZh9...".
  const util::Compression compression = offset == 0 ? util::sniff_compression(archive_) : util::Compression::none;
  if (compression == util::Compression::none) return fail(fault, offset, member, what);
  return fail(TarFault::compressed, 0, {},
              "the archive is " + std::string(util::compression_name(compression)) +
                  "-compressed data, not a tar (its first bytes are the " +
                  std::string(util::compression_name(compression)) + " magic number); decompress it first");
}

Result<std::optional<TarMember>> TarReader::next() {
  Extended extended;
  while (!done_ && header_follows(extended)) {
    Header header;
    std::span<const std::byte> payload;
    if (!read_header(extended, header) || !take_payload(header, payload)) break;
    const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
    if (is_extended(header.type)) {
      if (!read_extended(header.type, text, header.offset, extended)) break;
      continue;
    }
    if (yields(header, extended)) {
      return std::optional<TarMember>{TarMember{header.name, payload, extended.offset.value_or(header.offset)}};
    }
    if (error_) break;
    extended = Extended{};
  }
  if (error_) return *error_;
  return std::optional<TarMember>{};
}

bool TarReader::header_follows(const Extended& extended) {
  const std::size_t remaining = archive_.size() - offset_;
  if (remaining == 0) {
    if (extended.offset) {
      fail(TarFault::bad_extended_header, *extended.offset, {}, "extended header is not followed by a member header");
    } else if (options_.end_marker == EndMarker::required) {
      fail(TarFault::missing_end_marker, offset_, {},
           "archive ends without the end-of-archive marker (two zero blocks): it was cut short, or written by a "
           "tool that omits the marker");
    }
    done_ = true;
    return false;
  }
  if (remaining < k_block) {
    fail_header(TarFault::truncated, offset_, {},
                "truncated header: " + std::to_string(remaining) + " bytes remain, a header needs 512");
    return false;
  }
  const std::byte* block = archive_.data() + offset_;
  if (!is_zero_block(block)) return true;
  if (extended.offset) {
    fail(TarFault::bad_extended_header, *extended.offset, {}, "extended header is followed by the end of the archive");
  } else if (options_.end_marker == EndMarker::required &&
             (remaining < 2 * k_block || !is_zero_block(block + k_block))) {
    fail(TarFault::missing_end_marker, offset_, {},
         "lone zero block: the end-of-archive marker is two zero blocks; the archive was cut short, or written by "
         "a tool that ends it with one");
  }
  done_ = true;
  return false;
}

bool TarReader::read_header(const Extended& extended, Header& header) {
  const std::byte* block = archive_.data() + offset_;
  header.offset = offset_;
  header.type = static_cast<char>(block[k_typeflag]);
  header.name = c_string(chars(block, k_name));
  const bool posix_ustar = chars(block, k_magic) == std::string_view("ustar\0", 6);
  const std::string_view prefix = posix_ustar ? c_string(chars(block, k_prefix)) : std::string_view{};
  if (!prefix.empty()) {
    name_scratch_.assign(prefix);
    name_scratch_ += '/';
    name_scratch_ += header.name;
    header.name = name_scratch_;
  }
  // The best name known for error messages before the header is trusted.
  const std::string_view shown_name = extended.pax.path    ? *extended.pax.path
                                      : extended.long_name ? *extended.long_name
                                                           : header.name;
  if (!verify_checksum(block, shown_name)) return false;

  const Number size_field = parse_number(chars(block, k_size), Base256::allowed);
  if (!size_field.error.empty()) {
    fail(TarFault::bad_number, offset_, shown_name, "bad size field: " + size_field.error);
    return false;
  }
  header.size = size_field.value;
  if (is_extended(header.type)) {
    header.name = shown_name;
    return true;
  }

  if (extended.pax.size) {
    header.size = *extended.pax.size;
  } else if (global_size_) {
    header.size = *global_size_;
  }
  if (extended.pax.path) {
    header.name = *extended.pax.path;
  } else if (extended.long_name) {
    header.name = *extended.long_name;
  } else if (!global_path_.empty()) {
    header.name = global_path_;
  }
  header.name = strip_dot_slash(header.name);
  // A directory (or a V7 regular file named with a trailing slash, which means a directory) has no payload
  // whatever its size field says, as in GNU tar and Python's tarfile.
  header.regular = header.type == '0' || header.type == '\0' || header.type == '7';
  header.directory = header.type == '5' || (header.regular && header.name.ends_with('/'));
  if (header.directory) header.size = 0;
  return true;
}

bool TarReader::verify_checksum(const std::byte* block, std::string_view shown_name) {
  const Number stored = parse_number(chars(block, k_checksum), Base256::refused);
  if (!stored.error.empty()) {
    fail_header(TarFault::bad_checksum, offset_, shown_name, "bad checksum field: " + stored.error);
    return false;
  }
  // Sum the whole block in one vectorisable pass, then count the checksum field as spaces.
  std::uint32_t unsigned_sum = 0;
  std::int32_t signed_sum = 0;
  for (std::size_t i = 0; i < k_block; ++i) {
    unsigned_sum += static_cast<unsigned char>(block[i]);
    signed_sum += static_cast<signed char>(block[i]);
  }
  for (std::size_t i = k_checksum.offset; i < k_checksum.offset + k_checksum.size; ++i) {
    unsigned_sum += ' ' - static_cast<unsigned char>(block[i]);
    signed_sum += ' ' - static_cast<signed char>(block[i]);
  }
  // GNU tar accepts both sums: some old tars summed the header as signed chars.
  if (stored.value == unsigned_sum || static_cast<std::int64_t>(stored.value) == signed_sum) return true;
  fail_header(TarFault::bad_checksum, offset_, shown_name,
              "header checksum mismatch (stored " + octal(stored.value) + ", computed " + octal(unsigned_sum) + ")");
  return false;
}

bool TarReader::take_payload(const Header& header, std::span<const std::byte>& payload) {
  const std::uint64_t available = archive_.size() - offset_ - k_block;
  if (header.size > available) {
    fail(TarFault::truncated, offset_, header.name,
         "member size " + std::to_string(header.size) + " runs past the end of the archive (" +
             std::to_string(available) + " bytes remain after the header)");
    return false;
  }
  if (padded_size(header.size) > available) {
    fail(TarFault::truncated, offset_, header.name,
         "truncated member: its payload of " + std::to_string(header.size) + " bytes is padded to " +
             std::to_string(padded_size(header.size)) + " but " + std::to_string(available) +
             " bytes remain after the header");
    return false;
  }
  payload = archive_.subspan(offset_ + k_block, static_cast<std::size_t>(header.size));
  offset_ += k_block + static_cast<std::size_t>(padded_size(header.size));
  return true;
}

bool TarReader::read_extended(char type, std::string_view records, std::size_t header_offset, Extended& extended) {
  if (type == 'g') {
    PaxValues global;
    if (!global_path_.empty()) global.path = global_path_;
    global.size = global_size_;
    const std::string problem = parse_pax(records, global);
    if (!problem.empty()) {
      fail(TarFault::bad_pax_record, header_offset, {}, problem);
      return false;
    }
    global_path_ = global.path.value_or(std::string_view{});
    global_size_ = global.size;
    return true;
  }
  if (type == 'x') {
    const std::string problem = parse_pax(records, extended.pax);
    if (!problem.empty()) {
      fail(TarFault::bad_pax_record, header_offset, {}, problem);
      return false;
    }
  } else if (type == 'L') {
    extended.long_name = c_string(records);
  }  // 'K', a long link name, only matters to links, which are skipped
  if (!extended.offset) extended.offset = header_offset;
  return true;
}

bool TarReader::yields(const Header& header, const Extended& extended) {
  if (header.type == 'S' || (header.regular && extended.pax.sparse)) {
    fail(TarFault::unsupported, header.offset, header.name, "GNU sparse members are not supported");
    return false;
  }
  if (header.directory) {
    ++skipped_.directories;
    return false;
  }
  if (!header.regular) {
    ++(header.type == '1' ? skipped_.hard_links : header.type == '2' ? skipped_.symlinks : skipped_.other);
    return false;
  }
  if (const char* reason = unsafe_name_reason(header.name)) {
    fail(TarFault::unsafe_name, header.offset, header.name, reason);
    return false;
  }
  return true;
}

}  // namespace datavo
