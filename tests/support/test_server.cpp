#include "support/test_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace datavo::test {
namespace {

using namespace std::chrono_literals;

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/datavo-fault-server-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

nlohmann::json parse_stats(const std::string& text) {
  return text.empty() ? nlohmann::json() : nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

int path_counter(const std::string& stats, std::string_view path, const char* field) {
  auto json = parse_stats(stats);
  if (!json.is_object() || !json.contains("paths")) return 0;
  const auto& paths = json["paths"];
  auto entry = paths.find(std::string(path));
  if (entry == paths.end() || !entry->contains(field)) return 0;
  return (*entry)[field].get<int>();
}

}  // namespace

std::string source_dir() {
  if (const char* env = std::getenv("DATAVO_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  // This file is <source>/tests/support/test_server.cpp.
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    stop();
    pid_ = other.pid_;
    other.pid_ = -1;
  }
  return *this;
}

bool ChildProcess::start(const std::vector<std::string>& argv, std::string* error) {
  std::string program = argv.at(0);
  if (program.find('/') == std::string::npos) program = find_in_path(program);
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    *error = "cannot find an executable " + argv[0];
    return false;
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls are allowed.
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    ::execv(program.c_str(), args.data());
    ::_exit(127);
  }
  pid_ = pid;
  return true;
}

bool ChildProcess::running() {
  if (pid_ < 0) return false;
  int status = 0;
  pid_t got;
  do {
    got = ::waitpid(pid_, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return true;
  pid_ = -1;
  return false;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ < 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    const pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_ || (got < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  pid_ = -1;
  return status;
}

RawResponse raw_http(int port, std::string_view method, std::string_view target, std::chrono::milliseconds timeout) {
  RawResponse response;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return response;
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string raw;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    std::string request = std::string(method) + " " + std::string(target) +
                          " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
      char buffer[16384];
      for (;;) {
        const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        raw.append(buffer, std::size_t(got));
      }
    }
  }
  ::close(fd);
  const auto header_end = raw.find("\r\n\r\n");
  const auto space = raw.find(' ');
  if (header_end == std::string::npos || space == std::string::npos || space > header_end) return response;
  response.status = std::atoi(raw.c_str() + space + 1);
  response.body = raw.substr(header_end + 4);
  return response;
}

FaultServer::FaultServer(FaultServerOptions options) {
  const std::string script = source_dir() + "/tests/support/http_fault_server.py";
  if (::access(script.c_str(), R_OK) != 0) {
    error_ = "cannot read " + script + " (set DATAVO_SOURCE_DIR)";
    return;
  }
  work_dir_ = make_temp_dir();
  if (work_dir_.empty()) {
    error_ = std::string("mkdtemp: ") + std::strerror(errno);
    return;
  }
  const std::string port_file = work_dir_ + "/port";
  std::vector<std::string> argv = {"python3", script, "--root", options.root, "--port-file", port_file};
  if (options.delay_ms) argv.insert(argv.end(), {"--delay-ms", std::to_string(*options.delay_ms)});
  if (options.rate_limit) argv.insert(argv.end(), {"--rate-limit", std::to_string(*options.rate_limit)});
  if (options.no_ranges) argv.push_back("--no-ranges");
  if (options.verbose) argv.push_back("--verbose");
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  if (!child_.start(argv, &error_)) return;

  // The server writes the port file atomically once it listens; python starts in well under a second.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) {
      port_ = port;
      return;
    }
    if (!child_.running()) {
      error_ = "http_fault_server.py exited before listening";
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  error_ = "http_fault_server.py did not write " + port_file + " within 10 s";
  child_.stop();
}

FaultServer::~FaultServer() { stop(); }

void FaultServer::stop() {
  child_.stop();
  if (!work_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(work_dir_, ignored);
    work_dir_.clear();
  }
}

std::string FaultServer::url(std::string_view path_and_query) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string(path_and_query);
}

std::string FaultServer::stats_json() const {
  auto response = raw_http(port_, "GET", "/_stats");
  return response.status == 200 ? response.body : std::string();
}

int FaultServer::requests(std::string_view path) const { return path_counter(stats_json(), path, "requests"); }

int FaultServer::range_requests(std::string_view path) const {
  return path_counter(stats_json(), path, "range_requests");
}

std::vector<std::string> FaultServer::ranges(std::string_view path) const {
  std::vector<std::string> out;
  auto json = parse_stats(stats_json());
  if (!json.is_object() || !json.contains("log")) return out;
  for (const auto& entry : json["log"])
    if (entry.value("path", "") == path && entry.contains("range") && entry["range"].is_string())
      out.push_back(entry["range"].get<std::string>());
  return out;
}

bool FaultServer::reset() const { return raw_http(port_, "POST", "/_reset").status == 200; }

}  // namespace datavo::test
