#include "util/base64.hpp"

#include <openssl/evp.h>

#include <algorithm>

namespace datavo::util {

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int size =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(size));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  const auto invalid = [] { return Error{ErrorCode::invalid_argument, "not base64 text"}; };
  if (text.size() % 4 != 0) return invalid();
  if (text.empty()) return std::string();
  std::string decoded(text.size() / 4 * 3, '\0');
  const int size = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                   reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (size < 0) return invalid();
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t padding = 0;
  if (text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  decoded.resize(static_cast<std::size_t>(size) - padding);
  return decoded;
}

std::string base64url_encode(std::string_view bytes) {
  std::string out = base64_encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  std::replace(out.begin(), out.end(), '+', '-');
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

Result<std::string> base64url_decode(std::string_view text) {
  std::string standard(text);
  while (!standard.empty() && standard.back() == '=') standard.pop_back();
  if (standard.size() % 4 == 1) return Error{ErrorCode::invalid_argument, "base64url text of an impossible length"};
  for (char& c : standard) {
    if (c == '+' || c == '/') return Error{ErrorCode::invalid_argument, "not base64url text"};
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  standard.append((4 - standard.size() % 4) % 4, '=');
  auto decoded = base64_decode(standard);
  if (!decoded) return Error{ErrorCode::invalid_argument, "not base64url text"};
  return decoded;
}

}  // namespace datavo::util
