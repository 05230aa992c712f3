// Test support for the cloud credential providers (tests/unit/tier/{gcs,azure}/): an in-process cpp-httplib server
// on 127.0.0.1 for fake token endpoints, a fake environment (variables, home, a clock that tests advance), a
// closed loopback port, and stderr capture for the "no secret in any log line" checks.
//
// Thread safety: FakeHttpServer handlers run on the server's threads; FakeEnvironment's state is guarded by a
// mutex, so providers may read it from any thread while a test changes it.
#pragma once

// Debian's libcpp-httplib is built with these; every translation unit that includes the header must match them.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "net/http_client.hpp"
#include "tier/cloud/credential_env.hpp"

namespace datavo::credtest {

// A cpp-httplib server on 127.0.0.1. Register handlers on server() first, then start().
class FakeHttpServer {
 public:
  // One request per connection: a keep-alive connection left in a client's pool would hold the server's stop()
  // for the keep-alive timeout (5 s).
  FakeHttpServer() { server_.set_keep_alive_max_count(1); }
  ~FakeHttpServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  httplib::Server& server() { return server_; }
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    // bind_to_any_port() already listens: connections queue until the accept loop starts.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait for it, or the destructor could join forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string host_port() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

// A loopback port nothing listens on (bound, then closed: connections to it are refused at once).
inline int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Environment variables, a home directory and a clock (the real time plus an offset the test advances).
class FakeEnvironment {
 public:
  void set(const std::string& name, const std::string& value) {
    std::lock_guard lock(state_->mutex);
    state_->vars[name] = value;
  }
  void unset(const std::string& name) {
    std::lock_guard lock(state_->mutex);
    state_->vars.erase(name);
  }
  void advance(std::chrono::milliseconds by) {
    std::lock_guard lock(state_->mutex);
    state_->offset += by;
  }
  cloud::WallClock::time_point now() const {
    std::lock_guard lock(state_->mutex);
    return state_->base + state_->offset;
  }
  void set_home(std::string home) { home_ = std::move(home); }

  // A CredentialEnv reading this object's current state (also after later set() and advance() calls).
  cloud::CredentialEnv env() const {
    cloud::CredentialEnv out;
    auto state = state_;
    out.getenv = [state](const std::string& name) -> std::optional<std::string> {
      std::lock_guard lock(state->mutex);
      auto it = state->vars.find(name);
      if (it == state->vars.end()) return std::nullopt;
      return it->second;
    };
    out.home = home_;
    out.clock = std::make_shared<Clock>(state_);
    return out;
  }

 private:
  struct State {
    std::mutex mutex;
    std::map<std::string, std::string> vars;
    cloud::WallClock::time_point base = std::chrono::time_point_cast<std::chrono::seconds>(cloud::WallClock::now());
    std::chrono::milliseconds offset{0};
  };
  // Wall time from the state; steady time and sleeps are the real ones (the transport's retries really wait).
  class Clock final : public net::Clock {
   public:
    explicit Clock(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
    std::chrono::system_clock::time_point wall_now() override {
      std::lock_guard lock(state_->mutex);
      return state_->base + state_->offset;
    }
    void sleep_for(Milliseconds duration) override { std::this_thread::sleep_for(duration); }

   private:
    const std::shared_ptr<State> state_;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::string home_;
};

// Redirects this process's stderr (fd 2) into a file for its lifetime; text() returns what was written.
class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    FILE* file = std::fopen(path_.c_str(), "w");
    ::dup2(::fileno(file), STDERR_FILENO);
    std::fclose(file);
  }
  ~StderrCapture() { restore(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

// An HttpClient with quick retries, for the token endpoints of the tests.
inline std::shared_ptr<net::HttpClient> fast_http_client() {
  TransportOptions options;
  options.connect_timeout = Milliseconds{2'000};
  options.stall_timeout = Seconds{5};
  options.max_attempts = 3;
  options.initial_backoff = Milliseconds{10};
  options.max_backoff = Milliseconds{50};
  return std::make_shared<net::HttpClient>(options);
}

// The fields of an application/x-www-form-urlencoded request body, decoded.
inline std::map<std::string, std::string> form_of(const httplib::Request& request) {
  httplib::Params params;
  httplib::detail::parse_query_text(request.body, params);
  return std::map<std::string, std::string>(params.begin(), params.end());
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace datavo::credtest
