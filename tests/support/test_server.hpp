// Test support: running tests/support/http_fault_server.py as a child process, talking to it without going
// through the code under test, and a string ByteSink double.
//
// Typical use (one server per test suite, counters reset per test):
//
//   static std::unique_ptr<datavo::test::FaultServer> server;
//   static void SetUpTestSuite() {
//     server = std::make_unique<datavo::test::FaultServer>(datavo::test::FaultServerOptions{.root = dir});
//     ASSERT_TRUE(server->started()) << server->error();
//   }
//   void SetUp() override { ASSERT_TRUE(server->reset()); }
//   ... fetch server->url("/faults/truncate/big.bin") ...; EXPECT_EQ(server->requests("/faults/truncate/big.bin"), 2);
//
// See the docstring of http_fault_server.py for its URLs and fault modes.
// Thread safety: none of these classes is thread-safe, except that FaultServer's HTTP helpers may be called from
// several threads at once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/tier.hpp"

namespace datavo::test {

// The Datavo source tree: $DATAVO_SOURCE_DIR when set, else derived from the path this file was compiled from.
std::string source_dir();

// A child process started with fork + exec. Owns it: stop() (or the destructor) terminates it by PID and reaps it.
// The child is also sent SIGKILL by the kernel if the thread that started it dies (PR_SET_PDEATHSIG), so a crashed
// test never leaves a server behind.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { stop(); }
  ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (looked up in $PATH when it has no '/'). REQUIRES: !argv.empty() and no child running.
  // Returns false and sets *error when the program cannot be found or fork fails.
  bool start(const std::vector<std::string>& argv, std::string* error);
  // Whether the child is still running (reaps it when it has exited).
  bool running();
  // SIGTERM, then SIGKILL after `grace`; always reaps. Returns the wait status, or -1 when nothing was running.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds{3000});
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// A minimal HTTP/1.0 exchange over a loopback socket, independent of src/net. status 0 means it failed.
struct RawResponse {
  int status = 0;
  std::string body;
};
RawResponse raw_http(int port, std::string_view method, std::string_view target,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});

struct FaultServerOptions {
  std::string root{};                         // the directory served (required)
  std::optional<int> delay_ms{};              // --delay-ms
  std::optional<std::uint64_t> rate_limit{};  // --rate-limit, bytes/s
  bool no_ranges = false;                     // --no-ranges
  bool verbose = false;                       // --verbose: log every request to stderr
  std::vector<std::string> extra_args{};
};

// http_fault_server.py running on 127.0.0.1 for the lifetime of this object.
class FaultServer {
 public:
  // Starts the server and waits up to 10 s for it to listen. Check started(); error() says what went wrong.
  explicit FaultServer(FaultServerOptions options);
  ~FaultServer();
  FaultServer(const FaultServer&) = delete;
  FaultServer& operator=(const FaultServer&) = delete;

  bool started() const { return port_ > 0; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  pid_t pid() const { return child_.pid(); }
  // "http://127.0.0.1:<port>" + path_and_query (which starts with '/').
  std::string url(std::string_view path_and_query) const;

  // GET /_stats: the JSON text, or "" when the server does not answer.
  std::string stats_json() const;
  // Counters from /_stats for a URL path (no query string); 0 when the path was never requested.
  int requests(std::string_view path) const;
  int range_requests(std::string_view path) const;
  // The Range headers the server received for `path`, in order (requests without one are skipped).
  std::vector<std::string> ranges(std::string_view path) const;
  // POST /_reset. Returns false when the server does not answer.
  bool reset() const;
  // Terminates the server (SIGTERM, then SIGKILL) and removes its port file. Idempotent.
  void stop();

 private:
  ChildProcess child_;
  std::string work_dir_;  // holds the port file
  int port_ = 0;
  std::string error_;
};

// A ByteSink double that keeps the bytes in a string and counts restarts. `fail_writes_with` makes write() fail.
class StringSink final : public ByteSink {
 public:
  Result<void> write(const void* data, std::size_t size) override {
    if (fail_writes_with) return *fail_writes_with;
    data_.append(static_cast<const char*>(data), size);
    return ok();
  }
  Bytes written() const override { return Bytes{data_.size()}; }
  Result<void> restart() override {
    ++restarts_;
    data_.clear();
    return ok();
  }

  const std::string& data() const { return data_; }
  int restarts() const { return restarts_; }
  // Pre-fills the sink, as a sink left over from a failed attempt would be.
  void prefill(std::string bytes) { data_ = std::move(bytes); }

  std::optional<Error> fail_writes_with;

 private:
  std::string data_;
  int restarts_ = 0;
};

}  // namespace datavo::test
