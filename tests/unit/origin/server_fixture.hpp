// The fixture of the origin server's tests: a store with the dataset voice/train (5 samples, 2 per shard, keys
// audio.wav and transcript.txt), an OriginServer started on it on an ephemeral loopback port, and helpers that talk
// to it over raw HTTP (origin_test_support.hpp).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "datavo/origin.hpp"
#include "datavo/tar.hpp"
#include "unit/origin/origin_test_support.hpp"

namespace datavo::origintest {

using json = nlohmann::json;
using shardtest::TempDir;

inline OriginServerOptions quiet(const std::string& store, std::uint16_t port = 0) {
  OriginServerOptions options;
  options.store = store;
  options.port = port;
  options.log_requests = false;
  return options;
}

inline json json_of(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

// The error code of a JSON error body, "" when the body is not one.
inline std::string error_code(const HttpResult& r) {
  json body = json_of(r);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const json& error = body["error"];
  if (!error.contains("message") || !error["message"].is_string()) return "";
  return error.value("code", "");
}

inline std::map<std::string, std::string> query_of(const std::string& url) {
  std::map<std::string, std::string> params;
  std::string query = url.substr(url.find('?') + 1);
  for (std::size_t begin = 0; begin < query.size();) {
    std::size_t end = std::min(query.find('&', begin), query.size());
    std::string pair = query.substr(begin, end - begin);
    auto eq = pair.find('=');
    params[pair.substr(0, eq)] = pair.substr(eq + 1);
    begin = end + 1;
  }
  return params;
}

inline std::string build_url(const std::string& path, const std::map<std::string, std::string>& params) {
  std::string url = path + "?";
  for (const auto& [k, v] : params) url += (url.back() == '?' ? "" : "&") + k + "=" + v;
  return url;
}

// (member name, payload) in archive order.
inline std::vector<std::pair<std::string, std::string>> members_of(const std::string& tar) {
  std::vector<std::pair<std::string, std::string>> out;
  TarReader reader(std::as_bytes(std::span(tar)), "download");
  for (;;) {
    auto member = reader.next();
    EXPECT_TRUE(member) << member.error().message;
    if (!member || !*member) break;
    out.emplace_back(std::string((*member)->name),
                     std::string(reinterpret_cast<const char*>((*member)->data.data()), (*member)->data.size()));
  }
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_sample_dir(dir_.sub("src"), sample_ids(0, 5));
    pack_or_fail(dir_.sub("src"), store_root(), "voice/train", 2);
  }

  std::string store_root() const { return dir_.sub("store"); }

  void start(OriginServerOptions options = {}) {
    if (options.store.empty()) options.store = store_root();
    options.log_requests = false;
    auto started = OriginServer::start(std::move(options));
    ASSERT_TRUE(started) << started.error().message;
    server_ = std::move(started).value();
  }

  std::string url(const std::string& path) const { return server_->base_url() + path; }
  std::vector<std::string> auth() const {
    return token_.empty() ? std::vector<std::string>{} : std::vector<std::string>{"Authorization: Bearer " + token_};
  }
  HttpResult get(const std::string& path, std::vector<std::string> headers = {}) const {
    for (auto& h : auth()) headers.push_back(h);
    return origintest::http("GET", url(path), headers);
  }
  HttpResult post_ticket(const std::string& body) const {
    auto headers = auth();
    headers.push_back("Content-Type: application/json");
    return origintest::http("POST", url("/v1/stream-tickets"), headers, body);
  }
  json manifest(std::optional<std::uint64_t> revision = std::nullopt) const {
    auto r = get("/v1/datasets/voice/train/manifest" + (revision ? "?revision=" + std::to_string(*revision) : ""));
    EXPECT_EQ(r.status, 200) << r.body;
    return json_of(r);
  }
  json ticket(std::uint64_t revision, std::uint64_t shard, const std::vector<std::string>& keys) const {
    auto r = post_ticket(
        json{{"dataset", "voice"}, {"split", "train"}, {"revision", revision}, {"shard_index", shard}, {"keys", keys}}
            .dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json_of(r);
  }
  std::string download(const json& t) const {
    auto r = get(t["url"].get<std::string>());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  }

  TempDir dir_;
  std::string token_;
  std::unique_ptr<OriginServer> server_;
};

}  // namespace datavo::origintest
