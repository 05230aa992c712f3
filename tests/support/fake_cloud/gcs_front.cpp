// The GCS JSON API front end of the fake object store (fake_cloud.hpp says what it serves).
#include <nlohmann/json.hpp>

#include "support/fake_cloud/store_state.hpp"
#include "util/rfc3339.hpp"

namespace datavo::fakecloud {
namespace {

using json = nlohmann::json;

json metadata_json(const std::map<std::string, std::string>& metadata) {
  json out = json::object();
  for (const auto& [name, value] : metadata) out[name] = value;
  return out;
}

std::map<std::string, std::string> metadata_of(const json& resource) {
  std::map<std::string, std::string> out;
  if (!resource.contains("metadata") || !resource["metadata"].is_object()) return out;
  for (const auto& [name, value] : resource["metadata"].items())
    if (value.is_string()) out[name] = value.get<std::string>();
  return out;
}

json resource(const std::string& bucket, const std::string& name, const StoredObject& object) {
  json out = {{"kind", "storage#object"},
              {"bucket", bucket},
              {"name", name},
              {"size", std::to_string(object.bytes.size())},
              {"generation", std::to_string(object.generation)},
              {"crc32c", object.crc32c_base64},
              {"etag", object.etag},
              {"updated", util::format_rfc3339(object.last_modified)}};
  if (!object.md5_base64.empty()) out["md5Hash"] = object.md5_base64;
  if (!object.metadata.empty()) out["metadata"] = metadata_json(object.metadata);
  return out;
}

// The two parts of a multipart/related body: the object resource (JSON) and the bytes, each with its own
// Content-Type; false when the body is not one.
bool split_multipart(const httplib::Request& req, std::string& resource_text, std::string& data) {
  const std::string content_type = req.get_header_value("Content-Type");
  const auto at = content_type.find("boundary=");
  if (at == std::string::npos) return false;
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
    return false;
  }
  resource_text = body.substr(json_start + 4, json_end - json_start - 4);
  data = body.substr(data_start + 4, data_end - data_start - 4);
  return true;
}

class GcsFront final : public FrontEnd {
 public:
  explicit GcsFront(std::string url) : url_(std::move(url)) {}

  void classify(const httplib::Request& req, SeenRequest& seen) const override {
    if (req.method == "POST" && req.path == "/token") {
      seen.op = "Token";
      return;
    }
    const bool upload = req.path.rfind("/upload/storage/v1/b/", 0) == 0;
    const std::string prefix = upload ? "/upload/storage/v1/b/" : "/storage/v1/b/";
    if (req.path.rfind(prefix, 0) != 0) {
      seen.op = "Other";
      return;
    }
    const auto parts = split_path(req.path.substr(prefix.size() - 1), 3);  // bucket, "o", name
    seen.bucket = parts.empty() ? "" : parts[0];
    seen.object = parts.size() > 2 && parts[1] == "o" ? parts[2] : "";
    seen.op = upload ? upload_op(req) : object_op(req, parts.size() == 2 && parts[1] == "o");
  }

  bool authorize(const httplib::Request& req, httplib::Response& res, StoreState& state) const override {
    const std::string authorization = req.get_header_value("Authorization");
    const std::string token = authorization.rfind("Bearer ", 0) == 0 ? authorization.substr(7) : "";
    if (state.require_token && state.valid_tokens.count(token) == 0) {
      error(res, 401, "", "Invalid Credentials");
      return false;
    }
    return true;
  }

  void handle(const httplib::Request& req, httplib::Response& res, StoreState& state,
              const SeenRequest& seen) override {
    const std::string& op = seen.op;
    if (op == "Token") return token(req, res, state);
    if (op == "UploadPart") return chunk(req, res, state);
    if (op == "AbortMultipartUpload") return cancel(req, res, state);
    if (!state.has_bucket(seen.bucket)) return error(res, 404, "", "The specified bucket does not exist.");
    if (op == "ListObjects") return list(res, state, seen);
    if (op == "GetObject" || op == "HeadObject") return get(req, res, state, seen);
    if (op == "DeleteObject") return remove(res, state, seen);
    if (op == "PutObject") return multipart(req, res, state, seen);
    if (op == "CreateMultipartUpload") return start_session(req, res, state, seen);
    error(res, 400, "", "the fake does not serve " + req.method + " " + req.target);
  }

  void error(httplib::Response& res, int status, const std::string&, const std::string& message) const override {
    res.status = status;
    res.set_content(json{{"error", {{"code", status}, {"message", message}}}}.dump(), "application/json");
  }

 private:
  static std::string upload_op(const httplib::Request& req) {
    if (req.has_param("upload_id")) {
      if (req.method == "PUT") return "UploadPart";
      return req.method == "DELETE" ? "AbortMultipartUpload" : "Other";
    }
    const std::string type = req.has_param("uploadType") ? req.get_param_value("uploadType") : "";
    if (req.method != "POST") return "Other";
    return type == "multipart" ? "PutObject" : type == "resumable" ? "CreateMultipartUpload" : "Other";
  }
  static std::string object_op(const httplib::Request& req, bool listing) {
    if (listing) return req.method == "GET" ? "ListObjects" : "Other";
    if (req.method == "GET")
      return req.has_param("alt") && req.get_param_value("alt") == "media" ? "GetObject" : "HeadObject";
    return req.method == "DELETE" ? "DeleteObject" : "Other";
  }

