#include "net/http_client.hpp"

#include <curl/curl.h>
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>

#include "util/cancel.hpp"
#include "util/decimal.hpp"
#include "util/log.hpp"
#include "util/text.hpp"

namespace datavo::net {
namespace {

using SteadyClock = std::chrono::steady_clock;

// An error body is only read for its message (S3 / GCS XML errors are a few hundred bytes); the bound keeps a
// misbehaving server from filling memory.
constexpr std::size_t k_max_error_body = 64 * 1024;
// How much of an error body goes into an Error message: enough for an S3 <Code> and <Message>.
constexpr std::size_t k_error_excerpt = 200;
constexpr long k_max_redirects = 5;
constexpr long k_download_buffer = 512L * 1024;
// Idle handles kept for connection reuse; beyond this, handles of a burst of threads are freed.
constexpr std::size_t k_max_idle_handles = 16;
constexpr const char* k_user_agent = "datavo";
// CURLOPT_LOW_SPEED_LIMIT: "under 1 byte/s over stall_timeout" counts as a stall.
constexpr long k_low_speed_bytes_per_second = 1;

class RealClock final : public Clock {
 public:
  SteadyClock::time_point now() override { return SteadyClock::now(); }
  std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
  // A cancellation (util/cancel.hpp) ends a backoff of seconds at once; perform() then sees it before the next
  // attempt.
  void sleep_for(Milliseconds duration) override { (void)util::sleep_unless_cancelled(duration, "backoff"); }
};

struct EasyDeleter {
  void operator()(CURL* handle) const noexcept { curl_easy_cleanup(handle); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const noexcept { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

CURLcode global_init() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return result;
}

// A number in a header value (Content-Length, a Content-Range bound, a status code), spaces around it allowed.
std::optional<std::uint64_t> header_number(std::string_view text) { return util::parse_decimal(util::trim(text)); }

struct ContentRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::optional<std::uint64_t> total;  // nullopt for "*"
};

// "bytes <first>-<last>/<total or *>"
std::optional<ContentRange> parse_content_range(std::string_view value) {
  value = util::trim(value);
  if (value.size() < 6 || !util::iequals(value.substr(0, 6), "bytes ")) return std::nullopt;
  value = util::trim(value.substr(6));
  const auto slash = value.find('/');
  const auto dash = value.find('-');
  if (slash == std::string_view::npos || dash == std::string_view::npos || dash > slash) return std::nullopt;
  auto first = header_number(value.substr(0, dash));
  auto last = header_number(value.substr(dash + 1, slash - dash - 1));
  if (!first || !last || *last < *first) return std::nullopt;
  ContentRange out{*first, *last, std::nullopt};
  if (auto total_text = util::trim(value.substr(slash + 1)); total_text != "*") {
    out.total = header_number(total_text);
    if (!out.total) return std::nullopt;
  }
  return out;
}

bool is_success(long status) { return status >= 200 && status < 300; }

// Why a request stopped on a cancellation: at once, or, for a cleanup (util::CleanupScope), at the cleanup deadline.
Error stopped_error(const std::string& context) {
  Error error = util::stopped_error(context);
  if (util::in_cleanup_scope() && util::cancel_requested()) {
    error.message += "; the cleanup after it ran out of its " + std::to_string(util::k_cleanup_budget.count()) + " ms";
  }
  return error;
}

bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (util::iequals(util::trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

double random_unit() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

// Printable excerpt of an error body for an Error message.
std::string excerpt(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, k_error_excerpt)) {
    const bool printable = static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (printable)
      out += c;
    else if (!out.empty() && out.back() != ' ')
      out += ' ';
  }
  out = std::string(util::trim(out));
  if (body.size() > k_error_excerpt && !out.empty()) out += "...";
  return out;
}

// The state of one attempt, shared with the curl callbacks.
struct Attempt {
  Attempt(const HttpRequest& req, Seconds stall) : request(req), stall_timeout(stall) {}

  const HttpRequest& request;
  const Seconds stall_timeout;
  bool sent_range = false;

  // The final response (reset by every status line: 1xx and redirects come first).
  long status = 0;
  std::string reason;
  HttpHeaders headers;
  std::string body;
  std::uint64_t received = 0;
  bool body_started = false;

  std::optional<Error> local_error;  // from the sink or the upload source: ends perform() as it is
  bool range_mismatch = false;
  bool stalled = false;
  bool cancelled = false;  // the progress callback saw a cancellation request
  long os_errno = 0;       // CURLINFO_OS_ERRNO of a failed connect

  std::uint64_t upload_offset = 0;
  SteadyClock::time_point last_progress = SteadyClock::now();
  curl_off_t last_download = 0;
  curl_off_t last_upload = 0;

