// The store of the reference origin (docs/protocol.md, "The store of the reference server"): the on-disk layout,
// revisions (manifests plus the objects behind every member), content-addressed objects, the instance id and the
// ticket secret, and key-group tars materialised for serving. The names in it follow the protocol's rules
// (datavo/protocol.hpp).
//
// Layout under the store root:
//   instance.json                         {"instance_id": "<32 hex>"}
//   secret                                64 hex characters, the HMAC key of tickets (0600)
//   objects/<sha256>                      member payloads, content-addressed
//   datasets/<dataset>/<split>/revisions/<R>.json, LATEST, .pack.lock
//   tars/<content_hash>.tar, tars/<content_hash>.sha256, tars/<content_hash>.chunks
// Temporary files are created beside their target with the infix ".tmp." and renamed into place, so a reader
// never sees a partial object, revision or tar; sweep_temporaries() removes the ones a crash left behind.
//
// Thread safety: a Store is an immutable value after open(); every method may be called from any thread. Files
// are only ever replaced by rename, so concurrent processes (a `datavo pack` next to a `datavo serve`) are safe;
// two packs of one dataset are serialised by lock_dataset().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/chunk_digests.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"
#include "util/fs.hpp"

namespace datavo::origin {

// --- revisions --------------------------------------------------------------------------------------------------

// A member payload in objects/.
struct ObjectRef {
  std::string sha256;  // 64 lowercase hex
  std::uint64_t size = 0;
};

struct SampleRecord {
  std::string id;
  std::vector<ObjectRef> objects;  // objects[i] is the member of Revision::keys[i]
};

struct ShardRecord {
  std::vector<SampleRecord> samples;  // shard order
};

// The state of a dataset at one revision: its manifest plus the object of every member.
struct Revision {
  std::string dataset;
  std::string split;
  std::string manifest_ref;  // "<dataset>/<split>@m<12 hex>", fixed when the dataset is created
  std::uint64_t revision = 0;
  std::vector<std::string> keys;  // sorted bytewise, unique
  std::vector<ShardRecord> shards;
};

// A key-group tar in tars/: complete (it is only renamed into place once written and hashed).
struct KeyGroupTar {
  std::string path;
  Bytes size;
  Sha256 sha256;
  ChunkDigests chunks;  // of `size` bytes (ChunkDigests::check_covers holds)
};

class Store {
 public:
  enum class Create { yes, no };

  // Opens the store at `root`. Create::yes makes the directory and its layout when missing; Create::no requires
  // the directory to exist (not_found otherwise) and adds whatever of the layout is missing. Either way,
  // instance.json and secret are created on first use (atomically: when two processes race, one file wins and
  // both read it).
  static Result<Store> open(const std::string& root, Create create);

  const std::string& root() const { return root_; }
  const std::string& instance_id() const { return instance_id_; }
  // The HMAC key of tickets (the text of STORE/secret).
  const std::string& secret() const { return secret_; }

  // REQUIRES: validated names, a validated sha256 / content hash.
  std::string dataset_dir(std::string_view dataset, std::string_view split) const;
  std::string object_path(std::string_view sha256) const;
  std::string tar_path(const ContentHash& hash) const;
  std::string objects_dir() const { return root_ + "/objects"; }
  std::string tars_dir() const { return root_ + "/tars"; }

  // Whether datasets/<dataset>/ exists (to tell an unknown dataset from an unknown split in messages).
  bool has_dataset(std::string_view dataset) const;

  // The LATEST revision of a dataset, nullopt when it has none. integrity when LATEST is malformed.
  Result<std::optional<std::uint64_t>> latest_revision(std::string_view dataset, std::string_view split) const;

  // Revision `revision` of a dataset, nullopt when it does not exist. integrity when the file is malformed (every
  // name, sha256 and count in it is validated, so nothing read from it can escape the store).
  Result<std::optional<Revision>> load_revision(std::string_view dataset, std::string_view split,
                                                std::uint64_t revision) const;

  // Writes revisions/<R>.json, then LATEST = R (each atomically, fsynced). REQUIRES: lock_dataset() is held and
  // R is LATEST + 1. After a crash between the two, R.json exists without being LATEST; the next pack overwrites
  // it.
  Result<void> publish_revision(const Revision& revision) const;

  // Takes the exclusive pack lock of a dataset (flock on .pack.lock), waiting for another pack of it; released when
  // the returned descriptor is closed. cancelled when the caller is stopped or cancelled while it waits
  // (util::flock_exclusive).
  Result<util::UniqueFd> lock_dataset(std::string_view dataset, std::string_view split) const;

  // Copies a payload into objects/, hashing it on the way. `added` tells whether the object is new (false when
  // identical bytes were already stored: objects are deduplicated).
  struct PutResult {
    ObjectRef ref;
    bool added = false;
  };
  Result<PutResult> put_object(std::span<const std::byte> data) const;
  Result<PutResult> put_object_file(const std::string& path) const;

  // The key-group tar of `hash` if it is already materialised with chunk digests of `chunk_size` (.tar, .sha256
  // and a .chunks of that chunk size that covers the tar), else nullopt: a tar written before chunk digests, or
  // with another chunk size, is materialised again (the same bytes).
  Result<std::optional<KeyGroupTar>> find_key_group(const ContentHash& hash, Bytes chunk_size) const;

  // Writes the key-group tar of `keys` (a sorted subset of revision.keys) of shard `shard_index` to
  // tars/<hash>.tar: a temp file hashed while written (the whole SHA-256 and the SHA-256 of every chunk of
  // `chunk_size`, in the same pass), then <hash>.chunks ("chunk_size <N>\n" and the canonical list), then
  // <hash>.sha256, then the rename. Memory is bounded (the objects are copied in 1 MiB pieces). integrity when an
  // object is missing or has the wrong size. REQUIRES: chunk_size within [k_min_chunk_size, k_max_chunk_size].
  // Not serialised here: concurrent calls for one hash produce identical bytes, and the last rename wins; callers
  // in one process serialise per hash to avoid the duplicate work.
  Result<KeyGroupTar> materialise_key_group(const Revision& revision, std::uint64_t shard_index,
                                            std::span<const std::string> keys, const ContentHash& hash,
                                            Bytes chunk_size) const;

  // Removes temporary files older than `age` under objects/ and tars/ (left by crashed writers). Best effort.
  void sweep_temporaries(Seconds age) const;

 private:
  Store() = default;
  std::string root_;
  std::string instance_id_;
  std::string secret_;
};

}  // namespace datavo::origin
