#include "origin/auth.hpp"

#include <openssl/crypto.h>

#include "util/text.hpp"

namespace datavo::origin {

bool bearer_token_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size() || !util::iequals(authorization.substr(0, scheme.size()), scheme))
    return false;
  const std::string_view presented = authorization.substr(scheme.size());
  return presented.size() == token.size() && CRYPTO_memcmp(presented.data(), token.data(), token.size()) == 0;
}

}  // namespace datavo::origin
