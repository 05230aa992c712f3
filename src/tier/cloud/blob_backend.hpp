// BlobBackend: what one cloud service (S3, GCS, Azure Blob) must provide to the remote-tier layer
// (blob_tier.hpp). A backend is a request builder over the one HTTP transport (net::HttpClient): its URLs, its
// headers, its RequestAuth and its error mapping. Everything else a cloud tier does (object names, metadata,
// parallel ranged reads pinned to a version, multipart uploads, conditional creates, leases, `cache check`) is
// written once, in blob_tier.cpp.
//
// Error contract for every method: a miss is a value (nullopt, false); a failure is an Error whose code the layer
// branches on: conflict (a precondition failed: 412, or 409 for "already exists"), not_found (the bucket or
// container does not exist, never a missing object), permission_denied (credentials refused or missing), remote
// / timeout (the service failed), or the sink's own Error.
//
// Thread safety: every method may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/result.hpp"
#include "datavo/tier.hpp"
#include "datavo/units.hpp"
#include "net/http_client.hpp"

namespace datavo::cloud {

// What the service says about an object.
struct ObjectInfo {
  Bytes size;                          // the whole object (not the range that was read)
  std::string version;                 // the pin for ranged reads: the ETag (S3, Azure) or the generation (GCS)
  std::optional<Sha256> sha256;        // metadata datavo-sha256
  std::optional<Bytes> recorded_size;  // metadata datavo-size
  // Metadata datavo-chunks as the service returned it, unparsed (chunk_metadata.hpp decodes it against the size).
  std::optional<std::string> recorded_chunks;
  // The whole-object SHA-256 that the service keeps for the object, answered to a HEAD: only S3 has one (the
  // x-amz-checksum-sha256 Datavo sends with a single PUT, returned with x-amz-checksum-mode: ENABLED; a multipart
  // object's checksum is composite, "...-N", and is not one). GCS and Azure keep MD5 / CRC32C only: nullopt.
  std::optional<Sha256> service_sha256;
  std::chrono::system_clock::time_point last_modified;
};

struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t length = 0;
};

// Metadata written with an entry.
struct EntryMetadata {
  Sha256 sha256;
  Bytes size;
  // datavo-chunks (chunk_metadata.hpp): nullopt for an object too large to record them.
  std::optional<ChunkDigests> chunks{};
};

// Whether a write may replace an existing object. Entries and new leases never do (a conditional create); a
// lease being renewed does.
enum class Overwrite { no, yes };

struct UploadedPart {
  int number = 0;        // 1-based
  std::string etag;      // as the service returned it
  std::string checksum;  // the part's checksum as sent (S3: base64 SHA-256), for the completing request
  // Set when this part completed the object by itself (GCS's last resumable chunk): what finish_upload returns.
  std::optional<InstallOutcome> completed{};
};

struct ListedObject {
  std::string name;  // the full object name
  Bytes size;
  std::chrono::system_clock::time_point last_modified;
};

class BlobBackend {
 public:
  virtual ~BlobBackend() = default;

  // "s3", "gcs" or "azure_blob".
  virtual std::string_view type() const = 0;
  // How this service's API makes a create conditional on the object's absence ("If-None-Match: *",
  // "ifGenerationMatch=0"): named in `cache check`'s advice to a server that ignores it.
  virtual std::string_view conditional_create() const = 0;
  // "s3://bucket", "gs://bucket", the container URL: for messages and `cache info`, never with a secret.
  virtual std::string location() const = 0;

  // Resolves the credentials the requests will carry (for `cache check`): a description without secrets
  // ("environment", "profile default", "SharedKey for devstoreaccount1", "none (emulator)").
  virtual Result<std::string> credentials() = 0;

  // GETs `name`, or `range` of it, into `sink` (which receives exactly those bytes). With `pin`, the read fails
  // with ErrorCode::conflict when the object is no longer that version. nullopt when the object does not exist.
  // A range that ends past the object is clamped by the service; the ObjectInfo says the whole size.
  virtual Result<std::optional<ObjectInfo>> get(const std::string& name, std::optional<ByteRange> range,
                                                const std::string* pin, ByteSink& sink) = 0;
  // What the service says about `name` without its bytes; nullopt when it does not exist.
  virtual Result<std::optional<ObjectInfo>> head(const std::string& name) = 0;
  // Writes `name` in one request. With Overwrite::no it is a conditional create: already_present when the object
  // exists (the service checked; a service that ignores the condition overwrites, which `cache check` reports).
  // `metadata` and a service-side checksum go with entries; leases carry none.
  virtual Result<InstallOutcome> put(const std::string& name, const net::RequestBody& body,
                                     const std::optional<EntryMetadata>& metadata, Overwrite overwrite) = 0;

  // Multipart (S3), resumable (GCS) or block (Azure) uploads of large entries. start_upload returns the upload's
  // id; parts are numbered from 1 and cover the object in order; finish_upload is the conditional create
  // (already_present when the object exists); abort_upload frees what was sent (no orphaned parts left billed).
  virtual Result<std::string> start_upload(const std::string& name, const EntryMetadata& metadata) = 0;
  virtual Result<UploadedPart> upload_part(const std::string& name, const std::string& upload_id, int number,
                                           const net::FileBody& part) = 0;
  virtual Result<InstallOutcome> finish_upload(const std::string& name, const std::string& upload_id,
                                               const std::vector<UploadedPart>& parts,
                                               const EntryMetadata& metadata) = 0;
  virtual Result<void> abort_upload(const std::string& name, const std::string& upload_id) = 0;
  // Whether parts may be sent by several threads at once (GCS's resumable uploads are sequential).
  virtual bool parallel_parts() const { return true; }
  // The largest entry that put() writes in one request, given the tier's part_size; a larger one goes up through
  // start_upload() in parts of part_size (one part when part_size covers it).
  virtual Bytes one_request_limit(Bytes part_size) const { return part_size; }

  // Removes `name`; false when there was nothing to remove.
  virtual Result<bool> remove(const std::string& name) = 0;
  // Every object whose name starts with `prefix`, following the service's pagination.
  virtual Result<std::vector<ListedObject>> list(const std::string& prefix) = 0;
};

}  // namespace datavo::cloud
