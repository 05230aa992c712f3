#include "tier/cloud/checksums.hpp"

#include <openssl/evp.h>

#include <memory>
#include <vector>

#include "util/fs.hpp"

namespace datavo::cloud {
namespace {

// Big enough to amortise the syscall, small enough for a stack of upload workers.
constexpr std::size_t k_chunk = 1u << 20;

struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// Feeds [offset, offset + length) of `fd` to `update`.
template <typename Update>
Result<void> read_range(int fd, std::uint64_t offset, std::uint64_t length, Update&& update) {
  std::vector<char> buffer(std::size_t(std::min<std::uint64_t>(length, k_chunk)));
  for (std::uint64_t done = 0; done < length;) {
    const std::size_t n = std::size_t(std::min<std::uint64_t>(buffer.size(), length - done));
    DATAVO_TRY(util::pread_all(fd, buffer.data(), n, off_t(offset + done), "upload source"));
    update(buffer.data(), n);
    done += n;
  }
  return {};
}

}  // namespace

Result<Sha256> sha256_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  Sha256Hasher hasher;
  DATAVO_TRY(read_range(fd, offset, length, [&](const char* data, std::size_t n) { hasher.update(data, n); }));
  return hasher.finish();
}

Result<std::string> md5_of_range(int fd, std::uint64_t offset, std::uint64_t length) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_md5(), nullptr) != 1)
    return Error{ErrorCode::internal, "cannot start an MD5"};
  DATAVO_TRY(
      read_range(fd, offset, length, [&](const char* data, std::size_t n) { EVP_DigestUpdate(ctx.get(), data, n); }));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &size) != 1) return Error{ErrorCode::internal, "cannot finish an MD5"};
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string md5_of(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

}  // namespace datavo::cloud
