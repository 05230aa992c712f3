// HttpClient: the one HTTP transport of Datavo, over libcurl. Every backend that speaks HTTP (the URL fetcher, the
// S3 / GCS / Azure tiers, the Datavo origin client) builds HttpRequests and hands them to HttpClient::perform();
// none of them carries its own retry loop, timeout or logging of URLs.
//
// What perform() does for every request:
//   - Timeouts: connect_timeout for the TCP/TLS connect; a transfer that makes no progress for stall_timeout (no
//     byte sent or received, also while waiting for the response) or that averages under 1 byte/s over that window
//     (CURLOPT_LOW_SPEED_*) is aborted as stalled. There is no total deadline unless the request sets one (see
//     Deadline below): a slow but moving download goes on.
//   - Retries: up to max_attempts attempts in all. Transient failures are retried: connection refused / reset, DNS
//     failures, timeouts and stalls, a body shorter than its Content-Length, HTTP 408, 429 and 5xx (but 501, 505).
//     Other failures are permanent and returned at once: other 4xx, a malformed URL, a failing sink.
//     A non-idempotent request (POST by default, see HttpRequest::idempotent) is retried only when the server
//     cannot have acted on it: connection refused, DNS failure, 429 and 503.
//   - Backoff: before retry n (n >= 1) it sleeps a uniform random time in [0, min(max_backoff, initial_backoff *
//     2^(n-1))] ("full jitter"). On 429 and 503 a Retry-After header (delay-seconds or an HTTP-date) replaces that,
//     capped at k_max_retry_after.
//   - Resume: a GET that streams into a sink (HttpRequest::sink) and fails mid-body is resumed with
//     "Range: bytes=<written>-" (and If-Range with the entity's validator) when the server supports ranges
//     ("Accept-Ranges: bytes" or an earlier 206); the 206's Content-Range start must equal the bytes already
//     written. Otherwise (no range support, a 200 answer to the Range, a Content-Range mismatch) the sink is
//     restart()ed and the entity fetched again from its first byte.
//   - Status mapping: 2xx and 3xx (e.g. 304 Not Modified; redirects are followed, at most 5, http/https only) are
//     responses. A status >= 400 is an Error (error_for_status) unless it is listed in accepted_statuses, in which
//     case it is a response too (e.g. 404 for a tier that treats it as a miss).
//   - Authentication is per request (HttpRequest::auth, a RequestAuth): before every attempt, after the transport
//     has added its own headers (Range, If-Range), the request's RequestAuth prepares the attempt (adds a bearer
//     token, signs it with SigV4 or SharedKey, appends a SAS), so that a signature covers every header sent and a
//     retry is signed afresh. When an attempt is refused (401, 403, or an error body such as ExpiredToken) and the
//     RequestAuth says it refreshed its credentials, that one request is repeated at once (once per perform()).
//   - Deadline: HttpRequest::deadline bounds the whole perform(), retries and backoff included (ErrorCode::timeout).
//   - Cancellation: once util::request_cancel() was called (the CLI does on SIGINT / SIGTERM), a transfer stops
//     within a fraction of a second, a backoff sleep ends, no new attempt starts, and perform() returns
//     ErrorCode::cancelled (never retried). The sink keeps what it had; its owner's RAII discards it. A request
//     made inside a util::CleanupScope (releasing a lease, aborting an upload) is exempt: it is sent and retried
//     as usual, but stops at util::cleanup_deadline() (k_cleanup_budget after the cancellation) with cancelled.
//   - Connections: kept alive and reused between requests, with TCP_NODELAY (no wait for a delayed ACK).
//   - Logging: one DEBUG line per attempt, an INFO line per retry. URLs pass through log::redact_url (query string
//     and user:password@ removed); Authorization and other credential headers are never logged, and Error messages
//     carry the redacted URL only.
//
// Thread safety: one HttpClient may be used from any number of threads at once; it keeps a small pool of idle curl
// handles so that connections (and TLS sessions) are reused between requests. An HttpRequest, its sink and its
// upload source belong to the calling thread for the duration of perform().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "datavo/byte_sink.hpp"
#include "datavo/result.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo::net {

// Retry-After values above this are clamped to it, so a confused server cannot park a caller for hours.
inline constexpr Milliseconds k_max_retry_after{60'000};

// The time seam of the transport: backoff and Retry-After sleeps go through sleep_for(), and HTTP-date
// Retry-After values are measured against wall_now(). Tests substitute a clock that records the sleeps and
// returns at once. Implementations must be thread-safe. (Stall detection uses the real steady clock: it times
// real sockets.)
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() = 0;
  virtual std::chrono::system_clock::time_point wall_now() = 0;
  virtual void sleep_for(Milliseconds duration) = 0;
};