  // Called before the first body byte of a 2xx reaches the sink, and after the transfer when there was none.
  bool begin_sink_body() {
    body_started = true;
    ByteSink& sink = *request.sink;
    if (sent_range && status == 206) {
      auto range = find_header(headers, "Content-Range");
      auto parsed = range ? parse_content_range(*range) : std::nullopt;
      if (!parsed || parsed->first != sink.written().count()) {
        range_mismatch = true;
        return false;
      }
      return true;
    }
    if (sink.written().count() > 0) {
      // The whole entity is coming (a 200 to our Range, e.g. because If-Range did not match): start over.
      if (auto restarted = sink.restart(); !restarted) {
        local_error = restarted.error();
        return false;
      }
    }
    return true;
  }
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& attempt = *static_cast<Attempt*>(user);
  const size_t length = size * count;
  attempt.last_progress = SteadyClock::now();
  std::string_view line = util::trim(std::string_view(data, length));
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    attempt.status = 0;
    attempt.reason.clear();
    attempt.headers.clear();
    attempt.body.clear();
    attempt.received = 0;
    const auto space = line.find(' ');
    if (space != std::string_view::npos) {
      std::string_view rest = line.substr(space + 1);
      const auto reason_at = rest.find(' ');
      if (auto code = header_number(rest.substr(0, reason_at)); code && *code < 1000) attempt.status = long(*code);
      if (reason_at != std::string_view::npos) attempt.reason = std::string(util::trim(rest.substr(reason_at + 1)));
    }
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos && colon > 0) {
    attempt.headers.push_back(
        {std::string(util::trim(line.substr(0, colon))), std::string(util::trim(line.substr(colon + 1)))});
  }
  return length;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& attempt = *static_cast<Attempt*>(user);
  const size_t length = size * count;
  ByteSink* sink = attempt.request.sink;
  if (sink != nullptr && is_success(attempt.status)) {
    if (!attempt.body_started && !attempt.begin_sink_body()) return 0;  // 0 aborts with CURLE_WRITE_ERROR
    if (auto written = sink->write(data, length); !written) {
      attempt.local_error = written.error();
      return 0;
    }
  } else if (sink == nullptr && attempt.status < 400) {
    attempt.body.append(data, length);
  } else if (attempt.body.size() < k_max_error_body) {
    attempt.body.append(data, std::min(length, k_max_error_body - attempt.body.size()));
  }
  attempt.received += length;
  return length;
}

int on_progress(void* user, curl_off_t, curl_off_t download_now, curl_off_t, curl_off_t upload_now) {
  // curl's own low-speed check averages over a window of several seconds, so a burst followed by silence is seen
  // late; this one fires once no byte has moved for stall_timeout.
  auto& attempt = *static_cast<Attempt*>(user);
  // curl calls this several times a second, also while connecting or waiting: a cancelled transfer stops here (a
  // cleanup's at the cleanup deadline). curl calls it on the thread of perform(), the one the scope marks.
  if (util::must_stop()) {
    attempt.cancelled = true;
    return 1;
  }
  const auto now = SteadyClock::now();
  if (download_now != attempt.last_download || upload_now != attempt.last_upload) {
    attempt.last_download = download_now;
    attempt.last_upload = upload_now;
    attempt.last_progress = now;
    return 0;
  }
  if (now - attempt.last_progress >= attempt.stall_timeout) {
    attempt.stalled = true;
    return 1;
  }
  return 0;
}

std::uint64_t body_size(const RequestBody& body) {
  if (const auto* text = std::get_if<std::string>(&body)) return text->size();
  if (const auto* file = std::get_if<FileBody>(&body))
    return file->head.size() + file->size.count() + file->tail.size();
  return 0;
}

size_t on_read(char* buffer, size_t size, size_t count, void* user) {
  auto& attempt = *static_cast<Attempt*>(user);
  const size_t room = size * count;
  auto copy = [&](std::string_view text, std::uint64_t at) {
    const size_t n = std::min<std::uint64_t>(room, text.size() - at);
    std::memcpy(buffer, text.data() + at, n);
    attempt.upload_offset += n;
    return n;
  };
  if (const auto* text = std::get_if<std::string>(&attempt.request.body)) return copy(*text, attempt.upload_offset);
  const auto* file = std::get_if<FileBody>(&attempt.request.body);
  if (file == nullptr) return 0;
  std::uint64_t at = attempt.upload_offset;
  if (at < file->head.size()) return copy(file->head, at);
  at -= file->head.size();
  if (at >= file->size.count()) {
    at -= file->size.count();
    return at < file->tail.size() ? copy(file->tail, at) : 0;
  }
  const size_t want = std::min<std::uint64_t>(room, file->size.count() - at);
  ssize_t got;
  do {
    got = ::pread(file->fd, buffer, want, off_t(file->offset + at));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    attempt.local_error = got < 0 ? Error::from_errno(errno, "read upload body")
                                  : Error{ErrorCode::io, "upload body ended at byte " + std::to_string(at) + " of " +
                                                             std::to_string(file->size.count())};
    return CURL_READFUNC_ABORT;
  }
  attempt.upload_offset += std::uint64_t(got);
  return size_t(got);
}

// curl rewinds the upload this way on a redirect or an auth round trip.
int on_seek(void* user, curl_off_t offset, int origin) {
  auto& attempt = *static_cast<Attempt*>(user);
  const std::uint64_t size = body_size(attempt.request.body);
  if (origin != SEEK_SET || offset < 0 || std::uint64_t(offset) > size) return CURL_SEEKFUNC_FAIL;
  attempt.upload_offset = std::uint64_t(offset);
  return CURL_SEEKFUNC_OK;
}

// Error messages start with "<context>: "; a log line that already names the request drops it.
std::string without_context(const std::string& message, const std::string& context) {
  return message.starts_with(context + ": ") ? message.substr(context.size() + 2) : message;
}

bool valid_header_text(std::string_view text) { return text.find_first_of("\r\n") == std::string_view::npos; }

struct Outcome {
  enum class Kind { done, retry, fail };
  Kind kind = Kind::done;
  Error error;
  std::optional<Milliseconds> retry_after;
  bool immediate = false;  // retry at once: nothing is wrong with the server's health
  bool refreshed = false;  // the request's RequestAuth refreshed its credential after a refusal

