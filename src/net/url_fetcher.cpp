#include "datavo/url_fetcher.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <vector>

#include "net/http_client.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"

namespace datavo {
namespace {

// Large enough that syscalls do not dominate a local copy, small enough to stay a modest heap buffer.
constexpr std::size_t k_file_chunk = 1 << 20;

std::string scheme_of(std::string_view url) {
  const auto end = url.find("://");
  if (end == std::string_view::npos) return {};
  std::string scheme(url.substr(0, end));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme;
}

// file:///abs/path or file://localhost/abs/path, percent-escapes decoded. Other hosts are refused: they would
// silently mean "this machine" to open(2).
Result<std::string> file_url_path(std::string_view url) {
  std::string_view rest = url.substr(url.find("://") + 3);
  if (rest.starts_with("localhost/")) rest.remove_prefix(std::string_view("localhost").size());
  if (!rest.starts_with('/'))
    return Error{ErrorCode::invalid_argument,
                 "file URL needs an absolute path (file:///path): " + log::redact_url(url)};
  rest = rest.substr(0, rest.find_first_of("?#"));
  // A NUL would cut the path short at open(2).
  auto path = util::percent_decode(rest);
  if (!path || path->find('\0') != std::string::npos)
    return Error{ErrorCode::invalid_argument, "bad percent-escape in file URL: " + log::redact_url(url)};
  return std::move(*path);
}

Result<Expectation> fetch_file(const std::string& path, ByteSink& sink) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Error{ErrorCode::invalid_argument, path + " is not a regular file"};
  if (sink.written().count() > 0) DATAVO_TRY(sink.restart());

  std::vector<char> buffer(k_file_chunk);
  std::uint64_t total = 0;
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + path);
    }
    if (got == 0) break;
    DATAVO_TRY(sink.write(buffer.data(), std::size_t(got)));
    total += std::uint64_t(got);
  }
  // A file that grows or shrinks under us would be reported with a size its bytes do not have.
  if (total != std::uint64_t(st.st_size))
    return Error{ErrorCode::io, path + " changed size while being read (" + std::to_string(st.st_size) + " -> " +
                                    std::to_string(total) + " bytes)"};
  Expectation expectation;
  expectation.size = Bytes{total};
  return expectation;
}

}  // namespace

Result<std::optional<Seconds>> stall_timeout_from_env() {
  const char* env = std::getenv("DATAVO_STALL_TIMEOUT");
  if (env == nullptr || *env == '\0') return std::optional<Seconds>{};
  const std::string_view text(env);
  long value = 0;
  bool digits = text.size() <= 5;
  for (char c : text) {
    if (c < '0' || c > '9') digits = false;
    if (digits) value = value * 10 + (c - '0');
  }
  if (!digits || value < 1 || value > 86'400) {
    return Error{ErrorCode::invalid_argument,
                 "DATAVO_STALL_TIMEOUT=" + std::string(text) + ": expected a whole number of seconds from 1 to 86400"};
  }
  return std::optional<Seconds>{Seconds{value}};
}

Fetcher make_url_fetcher(std::string url, TransportOptions options, std::optional<std::string> bearer_token,
                         PartialDownload partial) {
  const std::string scheme = scheme_of(url);
  if (scheme == "file") {
    return [url = std::move(url)](ByteSink& sink) -> Result<Expectation> {
      auto path = file_url_path(url);
      if (!path) return std::move(path).error();
      return fetch_file(*path, sink);
    };
  }
  if (scheme == "http" || scheme == "https") {
    // Shared by copies of the fetcher, so that retries of the hierarchy reuse the connection.
    auto client = std::make_shared<net::HttpClient>(std::move(options));
    std::shared_ptr<net::RequestAuth> auth;
    if (bearer_token) auth = net::bearer_auth(std::move(*bearer_token));
    return [client, auth, partial, url = std::move(url)](ByteSink& sink) -> Result<Expectation> {
      net::HttpRequest request;
      request.url = url;
      request.sink = &sink;
      request.auth = auth.get();
      if (partial == PartialDownload::continue_verified) request.resume = net::Resume::continue_sink;
      auto response = client->perform(request);
      if (!response) return std::move(response).error();
      LOG_DEBUG(net::describe_for_log(request.method, url)
                << ": " << response->body_bytes.count() << " bytes in " << response->attempts << " attempt(s), "
                << response->elapsed.count() << " ms");
      Expectation expectation;
      if (response->entity_size) expectation.size = Bytes{*response->entity_size};
      return expectation;
    };
  }
  return [url = std::move(url)](ByteSink&) -> Result<Expectation> {
    return Error{ErrorCode::invalid_argument,
                 "unsupported URL scheme (want http, https or file): " + log::redact_url(url)};
  };
}

}  // namespace datavo
