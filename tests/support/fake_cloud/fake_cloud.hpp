// One fake object store for the unit tests of the three cloud backends, with a front end per dialect, served by
// cpp-httplib on 127.0.0.1:
//   - the store (object_store.cpp): buckets (containers) of objects with their metadata, a generation that every
//     write advances (GCS's generation, the number in S3's and Azure's ETags), the MD5 and CRC-32C the service
//     records (which may lie, as after bit rot), the checksums the client declared; conditional creates; the
//     state of uploads in parts (S3 multipart uploads, GCS resumable sessions, Azure uncommitted blocks); bearer
//     tokens issued by the dialect's token endpoint; the request log; and the knobs that make it fail on purpose;
//   - the front ends translate one dialect's REST API onto it, the way the service documents it:
//       S3 (s3_front.cpp): path-style /<bucket>/<key>; every request's SigV4 signature checked against the keys
//         the store knows, from what arrived on the wire (Host, the raw target, every header, the body hash);
//         ExpiredToken for session tokens said to be expired; GET with Range and If-Match, HEAD (both with the
//         client's x-amz-checksum-sha256 when x-amz-checksum-mode: ENABLED), PUT with
//         If-None-Match: * and x-amz-checksum-sha256, CreateMultipartUpload, UploadPart, CompleteMultipartUpload
//         (If-None-Match, the parts' ETags and checksums checked), AbortMultipartUpload, DeleteObject,
//         ListObjectsV2 pages; NoSuchBucket told from NoSuchKey;
//       GCS JSON API (gcs_front.cpp): ifGenerationMatch=0 on uploads (checked at the initiation of a resumable
//         upload and again when it finalizes) and ifGenerationMatch=<generation> on reads; multipart uploads with
//         md5Hash and crc32c checked; chunked resumable uploads (a session URI in Location, Content-Range chunks
//         that must be multiples of 256 KiB but the last, 308 with "Range: bytes=0-N", the status query
//         "bytes */total", X-Goog-Hash's crc32c on the completing chunk, DELETE of a session: 499); userProject
//         recorded; bucket-missing and object-missing 404s told apart by their messages; list pages; a bearer
//         token required when the test asks, from the refresh-token grant at POST /token;
//       Azure Blob REST (azure_front.cpp): path-style /<account>/<container>/<blob> as Azurite; x-ms-version
//         required; a bearer token (from the client-credentials grant at POST /<tenant>/oauth2/v2.0/token) or a
//         SharedKey signature checked on every request; Put Blob with If-None-Match: * (409 BlobAlreadyExists)
//         and Content-MD5, Put Block, Put Block List, Get Blob with x-ms-range and If-Match, Get Blob Properties
//         (HEAD), Delete Blob, List Blobs pages; ContainerNotFound told from BlobNotFound.
// Every storage request is logged under the S3 name of its operation (GetObject, HeadObject, PutObject,
// CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload, DeleteObject, ListObjects,
// Other), as tests/support/cloud_proxy.py --flavour names them, so that one test reads every dialect's log. The
// token endpoints' requests are neither logged nor passed to the hook.
//
// Thread safety: the handlers run on the server's threads; every piece of state is guarded by one mutex, and the
// accessors take it. A hook set with on_request() runs without it and may call the accessors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace datavo::fakecloud {

enum class Dialect { s3, gcs, azure };
const char* to_string(Dialect dialect);

// The account of the Azure front end, as Azurite's; its container URLs are <url>/<account>/<container>.
inline constexpr const char* k_azure_account = "devstoreaccount1";
// GCS's resumable chunks are multiples of this, but the last.
inline constexpr std::uint64_t k_chunk_granularity = 256 * 1024;

struct StoredObject {
  std::string bytes;
  std::map<std::string, std::string> metadata;  // the custom metadata, names in lower case, without any prefix
  std::int64_t generation = 0;                  // advanced by every write of the store
  std::string etag;                             // as read answers carry it (S3: the MD5 in hex, quoted)
  std::string md5_base64;                       // the MD5 the service recorded; empty: none (a composite object)
  std::string crc32c_base64;                    // the CRC-32C the service recorded
  // The checksums the client sent with the object, by algorithm ("md5", "crc32c", "sha256"), base64.
  std::map<std::string, std::string> client_checksums;
  std::chrono::system_clock::time_point last_modified;
};

// One request as a front end saw it.
struct SeenRequest {
  std::string op;  // the S3 name of the operation (see the top of this file)
  std::string method;
  std::string path;                            // decoded
  std::string bucket;                          // the bucket or container, "" when none
  std::string object;                          // the object or blob name, "" for requests on a bucket
  std::map<std::string, std::string> query;    // decoded
  std::map<std::string, std::string> headers;  // names in lower case
  std::size_t body_bytes = 0;
  int status = 0;

  bool has(const std::string& name) const { return query.count(name) > 0; }
  std::string param(const std::string& name) const;
  // The header `name` (any case), "" when absent.
  std::string header(const std::string& name) const;
  // A chunk of a GCS resumable upload (a PUT with "Content-Range: bytes a-b/total"): its first byte, else -1.
  long long chunk_start() const;
};

// An error answered in the dialect's own form instead of what the store would answer.
struct InjectedFault {
  std::string op{};  // the operation it applies to (SeenRequest::op); "" for every operation
  int status = 503;
  std::string code{};  // the service's error code (S3's <Code>, Azure's x-ms-error-code); "" for a generic one
  int after = 0;       // let this many matching requests through first
  int count = -1;      // then answer this many of them so; -1: every one
  std::optional<std::chrono::seconds> retry_after{};
};

