// A tiny in-process origin (cpp-httplib) for the client tests that need a server misbehaving on purpose: a ticket
// naming the wrong content hash, a ticket that expires mid-download, wrong bytes. It speaks just enough of
// docs/protocol.md: the manifest (with ETag / 304), stream tickets and shard downloads, and counts every request.
// The tests of normal behaviour run against the real OriginServer instead.
//
// Thread safety: the knobs and counters are atomics; the dataset is fixed at construction.
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/tar.hpp"

namespace datavo::clienttest {

struct FakeDataset {
  std::string dataset = "fake";
  std::string split = "train";
  std::string manifest_ref = "fake/train@m1";
  std::uint64_t revision = 7;
  std::vector<std::string> keys = {"audio.wav", "transcript.txt"};
  std::vector<std::vector<std::string>> shards;  // sample ids per shard
};

// `shards` shards of `per_shard` samples each, named s<shard>_<index>.
inline FakeDataset fake_dataset(std::size_t shards, std::size_t per_shard) {
  FakeDataset data;
  for (std::size_t s = 0; s < shards; ++s) {
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < per_shard; ++i) ids.push_back("s" + std::to_string(s) + "_" + std::to_string(i));
    data.shards.push_back(ids);
  }
  return data;
}

// Payload of member <id>.<key>: deterministic, a few hundred bytes.
inline std::string fake_payload(const std::string& id, const std::string& key) {
  std::string out;
  while (out.size() < 300) out += id + "." + key + ";";
  return out;
}