// The real clock: std::chrono, and util::sleep_unless_cancelled for sleeps (a cancellation ends them at once).
// Shared, never null.
std::shared_ptr<Clock> system_clock();

enum class HttpMethod { get, head, put, post, delete_ };
const char* to_string(HttpMethod method);

struct HttpHeader {
  std::string name;
  std::string value;  // an empty value is sent as "Name:" with no value
};
using HttpHeaders = std::vector<HttpHeader>;

// The value of the first header called `name` (ASCII case-insensitive), or nullopt.
std::optional<std::string_view> find_header(const HttpHeaders& headers, std::string_view name);

// An upload of `size` bytes read from a file descriptor with pread() from `offset`, so that every retry resends
// it whole and parts of one file can be sent by several threads at once; `head` and `tail` are sent before and
// after those bytes (the framing of a multipart/related body). The descriptor is borrowed: it must stay open for
// the duration of perform().
struct FileBody {
  int fd = -1;
  Bytes size;  // of the file's bytes, without head and tail
  std::uint64_t offset = 0;
  std::string head{};
  std::string tail{};
};

// No body, a body held in memory, or a file.
using RequestBody = std::variant<std::monostate, std::string, FileBody>;

// Whether a streamed GET that fails mid-body may continue with a Range request (see the top of this file).
//   if_supported:  yes, once the server has shown it supports ranges; a sink that holds bytes at the start of
//                  perform() is restarted.
//   continue_sink: the same, and a sink that already holds bytes at the start (a download a killed process left
//                  half-done) is continued from there with "Range: bytes=<written>-" and no validator. Only for
//                  callers that verify the whole entity afterwards (a known SHA-256): nothing says those bytes are
//                  a prefix of the entity the server has now.
//   never:         a failed transfer starts over from the first byte.
enum class Resume { if_supported, continue_sink, never };

// One attempt of a request as it will be sent: what a RequestAuth sees and may change.
struct PreparedRequest {
  HttpMethod method = HttpMethod::get;
  std::string url;      // a RequestAuth may append query parameters (a SAS)
  HttpHeaders headers;  // the request's headers, then the transport's (Range, If-Range); a RequestAuth adds its own
  const RequestBody* body = nullptr;
  std::uint64_t body_size = 0;
};

// Per-request authentication, called by the transport for every attempt (see the top of this file).
// Implementations must be thread-safe: one RequestAuth serves many requests at once.
class RequestAuth {
 public:
  virtual ~RequestAuth() = default;
  // Adds the credential to `request` (attempt is 1-based). An Error ends perform() with it, unretried (e.g. no
  // credentials could be found: permission_denied naming where they were looked for).
  virtual Result<void> prepare(PreparedRequest& request, int attempt) = 0;
  // The attempt was answered `status` (>= 400) with `body` (at most 64 KiB). Returns true when the credential
  // was stale and has been refreshed, so that the request is worth repeating at once.
  virtual bool refresh_after_refusal(long status, const HttpHeaders& headers, std::string_view body) {
    (void)status, (void)headers, (void)body;
    return false;
  }
};

// Bearer authorization, the one RequestAuth of its kind: "Authorization: Bearer <token>" on every attempt, the
// token never logged. The token comes from a BearerSource: a fixed token (the origin's, a URL's), or a cache of
// tokens that expire (cloud::make_bearer_auth over a cloud::TokenProvider, for GCS and Azure AD).
struct BearerSource {
  // The token of this attempt. An Error ends the request with it. REQUIRED.
  std::function<Result<std::string>()> token;
  // Who issues the tokens, for the error of one holding a line break (refused as `remote`, never sent). nullptr: the
  // token is the caller's own, and that error is an `invalid_argument`.
  std::function<std::string()> issuer;
  // After a refusal (status >= 400, its headers and at most 64 KiB of body): returns true when it says the token is
  // stale and the source has dropped it, so that the transport repeats the request once with a fresh one. nullptr:
  // never (a fixed token has nothing fresher).
  std::function<bool(long status, const HttpHeaders& headers, std::string_view body)> drop_if_stale;
  // What every attempt needs besides the token (Azure: x-ms-date and x-ms-version). nullptr: nothing.
  std::function<void(PreparedRequest& request)> decorate;
};
// REQUIRES: source.token. Thread-safe if the source's functions are.
std::shared_ptr<RequestAuth> bearer_auth(BearerSource source);
// A fixed token.
std::shared_ptr<RequestAuth> bearer_auth(std::string token);

