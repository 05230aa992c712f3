// An in-process fake of Azure Blob Storage (cpp-httplib on 127.0.0.1) that takes bearer tokens, with the AAD
// client-credentials endpoint that issues them, for the tests of the Azure request builder (test_azure_tier.cpp).
// Azurite checks SharedKey and SAS over http, but bearer tokens only over https (its --oauth needs a certificate),
// so the token paths are tested here: a token refused with 401 InvalidAuthenticationInfo mid-transfer, and a
// short-lived token refreshed ahead of its expiry.
//
// What it serves, path-style as Azurite does (http://127.0.0.1:P/<account>/<container>/<blob>): Put Blob (with
// If-None-Match: *, x-ms-meta-*, Content-MD5 checked), Put Block, Put Block List, Get Blob with x-ms-range and
// If-Match, Get Blob Properties (HEAD), Delete Blob; the token endpoint is POST /<tenant>/oauth2/v2.0/token.
//
// Thread safety: the handlers run on the server's threads; all state is guarded by one mutex.
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tier/cloud/checksums.hpp"
#include "util/base64.hpp"

namespace datavo::azuretest {

inline constexpr const char* k_account = "devstoreaccount1";
inline constexpr const char* k_container = "shards";

struct FakeBlob {
  std::string bytes;
  std::string etag;
  std::map<std::string, std::string> metadata;  // x-ms-meta-<name> -> value
};

struct SeenRequest {
  std::string method;
  std::string blob;      // the blob name
  std::string comp;      // the comp= query parameter
  std::string block_id;  // blockid=
  std::string range;     // x-ms-range
  std::string if_match;
  std::string authorization;
  int status = 0;
};

class FakeBlobServer {
 public:
  FakeBlobServer() {
    server_.set_keep_alive_max_count(1);
    server_.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
      const_cast<httplib::Request&>(req).ranges.clear();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Post(R"(/([^/]+)/oauth2/v2.0/token)",
                 [this](const httplib::Request& req, httplib::Response& res) { token(req, res); });
    const std::string blob = std::string("/") + k_account + "/" + k_container + "/(.+)";
    auto route = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    server_.Get(blob, route);
    server_.Put(blob, route);
    server_.Delete(blob, route);
    // cpp-httplib answers HEAD through the GET handler (and drops the body).
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeBlobServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeBlobServer(const FakeBlobServer&) = delete;
  FakeBlobServer& operator=(const FakeBlobServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string container_url() const { return url() + "/" + k_account + "/" + k_container; }

  void put_blob(const std::string& name, const std::string& bytes, std::map<std::string, std::string> metadata) {
    std::lock_guard lock(mu_);
    blobs_[name] = FakeBlob{bytes, next_etag(), std::move(metadata)};
  }
  std::optional<FakeBlob> blob(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = blobs_.find(name);
    if (it == blobs_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<SeenRequest> requests() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  void clear_requests() {
    std::lock_guard lock(mu_);
    seen_.clear();
  }
  int tokens_issued() {
    std::lock_guard lock(mu_);
    return tokens_issued_;
  }
  void revoke_tokens() {
    std::lock_guard lock(mu_);
    valid_tokens_.clear();
  }
  void set_token_lifetime(std::chrono::seconds lifetime) {
    std::lock_guard lock(mu_);
    token_lifetime_ = lifetime;
  }
  // Called (without the lock) before each blob request is answered; it may use the accessors above.
  void on_request(std::function<void(const SeenRequest&)> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }

 private:
  std::string next_etag() { return "\"0x8DC" + std::to_string(++etags_) + "\""; }

  static void error(httplib::Response& res, int status, const std::string& code) {
    res.status = status;
    res.set_header("x-ms-error-code", code);
    res.set_content("<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>" + code + "</Code><Message>" + code +
                        "</Message></Error>",
                    "application/xml");
  }

  void token(const httplib::Request& req, httplib::Response& res) {
    httplib::Params form;
    httplib::detail::parse_query_text(req.body, form);
    std::lock_guard lock(mu_);
    if (form.find("client_secret") == form.end()) {
      res.status = 400;
      res.set_content(R"({"error":"invalid_client"})", "application/json");
      return;
    }
    const std::string token = "aad-" + std::to_string(++tokens_issued_);
    valid_tokens_.insert(token);
    res.set_content(
        nlohmann::json{{"token_type", "Bearer"}, {"access_token", token}, {"expires_in", token_lifetime_.count()}}
            .dump(),
        "application/json");
  }

  void handle(const httplib::Request& req, httplib::Response& res) {
    SeenRequest seen;
    seen.method = req.method;
    seen.blob = req.matches[1].str();
    seen.comp = req.has_param("comp") ? req.get_param_value("comp") : "";
    seen.block_id = req.has_param("blockid") ? req.get_param_value("blockid") : "";
    seen.range = req.get_header_value("x-ms-range");
    seen.if_match = req.get_header_value("If-Match");
    seen.authorization = req.get_header_value("Authorization");
    std::function<void(const SeenRequest&)> hook;
    {
      std::lock_guard lock(mu_);
      hook = hook_;
    }
    if (hook) hook(seen);
    std::lock_guard lock(mu_);
    const std::string token = seen.authorization.rfind("Bearer ", 0) == 0 ? seen.authorization.substr(7) : "";
    if (req.get_header_value("x-ms-version").empty()) {
      error(res, 400, "MissingRequiredHeader");
    } else if (valid_tokens_.count(token) == 0) {
      res.set_header("WWW-Authenticate", "Bearer authorization_uri=https://login.microsoftonline.com/tenant-1");
      error(res, 401, "InvalidAuthenticationInfo");
    } else if (req.method == "PUT") {
      put(req, res, seen);
    } else if (req.method == "DELETE") {
      if (blobs_.erase(seen.blob) == 0)
        error(res, 404, "BlobNotFound");
      else
        res.status = 202;
    } else {
      get(req, res, seen);
    }
    record(seen, res);
  }

  // REQUIRES: mu_ held (below).
  void record(SeenRequest& seen, const httplib::Response& res) {
    seen.status = res.status == -1 ? 200 : res.status;
    seen_.push_back(seen);
  }

  static std::map<std::string, std::string> metadata_of(const httplib::Request& req) {
    std::map<std::string, std::string> out;
    for (const auto& [name, value] : req.headers) {
      std::string lower = name;
      for (auto& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (lower.rfind("x-ms-meta-", 0) == 0) out[lower.substr(10)] = value;
    }
    return out;
  }

  void put(const httplib::Request& req, httplib::Response& res, const SeenRequest& seen) {
    const bool if_absent = req.get_header_value("If-None-Match") == "*";
    if (seen.comp == "block") {
      blocks_[seen.blob + "\n" + seen.block_id] = req.body;
      res.status = 201;
      return;
    }
    std::string bytes;
    if (seen.comp == "blocklist") {
      // A scan, not std::regex: GCC 12's -Wmaybe-uninitialized fires inside <regex> under the sanitizer builds.
      constexpr std::string_view open_tag = "<Latest>", close_tag = "</Latest>";
      for (std::size_t at = req.body.find(open_tag); at != std::string::npos; at = req.body.find(open_tag, at)) {
        at += open_tag.size();
        const std::size_t stop = req.body.find(close_tag, at);
        if (stop == std::string::npos) return error(res, 400, "InvalidXmlDocument");
        auto block = blocks_.find(seen.blob + "\n" + req.body.substr(at, stop - at));
        if (block == blocks_.end()) return error(res, 400, "InvalidBlockList");
        bytes += block->second;
        at = stop + close_tag.size();
      }
    } else if (seen.comp.empty()) {
      if (req.get_header_value("x-ms-blob-type") != "BlockBlob") return error(res, 400, "InvalidHeaderValue");
      bytes = req.body;
      const std::string md5 = req.get_header_value("Content-MD5");
      if (!md5.empty() && md5 != util::base64_encode(cloud::md5_of(bytes))) return error(res, 400, "Md5Mismatch");
    } else {
      return error(res, 400, "UnsupportedQueryParameter");
    }
    if (if_absent && blobs_.count(seen.blob)) return error(res, 409, "BlobAlreadyExists");
    blobs_[seen.blob] = FakeBlob{bytes, next_etag(), metadata_of(req)};
    res.set_header("ETag", blobs_[seen.blob].etag);
    res.status = 201;
  }

  void get(const httplib::Request& req, httplib::Response& res, const SeenRequest& seen) {
    auto it = blobs_.find(seen.blob);
    if (it == blobs_.end()) return error(res, 404, "BlobNotFound");
    const FakeBlob& blob = it->second;
    if (!seen.if_match.empty() && seen.if_match != blob.etag) return error(res, 412, "ConditionNotMet");
    res.set_header("ETag", blob.etag);
    res.set_header("x-ms-blob-type", "BlockBlob");
    for (const auto& [name, value] : blob.metadata) res.set_header("x-ms-meta-" + name, value);
    const std::uint64_t size = blob.bytes.size();
    if (seen.range.rfind("bytes=", 0) != 0 || req.method == "HEAD") {
      res.set_content(blob.bytes, "application/octet-stream");
      return;
    }
    const auto dash = seen.range.find('-');
    const std::uint64_t first = std::stoull(seen.range.substr(6, dash - 6));
    const std::uint64_t last = std::min<std::uint64_t>(std::stoull(seen.range.substr(dash + 1)), size - 1);
    if (first >= size) return error(res, 416, "InvalidRange");
    res.status = 206;
    res.set_header("Content-Range",
                   "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size));
    res.set_content(blob.bytes.substr(first, last - first + 1), "application/octet-stream");
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, FakeBlob> blobs_;  // guarded by mu_, as is all below
  std::map<std::string, std::string> blocks_;
  std::vector<SeenRequest> seen_;
  std::set<std::string> valid_tokens_;
  int tokens_issued_ = 0;
  int etags_ = 0;
  std::chrono::seconds token_lifetime_{3600};
  std::function<void(const SeenRequest&)> hook_;
};

}  // namespace datavo::azuretest
