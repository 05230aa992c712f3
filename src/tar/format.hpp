// Internal: the tar header layout and the helpers shared by the tar reader, sample grouping and writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace datavo::tar_format {

inline constexpr std::size_t k_block = 512;

// Offsets and lengths of the header fields (POSIX ustar; GNU reuses the layout up to the magic).
struct Field {
  std::size_t offset;
  std::size_t size;
};
inline constexpr Field k_name{0, 100};
inline constexpr Field k_mode{100, 8};
inline constexpr Field k_uid{108, 8};
inline constexpr Field k_gid{116, 8};
inline constexpr Field k_size{124, 12};
inline constexpr Field k_mtime{136, 12};
inline constexpr Field k_checksum{148, 8};
inline constexpr std::size_t k_typeflag = 156;
inline constexpr Field k_magic{257, 6};
inline constexpr Field k_version{263, 2};
inline constexpr Field k_prefix{345, 155};

// Sizes below this fit the 11 octal digits of a ustar size field.
inline constexpr std::uint64_t k_max_octal_size = std::uint64_t{1} << 33;

inline constexpr std::uint64_t padded_size(std::uint64_t size) { return (size + k_block - 1) / k_block * k_block; }

// Why `name` may not be a member name (empty, absolute, a `..` component, a NUL byte), or nullptr when it may.
const char* unsafe_name_reason(std::string_view name);

// `name` fit for an error message: util::printable (escaped, at most 120 characters, "…" in the middle).
std::string escape_name(std::string_view name);

// "shard <shard>: member "<member>" at byte offset <offset>: <what>", the member part only when known.
std::string error_message(std::string_view shard, std::string_view member, std::uint64_t offset, std::string_view what);

}  // namespace datavo::tar_format
