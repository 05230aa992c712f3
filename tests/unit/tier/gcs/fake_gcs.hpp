// An in-process fake of the GCS JSON API (cpp-httplib on 127.0.0.1) for the tests of the GCS request builder
// (test_gcs_tier.cpp). It implements what the firebase-tools emulator of the e2e suites does not (docs/config.md,
// "GCS tiers"), the way GCS documents it:
//   - preconditions: ifGenerationMatch=0 on uploads (412 when the object exists, checked at the initiation of a
//     resumable upload and again when it finalizes), ifGenerationMatch=<generation> on reads (412 when the object
//     is another generation);
//   - chunked resumable uploads: a session URI from the initiation (Location), chunks with "Content-Range: bytes
//     a-b/total", 308 with "Range: bytes=0-N" for what it holds, the status query "Content-Range: bytes */total",
//     chunks that must be multiples of 256 KiB (but the last), DELETE of the session (499);
//   - userProject (recorded with every request), bucket-missing and object-missing 404s told apart by their
//     messages, md5Hash and crc32c checked on multipart uploads and X-Goog-Hash's crc32c on the request that
//     completes a resumable one (400 when they do not match the bytes);
//   - a bearer token checked on every request (when a test asks), from the refresh-token grant at /token.
// Its knobs make it fail on purpose: a chunk persisted in part (308 short of its end, or 503 after persisting half
// of it), a hook that replaces an object between the ranges of a read, stored objects whose md5Hash lies.
//
// Thread safety: the handlers run on the server's threads; every piece of state is guarded by one mutex, and the
// accessors take it.
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tier/cloud/checksums.hpp"
#include "util/base64.hpp"

namespace datavo::gcstest {

inline constexpr std::uint64_t k_chunk_granularity = 256 * 1024;

struct FakeObject {
  std::string bytes;
  std::int64_t generation = 0;
  nlohmann::json metadata;    // the custom metadata; null when there is none
  std::string md5_base64;     // md5Hash as GCS reports it; empty: none (a composite object)
  std::string crc32c_base64;  // crc32c as GCS reports it
};

// One request as the fake saw it.
struct SeenRequest {
  std::string method;
  std::string path;                          // decoded
  std::map<std::string, std::string> query;  // decoded
  std::string range;                         // the Range header
  std::string content_range;                 // the Content-Range header
  std::string content_type;                  // the Content-Type header, empty when absent
  std::string goog_hash;                     // the X-Goog-Hash header, empty when absent
  std::string authorization;                 // the Authorization header
  std::size_t body_bytes = 0;
  int status = 0;

