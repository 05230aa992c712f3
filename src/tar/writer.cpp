#include <array>
#include <cstdio>
#include <cstring>
#include <limits>

#include "datavo/tar.hpp"
#include "tar/format.hpp"

namespace datavo {

using namespace tar_format;

namespace {

using Block = std::array<std::byte, k_block>;

constexpr std::array<std::byte, 2 * k_block> k_zeros{};
constexpr std::string_view k_pax_header_name = "././@PaxHeader";  // Python tarfile's and star's fixed name
constexpr std::uint64_t k_member_mode = 0644;

// Writes `value` as zero-padded octal filling the field but its last byte, which stays NUL.
void put_octal(Block& block, Field field, std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "%0*llo", static_cast<int>(field.size - 1), static_cast<unsigned long long>(value));
  std::memcpy(block.data() + field.offset, text, field.size - 1);
}

void put_text(Block& block, Field field, std::string_view text) {
  std::memcpy(block.data() + field.offset, text.data(), std::min(text.size(), field.size));
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Python tarfile's rule, so that the same name splits the same way in both: the leftmost '/' that leaves at
// most 155 bytes of prefix and 100 of name. Returns the index of that '/', or npos.
std::size_t ustar_split(std::string_view name) {
  for (std::size_t slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1)) {
    if (slash > k_prefix.size) break;
    if (slash > 0 && name.size() - slash - 1 <= k_name.size && slash + 1 < name.size()) return slash;
  }
  return std::string_view::npos;
}

void append_pax_record(std::string& records, std::string_view keyword, std::string_view value) {
  // The length counts its own digits: grow the digit count until it is stable.
  const std::size_t base = 1 + keyword.size() + 1 + value.size() + 1;
  std::size_t digits = 1;
  while (std::to_string(base + digits).size() != digits) ++digits;
  records += std::to_string(base + digits);
  records += ' ';
  records += keyword;
  records += '=';
  records += value;
  records += '\n';
}

Result<void> check_name(std::string_view name) {
  if (const char* reason = unsafe_name_reason(name)) {
    return Error::invalid_argument("tar member \"" + escape_name(name) + "\": " + reason);
  }
  if (name.starts_with("./") || name.ends_with('/')) {
    return Error::invalid_argument("tar member \"" + escape_name(name) +
                                   "\": a leading \"./\" or a trailing '/' would not read back "
                                   "verbatim");
  }
  return ok();
}

// The pax records a member needs, empty when its ustar header says everything.
std::string pax_records(std::string_view name, std::uint64_t size) {
  std::string records;
  if (!is_ascii(name) || (name.size() > k_name.size && ustar_split(name) == std::string_view::npos)) {
    append_pax_record(records, "path", name);
  }
  if (size >= k_max_octal_size) append_pax_record(records, "size", std::to_string(size));
  return records;
}

Block make_header(std::string_view name, std::uint64_t size, char type) {
  Block block{};
  std::string ascii(name);
  for (char& c : ascii) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  std::string_view ascii_name = ascii;
  if (ascii_name.size() > k_name.size) {
    const std::size_t slash = ustar_split(ascii_name);
    if (slash != std::string_view::npos) {
      put_text(block, k_prefix, ascii_name.substr(0, slash));
      ascii_name.remove_prefix(slash + 1);
    }
  }
  put_text(block, k_name, ascii_name);
  put_octal(block, k_mode, k_member_mode);
  put_octal(block, k_uid, 0);
  put_octal(block, k_gid, 0);
  put_octal(block, k_size, size < k_max_octal_size ? size : 0);
  put_octal(block, k_mtime, 0);
  block[k_typeflag] = static_cast<std::byte>(type);
  put_text(block, k_magic, std::string_view("ustar\0", 6));
  put_text(block, k_version, "00");
  // devmajor/devminor stay NUL: they mean something only for device members (Python's tarfile does the same).

  std::memset(block.data() + k_checksum.offset, ' ', k_checksum.size);
  std::uint64_t sum = 0;
  for (std::byte b : block) sum += static_cast<unsigned char>(b);
  // "%06o\0 " as GNU tar and Python's tarfile write it.
  char text[16];
  std::snprintf(text, sizeof text, "%06llo", static_cast<unsigned long long>(sum));
  std::memcpy(block.data() + k_checksum.offset, text, 6);
  block[k_checksum.offset + 6] = std::byte{0};
  return block;
}

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

}  // namespace