  static Outcome done() { return {}; }
  static Outcome fail(Error e) { return {Kind::fail, std::move(e), std::nullopt, false}; }
  static Outcome retry(Error e) { return {Kind::retry, std::move(e), std::nullopt, false}; }
  static Outcome retry_at_once(Error e) { return {Kind::retry, std::move(e), std::nullopt, true}; }
  // A failure after which the server may have acted on the request: retried only when that is harmless.
  static Outcome retry_if(bool idempotent, Error e) { return idempotent ? retry(std::move(e)) : fail(std::move(e)); }
};

}  // namespace

std::shared_ptr<Clock> system_clock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<RealClock>();
  return clock;
}

const char* to_string(HttpMethod method) {
  switch (method) {
    case HttpMethod::get: return "GET";
    case HttpMethod::head: return "HEAD";
    case HttpMethod::put: return "PUT";
    case HttpMethod::post: return "POST";
    case HttpMethod::delete_: return "DELETE";
  }
  return "GET";
}

std::optional<std::string_view> find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& header : headers)
    if (util::iequals(header.name, name)) return std::string_view(header.value);
  return std::nullopt;
}

bool is_transient_status(long status) {
  return status == 408 || status == 429 || (status >= 500 && status <= 599 && status != 501 && status != 505);
}

Error error_for_status(long status, std::string_view context) {
  ErrorCode code = ErrorCode::remote;
  switch (status) {
    case 400: code = ErrorCode::invalid_argument; break;
    case 401:
    case 403: code = ErrorCode::permission_denied; break;
    case 404: code = ErrorCode::not_found; break;
    case 408: code = ErrorCode::timeout; break;
    default: break;
  }
  return Error{code, std::string(context) + ": HTTP " + std::to_string(status)};
}

std::optional<Milliseconds> parse_retry_after(std::string_view value, std::chrono::system_clock::time_point now) {
  value = util::trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    auto seconds = header_number(value);
    // Anything past a day is as good as "too long"; the bound keeps the multiplication from overflowing.
    constexpr std::uint64_t k_day = 24 * 3600;
    if (!seconds) return Milliseconds{k_day * 1000};
    return Milliseconds{std::min(*seconds, k_day) * 1000};
  }
  const time_t when = curl_getdate(std::string(value).c_str(), nullptr);
  if (when == -1) return std::nullopt;
  const auto delta = std::chrono::system_clock::from_time_t(when) - now;
  return std::max(Milliseconds{0}, std::chrono::duration_cast<Milliseconds>(delta));
}

Milliseconds full_jitter_backoff(int retry, Milliseconds initial, Milliseconds max_backoff, double unit) {
  double cap = double(std::max<Milliseconds::rep>(initial.count(), 0));
  const double limit = double(std::max<Milliseconds::rep>(max_backoff.count(), 0));
  for (int i = 1; i < retry && cap < limit; ++i) cap *= 2;
  cap = std::min(cap, limit);
  unit = std::clamp(unit, 0.0, 1.0);
  return Milliseconds{Milliseconds::rep(cap * unit)};
}

std::string describe_for_log(HttpMethod method, std::string_view url) {
  return std::string(to_string(method)) + " " + log::redact_url(url);
}

std::string headers_for_log(const HttpHeaders& headers) {
  // "identity": Azure App Service's X-IDENTITY-HEADER is the secret that proves a caller runs on the instance.
  static constexpr std::string_view k_secret_words[] = {"authorization", "cookie",   "token", "secret",  "signature",
                                                        "credential",    "password", "key",   "identity"};
  std::string out;
  for (const auto& header : headers) {
    const std::string name = util::to_lower(header.name);
    const bool secret = std::any_of(std::begin(k_secret_words), std::end(k_secret_words),
                                    [&](std::string_view word) { return name.find(word) != std::string::npos; });
    if (!out.empty()) out += ", ";
    out += header.name;
    out += ": ";
    out += secret ? std::string("<redacted>") : header.value;
  }
  return out;
}

