// The Azure Blob REST front end of the fake object store (fake_cloud.hpp says what it serves).
#include <nlohmann/json.hpp>
#include <string_view>

#include "support/fake_cloud/store_state.hpp"
#include "tier/azure/shared_key.hpp"

namespace datavo::fakecloud {
namespace {

// The block ids of a Put Block List body, in order. A scan, not std::regex: GCC 12's -Wmaybe-uninitialized fires
// inside <regex> under the sanitizer builds.
std::optional<std::vector<std::string>> block_list(const std::string& body) {
  constexpr std::string_view open_tag = "<Latest>", close_tag = "</Latest>";
  std::vector<std::string> ids;
  for (std::size_t at = body.find(open_tag); at != std::string::npos; at = body.find(open_tag, at)) {
    at += open_tag.size();
    const std::size_t stop = body.find(close_tag, at);
    if (stop == std::string::npos) return std::nullopt;
    ids.push_back(body.substr(at, stop - at));
    at = stop + close_tag.size();
  }
  return ids;
}

class AzureFront final : public FrontEnd {
 public:
  void classify(const httplib::Request& req, SeenRequest& seen) const override {
    const auto parts = split_path(req.path, 3);  // account (or tenant), container, blob
    if (req.method == "POST" && parts.size() == 3 && parts[1] == "oauth2" && parts[2] == "v2.0/token") {
      seen.op = "Token";
      return;
    }
    seen.bucket = parts.size() > 1 ? parts[1] : "";
    seen.object = parts.size() > 2 ? parts[2] : "";
    seen.op = seen.object.empty() ? container_op(seen) : blob_op(req, seen);
  }

  bool authorize(const httplib::Request& req, httplib::Response& res, StoreState& state) const override {
    if (req.get_header_value("x-ms-version").empty()) {
      error(res, 400, "MissingRequiredHeader", "An HTTP header that's mandatory for this request is not specified.");
      return false;
    }
    const std::string authorization = req.get_header_value("Authorization");
    if (authorization.rfind("SharedKey ", 0) == 0) return shared_key_accepted(req, res, state, authorization);
    const std::string token = authorization.rfind("Bearer ", 0) == 0 ? authorization.substr(7) : "";
    if (state.valid_tokens.count(token) == 0) {
      res.set_header("WWW-Authenticate", "Bearer authorization_uri=https://login.microsoftonline.com/tenant-1");
      error(res, 401, "InvalidAuthenticationInfo", "Authentication information is not given in the correct format.");
      return false;
    }
    return true;
  }

  void handle(const httplib::Request& req, httplib::Response& res, StoreState& state,
              const SeenRequest& seen) override {
    const std::string& op = seen.op;
    if (op == "Token") return token(req, res, state);
    if (!state.has_bucket(seen.bucket))
      return error(res, 404, "ContainerNotFound", "The specified container does not exist.");
    if (op == "GetObject" || op == "HeadObject") return get(req, res, state, seen);
    if (op == "PutObject" || op == "CompleteMultipartUpload") return put(req, res, state, seen);
    if (op == "UploadPart") return put_block(req, res, state, seen);
    if (op == "DeleteObject") return remove(res, state, seen);
    if (op == "ListObjects") return list(res, state, seen);
    error(res, 400, "UnsupportedQueryParameter", "the fake does not serve " + req.method + " " + req.target);
  }

  void error(httplib::Response& res, int status, const std::string& code, const std::string& message) const override {
    res.status = status;
    res.set_header("x-ms-error-code", code);
    res.set_content("<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>" + code + "</Code><Message>" + message +
                        "</Message></Error>",
                    "application/xml");
  }

 private:
  static std::string container_op(const SeenRequest& seen) {
    return seen.method == "GET" && seen.param("comp") == "list" ? "ListObjects" : "Other";
  }
  static std::string blob_op(const httplib::Request& req, const SeenRequest& seen) {
    const std::string comp = seen.param("comp");
    if (req.method == "GET") return comp.empty() ? "GetObject" : "Other";
    if (req.method == "HEAD") return "HeadObject";
    if (req.method == "DELETE") return "DeleteObject";
    if (req.method != "PUT") return "Other";
    if (comp.empty()) return "PutObject";
    return comp == "block" ? "UploadPart" : comp == "blocklist" ? "CompleteMultipartUpload" : "Other";
  }

  bool shared_key_accepted(const httplib::Request& req, httplib::Response& res, StoreState& state,
                           const std::string& authorization) const {
    net::PreparedRequest wire;
    wire.method = req.method == "PUT"      ? net::HttpMethod::put
                  : req.method == "DELETE" ? net::HttpMethod::delete_
                  : req.method == "HEAD"   ? net::HttpMethod::head
                  : req.method == "POST"   ? net::HttpMethod::post
                                           : net::HttpMethod::get;
    wire.url = "http://" + req.get_header_value("Host") + req.target;
    for (const auto& [name, value] : req.headers) wire.headers.push_back({name, value});
    wire.body_size = req.body.size();
    auto text = azure::string_to_sign(wire, k_azure_account);
    const std::string expected = std::string("SharedKey ") + k_azure_account + ":" +
                                 azure::hmac_sha256_base64(state.azure_key, text ? *text : "");
    if (!state.azure_key.empty() && text && authorization == expected) return true;
    error(res, 403, "AuthenticationFailed",
          "Server failed to authenticate the request. Make sure the value of the Authorization header is formed "
          "correctly including the signature.");
    return false;
  }

