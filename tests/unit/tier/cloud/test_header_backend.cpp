// Tests of src/tier/cloud/header_backend.cpp, the reads that the S3 and Azure backends share, through a minimal
// subclass against a real HTTP server on loopback (cpp-httplib): the range header of the dialect, If-Match pins,
// 404 / 412 / 416, metadata headers, and listings over several pages.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "support/test_server.hpp"
#include "tier/cloud/header_backend.hpp"

namespace datavo::cloud {
namespace {

constexpr const char* k_sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

// Serves /c/object (10 bytes, ETag "v1", Datavo's metadata in x-test-meta-*), /c/empty (0 bytes: a range is 416),
// /c/list?token=T (three pages of two names), /gone/... (404 naming the container as missing).
class Server {
 public:
  Server() {
    server_.set_keep_alive_max_count(1);
    server_.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
      const_cast<httplib::Request&>(req).ranges.clear();  // ranges are applied below, from the dialect's header
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Get("/c/object", [this](const httplib::Request& req, httplib::Response& res) { object(req, res); });
    server_.Get("/c/empty", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      if (req.has_header("x-test-range")) {
        res.status = 416;
        return;
      }
      res.set_content("", "application/octet-stream");
    });
    server_.Get("/c/list", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      const std::string token = req.get_param_value("token");
      const std::string page = token.empty() ? "a,b|p2" : token == "p2" ? "c,d|p3" : token == "p3" ? "e|" : "";
      if (page.empty()) {
        res.status = 400;
        return;
      }
      res.set_content(page, "text/plain");
    });
    server_.Get("/gone/list", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 404;
      res.set_content("NoSuchContainer", "text/plain");
    });
    server_.Get("/c/absent", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 404;
      res.set_content("NoSuchKey", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Server() {
    server_.stop();
    thread_.join();
  }

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::vector<httplib::Headers> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void record(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    seen_.push_back(req.headers);
  }
  void object(const httplib::Request& req, httplib::Response& res) {
    record(req);
    const std::string bytes = "0123456789";
    res.set_header("ETag", "\"v1\"");
    res.set_header("x-test-meta-sha256", k_sha);
    res.set_header("x-test-meta-size", "10");
    if (req.has_header("If-Match") && req.get_header_value("If-Match") != "\"v1\"") {
      res.status = 412;
      return;
    }
    const std::string range = req.get_header_value("x-test-range");  // "bytes=A-B"
    if (range.empty()) {
      res.set_content(bytes, "application/octet-stream");
      return;
    }
    const auto dash = range.find('-');
    const std::size_t first = std::stoul(range.substr(6, dash - 6)), last = std::stoul(range.substr(dash + 1));
    res.status = 206;
    res.set_header("Content-Range",
                   "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(bytes.size()));
    res.set_content(bytes.substr(first, last - first + 1), "application/octet-stream");
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<httplib::Headers> seen_;
};

class TestBackend final : public HeaderBackend {
 public:
  explicit TestBackend(const Server& server)
      : HeaderBackend({"x-test-range", "x-test-meta-sha256", "x-test-meta-size", "x-test-meta-chunks", "thing"}),
        server_(server) {}

  using HeaderBackend::add_metadata;
  using HeaderBackend::list_pages;

  std::string_view type() const override { return "test"; }
  std::string_view conditional_create() const override { return "If-None-Match: *"; }
  std::string location() const override { return server_.url("/c"); }
  Result<std::string> credentials() override { return std::string("none"); }
  Result<InstallOutcome> put(const std::string&, const net::RequestBody&, const std::optional<EntryMetadata>&,
                             Overwrite) override {
    return unused();
  }
  Result<std::string> start_upload(const std::string&, const EntryMetadata&) override { return unused(); }
  Result<UploadedPart> upload_part(const std::string&, const std::string&, int, const net::FileBody&) override {
    return unused();
  }
  Result<InstallOutcome> finish_upload(const std::string&, const std::string&, const std::vector<UploadedPart>&,
                                       const EntryMetadata&) override {
    return unused();
  }
  Result<void> abort_upload(const std::string&, const std::string&) override { return unused(); }
  Result<bool> remove(const std::string&) override { return unused(); }
  Result<std::vector<ListedObject>> list(const std::string& container) override {
    return list_pages([&](const std::string& token) { return server_.url("/" + container + "/list?token=" + token); },
                      [](const std::string& body, std::vector<ListedObject>& out) -> Result<std::string> {
                        const auto bar = body.find('|');
                        std::string names = body.substr(0, bar);
                        for (std::size_t at = 0; at <= names.size();) {
                          const auto comma = std::min(names.find(',', at), names.size());
                          out.push_back(ListedObject{names.substr(at, comma - at), Bytes{1}, {}});
                          at = comma + 1;
                        }
                        return body.substr(bar + 1);
                      });
  }

 protected:
  std::string object_url(const std::string& name) override { return server_.url("/c/" + name); }
  Result<net::HttpResponse> perform(net::HttpRequest& request) override { return http_.perform(request); }
  Result<void> container_exists(const net::HttpResponse& response) const override {
    if (response.body == "NoSuchContainer") return Error{ErrorCode::not_found, "no such container"};
    return {};
  }

 private:
  static Error unused() { return Error{ErrorCode::internal, "not used by these tests"}; }
  const Server& server_;
  net::HttpClient http_{TransportOptions{.max_attempts = 1}};
};

std::string header(const httplib::Headers& headers, const std::string& name) {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

TEST(HeaderBackend, ARangedGetSendsTheDialectsRangeHeaderAndThePinAndReadsTheMetadataHeaders) {
  Server server;
  TestBackend backend(server);
  test::StringSink sink;
  const std::string pin = "\"v1\"";
  auto got = backend.get("object", ByteRange{2, 5}, &pin, sink);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(*got);
  EXPECT_EQ(sink.data(), "23456");
  EXPECT_EQ((*got)->size, Bytes{10}) << "the whole object, from Content-Range";
  EXPECT_EQ((*got)->version, "\"v1\"");
  ASSERT_TRUE((*got)->sha256);
  EXPECT_EQ((*got)->sha256->hex(), k_sha);
  EXPECT_EQ((*got)->recorded_size, Bytes{10});
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(header(seen[0], "x-test-range"), "bytes=2-6");
  EXPECT_EQ(header(seen[0], "If-Match"), "\"v1\"");
  EXPECT_EQ(header(seen[0], "Range"), "") << "only the dialect's range header";
}

TEST(HeaderBackend, A412IsAConflictA404AMissAndARangeOfAnEmptyObjectReadsItWhole) {
  Server server;
  TestBackend backend(server);
  test::StringSink sink;
  const std::string stale = "\"v0\"";
  auto changed = backend.get("object", ByteRange{0, 4}, &stale, sink);
  ASSERT_FALSE(changed);
  EXPECT_EQ(changed.error().code, ErrorCode::conflict);

  auto absent = backend.get("absent", ByteRange{0, 4}, nullptr, sink);
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_FALSE(*absent);

  auto empty = backend.get("empty", ByteRange{0, 4}, nullptr, sink);
  ASSERT_TRUE(empty) << empty.error().message;
  ASSERT_TRUE(*empty);
  EXPECT_EQ((*empty)->size, Bytes{0});
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 4u) << "the 416 was followed by one GET of the whole object";
  EXPECT_EQ(header(seen[3], "x-test-range"), "");

  auto head = backend.head("object");
  ASSERT_TRUE(head) << head.error().message;
  ASSERT_TRUE(*head);
  EXPECT_EQ((*head)->version, "\"v1\"");
}

TEST(HeaderBackend, AListingFollowsEveryPageTokenAndAMissingContainerIsAnError) {
  Server server;
  TestBackend backend(server);
  auto listed = backend.list("c");
  ASSERT_TRUE(listed) << listed.error().message;
  std::vector<std::string> names;
  for (const auto& object : *listed) names.push_back(object.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(server.seen().size(), 3u);

  auto gone = backend.list("gone");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::not_found);
}

TEST(HeaderBackend, MetadataGoesInTheDialectsHeaders) {
  Server server;
  TestBackend backend(server);
  net::HttpHeaders headers;
  backend.add_metadata(headers, EntryMetadata{*Sha256::parse(k_sha), Bytes{10}});
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0].name, "x-test-meta-sha256");
  EXPECT_EQ(headers[0].value, k_sha);
  EXPECT_EQ(headers[1].name, "x-test-meta-size");
  EXPECT_EQ(headers[1].value, "10");
}

}  // namespace
}  // namespace datavo::cloud
