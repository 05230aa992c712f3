#include "tier/cloud/checksums.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "util/base64.hpp"
#include "util/fs.hpp"

namespace datavo::cloud {
namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// Feeds [offset, offset + length) of `fd` to `update`.
template <typename Update>
Result<void> read_range(int fd, std::uint64_t offset, std::uint64_t length, Update&& update) {
  return util::read_chunks(fd, off_t(offset), length, "upload source", [&](std::span<const char> chunk) {
    update(chunk.data(), chunk.size());
    return Result<void>{};
  });
}

// CRC-32C's polynomial 0x1EDC6F41, bit-reversed (the CRC is computed least significant bit first).
constexpr std::uint32_t k_crc32c_polynomial = 0x82F63B78;

constexpr std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? k_crc32c_polynomial : 0);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> k_crc32c_table = crc32c_table();

// Both take and return the register (the CRC before its final inversion).
std::uint32_t crc32c_table_update(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  for (; n > 0; --n) crc = (crc >> 8) ^ k_crc32c_table[(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42_update(std::uint32_t crc, const unsigned char* p,
                                                                    std::size_t n) {
  std::uint64_t wide = crc;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    wide = __builtin_ia32_crc32di(wide, word);
  }
  crc = std::uint32_t(wide);
  for (; n > 0; --n) crc = __builtin_ia32_crc32qi(crc, *p++);
  return crc;
}

bool has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t size) {
  return ~crc32c_table_update(~crc, static_cast<const unsigned char*>(data), size);
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
#if defined(__x86_64__)
  if (has_sse42()) return ~crc32c_sse42_update(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return crc32c_extend_portable(crc, data, size);
}

Result<std::uint32_t> crc32c_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  std::uint32_t crc = 0;
  DATAVO_TRY(
      read_range(fd, offset, length, [&](const char* data, std::size_t n) { crc = crc32c_extend(crc, data, n); }));
  return crc;
}

std::string crc32c_base64(std::uint32_t crc) {
  const char bytes[4] = {char(crc >> 24), char(crc >> 16), char(crc >> 8), char(crc)};
  return util::base64_encode(std::string_view(bytes, 4));
}

Result<Sha256> sha256_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  Sha256Hasher hasher;
  DATAVO_TRY(read_range(fd, offset, length, [&](const char* data, std::size_t n) { hasher.update(data, n); }));
  return hasher.finish();
}

// The MD5 of the range, with every chunk also given to `also`.
template <typename Also>
Result<std::string> md5_of_range_and(int fd, std::uint64_t offset, std::uint64_t length, Also&& also) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_md5(), nullptr) != 1)
    return Error{ErrorCode::internal, "cannot start an MD5"};
  DATAVO_TRY(read_range(fd, offset, length, [&](const char* data, std::size_t n) {
    EVP_DigestUpdate(ctx.get(), data, n);
    also(data, n);
  }));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &size) != 1) return Error{ErrorCode::internal, "cannot finish an MD5"};
  return std::string(reinterpret_cast<const char*>(digest), size);
}

Result<std::string> md5_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  return md5_of_range_and(fd, offset, length, [](const char*, std::size_t) {});
}

Result<Md5AndCrc32c> md5_and_crc32c_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  Md5AndCrc32c out;
  auto md5 = md5_of_range_and(
      fd, offset, length, [&](const char* data, std::size_t n) { out.crc32c = crc32c_extend(out.crc32c, data, n); });
  if (!md5) return std::move(md5).error();
  out.md5 = std::move(*md5);
  return out;
}

std::string md5_of(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

}  // namespace datavo::cloud
