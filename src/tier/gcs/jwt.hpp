// JSON Web Tokens for Google service-account keys: an RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 section 3.3)
// signer over OpenSSL EVP; base64url is util/base64.hpp.
//
// Secrets: the private key is used and dropped; it never appears in an Error message (OpenSSL's own reason text
// does, which never includes key material).
// Thread safety: reentrant.
#pragma once

#include <string>
#include <string_view>

#include "datavo/result.hpp"

namespace datavo::gcs {

// "<base64url(header_json)>.<base64url(claims_json)>.<base64url(signature)>", the signature RS256 over the first two
// parts with `private_key_pem` (PKCS#8 "BEGIN PRIVATE KEY", as in Google key files, or PKCS#1 "BEGIN RSA PRIVATE
// KEY"). Errors: invalid_argument when the key cannot be read or is not RSA, internal when signing fails.
Result<std::string> sign_jwt_rs256(std::string_view header_json, std::string_view claims_json,
                                   std::string_view private_key_pem);

}  // namespace datavo::gcs