struct HttpClient::Impl {
  TransportOptions options;
  std::shared_ptr<Clock> clock;
  std::mutex mutex;
  std::vector<EasyHandle> idle;  // guarded by mutex

  // Lends a curl handle for one perform() and returns it to the pool afterwards.
  class Lease {
   public:
    explicit Lease(Impl& impl) : impl_(impl), handle_(impl.take()) {}
    ~Lease() {
      if (handle_) impl_.give(std::move(handle_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    CURL* get() const { return handle_.get(); }

   private:
    Impl& impl_;
    EasyHandle handle_;
  };

  EasyHandle take() {
    EasyHandle handle;
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        handle = std::move(idle.back());
        idle.pop_back();
      }
    }
    // curl_easy_reset forgets the options of the previous request but keeps its connection and DNS caches.
    if (handle)
      curl_easy_reset(handle.get());
    else
      handle.reset(curl_easy_init());
    return handle;
  }

  void give(EasyHandle handle) {
    std::lock_guard lock(mutex);
    if (idle.size() < k_max_idle_handles) idle.push_back(std::move(handle));
  }

  // The attempt as it will be sent: the request's headers, the transport's own (Range, If-Range), then what the
  // request's RequestAuth adds.
  Result<PreparedRequest> prepare(const HttpRequest& request, const Attempt& attempt,
                                  const std::optional<std::string>& validator, int attempt_number) const;
  Result<Slist> build_headers(const PreparedRequest& prepared, const std::string& context) const;
  Result<void> configure(CURL* handle, const HttpRequest& request, const std::string& url, Attempt& attempt,
                         curl_slist* headers, char* error_buffer) const;
  // What an attempt's end means: done, retry or fail (see the top of http_client.hpp).
  Outcome classify(CURLcode code, const Attempt& attempt, bool idempotent, bool may_refresh, const std::string& context,
                   const char* error_buffer) const;
  // classify() of an attempt that got a whole response (CURLE_OK), and of one that did not.
  Outcome classify_response(const Attempt& attempt, bool idempotent, bool may_refresh,
                            const std::string& context) const;
  Outcome classify_transport_failure(CURLcode code, const Attempt& attempt, bool idempotent,
                                     const std::string& message) const;

