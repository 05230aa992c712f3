#include <algorithm>
#include <cstdio>
#include <limits>

#include "datavo/tar.hpp"
#include "tar/format.hpp"

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

// Octal as GNU tar reads it: optional leading spaces, digits, then only spaces or NULs. An empty field is 0, as
// Python's tarfile reads it. With `allow_base256`, a first byte with the high bit set starts a big-endian
// base-256 number whose first byte keeps 6 value bits (bit 6 is the sign: negative values are refused).
Number parse_number(std::string_view field, bool allow_base256) {
  Number out;
  if (field.empty()) return out;
  const auto first = static_cast<unsigned char>(field.front());
  if (allow_base256 && (first & 0x80) != 0) {
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

// Strict decimal for pax values: digits only, no sign, no overflow.
bool parse_decimal(std::string_view text, std::uint64_t& value) {
  if (text.empty() || text.size() > 20) return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  return true;
}

// The pax keywords Datavo honours, parsed in place: the views point into the archive buffer.
struct PaxValues {
  std::optional<std::string_view> path;
  std::optional<std::uint64_t> size;
  bool sparse = false;
};

// Parses the records "<length> <keyword>=<value>\n" of a pax header into `values`. An empty value unsets the
// keyword (POSIX). Returns an empty string, or what is wrong.
std::string parse_pax(std::string_view records, PaxValues& values) {
  std::size_t pos = 0;
  while (pos < records.size()) {
    const std::string_view rest = records.substr(pos);
    const auto where = [pos] { return "pax record at offset " + std::to_string(pos) + " of the extended header: "; };
    const std::size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
    if (digits == 0 || digits >= rest.size() || rest[digits] != ' ') return where() + "bad record length";
    std::uint64_t length = 0;
    if (!parse_decimal(rest.substr(0, digits), length)) return where() + "bad record length";
    if (length > rest.size()) {
      return where() + "record length " + std::to_string(length) + " runs past the end of the extended header (" +
             std::to_string(rest.size()) + " bytes remain)";
    }
    // The shortest record is "<digits> k=\n".
    if (length < digits + 4) return where() + "record length " + std::to_string(length) + " is too short";
    const std::string_view record = rest.substr(0, static_cast<std::size_t>(length));
    if (record.back() != '\n') return where() + "record does not end with a newline";
    const std::string_view body = record.substr(digits + 1, record.size() - digits - 2);
    const std::size_t equals = body.find('=');
    if (equals == std::string_view::npos || equals == 0) return where() + "record has no keyword";
    const std::string_view keyword = body.substr(0, equals);
    const std::string_view value = body.substr(equals + 1);
    if (keyword == "path") {
      values.path = value.empty() ? std::nullopt : std::optional<std::string_view>(value);
    } else if (keyword == "size") {
      std::uint64_t size = 0;
      if (value.empty()) {
        values.size.reset();
      } else if (parse_decimal(value, size)) {
        values.size = size;
      } else {
        return where() + "bad size value \"" + escape_name(value) + "\"";
      }
    } else if (keyword.starts_with("GNU.sparse.")) {
      values.sparse = true;
    }
    pos += static_cast<std::size_t>(length);
  }
  return {};
}

std::string_view strip_dot_slash(std::string_view name) {
  while (name.starts_with("./")) name.remove_prefix(2);
  return name;
}

}  // namespace

TarReader::TarReader(std::span<const std::byte> archive, std::string shard_name, TarReaderOptions options)
    : archive_(archive), shard_name_(std::move(shard_name)), options_(options) {}

Error TarReader::fail(TarFault fault, std::size_t offset, std::string_view member, std::string_view what) {
  const ErrorCode code = fault == TarFault::unsupported ? ErrorCode::unsupported : ErrorCode::integrity;
  error_ = Error{code, error_message(shard_name_, member, offset, what)};
  fault_ = fault;
  done_ = true;
  return *error_;
}

Result<std::optional<TarMember>> TarReader::next() {
  if (error_) return *error_;
  if (done_) return std::optional<TarMember>{};

  // State carried from extended headers ('x', 'L', 'K') to the member header they describe.
  PaxValues pax;
  std::optional<std::string_view> long_name;
  bool extended = false;
  std::size_t extended_offset = 0;
  std::size_t member_offset = offset_;

  for (;;) {
    const std::size_t remaining = archive_.size() - offset_;
    if (!extended) member_offset = offset_;
    if (remaining == 0) {
      if (extended) {
        return fail(TarFault::bad_extended_header, extended_offset, {},
                    "extended header is not followed by a member header");
      }
      if (options_.end_marker == EndMarker::required) {
        return fail(TarFault::missing_end_marker, offset_, {},
                    "archive ends without the end-of-archive marker (two zero blocks)");
      }
      done_ = true;
      return std::optional<TarMember>{};
    }
    if (remaining < k_block) {
      return fail(TarFault::truncated, offset_, {},
                  "truncated header: " + std::to_string(remaining) + " bytes remain, a header needs 512");
    }

    const std::byte* header = archive_.data() + offset_;
    if (is_zero_block(header)) {
      if (extended) {
        return fail(TarFault::bad_extended_header, extended_offset, {},
                    "extended header is followed by the end of the archive");
      }
      if (options_.end_marker == EndMarker::required && (remaining < 2 * k_block || !is_zero_block(header + k_block))) {
        return fail(TarFault::missing_end_marker, offset_, {},
                    "lone zero block: the end-of-archive marker is two zero blocks");
      }
      done_ = true;
      return std::optional<TarMember>{};
    }

    const char type = static_cast<char>(header[k_typeflag]);
    const bool posix_ustar = chars(header, k_magic) == std::string_view("ustar\0", 6);
    std::string_view header_name = c_string(chars(header, k_name));
    const std::string_view prefix = posix_ustar ? c_string(chars(header, k_prefix)) : std::string_view{};
    if (!prefix.empty()) {
      name_scratch_.assign(prefix);
      name_scratch_ += '/';
      name_scratch_ += header_name;
      header_name = name_scratch_;
    }
    // The best name known for error messages before the header is trusted.
    std::string_view shown_name = pax.path ? *pax.path : long_name ? *long_name : header_name;

    const Number stored = parse_number(chars(header, k_checksum), false);
    if (!stored.error.empty()) {
      return fail(TarFault::bad_checksum, offset_, shown_name, "bad checksum field: " + stored.error);
    }
    // Sum the whole block in one vectorisable pass, then count the checksum field as spaces.
    std::uint32_t unsigned_sum = 0;
    std::int32_t signed_sum = 0;
    for (std::size_t i = 0; i < k_block; ++i) {
      unsigned_sum += static_cast<unsigned char>(header[i]);
      signed_sum += static_cast<signed char>(header[i]);
    }
    for (std::size_t i = k_checksum.offset; i < k_checksum.offset + k_checksum.size; ++i) {
      unsigned_sum += ' ' - static_cast<unsigned char>(header[i]);
      signed_sum += ' ' - static_cast<signed char>(header[i]);
    }
    // GNU tar accepts both sums: some old tars summed the header as signed chars.
    if (stored.value != unsigned_sum && static_cast<std::int64_t>(stored.value) != signed_sum) {
      return fail(
          TarFault::bad_checksum, offset_, shown_name,
          "header checksum mismatch (stored " + octal(stored.value) + ", computed " + octal(unsigned_sum) + ")");
    }

    const Number size_field = parse_number(chars(header, k_size), true);
    if (!size_field.error.empty()) {
      return fail(TarFault::bad_number, offset_, shown_name, "bad size field: " + size_field.error);
    }
    const bool is_extended = type == 'x' || type == 'g' || type == 'L' || type == 'K';
    std::uint64_t size = size_field.value;
    if (!is_extended) {
      if (pax.size) {
        size = *pax.size;
      } else if (global_size_) {
        size = *global_size_;
      }
    }

    std::string_view name;
    if (!is_extended) {
      if (pax.path) {
        name = *pax.path;
      } else if (long_name) {
        name = *long_name;
      } else if (!global_path_.empty()) {
        name = global_path_;
      } else {
        name = header_name;
      }
      name = strip_dot_slash(name);
      shown_name = name;
    }

    // A directory (or a V7 regular file named with a trailing slash, which means a directory) has no payload
    // whatever its size field says, as in GNU tar and Python's tarfile.
    const bool regular = type == '0' || type == '\0' || type == '7';
    const bool directory = type == '5' || (regular && name.ends_with('/'));
    if (directory) size = 0;

    const std::uint64_t available = remaining - k_block;
    if (size > available) {
      return fail(TarFault::truncated, offset_, shown_name,
                  "member size " + std::to_string(size) + " runs past the end of the archive (" +
                      std::to_string(available) + " bytes remain after the header)");
    }
    if (padded_size(size) > available) {
      return fail(TarFault::truncated, offset_, shown_name,
                  "truncated member: its payload of " + std::to_string(size) + " bytes is padded to " +
                      std::to_string(padded_size(size)) + " but " + std::to_string(available) +
                      " bytes remain after the header");
    }
    const std::span<const std::byte> payload = archive_.subspan(offset_ + k_block, static_cast<std::size_t>(size));
    const std::size_t header_offset = offset_;
    offset_ += k_block + static_cast<std::size_t>(padded_size(size));

    const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
    switch (type) {
      case 'x': {
        const std::string problem = parse_pax(text, pax);
        if (!problem.empty()) return fail(TarFault::bad_pax_record, header_offset, {}, problem);
        if (!extended) extended_offset = header_offset;
        extended = true;
        continue;
      }
      case 'g': {
        PaxValues global;
        if (!global_path_.empty()) global.path = global_path_;
        global.size = global_size_;
        const std::string problem = parse_pax(text, global);
        if (!problem.empty()) return fail(TarFault::bad_pax_record, header_offset, {}, problem);
        global_path_ = global.path.value_or(std::string_view{});
        global_size_ = global.size;
        continue;
      }
      case 'L':
        long_name = c_string(text);
        if (!extended) extended_offset = header_offset;
        extended = true;
        continue;
      case 'K':
        if (!extended) extended_offset = header_offset;
        extended = true;
        continue;
      default: break;
    }

    if (type == 'S' || (regular && pax.sparse)) {
      return fail(TarFault::unsupported, header_offset, name, "GNU sparse members are not supported");
    }
    if (!regular || directory) {
      pax = PaxValues{};
      long_name.reset();
      extended = false;
      continue;
    }
    if (const char* reason = unsafe_name_reason(name)) {
      return fail(TarFault::unsafe_name, header_offset, name, reason);
    }
    return std::optional<TarMember>{TarMember{name, payload, member_offset}};
  }
}

}  // namespace datavo