  void token(const httplib::Request& req, httplib::Response& res, StoreState& state) const {
    httplib::Params form;
    httplib::detail::parse_query_text(req.body, form);
    if (form.find("client_secret") == form.end()) {
      res.status = 400;
      res.set_content(R"({"error":"invalid_client"})", "application/json");
      return;
    }
    res.set_content(nlohmann::json{{"token_type", "Bearer"},
                                   {"access_token", state.issue_token("aad-")},
                                   {"expires_in", state.token_lifetime.count()}}
                        .dump(),
                    "application/json");
  }

  void get(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    ObjectPtr blob = state.find(seen.bucket, seen.object);
    if (!blob) return error(res, 404, "BlobNotFound", "The specified blob does not exist.");
    const std::string if_match = req.get_header_value("If-Match");
    if (!if_match.empty() && !state.ignore_preconditions && if_match != blob->etag)
      return error(res, 412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.");
    res.set_header("ETag", blob->etag);
    res.set_header("x-ms-blob-type", "BlockBlob");
    if (state.metadata_in_reads)
      for (const auto& [name, value] : blob->metadata) res.set_header("x-ms-meta-" + name, value);
    if (req.method == "HEAD") {
      res.set_content(blob->bytes, "application/octet-stream");
      return;
    }
    std::string range = req.get_header_value("x-ms-range");
    if (range.empty()) range = req.get_header_value("Range");
    if (!serve_bytes(res, blob->bytes, range))
      error(res, 416, "InvalidRange", "The range specified is invalid for the current size of the resource.");
  }

  void put_block(const httplib::Request& req, httplib::Response& res, StoreState& state,
                 const SeenRequest& seen) const {
    if (state.count_part_and_refuse())
      return error(res, 403, "AuthorizationPermissionMismatch",
                   "This request is not authorized to perform this operation.");
    std::string bytes = req.body;
    state.maybe_corrupt(bytes);
    state.blocks[seen.bucket + "/" + seen.object][seen.param("blockid")] = std::move(bytes);
    res.status = 201;
  }

  // Put Blob (the body) or Put Block List (the named blocks), a conditional create with If-None-Match: *.
  void put(const httplib::Request& req, httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    std::string bytes;
    const std::string blob_key = seen.bucket + "/" + seen.object;
    if (seen.op == "CompleteMultipartUpload") {
      auto ids = block_list(req.body);
      if (!ids) return error(res, 400, "InvalidXmlDocument", "XML specified is not syntactically valid.");
      auto& staged = state.blocks[blob_key];
      for (const auto& id : *ids) {
        auto block = staged.find(id);
        if (block == staged.end()) return error(res, 400, "InvalidBlockList", "The specified block list is invalid.");
        bytes += block->second;
      }
    } else {
      if (req.get_header_value("x-ms-blob-type") != "BlockBlob")
        return error(res, 400, "InvalidHeaderValue", "x-ms-blob-type");
      bytes = req.body;
      state.maybe_corrupt(bytes);
      const std::string md5 = req.get_header_value("Content-MD5");
      if (!md5.empty() && md5 != md5_base64(bytes))
        return error(res, 400, "Md5Mismatch", "The MD5 value specified in the request did not match the stored one.");
    }
    if (state.refuses_create(seen.bucket, seen.object, req.get_header_value("If-None-Match") == "*"))
      return error(res, 409, "BlobAlreadyExists", "The specified blob already exists.");
    StoredObject blob = object_of(std::move(bytes), metadata_headers(req, "x-ms-meta-"));
    if (req.has_header("Content-MD5")) blob.client_checksums["md5"] = req.get_header_value("Content-MD5");
    res.set_header("ETag", state.store(seen.bucket, seen.object, std::move(blob))->etag);
    if (seen.op == "CompleteMultipartUpload") state.blocks.erase(blob_key);  // committed: the others are dropped
    res.status = 201;
  }

  void remove(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    if (state.buckets[seen.bucket].erase(seen.object) == 0)
      return error(res, 404, "BlobNotFound", "The specified blob does not exist.");
    res.status = 202;
  }

  void list(httplib::Response& res, StoreState& state, const SeenRequest& seen) const {
    bool more = false;
    const auto page = list_page(state, seen.bucket, seen.param("prefix"), seen.param("marker"), state.page_size, more);
    std::string body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults><Prefix>" +
                       xml_escape(seen.param("prefix")) + "</Prefix><Blobs>";
    for (const auto& [name, blob] : page) {
      body += "<Blob><Name>" + xml_escape(name) + "</Name><Properties><Content-Length>" +
              std::to_string(blob->bytes.size()) + "</Content-Length><Last-Modified>" +
              azure::http_date(blob->last_modified) + "</Last-Modified><Etag>" + blob->etag +
              "</Etag><BlobType>BlockBlob</BlobType></Properties></Blob>";
    }
    body += "</Blobs><NextMarker>" + (more ? xml_escape(page.back().first) : std::string()) +
            "</NextMarker></EnumerationResults>";
    res.set_content(body, "application/xml");
  }
};

}  // namespace

std::unique_ptr<FrontEnd> make_azure_front() { return std::make_unique<AzureFront>(); }

}  // namespace datavo::fakecloud