  struct Transfer;
  // One attempt: prepared, signed, configured on `handle` and performed. An Error ends perform() as it is.
  Result<CURLcode> run_attempt(CURL* handle, const Transfer& transfer, Attempt& attempt, int attempt_number,
                               char* error_buffer) const;
  HttpResponse response_of(CURL* handle, const Transfer& transfer, Attempt& attempt, int attempt_number) const;
  // Sleeps the backoff before the next attempt; the Error that ends perform() instead when the attempts are used
  // up or the backoff would pass the deadline.
  std::optional<Error> wait_before_retry(const Transfer& transfer, const Outcome& outcome, int attempt_number) const;
  Result<HttpResponse> perform(const HttpRequest& request);
};

Result<PreparedRequest> HttpClient::Impl::prepare(const HttpRequest& request, const Attempt& attempt,
                                                  const std::optional<std::string>& validator,
                                                  int attempt_number) const {
  PreparedRequest prepared;
  prepared.method = request.method;
  prepared.url = request.url;
  prepared.headers = request.headers;
  prepared.body = &request.body;
  prepared.body_size = body_size(request.body);
  if (attempt.sent_range) {
    prepared.headers.push_back({"Range", "bytes=" + std::to_string(request.sink->written().count()) + "-"});
    if (validator) prepared.headers.push_back({"If-Range", *validator});
  }
  if (request.auth != nullptr) DATAVO_TRY(request.auth->prepare(prepared, attempt_number));
  return prepared;
}

Result<Slist> HttpClient::Impl::build_headers(const PreparedRequest& prepared, const std::string& context) const {
  Slist list;
  auto append = [&list](const std::string& line) {
    curl_slist* head = curl_slist_append(list.get(), line.c_str());
    if (head == nullptr) return false;
    (void)list.release();  // curl_slist_append returned the same list, now one longer
    list.reset(head);
    return true;
  };
  bool appended = true;
  for (const auto& header : prepared.headers) {
    if (header.name.empty() || !valid_header_text(header.name) || !valid_header_text(header.value) ||
        header.name.find(':') != std::string::npos)
      return Error{ErrorCode::invalid_argument, context + ": malformed request header \"" + header.name + "\""};
    // curl drops "Name:" (that is how it removes its own headers); "Name;" sends an empty value.
    appended = appended && append(header.value.empty() ? header.name + ";" : header.name + ": " + header.value);
  }
  // "Expect: 100-continue" would cost a round trip (or a 1 s wait) on every upload.
  if (!find_header(prepared.headers, "Expect")) appended = appended && append("Expect:");
  // Without this curl labels a POST body as a form.
  if (prepared.method == HttpMethod::post && !find_header(prepared.headers, "Content-Type"))
    appended = appended && append("Content-Type:");
  if (!appended) return Error{ErrorCode::internal, context + ": out of memory building the request headers"};
  return list;
}

Result<void> HttpClient::Impl::configure(CURL* handle, const HttpRequest& request, const std::string& url,
                                         Attempt& attempt, curl_slist* headers, char* error_buffer) const {
  bool all_set = true;
  auto set = [&all_set](CURLcode code) { all_set = all_set && code == CURLE_OK; };
  set(curl_easy_setopt(handle, CURLOPT_URL, url.c_str()));
  set(curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer));
  // Signals are not thread-safe; without this curl uses SIGALRM for DNS timeouts.
  set(curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L));
  // file://, ftp:// etc. are never wanted here, not even through a redirect.
  set(curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https"));
  set(curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"));
  set(curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L));
  set(curl_easy_setopt(handle, CURLOPT_MAXREDIRS, k_max_redirects));
  set(curl_easy_setopt(handle, CURLOPT_USERAGENT, k_user_agent));
  set(curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L));
  // libcurl's default since 7.50.2 (Debian 12 has 7.88), set anyway: a request written in two sends must never
  // wait for the server's delayed ACK, whatever the build's default.
  set(curl_easy_setopt(handle, CURLOPT_TCP_NODELAY, 1L));
  set(curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, long(options.connect_timeout.count())));
  set(curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, k_low_speed_bytes_per_second));
  set(curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, long(std::max<Seconds::rep>(1, options.stall_timeout.count()))));
  set(curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers));
  set(curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header));
  set(curl_easy_setopt(handle, CURLOPT_HEADERDATA, &attempt));
  // Downloads into a sink receive in large reads: a fetch of hundreds of MiB then costs a few thousand recv,
  // write and callback rounds instead of tens of thousands (measured in docs/BENCHMARKS-main-job.md, item 1b).
  // Advisory: libcurl 7.88 refuses a new size on a handle whose previous transfer failed before it started (an
  // unsupported scheme), and the request works with either size.
  (void)curl_easy_setopt(handle, CURLOPT_BUFFERSIZE,
                         request.sink != nullptr ? k_download_buffer : long(CURL_MAX_WRITE_SIZE));
  set(curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body));
  set(curl_easy_setopt(handle, CURLOPT_WRITEDATA, &attempt));
  set(curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L));
  set(curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, on_progress));
  set(curl_easy_setopt(handle, CURLOPT_XFERINFODATA, &attempt));
  // Also set for requests without a body, so that curl never falls back to reading stdin.
  set(curl_easy_setopt(handle, CURLOPT_READFUNCTION, on_read));
  set(curl_easy_setopt(handle, CURLOPT_READDATA, &attempt));
  set(curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, on_seek));
  set(curl_easy_setopt(handle, CURLOPT_SEEKDATA, &attempt));

  const bool has_body = !std::holds_alternative<std::monostate>(request.body);
  const auto size = curl_off_t(body_size(request.body));
  switch (request.method) {
    case HttpMethod::get: set(curl_easy_setopt(handle, CURLOPT_HTTPGET, 1L)); break;
    case HttpMethod::head: set(curl_easy_setopt(handle, CURLOPT_NOBODY, 1L)); break;
    case HttpMethod::put:
      set(curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L));
      set(curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, size));
      break;
    case HttpMethod::post:
      set(curl_easy_setopt(handle, CURLOPT_POST, 1L));
      set(curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, size));
      break;
    case HttpMethod::delete_:
      if (has_body) {
        set(curl_easy_setopt(handle, CURLOPT_POST, 1L));
        set(curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, size));
      }
      set(curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "DELETE"));
      break;
  }
  if (!all_set)
    return Error{ErrorCode::internal, describe_for_log(request.method, request.url) + ": curl_easy_setopt failed"};
  return datavo::ok();
}

Outcome HttpClient::Impl::classify(CURLcode code, const Attempt& attempt, bool idempotent, bool may_refresh,
                                   const std::string& context, const char* error_buffer) const {
  if (attempt.local_error) return Outcome::fail(*attempt.local_error);
  if (code == CURLE_OK) return classify_response(attempt, idempotent, may_refresh, context);
  if (code == CURLE_WRITE_ERROR && attempt.range_mismatch) {
    return Outcome::retry_at_once(Error{ErrorCode::remote, context + ": the Content-Range of the resumed response "
                                                                     "does not start at the bytes already received"});
  }
  if (code == CURLE_ABORTED_BY_CALLBACK && attempt.cancelled) return Outcome::fail(stopped_error(context));
  if (code == CURLE_ABORTED_BY_CALLBACK && attempt.stalled) {
    return Outcome::retry_if(idempotent,
                             Error{ErrorCode::timeout, context + ": stalled: no byte moved for " +
                                                           std::to_string(options.stall_timeout.count()) + " s"});
  }
  const std::string detail = error_buffer[0] != '\0' ? std::string(error_buffer) : curl_easy_strerror(code);
  return classify_transport_failure(code, attempt, idempotent, context + ": " + detail);
}

