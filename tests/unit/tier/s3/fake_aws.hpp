// Test support for the S3 auth tests: in-process fake AWS endpoints on 127.0.0.1 (cpp-httplib), a settable clock,
// an AWS environment that reads no real variable, and stderr capture. Nothing here talks off loopback.
//
// Thread safety: LoopbackServer handlers run on the server's threads; the counters are atomics and the rest is
// guarded by each fake's mutex. FakeClock is thread-safe.
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/s3/aws_credentials.hpp"
#include "tier/s3/sigv4.hpp"

namespace datavo::s3test {

// An httplib::Server bound to an ephemeral port on 127.0.0.1. Add routes with server() before start().
class LoopbackServer {
 public:
  LoopbackServer() = default;
  ~LoopbackServer() { stop(); }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  httplib::Server& server() { return server_; }
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    // bind_to_any_port() already listens: connections queue until the accept loop starts.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait for it, or the destructor could join forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

// Wall time that only moves when told to; sleeps return at once and advance both clocks.
class FakeClock final : public net::Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point wall) : wall_(wall) {}
  std::chrono::steady_clock::time_point now() override {
    std::lock_guard lock(mutex_);
    return steady_base_ + advanced_;
  }
  std::chrono::system_clock::time_point wall_now() override {
    std::lock_guard lock(mutex_);
    return wall_ + advanced_;
  }
  void sleep_for(Milliseconds duration) override { advance(duration); }
  void advance(std::chrono::system_clock::duration by) {
    std::lock_guard lock(mutex_);
    advanced_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(by);
  }

 private:
  std::mutex mutex_;
  const std::chrono::system_clock::time_point wall_;
  const std::chrono::steady_clock::time_point steady_base_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration advanced_{0};
};

// "2013-05-24T00:00:00Z" for the fake answers.
inline std::string iso8601(std::chrono::system_clock::time_point when) {
  const time_t seconds = std::chrono::system_clock::to_time_t(when);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  return std::string(buffer, std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc));
}

// A CredentialEnv over a map instead of the process environment, on a FakeClock; the ECS agent's host for the
// chain's options. The map is copied when env() is called.
struct FakeEnvironment {
  std::map<std::string, std::string> vars;
  std::string home;
  std::shared_ptr<FakeClock> clock;
  std::string container_host = "http://127.0.0.1:9";  // nothing listens on the discard port

  cloud::CredentialEnv env() const {
    cloud::CredentialEnv out;
    out.getenv = [vars = vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    out.home = home;
    out.clock = clock;
    return out;
  }
};

// A fake S3 that knows the secret of each access key id in `secrets`, refuses the session tokens in
// expire_token() with 400 ExpiredToken (before the signature, as S3 cannot check a signature without valid
// credentials), checks the SigV4 signature of every other request from what arrived on the wire (the Host
// header, the raw request target, every header), and answers "ok".
class FakeS3 {
 public:
  using Secrets = std::map<std::string, std::string>;  // access key id -> secret access key
  explicit FakeS3(Secrets secrets, std::string region = "us-east-1")
      : secrets_(std::move(secrets)), region_(std::move(region)) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    server_.server().Get(".*", handler);
    server_.server().Put(".*", handler);
    server_.server().Delete(".*", handler);
    server_.start();
  }

  std::string url(const std::string& path) const { return server_.url(path); }