struct StoreState;

class ObjectStore {
 public:
  explicit ObjectStore(Dialect dialect);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  Dialect dialect() const { return dialect_; }

  // --- objects, as another client would write them (not logged) ---------------------------------------------

  void add_bucket(const std::string& bucket);
  // `md5_base64` empty: the true MD5 of `bytes`; else the MD5 the service recorded (a lie, when it differs).
  void put_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                  std::map<std::string, std::string> metadata = {}, std::string md5_base64 = {});
  // An object as a composite upload leaves it: no MD5, and the given CRC-32C.
  void put_composite_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                            std::string crc32c_base64);
  // An object as an S3 PUT with x-amz-checksum-sha256 leaves it: the SHA-256 the service keeps (base64, or a
  // multipart upload's "<base64>-<parts>"), answered to reads with x-amz-checksum-mode: ENABLED.
  void put_object_with_sha256(const std::string& bucket, const std::string& name, const std::string& bytes,
                              std::map<std::string, std::string> metadata, std::string sha256_base64);
  std::optional<StoredObject> object(const std::string& bucket, const std::string& name);
  // Makes an existing object look written `age` ago (its Last-Modified in reads and listings).
  void backdate(const std::string& bucket, const std::string& name, std::chrono::seconds age);
  std::size_t object_count(const std::string& bucket);
  // Uploads in parts that are neither completed nor aborted (S3 multipart uploads, GCS resumable sessions).
  int open_uploads();
  // Blobs with uncommitted Azure blocks.
  int blobs_with_uncommitted_blocks();

  std::vector<SeenRequest> requests();
  void clear_requests();

  // --- credentials -----------------------------------------------------------------------------------------------

  // S3: the secret access key of each access key id that signs requests (a default pair is known from the start:
  // k_s3_key_id / k_s3_secret).
  void add_s3_key(const std::string& key_id, const std::string& secret);
  // S3: requests carrying this session token are answered 400 ExpiredToken.
  void expire_session_token(const std::string& token);
  // Azure: the account key (base64, as the portal shows it) that SharedKey signatures are checked against.
  void set_azure_account_key(const std::string& key_base64);
  // GCS: every request must carry a bearer token issued at /token (Azure always requires a token or SharedKey).
  void require_token(bool on);
  void revoke_tokens();
  void set_token_lifetime(std::chrono::seconds lifetime);
  int tokens_issued();

  // --- knobs (set between requests, or from a hook) ----------------------------------------------------------

  // Preconditions (If-None-Match, If-Match, ifGenerationMatch) are ignored, as some emulators ignore them.
  void set_ignore_preconditions(bool on);
  // Every list page holds at most this many objects.
  void set_page_size(std::size_t size);
  // Read answers carry the object's custom metadata (x-amz-meta-*, x-ms-meta-*, x-goog-meta-*). On by default for
  // S3 and Azure, as the services do; off for GCS, as the firebase emulator (GCS's media answers carry it).
  void set_metadata_in_reads(bool on);
  // GCS: the chunk number `n` (1-based, over every session, status queries excluded) persists only half of the
  // bytes it brings (rounded down to 256 KiB) and then answers 308 (PartFailure::none) or 503 (::unavailable).
  enum class PartFailure { none, unavailable };
  void persist_half_of_chunk(int n, PartFailure failure);
  // The next upload's bytes are damaged on their way in (one byte flipped before the service checks them): a
  // single-request upload, an S3 part, or a GCS chunk.
  void corrupt_next_upload();
  // Upload parts (S3 parts, Azure blocks, GCS chunks) from number `n` on (1-based, counted over every upload) are
  // refused for good: 403, as to a principal without permission.
  void refuse_parts_from(int n);
  // S3: CompleteMultipartUpload answers 200 with <Error><Code>`code`</Code></Error> in its body, as S3 may after it
  // began streaming its answer, and stores nothing.
  void complete_with_error_in_body(const std::string& code);
  void inject(InjectedFault fault);
  // Called (without the lock) before each request is answered, with the request as seen so far; it may change
  // the state through the accessors above (replace an object, revoke tokens).
  void on_request(std::function<void(const SeenRequest&)> hook);

  // For the front ends: the state, locked for the guard's lifetime.
  class Locked {
   public:
    explicit Locked(ObjectStore& store) : lock_(store.mu_), state_(*store.state_) {}
    StoreState& operator*() { return state_; }
    StoreState* operator->() { return &state_; }

   private:
    std::unique_lock<std::mutex> lock_;
    StoreState& state_;
  };
  Locked lock() { return Locked(*this); }
  std::function<void(const SeenRequest&)> hook();

 private:
  const Dialect dialect_;
  std::mutex mu_;
  std::unique_ptr<StoreState> state_;  // guarded by mu_
};

inline constexpr const char* k_s3_key_id = "AKIDFAKESTORE";
inline constexpr const char* k_s3_secret = "fake-store-secret";
inline constexpr const char* k_s3_region = "us-east-1";

class FrontEnd;

// The store with the front end of one dialect on 127.0.0.1.
class FakeCloud : public ObjectStore {
 public:
  explicit FakeCloud(Dialect dialect);
  ~FakeCloud();

  // http://127.0.0.1:<port>
  std::string url() const;
  // What a tier's configuration names: S3's endpoint (url()), GCS's endpoint (url()), Azure's container URL.
  std::string container_url(const std::string& bucket) const;

 private:
  struct Server;
  std::unique_ptr<FrontEnd> front_;
  std::unique_ptr<Server> server_;  // last: stopped first, before the state its handlers use
};

}  // namespace datavo::fakecloud