Outcome HttpClient::Impl::classify_response(const Attempt& attempt, bool idempotent, bool may_refresh,
                                            const std::string& context) const {
  const bool has_entity_body = attempt.request.method != HttpMethod::head && attempt.status >= 200 &&
                               attempt.status != 204 && attempt.status != 304;
  if (auto length = find_header(attempt.headers, "Content-Length"); has_entity_body && length) {
    if (auto expected = header_number(*length); expected && attempt.received < *expected) {
      return Outcome::retry_if(
          idempotent, Error{ErrorCode::remote, context + ": short body: got " + std::to_string(attempt.received) +
                                                   " of " + std::to_string(*expected) + " bytes"});
    }
  }
  if (attempt.status >= 100 && attempt.status < 400) return Outcome::done();
  if (attempt.status == 416 && attempt.sent_range) {
    // The entity changed under us (it is shorter than what we hold): fetch it again from its first byte.
    return Outcome::retry_at_once(Error{ErrorCode::remote, context + ": HTTP 416 to a resume request"});
  }
  const auto& accepted = attempt.request.accepted_statuses;
  if (std::find(accepted.begin(), accepted.end(), attempt.status) != accepted.end()) return Outcome::done();

  Error error = attempt.status == 0 ? Error{ErrorCode::remote, context + ": no HTTP status in the response"}
                                    : error_for_status(attempt.status, context);
  if (!attempt.reason.empty()) error.message += " " + attempt.reason;
  std::string text;
  if (attempt.request.describe_error_body != nullptr)
    text = attempt.request.describe_error_body(attempt.status, attempt.body);
  if (text.empty()) text = excerpt(attempt.body);
  if (!text.empty()) error.message += ": " + text;
  // A stale credential (an expired session token, a rotated key): refreshed, the same request is worth one more
  // attempt at once; only this request is repeated, never a whole transfer.
  if (may_refresh && attempt.status >= 400 &&
      attempt.request.auth->refresh_after_refusal(attempt.status, attempt.headers, attempt.body)) {
    Outcome outcome = Outcome::retry_at_once(std::move(error));
    outcome.refreshed = true;
    return outcome;
  }
  // 429 and 503 say the server did not act on the request, so even a POST may be repeated.
  const bool refused = attempt.status == 429 || attempt.status == 503;
  if (!is_transient_status(attempt.status) || !(idempotent || refused)) return Outcome::fail(std::move(error));
  Outcome outcome = Outcome::retry(std::move(error));
  if (auto retry_after = find_header(attempt.headers, "Retry-After"); retry_after && refused)
    outcome.retry_after = parse_retry_after(*retry_after, clock->wall_now());
  return outcome;
}

Outcome HttpClient::Impl::classify_transport_failure(CURLcode code, const Attempt& attempt, bool idempotent,
                                                     const std::string& message) const {
  switch (code) {
    // The request never reached a server: always safe to repeat. sys_errno says why (see is_unreachable()).
    case CURLE_COULDNT_CONNECT: {
      const int err = attempt.os_errno != 0 ? int(attempt.os_errno) : ECONNREFUSED;
      return Outcome::retry(Error{ErrorCode::remote, message + " (" + std::strerror(err) + ")", err});
    }
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return Outcome::retry(Error{ErrorCode::remote, message, EHOSTUNREACH});
    case CURLE_OPERATION_TIMEDOUT: return Outcome::retry_if(idempotent, Error{ErrorCode::timeout, message});
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR: return Outcome::retry_if(idempotent, Error{ErrorCode::remote, message});
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return Outcome::fail(Error{ErrorCode::invalid_argument, message});
    default: return Outcome::fail(Error{ErrorCode::remote, message});
  }
}

// What one perform() call knows across its attempts.
struct HttpClient::Impl::Transfer {
  Transfer(const HttpRequest& req, const TransportOptions& transport, SteadyClock::time_point now)
      : request(req),
        context(describe_for_log(req.method, req.url)),
        started(now),
        idempotent(req.idempotent.value_or(req.method != HttpMethod::post)),
        may_resume(req.sink != nullptr && req.resume != Resume::never && req.method == HttpMethod::get &&
                   !find_header(req.headers, "Range")),
        continue_sink(may_resume && req.resume == Resume::continue_sink),
        max_attempts(std::max(1, transport.max_attempts)) {
    if (req.deadline) deadline_at = started + *req.deadline;
  }

  Error past_deadline() const {
    return Error{ErrorCode::timeout,
                 context + ": the deadline of " + std::to_string(request.deadline->count()) + " ms passed"};
  }

