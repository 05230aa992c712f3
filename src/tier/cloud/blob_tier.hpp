// The remote-tier layer: one Tier implementation for every cloud service, over a BlobBackend (blob_backend.hpp).
//
// What it does, the same for S3, GCS and Azure Blob (docs/config.md, "Cloud tiers"):
//   - Object names: [<prefix>/]<instance>/<content_hash>.tar; leases [<prefix>/]<instance>/.leases/<content_hash>;
//     `cache check` probes [<prefix>/].datavo-check/<host>.<pid>.<random>.
//   - Lookups are one request: a GET of the first part, whose 404 is the miss. Objects above part_size are read
//     with parallel ranged GETs (concurrency), each written at its offset into a positional sink, every range
//     pinned to the first response's version; a conflict (the object changed) restarts the object once.
//   - Hedged reads (hedge.hpp, CloudTierOptions::hedge, on by default): the first GET and every range of a
//     parallel read that has received no byte for the hedge deadline is sent once more; the first complete answer
//     is the range's bytes, never a mix of two. (The one GET of the rest of an object read into a sink that only
//     appends, with concurrency 1, is not hedged: it may be any size.)
//   - read_into() returns the object's metadata (datavo-sha256, datavo-size) as the Expectation that the
//     hierarchy checks before installing anything: bytes that do not match are never installed.
//   - install_copy() records the object's chunk digests in its metadata too (datavo-chunks, chunk_metadata.hpp),
//     hashed from the local file first; recorded_digests() reads them back with a HEAD, for streamed reads.
//   - install_copy() is a conditional create: one PUT up to part_size (or the backend's smaller
//     one_request_limit()), otherwise a multipart upload whose parts
//     are sent in parallel (when the service allows), each retried on its own by the transport, and aborted on
//     any failure. already_present when another VM stored the same bytes first.
//   - Leases (RemoteCoordination), when single_flight is on and the tier is writable: a conditional create of the
//     lease object holding "<host> <pid> <expiry>", renewed by a background thread every lease_duration / 3,
//     deleted on release; an expired lease is taken over (removed, then created again: one VM wins).
//   - After a cancellation (util/cancel.hpp) nothing is left on the service: a lease release and a multipart abort
//     run in a util::CleanupScope (sent anyway, within the cleanup budget), and so do a lease create and a
//     multipart start already sent when it came (their result is needed to undo them). None is begun after it.
//   - Construction does no I/O; the backend resolves credentials at first use.
//
// Thread safety: every method may be called from several threads at once.
#pragma once

#include <memory>

#include "datavo/cloud_tier.hpp"
#include "datavo/tier.hpp"
#include "tier/cloud/blob_backend.hpp"

namespace datavo::cloud {

// REQUIRES: backend != nullptr; options validated by the config loader or the backend's factory
// (validate_cloud_options).
std::shared_ptr<Tier> make_blob_tier(CloudTierOptions options, std::unique_ptr<BlobBackend> backend);

// invalid_argument naming the option unless part_size, concurrency and prefix are acceptable.
Result<void> validate_cloud_options(const CloudTierOptions& options);

// How `datavo cache verify` judges one entry object (ObjectVerifier, datavo/tier.hpp).
enum class ObjectVerdict { verified_by_service, verified_by_download, metadata_only, bad };
struct ObjectJudgement {
  ObjectVerdict verdict = ObjectVerdict::bad;
  std::string why;  // for bad: what does not match
};
// From what a HEAD says: bad when datavo-sha256 or datavo-size is missing, the size is not datavo-size, a
// datavo-chunks is there and does not decode for that size (chunk_metadata.hpp), or the service's whole-object
// SHA-256 is not datavo-sha256; verified_by_service when it is; else metadata_only. (An object without
// datavo-chunks is not bad: older Datavo versions wrote none, and reads fall back to whole-object checks.)
ObjectJudgement judge_object(const ObjectInfo& info);
// From a download: `read` bytes hashing to `digest` against what the read returned as recorded (bad, or
// verified_by_download).
ObjectJudgement judge_download(const Expectation& recorded, Bytes read, const Sha256& digest);
// From a download of an object with datavo-chunks: the digests of the chunks read against the recorded ones (bad,
// naming the first chunk that differs, or verified_by_download). A list that lies while the bytes match
// datavo-sha256 would stop every streamed read of the object at that chunk.
ObjectJudgement judge_chunks(const ChunkDigests& recorded, const ChunkDigests& read);

// The object names of the layer, for backends and tests.
std::string object_prefix(const CloudTierOptions& options);  // "" or "<prefix>/"
std::string entry_object_name(const CloudTierOptions& options, const ShardKey& key);
std::string lease_object_name(const CloudTierOptions& options, const ShardKey& key);

}  // namespace datavo::cloud