  void token(const httplib::Request& req, httplib::Response& res, StoreState& state) const {
    httplib::Params form;
    httplib::detail::parse_query_text(req.body, form);
    auto grant = form.find("grant_type");
    if (grant == form.end() || grant->second != "refresh_token") return error(res, 400, "", "invalid_grant");
    res.set_content(json{{"access_token", state.issue_token("ya29.fake-")},
                         {"expires_in", state.token_lifetime.count()},
                         {"token_type", "Bearer"}}
                        .dump(),
                    "application/json");
  }

  void list(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    bool more = false;
    const auto page =
        list_page(state, seen.bucket, seen.param("prefix"), seen.param("pageToken"), state.page_size, more);
    json items = json::array();
    for (const auto& [name, object] : page) items.push_back(resource(seen.bucket, name, *object));
    json body = {{"kind", "storage#objects"}, {"items", items}};
    if (more) body["nextPageToken"] = page.back().first;
    res.set_content(body.dump(), "application/json");
  }

  void get(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    ObjectPtr object = state.find(seen.bucket, seen.object);
    if (!object) return error(res, 404, "", "No such object: " + seen.bucket + "/" + seen.object);
    if (seen.has("ifGenerationMatch") && !state.ignore_preconditions &&
        seen.param("ifGenerationMatch") != std::to_string(object->generation))
      return error(res, 412, "", "Precondition Failed");
    if (seen.op == "HeadObject") {
      res.set_content(resource(seen.bucket, seen.object, *object).dump(), "application/json");
      return;
    }
    res.set_header("x-goog-generation", std::to_string(object->generation));
    res.set_header("x-goog-hash", "md5=" + object->md5_base64);
    if (state.metadata_in_reads)
      for (const auto& [name, value] : object->metadata) res.set_header("x-goog-meta-" + name, value);
    if (!serve_bytes(res, object->bytes, req.get_header_value("Range")))
      error(res, 416, "", "Requested range not satisfiable");
  }

  void remove(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    if (state.buckets[seen.bucket].erase(seen.object) == 0)
      return error(res, 404, "", "No such object: " + seen.bucket + "/" + seen.object);
    res.status = 204;
  }

  // Whether the checksum `field` of `resource` matches `actual`; answers 400 when it does not.
  bool checksum_matches(httplib::Response& res, const json& sent, const char* field, const char* what,
                        const std::string& actual) const {
    if (!sent.contains(field) || sent[field].get<std::string>() == actual) return true;
    error(res, 400, "",
          std::string("Provided ") + what + " \"" + sent[field].get<std::string>() + "\" doesn't match calculated " +
              what + " \"" + actual + "\".");
    return false;
  }

  void multipart(const httplib::Request& req, httplib::Response& res, StoreState& state,
                 const SeenRequest& seen) const {
    std::string resource_text, data;
    if (!split_multipart(req, resource_text, data))
      return error(res, 400, "", "Failed to parse multipart request body part. Missing content type.");
    auto sent = json::parse(resource_text, nullptr, false);
    if (!sent.is_object() || !sent.contains("name")) return error(res, 400, "", "no object name");
    state.maybe_corrupt(data);
    if (!checksum_matches(res, sent, "md5Hash", "MD5 hash", md5_base64(data)) ||
        !checksum_matches(res, sent, "crc32c", "CRC32C", crc32c_base64_of(data)))
      return;
    const std::string name = sent["name"].get<std::string>();
    if (state.refuses_create(seen.bucket, name, seen.param("ifGenerationMatch") == "0"))
      return error(res, 412, "", "Precondition Failed");
    StoredObject object = object_of(std::move(data), metadata_of(sent));
    if (sent.contains("md5Hash")) object.client_checksums["md5"] = sent["md5Hash"].get<std::string>();
    if (sent.contains("crc32c")) object.client_checksums["crc32c"] = sent["crc32c"].get<std::string>();
    res.set_content(resource(seen.bucket, name, *state.store(seen.bucket, name, std::move(object))).dump(),
                    "application/json");
  }

  void start_session(const httplib::Request& req, httplib::Response& res, StoreState& state,
                     const SeenRequest& seen) const {
    auto sent = json::parse(req.body, nullptr, false);
    if (!sent.is_object() || !sent.contains("name")) return error(res, 400, "", "no object name");
    Upload session;
    session.bucket = seen.bucket;
    session.name = sent["name"].get<std::string>();
    session.if_absent = seen.param("ifGenerationMatch") == "0";
    if (state.refuses_create(seen.bucket, session.name, session.if_absent))
      return error(res, 412, "", "Precondition Failed");
    session.metadata = metadata_of(sent);
    const std::string length = req.get_header_value("X-Upload-Content-Length");
    session.total = length.empty() ? 0 : std::stoull(length);
    const std::string id = "session-" + std::to_string(++state.upload_count);
    state.uploads[id] = std::move(session);
    res.set_header("Location",
                   url_ + "/upload/storage/v1/b/" + seen.bucket + "/o?uploadType=resumable&upload_id=" + id);
    res.set_content("", "text/plain");
  }

