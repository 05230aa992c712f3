// The key-group tars of the store (docs/protocol.md, "The tar of a key group"), materialised on first use: a tar
// is built only for a content hash that its revision, shard and keys give, and once per content hash at a time
// within the process.
//
// Thread safety: get() may be called from any thread at once. The Store and the RevisionCache must outlive it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <variant>

#include "datavo/content_hash.hpp"
#include "origin/keyed_mutex.hpp"
#include "origin/responses.hpp"
#include "origin/revision_cache.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"

namespace datavo::origin {

// The content hash of the key group `keys` (sorted, unique) of shard `shard_index` of `revision`; nullopt when the
// revision has no such shard or lacks one of the keys.
std::optional<ContentHash> key_group_hash(const Revision& revision, std::uint64_t shard_index,
                                          std::span<const std::string> keys);

class KeyGroups {
 public:
  // Tars are materialised with chunk digests of `chunk_size` (within [k_min_chunk_size, k_max_chunk_size]).
  KeyGroups(const Store& store, RevisionCache& revisions, Bytes chunk_size)
      : store_(store), revisions_(revisions), chunk_size_(chunk_size) {}
  Bytes chunk_size() const { return chunk_size_; }

  // The tar of the key group `fields` names (its content_hash, dataset, split, revision, shard and keys),
  // materialised when missing, or the refusal: 404 when that revision does not give fields.content_hash (the
  // shard is no longer in the store), 500 when the store fails. REQUIRES: fields validated (parse_ticket).
  std::variant<KeyGroupTar, Refusal> get(const TicketFields& fields);

 private:
  const Store& store_;
  RevisionCache& revisions_;
  const Bytes chunk_size_;
  KeyedMutex locks_;
};

}  // namespace datavo::origin
