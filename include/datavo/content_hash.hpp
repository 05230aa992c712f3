// Shard identity: the content hash that names a cached shard, and SHA-256 digests of shard bytes.
//
// The definition of content_hash is in docs/content-hash.md. In short it is the lowercase hex SHA-256 of
//   "datavo.content_hash.v1" 0x00 ns(manifest_ref) ns(revision) ns(shard_index) ns(K) ns(key_1)..ns(key_K)
//   ns(M) ns(id_1)..ns(id_M)
// where ns(x) = "<decimal byte length of x>:<x>,", keys are sorted bytewise and de-duplicated, and sample ids
// keep shard order.
//
// Thread safety: value types; all functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"

namespace datavo {

// A validated content hash: exactly 64 lowercase hex characters. Only ContentHash::parse() makes one, so any
// ContentHash is safe to put in a path.
class ContentHash {
 public:
  // Returns invalid_argument, naming the offending byte offset, unless `text` is 64 lowercase hex characters.
  static Result<ContentHash> parse(std::string_view text);

  const std::string& hex() const { return hex_; }
  bool operator==(const ContentHash&) const = default;
  auto operator<=>(const ContentHash&) const = default;

 private:
  explicit ContentHash(std::string hex) : hex_(std::move(hex)) {}
  std::string hex_;
};

// What the content hash of a shard is computed from.
struct ShardIdentity {
  std::string manifest_ref;  // e.g. "voice_demo_v1/train@m1"
  std::string revision;      // the revision watermark, decimal ASCII, e.g. "42"
  std::uint64_t shard_index = 0;
  std::vector<std::string> keys;        // any order, duplicates allowed: sorted and de-duplicated here
  std::vector<std::string> sample_ids;  // shard order
};

// Computes the content hash of `identity` as specified above.
ContentHash compute_content_hash(const ShardIdentity& identity);

// A SHA-256 digest of shard bytes (not to be confused with the content hash, which names the shard).
class Sha256 {
 public:
  using Raw = std::array<std::uint8_t, 32>;
  Sha256() = default;
  explicit Sha256(const Raw& raw) : raw_(raw) {}
  // Accepts 64 hex characters (either case); invalid_argument otherwise.
  static Result<Sha256> parse(std::string_view hex);
  std::string hex() const;
  const Raw& raw() const { return raw_; }
  bool operator==(const Sha256&) const = default;

 private:
  Raw raw_{};
};

// Incremental SHA-256 over a byte stream (OpenSSL EVP underneath). Movable, not copyable.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(Sha256Hasher&&) noexcept;
  Sha256Hasher& operator=(Sha256Hasher&&) noexcept;
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void update(const void* data, std::size_t size);
  // Returns the digest and resets the hasher for reuse.
  Sha256 finish();

 private:
  void* ctx_;  // EVP_MD_CTX*, kept opaque so that OpenSSL stays out of the public headers
};

}  // namespace datavo

namespace datavo {

// The server instance a cache entry belongs to: "local", "dev.datavo.io", "127.0.0.1_8080". Entries of two
// instances live in sibling directories and never see each other. Only parse()/from_server() make one, so an
// Instance is always safe as one path component: [A-Za-z0-9._-]+, not starting with '.', at most 255 bytes.
class Instance {
 public:
  static Result<Instance> parse(std::string_view name);
  // The instance of a server URL: its host, plus "_<port>" when the URL gives a port. IPv6 brackets dropped and
  // ':' mapped to '-'. invalid_argument when the URL has no host.
  static Result<Instance> from_server(std::string_view server_url);
  static Instance local() { return Instance("local"); }

  const std::string& name() const { return name_; }
  bool operator==(const Instance&) const = default;

 private:
  explicit Instance(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// What a cache entry is keyed by: the instance and the content hash.
struct ShardKey {
  Instance instance;
  ContentHash hash;
};

}  // namespace datavo