TarWriter::TarWriter(TarSink sink) : sink_(std::move(sink)) {}

Result<void> TarWriter::fail(Error error) {
  error_ = std::move(error);
  return *error_;
}

Result<void> TarWriter::emit(std::span<const std::byte> bytes) {
  if (bytes.empty()) return ok();
  auto written = sink_(bytes);
  if (!written) return fail(std::move(written).error());
  written_ += bytes.size();
  return ok();
}

Result<void> TarWriter::begin_member(std::string_view name, Bytes size) {
  if (error_) return *error_;
  if (finished_)
    return fail(Error::invalid_argument("tar member \"" + escape_name(name) + "\": the archive is finished"));
  if (remaining_ != 0) {
    return fail(Error::invalid_argument("tar member \"" + escape_name(name) + "\": the previous member still owes " +
                                        std::to_string(remaining_) + " payload bytes"));
  }
  if (auto checked = check_name(name); !checked) return fail(std::move(checked).error());

  const std::string records = pax_records(name, size.count());
  if (!records.empty()) {
    const Block pax_header = make_header(k_pax_header_name, records.size(), 'x');
    DATAVO_TRY(emit(pax_header));
    DATAVO_TRY(emit(bytes_of(records)));
    DATAVO_TRY(emit(std::span(k_zeros).first(padded_size(records.size()) - records.size())));
  }
  const Block header = make_header(name, size.count(), '0');
  DATAVO_TRY(emit(header));
  remaining_ = size.count();
  padding_ = padded_size(remaining_) - remaining_;
  return ok();
}

Result<void> TarWriter::write(std::span<const std::byte> data) {
  if (error_) return *error_;
  if (data.size() > remaining_) {
    return fail(Error::invalid_argument("tar writer: " + std::to_string(data.size()) +
                                        " payload bytes written where the member " + "has " +
                                        std::to_string(remaining_) + " left"));
  }
  DATAVO_TRY(emit(data));
  remaining_ -= data.size();
  if (remaining_ == 0 && padding_ != 0) {
    DATAVO_TRY(emit(std::span(k_zeros).first(static_cast<std::size_t>(padding_))));
    padding_ = 0;
  }
  return ok();
}

Result<void> TarWriter::add_member(std::string_view name, std::span<const std::byte> data) {
  DATAVO_TRY(begin_member(name, Bytes{data.size()}));
  return write(data);
}

Result<void> TarWriter::finish() {
  if (error_) return *error_;
  if (finished_) return fail(Error::invalid_argument("tar writer: finish() called twice"));
  if (remaining_ != 0) {
    return fail(Error::invalid_argument("tar writer: finish() while the last member still owes " +
                                        std::to_string(remaining_) + " payload bytes"));
  }
  DATAVO_TRY(emit(k_zeros));
  finished_ = true;
  return ok();
}

Result<Bytes> tar_archive_size(std::span<const TarEntryInfo> entries) {
  std::uint64_t total = 2 * k_block;
  const auto add = [&total](std::uint64_t amount) {
    if (amount > std::numeric_limits<std::uint64_t>::max() - total) return false;
    total += amount;
    return true;
  };
  for (const TarEntryInfo& entry : entries) {
    DATAVO_TRY(check_name(entry.name));
    const std::uint64_t size = entry.size.count();
    if (size > std::numeric_limits<std::uint64_t>::max() - k_block) {
      return Error::invalid_argument("tar member \"" + escape_name(entry.name) + "\": size too large");
    }
    const std::string records = pax_records(entry.name, size);
    bool fits = true;
    if (!records.empty()) fits = add(k_block) && add(padded_size(records.size()));
    fits = fits && add(k_block) && add(padded_size(size));
    if (!fits) return Error::invalid_argument("tar archive size overflows 64 bits");
  }
  return Bytes{total};
}

}  // namespace datavo