  // Whether this attempt continues the sink's bytes with a Range request; else the sink starts over.
  Result<void> plan_resume(Attempt& attempt, int attempt_number) const {
    if (request.sink == nullptr || request.sink->written().count() == 0) return ok();
    if (may_resume && !ranges_broken && (ranges_supported || (continue_sink && attempt_number == 1))) {
      attempt.sent_range = true;
      return ok();
    }
    return request.sink->restart();
  }

  // What an answer taught about resuming: range support, and the validator for If-Range.
  void learn(const Attempt& attempt) {
    if (auto accept = find_header(attempt.headers, "Accept-Ranges")) {
      if (has_token(*accept, "bytes"))
        ranges_supported = true;
      else if (has_token(*accept, "none"))
        ranges_supported = false;
    }
    if (attempt.status == 206 && attempt.sent_range) ranges_supported = true;
    if (attempt.range_mismatch || (attempt.sent_range && attempt.status == 416)) ranges_broken = true;
    // If-Range needs a strong validator; a weak ETag could pair bytes of two versions.
    if (auto etag = find_header(attempt.headers, "ETag"); etag && !etag->starts_with("W/")) validator = *etag;
  }

  const HttpRequest& request;
  const std::string context;
  const SteadyClock::time_point started;
  const bool idempotent;
  const bool may_resume;
  const bool continue_sink;
  int max_attempts;
  std::optional<SteadyClock::time_point> deadline_at;
  bool refreshed_credentials = false;  // at most one refresh per perform(): a second refusal is the answer
  bool ranges_supported = false;
  bool ranges_broken = false;  // a 206 started at the wrong byte: never trust this server's ranges again
  std::optional<std::string> validator;
};

Result<CURLcode> HttpClient::Impl::run_attempt(CURL* handle, const Transfer& transfer, Attempt& attempt,
                                               int attempt_number, char* error_buffer) const {
  const HttpRequest& request = transfer.request;
  auto prepared = prepare(request, attempt, transfer.validator, attempt_number);
  if (!prepared) return std::move(prepared).error();
  auto headers = build_headers(*prepared, transfer.context);
  if (!headers) return std::move(headers).error();
  DATAVO_TRY(configure(handle, request, prepared->url, attempt, headers->get(), error_buffer));
  if (transfer.deadline_at) {
    const auto left = std::chrono::duration_cast<Milliseconds>(*transfer.deadline_at - clock->now());
    if (left <= Milliseconds{0}) return transfer.past_deadline();
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, long(left.count()));
  }
  LOG_DEBUG(
      transfer.context << ": attempt " << attempt_number << " of " << transfer.max_attempts
                       << (attempt.sent_range ? ", resuming at byte " + std::to_string(request.sink->written().count())
                                              : std::string())
                       << (prepared->headers.empty() ? std::string() : "; " + headers_for_log(prepared->headers)));
  attempt.last_progress = SteadyClock::now();
  const CURLcode code = curl_easy_perform(handle);
  if (code == CURLE_COULDNT_CONNECT) curl_easy_getinfo(handle, CURLINFO_OS_ERRNO, &attempt.os_errno);
  if (attempt.status == 0) curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &attempt.status);
  if (code == CURLE_OK && request.sink != nullptr && is_success(attempt.status) && !attempt.body_started)
    attempt.begin_sink_body();  // an empty body: the sink must still end up holding exactly it
  return code;
}

HttpResponse HttpClient::Impl::response_of(CURL* handle, const Transfer& transfer, Attempt& attempt,
                                           int attempt_number) const {
  HttpResponse response;
  response.status = attempt.status;
  response.reason = std::move(attempt.reason);
  response.headers = std::move(attempt.headers);
  response.body = std::move(attempt.body);
  if (response.status == 206) {
    if (auto range = response.header("Content-Range"))
      if (auto parsed = parse_content_range(*range)) response.entity_size = parsed->total;
  } else if (is_success(response.status)) {
    if (auto length = response.header("Content-Length")) response.entity_size = header_number(*length);
  }
  const ByteSink* sink = transfer.request.sink;
  response.body_bytes = Bytes{sink != nullptr ? sink->written().count() : response.body.size()};
  response.attempts = attempt_number;
  response.elapsed = std::chrono::duration_cast<Milliseconds>(clock->now() - transfer.started);
  curl_off_t first_byte_us = 0;
  if (curl_easy_getinfo(handle, CURLINFO_STARTTRANSFER_TIME_T, &first_byte_us) == CURLE_OK)
    response.first_byte = Milliseconds{first_byte_us / 1000};
  return response;
}

