// The S3 REST front end of the fake object store (fake_cloud.hpp says what it serves).
#include <ctime>

#include "support/fake_cloud/store_state.hpp"
#include "tier/cloud/xml.hpp"
#include "tier/s3/sigv4.hpp"
#include "util/base64.hpp"

namespace datavo::fakecloud {
namespace {

constexpr std::uint64_t k_min_part = 5 * 1024 * 1024;  // S3's smallest part but the last

std::string iso8601(std::chrono::system_clock::time_point when) {
  const time_t seconds = std::chrono::system_clock::to_time_t(when);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  return std::string(buffer, std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S.000Z", &utc));
}

std::string sha256_base64(const std::string& bytes) {
  const std::string hex = s3::sha256_hex(bytes);
  std::string raw;
  for (std::size_t i = 0; i < hex.size(); i += 2) raw += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return util::base64_encode(raw);
}

net::HttpMethod method_of(const std::string& method) {
  if (method == "PUT") return net::HttpMethod::put;
  if (method == "POST") return net::HttpMethod::post;
  if (method == "DELETE") return net::HttpMethod::delete_;
  if (method == "HEAD") return net::HttpMethod::head;
  return net::HttpMethod::get;
}

// The parts of "AWS4-HMAC-SHA256 Credential=<key>/<scope>, SignedHeaders=<...>, Signature=<...>".
struct Authorization {
  std::string key_id, signed_headers, signature;
};
std::optional<Authorization> parse_authorization(const std::string& header) {
  const std::string prefix = "AWS4-HMAC-SHA256 Credential=";
  const auto headers_at = header.find(", SignedHeaders=");
  const auto signature_at = header.find(", Signature=");
  if (header.rfind(prefix, 0) != 0 || headers_at == std::string::npos || signature_at == std::string::npos)
    return std::nullopt;
  const std::string credential = header.substr(prefix.size(), headers_at - prefix.size());
  return Authorization{credential.substr(0, credential.find('/')),
                       header.substr(headers_at + 16, signature_at - headers_at - 16),
                       header.substr(signature_at + 12)};
}

class S3Front final : public FrontEnd {
 public:
  void classify(const httplib::Request& req, SeenRequest& seen) const override {
    const auto parts = split_path(req.path, 2);
    seen.bucket = parts.empty() ? "" : parts[0];
    seen.object = parts.size() > 1 ? parts[1] : "";
    seen.op = seen.object.empty() ? bucket_op(req) : object_op(req);
  }

  bool authorize(const httplib::Request& req, httplib::Response& res, StoreState& state) const override {
    auto authorization = parse_authorization(req.get_header_value("Authorization"));
    if (!authorization) return refuse(res, 403, "AccessDenied", "no SigV4 Authorization header");
    const std::string token = req.get_header_value("x-amz-security-token");
    if (state.expired_session_tokens.count(token))
      return refuse(res, 400, "ExpiredToken", "The provided token has expired.");
    auto secret = state.s3_keys.find(authorization->key_id);
    if (secret == state.s3_keys.end())
      return refuse(res, 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist.");
    const std::string date = req.get_header_value("x-amz-date");
    struct tm utc {};
    if (date.size() != 16 || strptime(date.c_str(), "%Y%m%dT%H%M%SZ", &utc) == nullptr)
      return refuse(res, 403, "AccessDenied", "bad x-amz-date " + date);
    const std::string payload_hash = req.get_header_value("x-amz-content-sha256");
    if (payload_hash != s3::k_unsigned_payload && payload_hash != s3::sha256_hex(req.body))
      return refuse(res, 400, "XAmzContentSHA256Mismatch", "the body does not match x-amz-content-sha256");
    net::HttpHeaders wire;
    for (const auto& [name, value] : req.headers) wire.push_back({name, value});
    s3::AwsCredentials credentials{authorization->key_id, secret->second, token, std::nullopt, "fake"};
    auto expected = s3::sign_request(
        method_of(req.method), "http://" + req.get_header_value("Host") + req.target, wire, payload_hash, credentials,
        s3::SigningScope{k_s3_region, "s3", std::chrono::system_clock::from_time_t(timegm(&utc))});
    if (!expected) return refuse(res, 403, "AccessDenied", expected.error().message);
    if (expected->signed_headers != authorization->signed_headers || expected->signature != authorization->signature)
      return refuse(res, 403, "SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you provided.");
    return true;
  }

  void handle(const httplib::Request& req, httplib::Response& res, StoreState& state,
              const SeenRequest& seen) override {
    if (!state.has_bucket(seen.bucket)) return error(res, 404, "NoSuchBucket", "The specified bucket does not exist");
    const std::string& op = seen.op;
    if (op == "GetObject" || op == "HeadObject") return get(req, res, state, seen);
    if (op == "PutObject") return put(req, res, state, seen);
    if (op == "CreateMultipartUpload") return start_upload(req, res, state, seen);
    if (op == "UploadPart") return upload_part(req, res, state, seen);
    if (op == "CompleteMultipartUpload") return complete(req, res, state, seen);
    if (op == "AbortMultipartUpload") return abort_upload(res, state, seen);
    if (op == "DeleteObject") return remove(res, state, seen);
    if (op == "ListObjects") return list(res, state, seen);
    error(res, 400, "NotImplemented", "the fake does not serve " + req.method + " " + req.target);
  }

  void error(httplib::Response& res, int status, const std::string& code, const std::string& message) const override {
    res.status = status;
    res.set_content("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" +
                        xml_escape(message) + "</Message><RequestId>FAKE</RequestId></Error>",
                    "application/xml");
  }

 private:
  static std::string bucket_op(const httplib::Request& req) {
    if (req.method == "GET" && req.has_param("list-type")) return "ListObjects";
    return "Other";
  }
  static std::string object_op(const httplib::Request& req) {
    const bool upload = req.has_param("uploadId");
    if (req.method == "GET") return "GetObject";
    if (req.method == "HEAD") return "HeadObject";
    if (req.method == "PUT") return upload && req.has_param("partNumber") ? "UploadPart" : "PutObject";
    if (req.method == "POST")
      return req.has_param("uploads") ? "CreateMultipartUpload" : upload ? "CompleteMultipartUpload" : "Other";
    if (req.method == "DELETE") return upload ? "AbortMultipartUpload" : "DeleteObject";
    return "Other";
  }

  bool refuse(httplib::Response& res, int status, const std::string& code, const std::string& message) const {
    error(res, status, code, message);
    return false;
  }

  // The bytes of a PUT as they arrived (corrupt_next_upload applies), checked against the hashes that came with
  // them; false when refused.
  bool received(const httplib::Request& req, httplib::Response& res, StoreState& state, std::string& bytes) const {
    bytes = req.body;
    state.maybe_corrupt(bytes);
    const std::string payload_hash = req.get_header_value("x-amz-content-sha256");
    if (payload_hash != s3::k_unsigned_payload && payload_hash != s3::sha256_hex(bytes))
      return refuse(res, 400, "XAmzContentSHA256Mismatch", "the body does not match x-amz-content-sha256");
    const std::string checksum = req.get_header_value("x-amz-checksum-sha256");
    if (!checksum.empty() && checksum != sha256_base64(bytes))
      return refuse(res, 400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.");
    return true;
  }

  void get(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    ObjectPtr object = state.find(seen.bucket, seen.object);
    if (!object) return error(res, 404, "NoSuchKey", "The specified key does not exist.");
    const std::string if_match = req.get_header_value("If-Match");
    if (!if_match.empty() && !state.ignore_preconditions && if_match != object->etag)
      return error(res, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
    res.set_header("ETag", object->etag);
    if (state.metadata_in_reads)
      for (const auto& [name, value] : object->metadata) res.set_header("x-amz-meta-" + name, value);
    if (auto sha256 = object->client_checksums.find("sha256");
        sha256 != object->client_checksums.end() && req.get_header_value("x-amz-checksum-mode") == "ENABLED") {
      res.set_header("x-amz-checksum-sha256", sha256->second);
    }
    if (req.method == "HEAD") {
      res.set_content(object->bytes, "application/octet-stream");
      return;
    }
    if (!serve_bytes(res, object->bytes, req.get_header_value("Range")))
      error(res, 416, "InvalidRange", "The requested range is not satisfiable");
  }

  void put(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    std::string bytes;
    if (!received(req, res, state, bytes)) return;
    if (state.refuses_create(seen.bucket, seen.object, req.get_header_value("If-None-Match") == "*"))
      return error(res, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
    StoredObject object = object_of(std::move(bytes), metadata_headers(req, "x-amz-meta-"));
    if (req.has_header("x-amz-checksum-sha256"))
      object.client_checksums["sha256"] = req.get_header_value("x-amz-checksum-sha256");
    res.set_header("ETag", state.store(seen.bucket, seen.object, std::move(object))->etag);
  }

  void start_upload(const httplib::Request& req, httplib::Response& res, StoreState& state,
                    const SeenRequest& seen) const {
    const std::string id = "upload-" + std::to_string(++state.upload_count);
    Upload& upload = state.uploads[id];
    upload.bucket = seen.bucket;
    upload.name = seen.object;
    upload.metadata = metadata_headers(req, "x-amz-meta-");
    res.set_content("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult><Bucket>" +
                        seen.bucket + "</Bucket><Key>" + xml_escape(seen.object) + "</Key><UploadId>" + id +
                        "</UploadId></InitiateMultipartUploadResult>",
                    "application/xml");
  }

  Upload* open_upload(const httplib::Request& req, httplib::Response& res, StoreState& state) const {
    auto it = state.uploads.find(req.get_param_value("uploadId"));
    if (it == state.uploads.end() || it->second.status != Upload::Status::open) {
      error(res, 404, "NoSuchUpload", "The specified upload does not exist.");
      return nullptr;
    }
    return &it->second;
  }

  void upload_part(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest&) const {
    Upload* upload = open_upload(req, res, state);
    if (!upload) return;
    if (state.count_part_and_refuse()) return error(res, 403, "AccessDenied", "Access Denied");
    std::string bytes;
    if (!received(req, res, state, bytes)) return;
    const int number = std::stoi(req.get_param_value("partNumber"));
    res.set_header("ETag", "\"" + md5_hex(bytes) + "\"");
    upload->part_checksums[number] = req.get_header_value("x-amz-checksum-sha256");
    upload->parts[number] = std::move(bytes);
  }

  // The object the parts named by a CompleteMultipartUpload body make; false (answered) when they do not match.
  bool assemble(const httplib::Request& req, httplib::Response& res, const Upload& upload, std::string& bytes) const {
    auto listed = cloud::xml_records(req.body, "Part");
    if (!listed || listed->empty()) return refuse(res, 400, "MalformedXML", "no <Part> in the body");
    int previous = 0;
    for (std::size_t i = 0; i < listed->size(); ++i) {
      auto& part = (*listed)[i];
      const int number = std::stoi(part["PartNumber"]);
      if (number <= previous) return refuse(res, 400, "InvalidPartOrder", "parts must be in ascending order");
      previous = number;
      auto stored = upload.parts.find(number);
      if (stored == upload.parts.end() || part["ETag"] != "\"" + md5_hex(stored->second) + "\"" ||
          (part.count("ChecksumSHA256") && part["ChecksumSHA256"] != upload.part_checksums.at(number)))
        return refuse(res, 400, "InvalidPart", "part " + std::to_string(number) + " was not uploaded so");
      if (i + 1 < listed->size() && stored->second.size() < k_min_part)
        return refuse(res, 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size");
      bytes += stored->second;
    }
    return true;
  }

  void complete(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    Upload* upload = open_upload(req, res, state);
    if (!upload) return;
    std::string bytes;
    if (!assemble(req, res, *upload, bytes)) return;
    if (state.refuses_create(seen.bucket, seen.object, req.get_header_value("If-None-Match") == "*"))
      return error(res, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
    if (!state.complete_error_code.empty()) {
      res.set_content("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\n  <Error><Code>" + state.complete_error_code +
                          "</Code><Message>failed after the answer began</Message></Error>",
                      "application/xml");
      return;
    }
    std::string md5s;
    for (const auto& [number, part] : upload->parts) md5s += md5_hex(part);
    StoredObject object = object_of(std::move(bytes), upload->metadata);
    object.etag = "\"" + md5_hex(md5s) + "-" + std::to_string(upload->parts.size()) + "\"";
    const std::string etag = state.store(seen.bucket, seen.object, std::move(object))->etag;
    upload->status = Upload::Status::completed;
    upload->parts.clear();
    res.set_content("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult><Key>" +
                        xml_escape(seen.object) + "</Key><ETag>" + xml_escape(etag) +
                        "</ETag></CompleteMultipartUploadResult>",
                    "application/xml");
  }

  void abort_upload(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    auto it = state.uploads.find(seen.param("uploadId"));
    if (it == state.uploads.end() || it->second.status == Upload::Status::completed)
      return error(res, 404, "NoSuchUpload", "The specified upload does not exist.");
    it->second.status = Upload::Status::aborted;
    it->second.parts.clear();
    res.status = 204;
  }

  void remove(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    state.buckets[seen.bucket].erase(seen.object);
    res.status = 204;  // whether or not there was an object
  }

  void list(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    bool more = false;
    const auto page =
        list_page(state, seen.bucket, seen.param("prefix"), seen.param("continuation-token"), state.page_size, more);
    std::string body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>" + seen.bucket +
                       "</Name><Prefix>" + xml_escape(seen.param("prefix")) + "</Prefix><KeyCount>" +
                       std::to_string(page.size()) + "</KeyCount><IsTruncated>" + (more ? "true" : "false") +
                       "</IsTruncated>";
    if (more) body += "<NextContinuationToken>" + xml_escape(page.back().first) + "</NextContinuationToken>";
    for (const auto& [name, object] : page) {
      body += "<Contents><Key>" + xml_escape(name) + "</Key><LastModified>" + iso8601(object->last_modified) +
              "</LastModified><ETag>" + xml_escape(object->etag) + "</ETag><Size>" +
              std::to_string(object->bytes.size()) + "</Size><StorageClass>STANDARD</StorageClass></Contents>";
    }
    res.set_content(body + "</ListBucketResult>", "application/xml");
  }
};

}  // namespace

std::unique_ptr<FrontEnd> make_s3_front() { return std::make_unique<S3Front>(); }

}  // namespace datavo::fakecloud
