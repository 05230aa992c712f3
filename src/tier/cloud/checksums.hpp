// Checksums of upload sources for the cloud backends: the SHA-256 of a part (S3's x-amz-checksum-sha256), the
// MD5 of a blob or part (GCS's md5Hash, Azure's Content-MD5) and the CRC-32C of an object (GCS's crc32c), read
// with pread so that several threads can hash parts of one file at once. Thread safety: reentrant.
//
// CRC-32C is written here, not taken from a library: Debian 12 packages none for C++ (zlib's crc32 is another
// polynomial). It is the Castagnoli polynomial of RFC 3720 (iSCSI) in its reflected form, with the SSE 4.2 crc32
// instruction where the CPU has it and a table otherwise; tests/unit/tier/cloud/test_checksums.cpp checks both
// against RFC 3720's examples (B.4) and the standard check value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"

namespace datavo::cloud {

Result<Sha256> sha256_of_range(int fd, std::uint64_t offset, std::uint64_t length);
// The 16 raw bytes of the MD5 of [offset, offset + length) of `fd`.
Result<std::string> md5_of_range(int fd, std::uint64_t offset, std::uint64_t length);
// The 16 raw bytes of the MD5 of `bytes`.
std::string md5_of(std::string_view bytes);

// The CRC-32C of `size` more bytes, continuing from `crc` (0 for the first bytes): crc32c_extend(crc32c_extend(0,
// a), b) is the CRC-32C of a followed by b.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
// The same without the crc32 instruction (what crc32c_extend falls back to on CPUs without SSE 4.2).
std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t size);
Result<std::uint32_t> crc32c_of_range(int fd, std::uint64_t offset, std::uint64_t length);
// Both of GCS's checksums of [offset, offset + length) of `fd`, in one read of it.
struct Md5AndCrc32c {
  std::string md5;  // 16 raw bytes
  std::uint32_t crc32c = 0;
};
Result<Md5AndCrc32c> md5_and_crc32c_of_range(int fd, std::uint64_t offset, std::uint64_t length);
// GCS's form of a CRC-32C (the crc32c field, the X-Goog-Hash header): its four bytes big-endian, in base64.
std::string crc32c_base64(std::uint32_t crc);

}  // namespace datavo::cloud