std::optional<Error> HttpClient::Impl::wait_before_retry(const Transfer& transfer, const Outcome& outcome,
                                                         int attempt_number) const {
  if (attempt_number >= transfer.max_attempts) {
    Error error = outcome.error;
    error.message += " (gave up after " + std::to_string(attempt_number) + " attempts)";
    return error;
  }
  Milliseconds delay{0};
  if (outcome.retry_after)
    delay = std::min(*outcome.retry_after, k_max_retry_after);
  else if (!outcome.immediate)
    delay = full_jitter_backoff(attempt_number, options.initial_backoff, options.max_backoff, random_unit());
  if (transfer.deadline_at && clock->now() + delay >= *transfer.deadline_at) {
    Error error = transfer.past_deadline();
    error.message += " (last failure: " + without_context(outcome.error.message, transfer.context) + ")";
    return error;
  }
  if (!outcome.refreshed) {
    LOG_INFO(outcome.error.message << "; retrying in " << delay.count() << " ms (attempt " << attempt_number + 1
                                   << " of " << transfer.max_attempts << ")");
  }
  clock->sleep_for(delay);
  return std::nullopt;
}

Result<HttpResponse> HttpClient::Impl::perform(const HttpRequest& request) {
  Transfer transfer(request, options, clock->now());
  const std::string& context = transfer.context;
  if (global_init() != CURLE_OK) return Error{ErrorCode::internal, context + ": curl_global_init failed"};
  if (const auto* file = std::get_if<FileBody>(&request.body); file && file->fd < 0)
    return Error{ErrorCode::invalid_argument, context + ": the upload body has no file descriptor"};
  Lease lease(*this);
  if (lease.get() == nullptr) return Error{ErrorCode::internal, context + ": curl_easy_init failed"};
  if (request.sink != nullptr && request.sink->written().count() > 0 && !transfer.continue_sink)
    DATAVO_TRY(request.sink->restart());

  for (int attempt_number = 1;; ++attempt_number) {
    if (util::must_stop()) return stopped_error(context);
    Attempt attempt(request, options.stall_timeout);
    DATAVO_TRY(transfer.plan_resume(attempt, attempt_number));
    char error_buffer[CURL_ERROR_SIZE] = {};
    auto code = run_attempt(lease.get(), transfer, attempt, attempt_number, error_buffer);
    if (!code) return std::move(code).error();
    transfer.learn(attempt);
    const bool may_refresh = request.auth != nullptr && !transfer.refreshed_credentials;
    const Outcome outcome = classify(*code, attempt, transfer.idempotent, may_refresh, context, error_buffer);
    LOG_DEBUG(context << ": attempt " << attempt_number << ": "
                      << (attempt.status != 0 ? "HTTP " + std::to_string(attempt.status) : std::string("no status"))
                      << ", " << attempt.received << " body bytes"
                      << (outcome.kind == Outcome::Kind::done
                              ? std::string()
                              : "; " + without_context(outcome.error.message, context)));
    if (transfer.deadline_at && *code == CURLE_OPERATION_TIMEDOUT && clock->now() >= *transfer.deadline_at)
      return transfer.past_deadline();
    if (outcome.kind == Outcome::Kind::fail) return outcome.error;
    if (outcome.kind == Outcome::Kind::done) return response_of(lease.get(), transfer, attempt, attempt_number);
    if (outcome.refreshed) {
      transfer.refreshed_credentials = true;
      ++transfer.max_attempts;  // the refusal was the credential's fault, not the server's: it costs no attempt
      LOG_INFO(outcome.error.message << "; credentials refreshed, repeating the request");
    }
    util::note_retry();  // a hedged read leaves a request that the server answered to its retries
                         // (tier/cloud/hedge.hpp)
    if (auto error = wait_before_retry(transfer, outcome, attempt_number)) return std::move(*error);
  }
}

namespace {

class BearerAuth final : public RequestAuth {
 public:
  explicit BearerAuth(BearerSource source) : source_(std::move(source)) {}

  Result<void> prepare(PreparedRequest& request, int) override {
    auto token = source_.token();
    if (!token) return std::move(token).error();
    // A header value must not be able to end the header.
    if (!valid_header_text(*token)) {
      if (source_.issuer)
        return Error{ErrorCode::remote, source_.issuer() + ": the access token contains a line break"};
      return Error{ErrorCode::invalid_argument, "the bearer token contains a line break"};
    }
    if (source_.decorate) source_.decorate(request);
    request.headers.push_back({"Authorization", "Bearer " + *token});
    return datavo::ok();
  }

  bool refresh_after_refusal(long status, const HttpHeaders& headers, std::string_view body) override {
    return source_.drop_if_stale && source_.drop_if_stale(status, headers, body);
  }

 private:
  const BearerSource source_;
};

}  // namespace

std::shared_ptr<RequestAuth> bearer_auth(BearerSource source) {
  return std::make_shared<BearerAuth>(std::move(source));
}

std::shared_ptr<RequestAuth> bearer_auth(std::string token) {
  BearerSource source;
  source.token = [token = std::move(token)]() -> Result<std::string> { return token; };
  return bearer_auth(std::move(source));
}

HttpClient::HttpClient(TransportOptions options, std::shared_ptr<Clock> clock) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->clock = clock ? std::move(clock) : system_clock();
}

HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::perform(const HttpRequest& request) { return impl_->perform(request); }

const TransportOptions& HttpClient::options() const { return impl_->options; }

}  // namespace datavo::net