  static void persisted(httplib::Response& res, const Upload& session) {
    res.status = 308;
    if (!session.data.empty()) res.set_header("Range", "bytes=0-" + std::to_string(session.data.size() - 1));
  }

  void chunk(const httplib::Request& req, httplib::Response& res, StoreState& state) const;
  void finalize(const httplib::Request& req, httplib::Response& res, StoreState& state, Upload& session) const;

  void cancel(const httplib::Request& req, httplib::Response& res, StoreState& state) const {
    auto it = state.uploads.find(req.get_param_value("upload_id"));
    if (it == state.uploads.end()) return error(res, 404, "", "No such upload session");
    if (it->second.status == Upload::Status::open) it->second.status = Upload::Status::aborted;
    res.status = 499;
  }

  const std::string url_;
};

// A chunk "Content-Range: bytes a-b/total" of a session, or a status query "bytes */total".
void GcsFront::chunk(const httplib::Request& req, httplib::Response& res, StoreState& state) const {
  auto it = state.uploads.find(req.get_param_value("upload_id"));
  if (it == state.uploads.end() || it->second.status == Upload::Status::aborted)
    return error(res, 404, "", "No such upload session");
  Upload& session = it->second;
  const std::string range = req.get_header_value("Content-Range");
  if (range.rfind("bytes ", 0) != 0) return error(res, 400, "", "no Content-Range");
  const auto slash = range.find('/');
  if (std::stoull(range.substr(slash + 1)) != session.total) return error(res, 400, "", "the total changed");
  if (session.status == Upload::Status::completed) {
    res.set_content(resource(session.bucket, session.name, *state.find(session.bucket, session.name)).dump(),
                    "application/json");
    return;
  }
  if (range.substr(6, 1) == "*") return persisted(res, session);
  const auto dash = range.find('-');
  const std::uint64_t first = std::stoull(range.substr(6, dash - 6));
  const std::uint64_t last = std::stoull(range.substr(dash + 1, slash - dash - 1));
  if (last + 1 - first != req.body.size()) return error(res, 400, "", "the body is not the Content-Range");
  if (first > session.data.size()) return error(res, 400, "", "the upload offset exceeds the uploaded size");
  if (last + 1 != session.total && (last + 1) % k_chunk_granularity != 0)
    return error(res, 400, "", "a chunk that is not the last must end on a multiple of 256 KiB");
  const int number = state.parts_seen + 1;
  if (state.count_part_and_refuse()) return error(res, 403, "", "does not have storage.objects.create access");
  std::string fresh = req.body.substr(session.data.size() - first);  // bytes it already holds are ignored
  state.maybe_corrupt(fresh);
  if (number == state.half_chunk) {
    const std::uint64_t keep = (fresh.size() / 2) / k_chunk_granularity * k_chunk_granularity;
    session.data += fresh.substr(0, keep);
    if (state.half_chunk_failure == ObjectStore::PartFailure::unavailable)
      return error(res, 503, "", "Service Unavailable (after persisting part of the chunk)");
    return persisted(res, session);
  }
  session.data += fresh;
  if (session.data.size() < session.total) return persisted(res, session);
  finalize(req, res, state, session);
}

void GcsFront::finalize(const httplib::Request& req, httplib::Response& res, StoreState& state, Upload& session) const {
  if (state.refuses_create(session.bucket, session.name, session.if_absent)) {
    session.status = Upload::Status::aborted;
    return error(res, 412, "", "Precondition Failed");
  }
  // X-Goog-Hash: crc32c=<base64> on the request that completes the object: checked before it is finalised.
  const std::string hash = req.get_header_value("X-Goog-Hash");
  std::string given;
  if (const auto at = hash.find("crc32c="); at != std::string::npos) {
    given = hash.substr(at + 7, hash.find(',', at) - at - 7);
    if (given != crc32c_base64_of(session.data)) {
      session.status = Upload::Status::aborted;
      return error(res, 400, "",
                   "Provided CRC32C \"" + given + "\" doesn't match calculated CRC32C \"" +
                       crc32c_base64_of(session.data) + "\".");
    }
  }
  session.status = Upload::Status::completed;
  StoredObject object = object_of(std::move(session.data), session.metadata);
  if (!given.empty()) object.client_checksums["crc32c"] = given;
  ObjectPtr stored = state.store(session.bucket, session.name, std::move(object));
  res.set_content(resource(session.bucket, session.name, *stored).dump(), "application/json");
}

}  // namespace

std::unique_ptr<FrontEnd> make_gcs_front(std::string url) { return std::make_unique<GcsFront>(std::move(url)); }

}  // namespace datavo::fakecloud
