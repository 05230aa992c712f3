#include "datavo/content_hash.hpp"

#include <errno.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

namespace datavo {
namespace {

constexpr std::size_t k_content_hash_hex_length = 64;

void append_netstring(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += ',';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

bool valid_instance_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

Result<ContentHash> ContentHash::parse(std::string_view text) {
  if (text.size() != k_content_hash_hex_length) {
    return Error{ErrorCode::invalid_argument, "content hash must be 64 lowercase hex characters, got " +
                                                  std::to_string(text.size()) + " characters"};
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return Error{ErrorCode::invalid_argument, "content hash must be 64 lowercase hex characters; byte offset " +
                                                    std::to_string(i) + " is not [0-9a-f]"};
    }
  }
  return ContentHash(std::string(text));
}

ContentHash compute_content_hash(const ShardIdentity& identity) {
  std::vector<std::string> keys = identity.keys;
  std::sort(keys.begin(), keys.end());  // std::string compares bytewise (char_traits<char> compares as unsigned)
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  std::string message = "datavo.content_hash.v1";
  message += '\0';
  append_netstring(message, identity.manifest_ref);
  append_netstring(message, identity.revision);
  append_netstring(message, std::to_string(identity.shard_index));
  append_netstring(message, std::to_string(keys.size()));
  for (const auto& key : keys) append_netstring(message, key);
  append_netstring(message, std::to_string(identity.sample_ids.size()));
  for (const auto& id : identity.sample_ids) append_netstring(message, id);

  Sha256Hasher hasher;
  hasher.update(message.data(), message.size());
  return ContentHash::parse(hasher.finish().hex()).value();
}

Result<Sha256> Sha256::parse(std::string_view hex) {
  if (hex.size() != 64) return Error{ErrorCode::invalid_argument, "SHA-256 must be 64 hex characters"};
  Raw raw{};
  for (std::size_t i = 0; i < 32; ++i) {
    int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return Error{ErrorCode::invalid_argument,
                   "SHA-256 has a non-hex character at byte offset " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1)};
    }
    raw[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return Sha256(raw);
}

std::string Sha256::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (auto b : raw_) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) != 1) std::abort();
}
Sha256Hasher::~Sha256Hasher() {
  if (ctx_) EVP_MD_CTX_free(as_ctx(ctx_));
}
Sha256Hasher::Sha256Hasher(Sha256Hasher&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }
Sha256Hasher& Sha256Hasher::operator=(Sha256Hasher&& other) noexcept {
  if (this != &other) {
    if (ctx_) EVP_MD_CTX_free(as_ctx(ctx_));
    ctx_ = other.ctx_;
    other.ctx_ = nullptr;
  }
  return *this;
}
void Sha256Hasher::update(const void* data, std::size_t size) { EVP_DigestUpdate(as_ctx(ctx_), data, size); }
Sha256 Sha256Hasher::finish() {
  Sha256::Raw raw{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(as_ctx(ctx_), raw.data(), &length);
  EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr);
  return Sha256(raw);
}

Result<Instance> Instance::parse(std::string_view name) {
  if (name.empty() || name.size() > 255) {
    return Error{ErrorCode::invalid_argument, "instance name must be 1 to 255 characters"};
  }
  if (name[0] == '.') return Error{ErrorCode::invalid_argument, "instance name must not start with '.'"};
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!valid_instance_char(name[i])) {
      return Error{ErrorCode::invalid_argument, "instance name '" + std::string(name) +
                                                    "' has a character outside [A-Za-z0-9._-] at byte offset " +
                                                    std::to_string(i)};
    }
  }
  return Instance(std::string(name));
}

Result<Instance> Instance::from_server(std::string_view url) {
  std::string_view rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string_view::npos) rest.remove_prefix(scheme + 3);
  if (auto end = rest.find_first_of("/?#"); end != std::string_view::npos) rest = rest.substr(0, end);
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string host, port;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return Error{ErrorCode::invalid_argument, "bad IPv6 host in server URL"};
    host = std::string(rest.substr(1, close - 1));
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = std::string(rest.substr(close + 2));
    std::replace(host.begin(), host.end(), ':', '-');
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = std::string(rest.substr(0, colon));
    port = std::string(rest.substr(colon + 1));
  } else {
    host = std::string(rest);
  }
  if (host.empty()) {
    return Error{ErrorCode::invalid_argument,
                 "server URL '" + std::string(url.substr(0, url.find("?"))) + "' has no host"};
  }
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!port.empty()) host += "_" + port;
  return parse(host);
}

}  // namespace datavo