  void expire_token(const std::string& token) {
    std::lock_guard lock(mutex_);
    expired_tokens_.push_back(token);
  }
  std::vector<std::string> tokens_seen() {
    std::lock_guard lock(mutex_);
    return tokens_seen_;
  }
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mutex_);
    return authorizations_;
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mutex_);
    return failures_;
  }
  std::map<std::string, std::string> last_signed_headers() {
    std::lock_guard lock(mutex_);
    return last_signed_headers_;
  }

  std::atomic<int> requests{0};
  std::atomic<int> accepted{0};

 private:
  static std::string error_xml(const std::string& code) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" + code +
           " (fake S3)</Message><RequestId>FAKE</RequestId></Error>";
  }

  void refuse(httplib::Response& res, int status, const std::string& code, const std::string& why) {
    {
      std::lock_guard lock(mutex_);
      failures_.push_back(code + ": " + why);
    }
    res.status = status;
    res.set_content(error_xml(code), "application/xml");
  }

  void handle(const httplib::Request& req, httplib::Response& res) {
    ++requests;
    const std::string authorization = req.get_header_value("Authorization");
    const std::string token = req.get_header_value("x-amz-security-token");
    {
      std::lock_guard lock(mutex_);
      authorizations_.push_back(authorization);
      tokens_seen_.push_back(token);
    }
    // "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/s3/aws4_request, SignedHeaders=<...>, Signature=<...>"
    const std::string prefix = "AWS4-HMAC-SHA256 Credential=";
    const auto headers_at = authorization.find(", SignedHeaders=");
    const auto signature_at = authorization.find(", Signature=");
    if (authorization.rfind(prefix, 0) != 0 || headers_at == std::string::npos || signature_at == std::string::npos)
      return refuse(res, 403, "AccessDenied", "no SigV4 Authorization header");
    const std::string credential = authorization.substr(prefix.size(), headers_at - prefix.size());
    const std::string signed_headers = authorization.substr(headers_at + 16, signature_at - headers_at - 16);
    const std::string signature = authorization.substr(signature_at + 12);

    const std::string key_id = credential.substr(0, credential.find('/'));
    {
      std::lock_guard lock(mutex_);
      if (std::find(expired_tokens_.begin(), expired_tokens_.end(), token) != expired_tokens_.end()) {
        res.status = 400;
        res.set_content(error_xml("ExpiredToken"), "application/xml");
        return;
      }
    }
    auto secret = secrets_.find(key_id);
    if (secret == secrets_.end()) return refuse(res, 403, "InvalidAccessKeyId", "unknown key " + key_id);

    net::HttpHeaders wire;
    for (const auto& [name, value] : req.headers) wire.push_back({name, value});
    const std::string date = req.get_header_value("x-amz-date");
    struct tm utc {};
    if (date.size() != 16 || strptime(date.c_str(), "%Y%m%dT%H%M%SZ", &utc) == nullptr)
      return refuse(res, 403, "AccessDenied", "bad x-amz-date " + date);
    const auto when = std::chrono::system_clock::from_time_t(timegm(&utc));
    const std::string payload_hash = req.get_header_value("x-amz-content-sha256");
    if (payload_hash != s3::k_unsigned_payload && payload_hash != s3::sha256_hex(req.body))
      return refuse(res, 400, "XAmzContentSHA256Mismatch", "body hash");
    net::HttpMethod method = net::HttpMethod::get;
    if (req.method == "PUT") method = net::HttpMethod::put;
    if (req.method == "DELETE") method = net::HttpMethod::delete_;
    if (req.method == "HEAD") method = net::HttpMethod::head;
    s3::AwsCredentials credentials{key_id, secret->second, token, std::nullopt, "fake"};
    auto expected = s3::sign_request(method, "http://" + req.get_header_value("Host") + req.target, wire, payload_hash,
                                     credentials, s3::SigningScope{region_, "s3", when});
    if (!expected) return refuse(res, 403, "AccessDenied", expected.error().message);
    {
      std::lock_guard lock(mutex_);
      last_signed_headers_.clear();
      for (const auto& header : wire)
        if (s3::is_signed_header(header.name)) last_signed_headers_[header.name] = header.value;
    }
    if (expected->signed_headers != signed_headers)
      return refuse(res, 403, "AccessDenied",
                    "signed headers " + signed_headers + " but the wire has " + expected->signed_headers);
    if (expected->signature != signature)
      return refuse(res, 403, "SignatureDoesNotMatch", "canonical request:\n" + expected->canonical_request);
    ++accepted;
    res.set_content("ok", "text/plain");
  }

  const std::map<std::string, std::string> secrets_;
  const std::string region_;
  std::mutex mutex_;
  std::vector<std::string> expired_tokens_;
  std::vector<std::string> tokens_seen_;
  std::vector<std::string> authorizations_;
  std::vector<std::string> failures_;
  std::map<std::string, std::string> last_signed_headers_;
  LoopbackServer server_;  // last: stopped first, before the state its handlers use
};

// A fake ECS credentials endpoint at /creds: checks the Authorization token (when `token` is set) and hands out
// credentials numbered by fetch ("ECSKEY1", "ecs-secret-1", "ecs-token-1", ...) that expire `lifetime` after the
// fake clock's now.
class FakeEcs {
 public:
  FakeEcs(std::shared_ptr<FakeClock> clock, std::chrono::seconds lifetime, std::string token = "")
      : clock_(std::move(clock)), lifetime_(lifetime), token_(std::move(token)) {
    server_.server().Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      paths_seen_add(req.path);
      if (!token_.empty() && req.get_header_value("Authorization") != token_) {
        res.status = 401;
        res.set_content("{\"message\":\"bad token\"}", "application/json");
        return;
      }
      if (failing.load()) {
        res.status = 500;
        res.set_content("{\"message\":\"down\"}", "application/json");
        return;
      }
      const int n = ++fetches;
      res.set_content("{\"AccessKeyId\":\"ECSKEY" + std::to_string(n) + "\",\"SecretAccessKey\":\"ecs-secret-" +
                          std::to_string(n) + "\",\"Token\":\"ecs-token-" + std::to_string(n) + "\",\"Expiration\":\"" +
                          iso8601(clock_->wall_now() + lifetime_) + "\"}",
                      "application/json");
    });
    server_.start();
  }
  std::string url(const std::string& path = "/creds") const { return server_.url(path); }
  std::vector<std::string> paths_seen() {
    std::lock_guard lock(mutex_);
    return paths_;
  }

  std::atomic<int> requests{0};
  std::atomic<int> fetches{0};
  std::atomic<bool> failing{false};

 private:
  void paths_seen_add(const std::string& path) {
    std::lock_guard lock(mutex_);
    paths_.push_back(path);
  }
  const std::shared_ptr<FakeClock> clock_;
  const std::chrono::seconds lifetime_;
  const std::string token_;
  std::mutex mutex_;
  std::vector<std::string> paths_;
  LoopbackServer server_;
};

// Runs `body` with stderr (where log lines go) captured into a string.
template <typename F>
std::string capture_stderr(F body) {
  const auto path = std::filesystem::temp_directory_path() / ("datavo-s3-stderr-" + std::to_string(::getpid()));
  const int file = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  body();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return text;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace datavo::s3test
