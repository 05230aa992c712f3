// The inside of the fake object store (fake_cloud.hpp), for its front ends only: the state they work on with the
// store's mutex held, the interface each dialect's front end implements, and the helpers the three share.
//
// Thread safety: everything in StoreState is guarded by the store's mutex (ObjectStore::Locked); FrontEnd methods
// are called with it held, except classify().
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/fake_cloud/fake_cloud.hpp"

namespace datavo::fakecloud {

using ObjectPtr = std::shared_ptr<const StoredObject>;

// An upload in parts: an S3 multipart upload (parts by number) or a GCS resumable session (bytes in order).
struct Upload {
  enum class Status { open, completed, aborted };
  std::string bucket, name;
  std::map<std::string, std::string> metadata;
  std::map<int, std::string> parts;           // S3: part number -> bytes
  std::map<int, std::string> part_checksums;  // S3: part number -> the x-amz-checksum-sha256 it came with
  std::string data;                           // GCS: the bytes persisted so far
  std::uint64_t total = 0;                    // GCS: the object's size, from X-Upload-Content-Length
  bool if_absent = false;                     // a conditional create
  Status status = Status::open;
};

struct ArmedFault {
  InjectedFault fault;
  int matched = 0;
};

struct StoreState {
  explicit StoreState(Dialect d);

  // --- objects ---
  const Dialect dialect;
  std::map<std::string, std::map<std::string, ObjectPtr>> buckets;
  std::map<std::string, Upload> uploads;  // by id
  // Azure: the uncommitted blocks of each blob, "<container>/<blob>" -> block id -> bytes.
  std::map<std::string, std::map<std::string, std::string>> blocks;
  std::vector<SeenRequest> seen;
  std::int64_t next_generation = 1000;
  int upload_count = 0;
  int parts_seen = 0;

  // --- credentials ---
  std::map<std::string, std::string> s3_keys;  // access key id -> secret
  std::set<std::string> expired_session_tokens;
  std::string azure_key;  // decoded; empty: SharedKey is refused
  bool require_token = false;
  std::set<std::string> valid_tokens;
  int tokens_issued = 0;
  std::chrono::seconds token_lifetime{3600};

  // --- knobs ---
  bool ignore_preconditions = false;
  std::size_t page_size = 1000;
  bool metadata_in_reads = true;
  int half_chunk = 0;
  ObjectStore::PartFailure half_chunk_failure = ObjectStore::PartFailure::none;
  bool corrupt_next_upload = false;
  int refuse_parts_from = 0;
  std::string complete_error_code;
  std::vector<ArmedFault> faults;
  std::function<void(const SeenRequest&)> hook;

  bool has_bucket(const std::string& bucket) const { return buckets.count(bucket) > 0; }
  ObjectPtr find(const std::string& bucket, const std::string& name) const;
  // Whether a conditional create (`if_absent`) of `name` must be refused: the object exists and preconditions are
  // honoured.
  bool refuses_create(const std::string& bucket, const std::string& name, bool if_absent) const;
  // Stores `object` and returns it: its generation and last_modified are set here, and its ETag when it has none.
  ObjectPtr store(const std::string& bucket, const std::string& name, StoredObject object);
  // Applies corrupt_next_upload to bytes that just arrived.
  void maybe_corrupt(std::string& bytes);
  // Counts an upload part; true when refuse_parts_from refuses it.
  bool count_part_and_refuse();
  // The fault to answer `seen` with, if one is armed for it.
  const InjectedFault* fault_for(const SeenRequest& seen);
  // A fresh bearer token, valid until revoked.
  std::string issue_token(const std::string& prefix);
};

// One dialect's REST API over the store.
class FrontEnd {
 public:
  virtual ~FrontEnd() = default;
  // Sets seen.op, seen.bucket and seen.object (op "Token" for the dialect's token endpoint).
  virtual void classify(const httplib::Request& req, SeenRequest& seen) const = 0;
  // Whether the request's credentials are accepted; when not, the refusal has been answered in `res`.
  virtual bool authorize(const httplib::Request& req, httplib::Response& res, StoreState& state) const = 0;
  // Answers the request (its credentials accepted, or a token request).
  virtual void handle(const httplib::Request& req, httplib::Response& res, StoreState& state,
                      const SeenRequest& seen) = 0;
  // An error in the dialect's own form.
  virtual void error(httplib::Response& res, int status, const std::string& code, const std::string& message) const = 0;
};

// `url`: the server's http://127.0.0.1:<port> (GCS's session URIs start with it).
std::unique_ptr<FrontEnd> make_s3_front();
std::unique_ptr<FrontEnd> make_gcs_front(std::string url);
std::unique_ptr<FrontEnd> make_azure_front();

// --- helpers the front ends share ------------------------------------------------------------------------------

// An object of `bytes` with `metadata`, the MD5 and CRC-32C of the bytes recorded.
StoredObject object_of(std::string bytes, std::map<std::string, std::string> metadata);
std::string md5_base64(const std::string& bytes);
std::string crc32c_base64_of(const std::string& bytes);
std::string md5_hex(const std::string& bytes);
// `text` with &, <, > and " escaped, for the XML answers.
std::string xml_escape(const std::string& text);

// Metadata from the request headers named <prefix><name> (prefix in lower case, e.g. "x-amz-meta-").
std::map<std::string, std::string> metadata_headers(const httplib::Request& req, const std::string& prefix);

// An inclusive byte range of an object of `size` bytes.
struct ByteSpan {
  std::uint64_t first = 0, last = 0;
};
// Parses "bytes=a-b" or "bytes=a-" against `size`. nullopt: not a range (serve the whole object). A range that
// starts at or past the end sets `unsatisfiable`.
std::optional<ByteSpan> parse_range(const std::string& header, std::uint64_t size, bool& unsatisfiable);

// Answers a GET of `bytes` with `range_header` (a header value, "" when none): 200 with all of them, or 206 with
// Content-Range; false when the range starts past the end (the caller answers 416 in its dialect's form).
bool serve_bytes(httplib::Response& res, const std::string& bytes, const std::string& range_header);

// Splits "/a/b/c" into at most `parts` decoded segments (the last keeps its slashes).
std::vector<std::string> split_path(const std::string& path, std::size_t parts);

// The position in a listing after which a page starts: the objects of `bucket` whose names start with `prefix`,
// after `after` (exclusive; "" from the first), at most `limit` of them; `more` says whether some were left out.
std::vector<std::pair<std::string, ObjectPtr>> list_page(const StoreState& state, const std::string& bucket,
                                                         const std::string& prefix, const std::string& after,
                                                         std::size_t limit, bool& more);

}  // namespace datavo::fakecloud