class FakeOrigin {
 public:
  explicit FakeOrigin(FakeDataset dataset) : data_(std::move(dataset)) {
    server_.Get(R"(/v1/datasets/([^/]+)/([^/]+)/manifest)",
                [this](const httplib::Request& req, httplib::Response& res) { manifest(req, res); });
    server_.Post("/v1/stream-tickets",
                 [this](const httplib::Request& req, httplib::Response& res) { ticket(req, res); });
    server_.Get(R"(/shards/([0-9a-f]{64})\.tar)",
                [this](const httplib::Request& req, httplib::Response& res) { shard(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // bind_to_any_port() already listens: connections queue until the accept loop starts.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait for it, or the destructor could join forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeOrigin() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeOrigin(const FakeOrigin&) = delete;
  FakeOrigin& operator=(const FakeOrigin&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // Knobs.
  std::atomic<bool> wrong_content_hash{false};  // tickets name another hash
  std::atomic<int> expire_downloads{0};         // the next N shard downloads answer 410
  std::atomic<bool> corrupt_bytes{false};       // downloads flip one byte (size and ticket sha256 unchanged)
  std::atomic<bool> broken_tar{false};          // the tar itself is broken (and the ticket describes it truly)
  std::atomic<int> broken_member{1};            // with broken_tar: the member whose header is broken (from 0)
  std::atomic<int> shard_delay_ms{0};           // shard downloads answer after this long
  // When set, ticket URLs are absolute with this base (e.g. "http://localhost:<port>": another origin string).
  // May be changed between requests (a server thread reads it under the lock).
  void set_shard_url_base(std::string base) {
    std::lock_guard lock(shard_url_base_mu_);
    shard_url_base_ = std::move(base);
  }

  // Counters.
  std::atomic<int> manifest_requests{0}, not_modified{0}, ticket_requests{0}, shard_requests{0};
  std::atomic<int> shard_requests_with_authorization{0};

  // The tar of a key group, as the protocol defines it.
  std::string tar_of(std::size_t shard, const std::vector<std::string>& keys) const {
    std::string out;
    TarWriter writer([&out](std::span<const std::byte> bytes) -> Result<void> {
      out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      return ok();
    });
    for (const auto& id : data_.shards.at(shard)) {
      for (const auto& key : keys) {
        const std::string payload = fake_payload(id, key);
        (void)writer.add_member(id + "." + key, std::as_bytes(std::span(payload.data(), payload.size())));
      }
    }
    (void)writer.finish();
    return out;
  }

 private:
  std::string shard_url_base() {
    std::lock_guard lock(shard_url_base_mu_);
    return shard_url_base_;
  }
  std::string etag() const { return "\"" + data_.manifest_ref + "." + std::to_string(data_.revision) + "\""; }

  void manifest(const httplib::Request& req, httplib::Response& res) {
    ++manifest_requests;
    if (req.matches[1].str() != data_.dataset || req.matches[2].str() != data_.split) {
      res.status = 404;
      res.set_content(R"({"error":{"code":"not_found","message":"unknown dataset"}})", "application/json");
      return;
    }
    if (req.has_param("revision") && req.get_param_value("revision") != std::to_string(data_.revision)) {
      res.status = 404;
      res.set_content(R"({"error":{"code":"not_found","message":"unknown revision"}})", "application/json");
      return;
    }
    res.set_header("ETag", etag());
    if (req.get_header_value("If-None-Match") == etag()) {
      ++not_modified;
      res.status = 304;
      return;
    }
    nlohmann::json shards = nlohmann::json::array();
    for (std::size_t i = 0; i < data_.shards.size(); ++i)
      shards.push_back({{"index", i}, {"samples", data_.shards[i]}});
    const nlohmann::json body = {
        {"dataset", data_.dataset},   {"split", data_.split}, {"manifest_ref", data_.manifest_ref},
        {"revision", data_.revision}, {"keys", data_.keys},   {"shards", shards}};
    res.set_content(body.dump(), "application/json");
  }

  void ticket(const httplib::Request& req, httplib::Response& res) {
    ++ticket_requests;
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    const auto index = body["shard_index"].get<std::size_t>();
    auto keys = body["keys"].get<std::vector<std::string>>();
    if (index >= data_.shards.size()) {
      res.status = 404;
      res.set_content(R"({"error":{"code":"not_found","message":"unknown shard index"}})", "application/json");
      return;
    }
    ShardIdentity identity{data_.manifest_ref, std::to_string(data_.revision), index, keys, data_.shards[index]};
    std::string hash = compute_content_hash(identity).hex();
    std::string tar = tar_of(index, keys);
    // Breaks the checksum field of a member's header: payloads are under 512 bytes, so member m's is at 1024 * m.
    const std::size_t broken_at = 1024 * std::size_t(broken_member.load());
    if (broken_tar && tar.size() > broken_at + 1024) tar[broken_at + 148] ^= 1;
    {
      std::lock_guard lock(mu_);
      tars_[hash] = tar;
    }
    Sha256Hasher hasher;
    hasher.update(tar.data(), tar.size());
    if (wrong_content_hash) hash = std::string(64, 'e');
    const nlohmann::json out = {
        {"content_hash", hash},
        {"size", tar.size()},
        {"sha256", hasher.finish().hex()},
        {"url", shard_url_base() + "/shards/" + compute_content_hash(identity).hex() + ".tar?sig=x"},
        {"expires_at", 4102444800}};
    res.set_content(out.dump(), "application/json");
  }

  void shard(const httplib::Request& req, httplib::Response& res) {
    ++shard_requests;
    if (req.has_header("Authorization")) ++shard_requests_with_authorization;
    if (const int delay = shard_delay_ms.load(); delay > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    if (expire_downloads.load() > 0) {
      --expire_downloads;
      res.status = 410;
      res.set_content(R"({"error":{"code":"expired","message":"ticket expired"}})", "application/json");
      return;
    }
    std::string tar;
    {
      std::lock_guard lock(mu_);
      auto it = tars_.find(req.matches[1].str());
      if (it == tars_.end()) {
        res.status = 404;
        return;
      }
      tar = it->second;
    }
    if (corrupt_bytes && !tar.empty()) tar[tar.size() / 2] ^= 1;
    res.set_content(tar, "application/x-tar");
  }

  FakeDataset data_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::string> tars_;  // guarded by mu_
  std::mutex shard_url_base_mu_;
  std::string shard_url_base_;
};

}  // namespace datavo::clienttest
