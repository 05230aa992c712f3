#include "tier/gcs/jwt.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <array>
#include <memory>

#include "util/base64.hpp"

namespace datavo::gcs {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// OpenSSL's reason for the last failure ("unsupported", "bad decrypt"), emptying its error queue.
std::string openssl_reason() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    if (out.empty()) {
      const char* reason = ERR_reason_error_string(code);
      out = reason != nullptr ? reason : "error " + std::to_string(code);
    }
  }
  return out.empty() ? "unknown error" : out;
}

}  // namespace

Result<std::string> sign_jwt_rs256(std::string_view header_json, std::string_view claims_json,
                                   std::string_view private_key_pem) {
  ERR_clear_error();
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())));
  if (!bio) return Error{ErrorCode::internal, "BIO_new_mem_buf failed"};
  // An empty passphrase callback result: a key file with an encrypted key fails instead of prompting on a tty.
  std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key)
    return Error{ErrorCode::invalid_argument,
                 "the private key is not a readable PEM private key (" + openssl_reason() + ")"};
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA)
    return Error{ErrorCode::invalid_argument, "the private key is not an RSA key (RS256 needs one)"};

  const std::string signing_input = util::base64url_encode(header_json) + "." + util::base64url_encode(claims_json);
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) != 1)
    return Error{ErrorCode::internal, "RS256 signing failed (" + openssl_reason() + ")"};
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size()) != 1)
    return Error{ErrorCode::internal, "RS256 signing failed (" + openssl_reason() + ")"};
  signature.resize(size);
  return signing_input + "." + util::base64url_encode(signature);
}

}  // namespace datavo::gcs
