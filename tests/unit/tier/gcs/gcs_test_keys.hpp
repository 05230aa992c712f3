// RSA keys made in the test with OpenSSL, and an RS256 JWT verifier written against OpenSSL directly (not against
// src/tier/gcs/jwt.cpp), for the GCS credential tests.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace datavo::gcstest {

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// A fresh 2048-bit RSA key.
inline Pkey make_rsa_key() { return Pkey(EVP_RSA_gen(2048)); }

// The private key as PKCS#8 PEM ("BEGIN PRIVATE KEY"), the form of Google's key files.
inline std::string private_key_pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  return out;
}

// base64url without padding, decoded with OpenSSL's base64 after mapping the alphabet back.
inline std::optional<std::string> decode_base64url(std::string text) {
  for (char& c : text) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  std::size_t padding = 0;
  while (text.size() % 4 != 0) {
    text += '=';
    ++padding;
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int size = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                   reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (size < 0) return std::nullopt;
  out.resize(static_cast<std::size_t>(size) - padding);
  return out;
}

struct VerifiedJwt {
  nlohmann::json header;
  nlohmann::json claims;
};

// Verifies the RS256 signature of `jwt` with `key`; nullopt when it is malformed or the signature is wrong.
inline std::optional<VerifiedJwt> verify_rs256(const std::string& jwt, EVP_PKEY* key) {
  const auto first = jwt.find('.');
  const auto second = jwt.find('.', first == std::string::npos ? 0 : first + 1);
  if (first == std::string::npos || second == std::string::npos) return std::nullopt;
  const std::string signing_input = jwt.substr(0, second);
  auto header = decode_base64url(jwt.substr(0, first));
  auto claims = decode_base64url(jwt.substr(first + 1, second - first - 1));
  auto signature = decode_base64url(jwt.substr(second + 1));
  if (!header || !claims || !signature) return std::nullopt;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool valid =
      EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature->data()), signature->size(),
                       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!valid) return std::nullopt;
  VerifiedJwt out{nlohmann::json::parse(*header, nullptr, false), nlohmann::json::parse(*claims, nullptr, false)};
  if (!out.header.is_object() || !out.claims.is_object()) return std::nullopt;
  return out;
}

}  // namespace datavo::gcstest
