// Checksums of upload sources for the cloud backends: the SHA-256 of a part (S3's x-amz-checksum-sha256) and the
// MD5 of a blob or part (GCS's md5Hash, Azure's Content-MD5), read with pread so that several threads can hash
// parts of one file at once. Thread safety: reentrant.
#pragma once

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

}  // namespace datavo::cloud