struct HttpRequest {
  HttpMethod method = HttpMethod::get;
  std::string url;  // http:// or https://; credentials in it are used and never logged
  HttpHeaders headers;
  RequestBody body;
  // Where the body of a 2xx response goes. nullptr: into HttpResponse::body. Otherwise the sink receives exactly
  // the entity's bytes: it is restart()ed first if it is not empty and whenever the transfer starts over, and it
  // never sees the body of an error response (that goes, truncated to 64 KiB, into HttpResponse::body). An Error
  // returned by the sink ends perform() with that Error, without retrying. Not owned.
  ByteSink* sink = nullptr;
  // Ignored when the request has its own Range header or is not a GET.
  Resume resume = Resume::if_supported;
  // Statuses >= 400 returned as HttpResponses instead of Errors (they are then not retried either).
  std::vector<long> accepted_statuses;
  // Whether the request may be repeated after the server may have acted on it. Default: every method but POST.
  std::optional<bool> idempotent;
  // Signs or authorizes every attempt; nullptr sends the request as it is. Not owned.
  RequestAuth* auth = nullptr;
  // The most the whole perform() may take, retries and backoff included. nullopt: no limit (a slow but moving
  // download goes on).
  std::optional<Milliseconds> deadline;
  // Words the body of an error response for the Error's message (a cloud service's own error, in a sentence
  // that keeps its code); nullptr, or "" from it: a printable excerpt of the body.
  std::string (*describe_error_body)(long status, std::string_view body) = nullptr;
};

struct HttpResponse {
  long status = 0;
  std::string reason;   // the reason phrase of the status line, possibly empty
  HttpHeaders headers;  // of the final response (after redirects), in order
  std::string body;     // see HttpRequest::sink
  // The size of the whole entity: Content-Length of a 200 (or of a HEAD), the total of a 206's Content-Range.
  std::optional<std::uint64_t> entity_size;
  Bytes body_bytes;            // bytes in the destination (sink or body) at the end
  int attempts = 0;            // attempts made, >= 1
  Milliseconds elapsed{0};     // the whole perform(), backoff sleeps included (as told by the Clock)
  Milliseconds first_byte{0};  // last attempt: from its start to the first response byte (curl STARTTRANSFER)

  std::optional<std::string_view> header(std::string_view name) const { return find_header(headers, name); }
};

class HttpClient {
 public:
  // Does no network I/O. `clock` nullptr means system_clock().
  explicit HttpClient(TransportOptions options = {}, std::shared_ptr<Clock> clock = nullptr);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Performs `request` with the policies described at the top of this file. Errors: invalid_argument (malformed
  // or non-http(s) URL, HTTP 400), not_found (404), permission_denied (401, 403), timeout (the last attempt timed
  // out or stalled, or the deadline passed), remote (other statuses, connection failures with their errno in
  // sys_errno (see is_unreachable()), protocol errors), the sink's own Error, or the RequestAuth's.
  Result<HttpResponse> perform(const HttpRequest& request);

  const TransportOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- Building blocks, public for the backends and for tests ---------------------------------------------------

// Whether an HTTP status is worth retrying: 408, 429 and 5xx except 501 and 505.
bool is_transient_status(long status);
// The Error for an HTTP status >= 400: 400 invalid_argument, 401/403 permission_denied, 404 not_found,
// 408 timeout, anything else remote. The message is "<context>: HTTP <status>".
Error error_for_status(long status, std::string_view context);
// Parses a Retry-After value: delay-seconds ("120") or an HTTP-date, measured from `now` (never negative).
// nullopt when it is neither.
std::optional<Milliseconds> parse_retry_after(std::string_view value, std::chrono::system_clock::time_point now);
// The full-jitter backoff before retry `retry` (1 = the first retry): `unit` (in [0, 1)) times
// min(max_backoff, initial * 2^(retry-1)).
Milliseconds full_jitter_backoff(int retry, Milliseconds initial, Milliseconds max_backoff, double unit);

// "GET https://host/path?<redacted>": how a request appears in log lines and Error messages.
std::string describe_for_log(HttpMethod method, std::string_view url);
// "Name: value" pairs joined by ", ", with the value of every header whose name suggests a credential replaced
// by "<redacted>": names containing authorization, cookie, token, secret, signature, credential, password, key or
// identity (Authorization, Proxy-Authorization, Set-Cookie, X-Amz-Security-Token, X-Api-Key, X-IDENTITY-HEADER, ...).
std::string headers_for_log(const HttpHeaders& headers);

}  // namespace datavo::net