  bool has(const std::string& name) const { return query.count(name) > 0; }
  std::string param(const std::string& name) const { return has(name) ? query.at(name) : std::string(); }
  // A chunk of a resumable upload (not a status query): its first byte, else -1.
  long long chunk_start() const {
    if (method != "PUT" || content_range.rfind("bytes ", 0) != 0 || content_range.find('*') != std::string::npos)
      return -1;
    return std::stoll(content_range.substr(6));
  }
};

class FakeGcs {
 public:
  FakeGcs() {
    // One request per connection: a keep-alive connection in a client's pool would hold stop() for 5 s.
    server_.set_keep_alive_max_count(1);
    // Ranges are applied here, not by httplib (which would also slice JSON bodies).
    server_.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
      const_cast<httplib::Request&>(req).ranges.clear();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Post("/token", [this](const httplib::Request& req, httplib::Response& res) { token(req, res); });
    server_.Get(R"(/storage/v1/b/([^/]+)/o)", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string& bucket) { list(req, res, bucket); });
    });
    server_.Get(R"(/storage/v1/b/([^/]+)/o/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string& bucket) { get(req, res, bucket, req.matches[2].str()); });
    });
    server_.Delete(R"(/storage/v1/b/([^/]+)/o/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string& bucket) { remove(res, bucket, req.matches[2].str()); });
    });
    server_.Post(R"(/upload/storage/v1/b/([^/]+)/o)", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string& bucket) { upload(req, res, bucket); });
    });
    server_.Put(R"(/upload/storage/v1/b/([^/]+)/o)", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string&) { chunk(req, res); });
    });
    server_.Delete(R"(/upload/storage/v1/b/([^/]+)/o)", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, [&](const std::string&) { cancel(req, res); });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeGcs() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeGcs(const FakeGcs&) = delete;
  FakeGcs& operator=(const FakeGcs&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // --- state -----------------------------------------------------------------------------------------------------

  void add_bucket(const std::string& bucket) {
    std::lock_guard lock(mu_);
    buckets_[bucket];
  }
  // Stores an object as another client would; `md5_base64` empty: the true MD5 of `bytes`.
  void put_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                  nlohmann::json metadata = nullptr, std::string md5_base64 = {}) {
    std::lock_guard lock(mu_);
    store(bucket, name, bytes, std::move(metadata), std::move(md5_base64));
  }
  // The object resource (JSON) of the last uploadType=multipart request, as it was sent.
  nlohmann::json last_multipart_resource() {
    std::lock_guard lock(mu_);
    return last_multipart_resource_;
  }
  // An object as a composite upload leaves it: no md5Hash, and the given crc32c.
  void put_composite_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                            std::string crc32c_base64) {
    std::lock_guard lock(mu_);
    FakeObject& stored = store(bucket, name, bytes, nullptr, {});
    stored.md5_base64.clear();
    stored.crc32c_base64 = std::move(crc32c_base64);
  }
  std::optional<FakeObject> object(const std::string& bucket, const std::string& name) {
    std::lock_guard lock(mu_);
    auto b = buckets_.find(bucket);
    if (b == buckets_.end()) return std::nullopt;
    auto o = b->second.find(name);
    if (o == b->second.end()) return std::nullopt;
    return o->second;
  }
  std::size_t object_count(const std::string& bucket) {
    std::lock_guard lock(mu_);
    return buckets_.count(bucket) ? buckets_[bucket].size() : 0;
  }
  std::vector<SeenRequest> requests() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  void clear_requests() {
    std::lock_guard lock(mu_);
    seen_.clear();
  }
  // Resumable sessions that are neither finished nor cancelled.
  int open_sessions() {
    std::lock_guard lock(mu_);
    int open = 0;
    for (const auto& [id, session] : sessions_) open += session.done || session.cancelled ? 0 : 1;
    return open;
  }
  int tokens_issued() {
    std::lock_guard lock(mu_);
    return tokens_issued_;
  }

  // --- knobs (set between requests, or from a hook) ----------------------------------------------------------------

  // Media responses carry x-goog-meta-* headers, as GCS's do (the emulator's do not).
  void set_metadata_headers(bool on) {
    std::lock_guard lock(mu_);
    metadata_headers_ = on;
  }
  // Preconditions are ignored, as the emulator ignores them.
  void set_ignore_preconditions(bool on) {
    std::lock_guard lock(mu_);
    ignore_preconditions_ = on;
  }
  // Every list page holds at most this many objects.
  void set_page_size(std::size_t size) {
    std::lock_guard lock(mu_);
    page_size_ = size;
  }
  // The chunk PUT number `n` (1-based, counted over every session, status queries excluded) persists only half of
  // the bytes it brings (rounded down to 256 KiB) and then answers 308 (`fail` false) or 503 (`fail` true).
  void persist_half_of_chunk(int n, bool fail) {
    std::lock_guard lock(mu_);
    half_chunk_ = n;
    half_chunk_fails_ = fail;
  }
  // The next upload's bytes are damaged on their way in (one byte of a multipart body, or of a resumable chunk,
  // flipped before GCS computes their checksums).
  void corrupt_next_upload() {
    std::lock_guard lock(mu_);
    corrupt_next_upload_ = true;
  }
  // Chunk PUTs from number `n` on (as above) are refused for good: 403, as to a principal without permission.
  void refuse_chunks_from(int n) {
    std::lock_guard lock(mu_);
    refuse_chunks_from_ = n;
  }
  // Every request must carry "Authorization: Bearer <a token issued at /token and not revoked>", else 401.
  void require_token(bool on) {
    std::lock_guard lock(mu_);
    require_token_ = on;
  }
  void revoke_tokens() {
    std::lock_guard lock(mu_);
    valid_tokens_.clear();
  }
  // Tokens from /token live this long (expires_in).
  void set_token_lifetime(std::chrono::seconds lifetime) {
    std::lock_guard lock(mu_);
    token_lifetime_ = lifetime;
  }
  // Called (without the lock) before each request is answered, with the request as seen so far; it may change
  // the state through the accessors above (replace an object, revoke tokens).
  void on_request(std::function<void(const SeenRequest&)> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }

 private:
  struct Session {
    std::string bucket, name;
    nlohmann::json metadata;
    std::uint64_t total = 0;
    std::string data;
    bool if_absent = false;  // ifGenerationMatch=0
    bool done = false, cancelled = false;
  };

  static std::string true_md5(const std::string& bytes) { return util::base64_encode(cloud::md5_of(bytes)); }
  static std::string true_crc32c(const std::string& bytes) {
    return cloud::crc32c_base64(cloud::crc32c_extend(0, bytes.data(), bytes.size()));
  }

  // REQUIRES: mu_ held.
  FakeObject& store(const std::string& bucket, const std::string& name, const std::string& bytes,
                    nlohmann::json metadata, std::string md5_base64) {
    FakeObject& object = buckets_[bucket][name];
    object.bytes = bytes;
    object.generation = next_generation_++;
    object.metadata = std::move(metadata);
    object.md5_base64 = md5_base64.empty() ? true_md5(bytes) : std::move(md5_base64);
    object.crc32c_base64 = true_crc32c(bytes);
    return object;
  }

  nlohmann::json resource(const std::string& bucket, const std::string& name, const FakeObject& object) const {
    nlohmann::json out = {{"kind", "storage#object"},
                          {"bucket", bucket},
                          {"name", name},
                          {"size", std::to_string(object.bytes.size())},
                          {"generation", std::to_string(object.generation)},
                          {"crc32c", object.crc32c_base64},
                          {"etag", "CN" + std::to_string(object.generation) + "="}};
    if (!object.md5_base64.empty()) out["md5Hash"] = object.md5_base64;
    if (!object.metadata.is_null()) out["metadata"] = object.metadata;
    return out;
  }

  static void json_error(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(nlohmann::json{{"error", {{"code", status}, {"message", message}}}}.dump(), "application/json");
  }
  static void no_bucket(httplib::Response& res) { json_error(res, 404, "The specified bucket does not exist."); }

  // Records the request, runs the hook, checks the token, then `body(bucket)` with the lock held.
  template <typename Body>
  void handle(const httplib::Request& req, httplib::Response& res, Body body) {
    SeenRequest seen;
    seen.method = req.method;
    seen.path = req.path;
    for (const auto& [key, value] : req.params) seen.query[key] = value;
    seen.range = req.get_header_value("Range");
    seen.content_range = req.get_header_value("Content-Range");
    seen.content_type = req.get_header_value("Content-Type");
    seen.goog_hash = req.get_header_value("X-Goog-Hash");
    seen.authorization = req.get_header_value("Authorization");
    seen.body_bytes = req.body.size();
    std::function<void(const SeenRequest&)> hook;
    {
      std::lock_guard lock(mu_);
      hook = hook_;
    }
    if (hook) hook(seen);
    {
      std::lock_guard lock(mu_);
      const std::string token = seen.authorization.rfind("Bearer ", 0) == 0 ? seen.authorization.substr(7) : "";
      if (require_token_ && valid_tokens_.count(token) == 0) {
        json_error(res, 401, "Invalid Credentials");
      } else {
        body(req.matches.size() > 1 ? req.matches[1].str() : std::string());
      }
      seen.status = res.status == -1 ? 200 : res.status;
      seen_.push_back(std::move(seen));
    }
  }

  void token(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    httplib::Params form;
    httplib::detail::parse_query_text(req.body, form);
    auto grant = form.find("grant_type");
    if (grant == form.end() || grant->second != "refresh_token") return json_error(res, 400, "invalid_grant");
    const std::string token = "ya29.fake-" + std::to_string(++tokens_issued_);
    valid_tokens_.insert(token);
    res.set_content(
        nlohmann::json{{"access_token", token}, {"expires_in", token_lifetime_.count()}, {"token_type", "Bearer"}}
            .dump(),
        "application/json");
  }

  // REQUIRES: mu_ held (all below).
  void list(const httplib::Request& req, httplib::Response& res, const std::string& bucket) {
    auto b = buckets_.find(bucket);
    if (b == buckets_.end()) return no_bucket(res);
    const std::string prefix = req.has_param("prefix") ? req.get_param_value("prefix") : "";
    const std::string after = req.has_param("pageToken") ? req.get_param_value("pageToken") : "";
    nlohmann::json items = nlohmann::json::array();
    std::string last;
    bool more = false;
    for (const auto& [name, object] : b->second) {
      if (name.rfind(prefix, 0) != 0 || (!after.empty() && name <= after)) continue;
      if (items.size() == page_size_) {
        more = true;
        break;
      }
      items.push_back(resource(bucket, name, object));
      last = name;
    }
    nlohmann::json page = {{"kind", "storage#objects"}, {"items", items}};
    if (more) page["nextPageToken"] = last;
    res.set_content(page.dump(), "application/json");
  }

  void get(const httplib::Request& req, httplib::Response& res, const std::string& bucket, const std::string& name) {
    auto b = buckets_.find(bucket);
    if (b == buckets_.end()) return no_bucket(res);
    auto o = b->second.find(name);
    if (o == b->second.end()) return json_error(res, 404, "No such object: " + bucket + "/" + name);
    const FakeObject& object = o->second;
    if (req.has_param("ifGenerationMatch") && !ignore_preconditions_ &&
        req.get_param_value("ifGenerationMatch") != std::to_string(object.generation)) {
      return json_error(res, 412, "Precondition Failed");
    }
    if (!req.has_param("alt") || req.get_param_value("alt") != "media") {
      res.set_content(resource(bucket, name, object).dump(), "application/json");
      return;
    }
    res.set_header("x-goog-generation", std::to_string(object.generation));
    res.set_header("x-goog-hash", "md5=" + object.md5_base64);
    res.set_header("Accept-Ranges", "bytes");
    if (metadata_headers_ && object.metadata.is_object()) {
      for (const auto& [key, value] : object.metadata.items()) {
        if (value.is_string()) res.set_header("x-goog-meta-" + key, value.get<std::string>());
      }
    }
    const std::string range = req.get_header_value("Range");
    const std::uint64_t size = object.bytes.size();
    if (range.rfind("bytes=", 0) != 0) {
      res.set_content(object.bytes, "application/octet-stream");
      return;
    }
    const auto dash = range.find('-');
    const std::uint64_t first = std::stoull(range.substr(6, dash - 6));
    std::uint64_t last = dash + 1 < range.size() ? std::stoull(range.substr(dash + 1)) : size - 1;
    if (first >= size) {
      res.set_header("Content-Range", "bytes */" + std::to_string(size));
      return json_error(res, 416, "Requested range not satisfiable");
    }
    last = std::min(last, size - 1);
    res.status = 206;
    res.set_header("Content-Range",
                   "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size));
    res.set_content(object.bytes.substr(first, last - first + 1), "application/octet-stream");
  }

  void remove(httplib::Response& res, const std::string& bucket, const std::string& name) {
    auto b = buckets_.find(bucket);
    if (b == buckets_.end()) return no_bucket(res);
    if (b->second.erase(name) == 0) return json_error(res, 404, "No such object: " + bucket + "/" + name);
    res.status = 204;
  }

  bool exists(const std::string& bucket, const std::string& name) {
    auto b = buckets_.find(bucket);
    return b != buckets_.end() && b->second.count(name) > 0;
  }

  void upload(const httplib::Request& req, httplib::Response& res, const std::string& bucket) {
    if (buckets_.count(bucket) == 0) return no_bucket(res);
    const std::string type = req.has_param("uploadType") ? req.get_param_value("uploadType") : "";
    const bool if_absent = req.has_param("ifGenerationMatch") && req.get_param_value("ifGenerationMatch") == "0";
    if (type == "multipart") {
      // multipart/related: the object resource (JSON), then the bytes; each part with its own Content-Type.
      const std::string content_type = req.get_header_value("Content-Type");
      const auto at = content_type.find("boundary=");
      if (at == std::string::npos) return json_error(res, 400, "no boundary");
      const std::string boundary = "--" + content_type.substr(at + 9);
      const std::string& body = req.body;
      const auto json_start = body.find("\r\n\r\n");
      const auto json_end = body.find("\r\n" + boundary, json_start);
      const auto data_start = body.find("\r\n\r\n", json_end + 2);
      const auto data_end = body.rfind("\r\n" + boundary + "--");
      if (body.rfind(boundary, 0) != 0 || json_start == std::string::npos || json_end == std::string::npos ||
          data_start == std::string::npos || data_end == std::string::npos || data_end < data_start + 4 ||
          body.substr(json_end + 2 + boundary.size(), 2) != "\r\n" ||
          body.substr(0, json_start).find("Content-Type:") == std::string::npos ||
          body.substr(json_end, data_start - json_end).find("Content-Type:") == std::string::npos) {
        return json_error(res, 400, "Failed to parse multipart request body part. Missing content type.");
      }
      auto object = nlohmann::json::parse(body.substr(json_start + 4, json_end - json_start - 4), nullptr, false);
      if (!object.is_object() || !object.contains("name")) return json_error(res, 400, "no object name");
      last_multipart_resource_ = object;
      std::string data = body.substr(data_start + 4, data_end - data_start - 4);
      if (corrupt_next_upload_ && !data.empty()) data[data.size() / 2] ^= 0x20;
      corrupt_next_upload_ = false;
      if (object.contains("md5Hash") && object["md5Hash"].get<std::string>() != true_md5(data)) {
        return json_error(res, 400,
                          "Provided MD5 hash \"" + object["md5Hash"].get<std::string>() +
                              "\" doesn't match calculated MD5 hash \"" + true_md5(data) + "\".");
      }
      if (object.contains("crc32c") && object["crc32c"].get<std::string>() != true_crc32c(data)) {
        return json_error(res, 400,
                          "Provided CRC32C \"" + object["crc32c"].get<std::string>() +
                              "\" doesn't match calculated CRC32C \"" + true_crc32c(data) + "\".");
      }
      const std::string name = object["name"].get<std::string>();
      if (if_absent && !ignore_preconditions_ && exists(bucket, name))
        return json_error(res, 412, "Precondition Failed");
      const FakeObject& stored =
          store(bucket, name, data, object.contains("metadata") ? object["metadata"] : nlohmann::json(nullptr), {});
      res.set_content(resource(bucket, name, stored).dump(), "application/json");
      return;
    }
    if (type == "resumable") {
      auto object = nlohmann::json::parse(req.body, nullptr, false);
      if (!object.is_object() || !object.contains("name")) return json_error(res, 400, "no object name");
      const std::string name = object["name"].get<std::string>();
      if (if_absent && !ignore_preconditions_ && exists(bucket, name))
        return json_error(res, 412, "Precondition Failed");
      Session session;
      session.bucket = bucket;
      session.name = name;
      session.metadata = object.contains("metadata") ? object["metadata"] : nlohmann::json(nullptr);
      session.total =
          req.has_header("X-Upload-Content-Length") ? std::stoull(req.get_header_value("X-Upload-Content-Length")) : 0;
      session.if_absent = if_absent;
      const std::string id = "session-" + std::to_string(++session_count_);
      sessions_[id] = std::move(session);
      res.set_header("Location", url() + "/upload/storage/v1/b/" + bucket + "/o?uploadType=resumable&upload_id=" + id);
      res.set_content("", "text/plain");
      return;
    }
    json_error(res, 400, "unknown uploadType " + type);
  }

  static void persisted_range(httplib::Response& res, const Session& session) {
    if (!session.data.empty()) res.set_header("Range", "bytes=0-" + std::to_string(session.data.size() - 1));
  }

  void chunk(const httplib::Request& req, httplib::Response& res) {
    auto s = sessions_.find(req.has_param("upload_id") ? req.get_param_value("upload_id") : "");
    if (s == sessions_.end() || s->second.cancelled) return json_error(res, 404, "No such upload session");
    Session& session = s->second;
    const std::string range = req.get_header_value("Content-Range");
    if (range.rfind("bytes ", 0) != 0) return json_error(res, 400, "no Content-Range");
    const auto slash = range.find('/');
    const std::uint64_t total = std::stoull(range.substr(slash + 1));
    if (total != session.total) return json_error(res, 400, "the total changed");
    if (session.done) {
      res.set_content(resource(session.bucket, session.name, buckets_[session.bucket][session.name]).dump(),
                      "application/json");
      return;
    }
    if (range.substr(6, 1) == "*") {  // a status query
      res.status = 308;
      persisted_range(res, session);
      return;
    }
    const auto dash = range.find('-');
    const std::uint64_t first = std::stoull(range.substr(6, dash - 6));
    const std::uint64_t last = std::stoull(range.substr(dash + 1, slash - dash - 1));
    if (last + 1 - first != req.body.size()) return json_error(res, 400, "the body is not the Content-Range");
    if (first > session.data.size()) return json_error(res, 400, "the upload offset exceeds the uploaded size");
    if (last + 1 != total && (last + 1) % k_chunk_granularity != 0) {
      return json_error(res, 400, "a chunk that is not the last must end on a multiple of 256 KiB");
    }
    ++chunks_;
    if (refuse_chunks_from_ > 0 && chunks_ >= refuse_chunks_from_)
      return json_error(res, 403, "does not have storage.objects.create access");
    std::string fresh = req.body.substr(session.data.size() - first);  // bytes it already holds are ignored
    if (corrupt_next_upload_ && !fresh.empty()) fresh[fresh.size() / 2] ^= 0x20;
    corrupt_next_upload_ = false;
    if (chunks_ == half_chunk_) {
      const std::uint64_t keep = (fresh.size() / 2) / k_chunk_granularity * k_chunk_granularity;
      session.data += fresh.substr(0, keep);
      if (half_chunk_fails_) return json_error(res, 503, "Service Unavailable (after persisting part of the chunk)");
      res.status = 308;
      persisted_range(res, session);
      return;
    }
    session.data += fresh;
    if (session.data.size() < total) {
      res.status = 308;
      persisted_range(res, session);
      return;
    }
    if (session.if_absent && !ignore_preconditions_ && exists(session.bucket, session.name)) {
      session.cancelled = true;
      return json_error(res, 412, "Precondition Failed");
    }
    // X-Goog-Hash: crc32c=<base64> on the request that completes the object: checked before it is finalised.
    const std::string hash = req.get_header_value("X-Goog-Hash");
    if (const auto at = hash.find("crc32c="); at != std::string::npos) {
      const std::string given = hash.substr(at + 7, hash.find(',', at) - at - 7);
      if (given != true_crc32c(session.data)) {
        session.cancelled = true;
        return json_error(
            res, 400,
            "Provided CRC32C \"" + given + "\" doesn't match calculated CRC32C \"" + true_crc32c(session.data) + "\".");
      }
    }
    session.done = true;
    const FakeObject& stored = store(session.bucket, session.name, session.data, session.metadata, {});
    res.set_content(resource(session.bucket, session.name, stored).dump(), "application/json");
  }

  void cancel(const httplib::Request& req, httplib::Response& res) {
    auto s = sessions_.find(req.has_param("upload_id") ? req.get_param_value("upload_id") : "");
    if (s == sessions_.end()) return json_error(res, 404, "No such upload session");
    s->second.cancelled = true;
    res.status = 499;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;

  std::mutex mu_;
  std::map<std::string, std::map<std::string, FakeObject>> buckets_;  // guarded by mu_, as is all below
  std::map<std::string, Session> sessions_;
  std::vector<SeenRequest> seen_;
  std::int64_t next_generation_ = 1000;
  int session_count_ = 0;
  int chunks_ = 0;
  int half_chunk_ = 0;
  bool half_chunk_fails_ = false;
  bool corrupt_next_upload_ = false;
  nlohmann::json last_multipart_resource_;
  int refuse_chunks_from_ = 0;
  bool metadata_headers_ = false;
  bool ignore_preconditions_ = false;
  std::size_t page_size_ = 1000;
  bool require_token_ = false;
  std::set<std::string> valid_tokens_;
  int tokens_issued_ = 0;
  std::chrono::seconds token_lifetime_{3600};
  std::function<void(const SeenRequest&)> hook_;
};

}  // namespace datavo::gcstest
