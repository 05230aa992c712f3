// OriginServer: origin protocol v1 (docs/protocol.md) over cpp-httplib.
//
// Debian ships cpp-httplib split into this header and libcpp-httplib.so, built with the flags below
// (`pkg-config --cflags cpp-httplib`). They change the layout of httplib::Request, so every translation unit that
// includes the header must define them too. HTTPS is not used: the server speaks plain HTTP.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <variant>

#include "datavo/origin.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "util/log.hpp"

namespace datavo {

namespace {

using origin::KeyGroupTar;
using origin::Revision;
using origin::Store;
using origin::TicketFields;

constexpr const char* k_server_name = "datavo-serve/0.1.0";
constexpr int k_protocol_version = 1;
// Shard bytes are sent in pieces of this size, read with pread: memory per download is bounded by it.
constexpr std::size_t k_send_chunk = std::size_t{1} << 20;
// Ticket requests are a few hundred bytes; anything much larger is not a ticket request.
constexpr std::size_t k_max_request_body = std::size_t{64} << 10;
// Parsed revisions kept in memory (each holds every sample id of its dataset).
constexpr std::size_t k_revision_cache_entries = 32;
// A worker thread waits this long for the next request on an idle keep-alive connection. Short, because a waiting
// worker serves no one else: a client pool of idle connections must not starve new connections.
constexpr time_t k_keep_alive_seconds = 1;
// Temporary files older than this, under objects/ and tars/, were left by a crashed writer.
constexpr Seconds k_stale_temporary_age{3600};
// How long start() waits for the accept loop to run before giving up.
constexpr std::chrono::seconds k_start_timeout{10};
// What a 202 "preparing" answer asks the client to wait before it asks again.
constexpr Seconds k_preparing_retry_after{1};
// Threads that build key-group tars for ticket requests: builds are disk-bound, and more at once only thrash.
constexpr int k_builders = 2;
// A ticket request holds its connection silent while it waits; clients give up on a silent transfer after their
// stall window (30 s by default), so the wait stays well inside it.
constexpr Milliseconds k_max_ticket_wait{20'000};
constexpr const char* k_immutable = "public, max-age=31536000, immutable";

// --- metrics ----------------------------------------------------------------------------------------------------

enum class Route { instance, manifest, ticket, shard, metrics, other };
constexpr std::size_t k_route_count = 6;

const char* to_string(Route route) {
  switch (route) {
    case Route::instance: return "instance";
    case Route::manifest: return "manifest";
    case Route::ticket: return "ticket";
    case Route::shard: return "shard";
    case Route::metrics: return "metrics";
    case Route::other: return "other";
  }
  return "other";
}

Route route_of(std::string_view path) {
  if (path == "/v1/instance") return Route::instance;
  if (path.starts_with("/v1/datasets/")) return Route::manifest;
  if (path == "/v1/stream-tickets") return Route::ticket;
  if (path.starts_with("/v1/shards/")) return Route::shard;
  if (path == "/v1/metrics") return Route::metrics;
  return Route::other;
}

class Metrics {
 public:
  void count_request(Route route, int status) {
    std::lock_guard lock(mu_);
    ++requests_[{static_cast<int>(route), status}];
  }
  void add_bytes(Route route, std::uint64_t bytes) {
    bytes_[static_cast<std::size_t>(route)].fetch_add(bytes, std::memory_order_relaxed);
  }
  std::string render() const {
    std::string out;
    out += "# HELP datavo_requests_total Requests answered, by route and HTTP status.\n";
    out += "# TYPE datavo_requests_total counter\n";
    {
      std::lock_guard lock(mu_);
      for (const auto& [key, count] : requests_) {
        out += "datavo_requests_total{route=\"" + std::string(to_string(static_cast<Route>(key.first))) +
               "\",status=\"" + std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
      }
    }
    out += "# HELP datavo_response_bytes_total Response body bytes sent, by route.\n";
    out += "# TYPE datavo_response_bytes_total counter\n";
    for (std::size_t i = 0; i < k_route_count; ++i) {
      out += "datavo_response_bytes_total{route=\"" + std::string(to_string(static_cast<Route>(i))) + "\"} " +
             std::to_string(bytes_[i].load(std::memory_order_relaxed)) + "\n";
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<int, int>, std::uint64_t> requests_;
  std::array<std::atomic<std::uint64_t>, k_route_count> bytes_{};
};

// Per-request bookkeeping. httplib runs a request's pre-routing handler, handler, content provider and logger on
// one worker thread, so thread-local state follows the request.
struct RequestState {
  std::chrono::steady_clock::time_point start{};
  bool started = false;
  std::uint64_t streamed = 0;  // bytes sent by a content provider
};
thread_local RequestState t_request;

// --- responses --------------------------------------------------------------------------------------------------

const char* error_code_for(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 410: return "expired";
    case 413: return "payload_too_large";
    case 416: return "range_not_satisfiable";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal" : "error";
  }
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  nlohmann::json body = {{"error", {{"code", error_code_for(status)}, {"message", message}}}};
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Maps a store Error to a response: only a corrupt store or an I/O fault gets here, so it is a 500.
void send_store_error(httplib::Response& res, const Error& error) {
  LOG_ERROR("origin: " << error.message);
  send_error(res, 500, "the store failed: " + std::string(to_string(error.code)));
}

// Whether an If-None-Match header value matches `etag` (a list of entity tags, weak ones compared weakly).
bool etag_matches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    auto comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;  // inclusive
};
enum class RangeOutcome { whole, partial, unsatisfiable };

// A single "bytes=a-b" / "bytes=a-" / "bytes=-n" range against an entity of `size` bytes. Anything else (another
// unit, several ranges, a malformed value) is ignored and the whole entity sent, as RFC 9110 allows.
RangeOutcome parse_range(std::string_view header, std::uint64_t size, ByteRange& out) {
  constexpr std::string_view prefix = "bytes=";
  if (!header.starts_with(prefix)) return RangeOutcome::whole;
  header.remove_prefix(prefix.size());
  auto dash = header.find('-');
  if (dash == std::string_view::npos || header.find(',') != std::string_view::npos) return RangeOutcome::whole;
  std::string_view lhs = header.substr(0, dash);
  std::string_view rhs = header.substr(dash + 1);
  auto number = [](std::string_view text) -> std::optional<std::uint64_t> {
    if (text.empty() || text.size() > 19) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return value;
  };
  if (lhs.empty()) {
    auto suffix = number(rhs);
    if (!suffix) return RangeOutcome::whole;
    if (*suffix == 0 || size == 0) return RangeOutcome::unsatisfiable;
    out.first = size - std::min(*suffix, size);
    out.last = size - 1;
    return RangeOutcome::partial;
  }
  auto first = number(lhs);
  if (!first) return RangeOutcome::whole;
  std::optional<std::uint64_t> last;
  if (!rhs.empty()) {
    last = number(rhs);
    if (!last || *last < *first) return RangeOutcome::whole;
  }
  if (*first >= size) return RangeOutcome::unsatisfiable;
  out.first = *first;
  out.last = last ? std::min(*last, size - 1) : size - 1;
  return RangeOutcome::partial;
}

// --- in-process locks per key -----------------------------------------------------------------------------------

// One mutex per key (content hash), created on demand and dropped when no one holds it.
class KeyedMutex {
 public:
  std::shared_ptr<std::mutex> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto& slot = table_[key];
    auto mutex = slot.lock();
    if (!mutex) {
      mutex = std::make_shared<std::mutex>();
      slot = mutex;
    }
    if (table_.size() > 1024) std::erase_if(table_, [](const auto& entry) { return entry.second.expired(); });
    return mutex;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<std::mutex>> table_;
};

// --- the server -------------------------------------------------------------------------------------------------

struct CachedRevision {
  Revision revision;
  std::string manifest_json;
  std::string etag;
};

std::string manifest_json(const Revision& rev) {
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t i = 0; i < rev.shards.size(); ++i) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& sample : rev.shards[i].samples) samples.push_back(sample.id);
    shards.push_back({{"index", i}, {"samples", std::move(samples)}});
  }
  nlohmann::json body = {{"dataset", rev.dataset},   {"split", rev.split}, {"manifest_ref", rev.manifest_ref},
                         {"revision", rev.revision}, {"keys", rev.keys},   {"shards", std::move(shards)}};
  return body.dump();
}

// A failed lookup, already turned into a response.
struct Refused {};

class ServerImpl final : public OriginServer {
 public:
  ServerImpl(OriginServerOptions options, Store store) : options_(std::move(options)), store_(std::move(store)) {}
  ~ServerImpl() override { stop(); }

  Result<void> run();

  std::uint16_t port() const override { return port_; }
  std::string base_url() const override {
    bool ipv6 = options_.host.find(':') != std::string::npos;
    return "http://" + (ipv6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(port_);
  }
  void wait() override {
    std::unique_lock lock(state_mu_);
    stopped_cv_.wait(lock, [this] { return stopped_; });
  }
  void stop() override {
    std::lock_guard stop_lock(stop_mu_);
    http_.stop();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    stop_builders();
    {
      std::lock_guard lock(state_mu_);
      stopped_ = true;
    }
    stopped_cv_.notify_all();
  }

 private:
  void install_handlers();
  httplib::Server::HandlerResponse pre_routing(const httplib::Request& req, httplib::Response& res);
  void log_request(const httplib::Request& req, const httplib::Response& res);

  void handle_instance(const httplib::Request& req, httplib::Response& res);
  void handle_manifest(const httplib::Request& req, httplib::Response& res);
  void handle_ticket(const httplib::Request& req, httplib::Response& res);
  void handle_shard(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  void count_request(const httplib::Request& req, const httplib::Response& res);

  // Revision `revision` (nullopt: the latest) of a dataset, or a 404/500 response.
  std::variant<std::shared_ptr<const CachedRevision>, Refused> find_revision(const std::string& dataset,
                                                                             const std::string& split,
                                                                             std::optional<std::uint64_t> revision,
                                                                             httplib::Response& res);
  // The key-group tar of a shard, materialised on first use (once per hash in this process), or a response.
  std::variant<KeyGroupTar, Refused> key_group(const TicketFields& fields, httplib::Response& res);
  // key_group() for a ticket request: a tar that is not built within options_.ticket_wait is built on in the
  // background, and the request is answered 202 with Retry-After (docs/protocol.md, "Preparing").
  std::variant<KeyGroupTar, Refused> key_group_for_ticket(const TicketFields& fields, httplib::Response& res);

  OriginServerOptions options_;
  Store store_;
  httplib::Server http_;
  std::thread thread_;
  std::uint16_t port_ = 0;
  Metrics metrics_;
  KeyedMutex tar_locks_;

  std::mutex cache_mu_;
  std::map<std::string, std::shared_ptr<const CachedRevision>> cache_;

  std::mutex stop_mu_;
  std::mutex state_mu_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;

  // Key-group tars built for ticket requests by k_builders threads of their own (key_group_for_ticket), one build
  // per content hash whoever asks. A preparation is in preparing_ from the request that queues it until its
  // builder finishes it; waiters hold it by shared_ptr beyond that.
  struct Prepared {
    std::optional<KeyGroupTar> tar;  // the tar, or the refusal that key_group() answered:
    int status = 0;
    std::string body;
  };
  struct Preparation {
    TicketFields fields;
    std::mutex mu;
    std::condition_variable finished;
    bool done = false;  // guarded by mu
    Prepared result;    // guarded by mu; set once, with done
  };
  void run_builder();
  void finish_preparation(Preparation& preparation, Prepared result);
  void stop_builders();

  std::mutex preparing_mu_;
  std::condition_variable build_wanted_;
  std::map<std::string, std::shared_ptr<Preparation>> preparing_;  // guarded by preparing_mu_
  std::deque<std::shared_ptr<Preparation>> build_queue_;           // guarded by preparing_mu_
  bool builders_stopping_ = false;                                 // guarded by preparing_mu_
  std::vector<std::thread> builders_;
};

Result<void> ServerImpl::run() {
  install_handlers();
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server share the port.
  http_.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const int threads = options_.threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  http_.set_keep_alive_timeout(k_keep_alive_seconds);
  http_.set_payload_max_length(k_max_request_body);
  http_.set_default_headers({{"Server", k_server_name}});

  int port = 0;
  if (options_.port == 0) {
    port = http_.bind_to_any_port(options_.host);
  } else if (http_.bind_to_port(options_.host, options_.port)) {
    port = options_.port;
  }
  if (port <= 0) {
    return Error{ErrorCode::io, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                    " (address in use, not local, or not permitted)"};
  }
  port_ = static_cast<std::uint16_t>(port);
  for (int i = 0; i < k_builders; ++i) builders_.emplace_back([this] { run_builder(); });
  thread_ = std::thread([this] {
    http_.listen_after_bind();
    std::lock_guard lock(state_mu_);
    stopped_ = true;
    stopped_cv_.notify_all();
  });
  // stop() is a no-op until the accept loop runs, so wait for it: a stop() right after start() must not be lost.
  auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
  while (!http_.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) return Error{ErrorCode::timeout, "the server did not start"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ok();
}

void ServerImpl::install_handlers() {
  auto guarded = [this](void (ServerImpl::*handler)(const httplib::Request&, httplib::Response&)) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*handler)(req, res);
      } catch (const std::exception& e) {
        LOG_ERROR("origin: " << req.method << " " << req.path << ": " << e.what());
        send_error(res, 500, "internal error");
      }
    };
  };
  http_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return pre_routing(req, res); });
  http_.Get("/v1/instance", guarded(&ServerImpl::handle_instance));
  http_.Get("/v1/datasets/(.*)", guarded(&ServerImpl::handle_manifest));
  http_.Post("/v1/stream-tickets", guarded(&ServerImpl::handle_ticket));
  http_.Get("/v1/shards/(.*)", guarded(&ServerImpl::handle_shard));
  http_.Get("/v1/metrics", guarded(&ServerImpl::handle_metrics));
  http_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    const_cast<httplib::Request&>(req).ranges.clear();
    if (!res.body.empty() || res.content_length_ > 0) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 400: message = "malformed request"; break;
      case 404: message = "no such resource: " + req.method + " " + log::redact_url(req.target); break;
      case 413: message = "the request body is too large"; break;
      case 416: message = "malformed or unsatisfiable Range"; break;
      default: message = "HTTP " + std::to_string(res.status); break;
    }
    send_error(res, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    LOG_ERROR("origin: " << req.method << " " << req.path << ": unhandled exception");
    send_error(res, 500, "internal error");
  });
  // Counted before the response is written (httplib runs the post-routing handler first), so that a client that
  // has its answer and then reads /v1/metrics always finds its request there; the logger runs after the write.
  http_.set_post_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { count_request(req, res); });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log_request(req, res); });
}

httplib::Server::HandlerResponse ServerImpl::pre_routing(const httplib::Request& req, httplib::Response& res) {
  t_request = RequestState{std::chrono::steady_clock::now(), true, 0};
  // Ranges are applied by the shard handler alone (httplib's own application neither checks bounds nor spares
  // JSON bodies). The Request is httplib's non-const object, passed to us as const.
  const_cast<httplib::Request&>(req).ranges.clear();
  if (!options_.token) return httplib::Server::HandlerResponse::Unhandled;
  if ((req.method == "GET" || req.method == "HEAD") && req.path == "/v1/metrics") {
    return httplib::Server::HandlerResponse::Unhandled;
  }
  std::string header = req.get_header_value("Authorization");
  constexpr std::string_view scheme = "bearer ";
  bool authorised = false;
  if (header.size() > scheme.size()) {
    std::string prefix = header.substr(0, scheme.size());
    for (auto& c : prefix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view presented = std::string_view(header).substr(scheme.size());
    const std::string& expected = *options_.token;
    authorised = prefix == scheme && presented.size() == expected.size() &&
                 CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
  }
  if (authorised) return httplib::Server::HandlerResponse::Unhandled;
  res.set_header("WWW-Authenticate", "Bearer realm=\"datavo\"");
  send_error(res, 401, header.empty() ? "a bearer token is required" : "the bearer token is not valid");
  return httplib::Server::HandlerResponse::Handled;
}

void ServerImpl::count_request(const httplib::Request& req, const httplib::Response& res) {
  const Route route = route_of(req.path);
  metrics_.add_bytes(route, req.method == "HEAD" ? 0 : res.body.size());
  metrics_.count_request(route, res.status);
}

void ServerImpl::log_request(const httplib::Request& req, const httplib::Response& res) {
  std::uint64_t bytes = req.method == "HEAD" ? 0 : res.body.size();
  bytes += t_request.streamed;
  if (options_.log_requests) {
    char elapsed[32] = "-";
    if (t_request.started) {
      auto us =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t_request.start);
      std::snprintf(elapsed, sizeof elapsed, "%.1fms", static_cast<double>(us.count()) / 1000.0);
    }
    std::string line = "datavo-serve: " + req.remote_addr + " \"" + req.method + " " + log::redact_url(req.target) +
                       "\" " + std::to_string(res.status) + " " + std::to_string(bytes) + " " + elapsed + "\n";
    // One write(2) per line, so that lines of concurrent requests do not interleave.
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
  }
  t_request = RequestState{};
}

void ServerImpl::handle_instance(const httplib::Request&, httplib::Response& res) {
  send_json(
      res,
      {{"instance_id", store_.instance_id()}, {"protocol_version", k_protocol_version}, {"server", k_server_name}});
}

std::variant<std::shared_ptr<const CachedRevision>, Refused> ServerImpl::find_revision(
    const std::string& dataset, const std::string& split, std::optional<std::uint64_t> revision,
    httplib::Response& res) {
  auto unknown = [&](const std::string& message) {
    send_error(res, 404, message);
    return Refused{};
  };
  auto latest = store_.latest_revision(dataset, split);
  if (!latest) {
    send_store_error(res, latest.error());
    return Refused{};
  }
  if (!*latest) {
    return store_.has_dataset(dataset) ? unknown("unknown split \"" + split + "\" of dataset \"" + dataset + "\"")
                                       : unknown("unknown dataset \"" + dataset + "\"");
  }
  // A revision file beyond LATEST is from a pack that crashed before publishing it; the next pack rewrites it, so
  // it is never served.
  if (!revision) revision = **latest;
  if (*revision > **latest) {
    return unknown("unknown revision " + std::to_string(*revision) + " of " + dataset + "/" + split);
  }
  std::string key = dataset + "/" + split + "@" + std::to_string(*revision);
  {
    std::lock_guard lock(cache_mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  auto loaded = store_.load_revision(dataset, split, *revision);
  if (!loaded) {
    send_store_error(res, loaded.error());
    return Refused{};
  }
  if (!*loaded) return unknown("unknown revision " + std::to_string(*revision) + " of " + dataset + "/" + split);
  auto cached = std::make_shared<CachedRevision>();
  cached->revision = std::move(**loaded);
  cached->manifest_json = manifest_json(cached->revision);
  cached->etag = "\"" + cached->revision.manifest_ref + "." + std::to_string(cached->revision.revision) + "\"";
  std::lock_guard lock(cache_mu_);
  if (cache_.size() >= k_revision_cache_entries) cache_.erase(cache_.begin());
  cache_[key] = cached;
  return std::shared_ptr<const CachedRevision>(cached);
}

void ServerImpl::handle_manifest(const httplib::Request& req, httplib::Response& res) {
  std::string_view rest = std::string_view(req.path).substr(std::string_view("/v1/datasets/").size());
  constexpr std::string_view suffix = "/manifest";
  if (!rest.ends_with(suffix)) {
    send_error(res, 404, "no such resource; expected /v1/datasets/<dataset>/<split>/manifest");
    return;
  }
  rest.remove_suffix(suffix.size());
  auto slash = rest.find('/');
  if (slash == std::string_view::npos || rest.find('/', slash + 1) != std::string_view::npos) {
    send_error(res, 400,
               "invalid dataset path " + origin::escape_for_message(rest) +
                   "; expected /v1/datasets/<dataset>/<split>/manifest");
    return;
  }
  std::string dataset(rest.substr(0, slash));
  std::string split(rest.substr(slash + 1));
  for (auto [what, name] : {std::pair{"dataset", &dataset}, std::pair{"split", &split}}) {
    if (auto valid = origin::validate_name(what, *name); !valid) {
      send_error(res, 400, valid.error().message);
      return;
    }
  }
  std::optional<std::uint64_t> pinned;
  if (req.has_param("revision")) {
    pinned = origin::parse_decimal(req.get_param_value("revision"), 1);
    if (!pinned) {
      send_error(res, 400, "revision must be a positive decimal integer");
      return;
    }
  }
  auto found = find_revision(dataset, split, pinned, res);
  if (std::holds_alternative<Refused>(found)) return;
  const auto& cached = *std::get<0>(found);
  res.set_header("ETag", cached.etag);
  res.set_header("Cache-Control", pinned ? k_immutable : "no-cache");
  if (req.has_header("If-None-Match") && etag_matches(req.get_header_value("If-None-Match"), cached.etag)) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(cached.manifest_json, "application/json");
}

void ServerImpl::handle_ticket(const httplib::Request& req, httplib::Response& res) {
  auto body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    send_error(res, 400, "the request body is not a JSON object");
    return;
  }
  auto bad = [&](const std::string& message) { send_error(res, 400, message); };
  TicketFields fields;
  for (auto [name, out] : {std::pair{"dataset", &fields.dataset}, std::pair{"split", &fields.split}}) {
    auto it = body.find(name);
    if (it == body.end() || !it->is_string()) return bad(std::string("\"") + name + "\" must be a string");
    *out = it->get<std::string>();
    if (auto valid = origin::validate_name(name, *out); !valid) return bad(valid.error().message);
  }
  auto revision = body.find("revision");
  if (revision == body.end() || !revision->is_number_unsigned() || revision->get<std::uint64_t>() == 0) {
    return bad("\"revision\" must be a positive integer");
  }
  fields.revision = revision->get<std::uint64_t>();
  auto shard = body.find("shard_index");
  if (shard == body.end() || !shard->is_number_unsigned()) return bad("\"shard_index\" must be a non-negative integer");
  fields.shard_index = shard->get<std::uint64_t>();
  auto keys = body.find("keys");
  if (keys == body.end() || !keys->is_array() || keys->empty()) return bad("\"keys\" must be a non-empty array");
  for (const auto& key : *keys) {
    if (!key.is_string()) return bad("\"keys\" must hold strings");
    if (auto valid = origin::validate_name("key", key.get<std::string>()); !valid) return bad(valid.error().message);
    fields.keys.push_back(key.get<std::string>());
  }
  std::sort(fields.keys.begin(), fields.keys.end());
  fields.keys.erase(std::unique(fields.keys.begin(), fields.keys.end()), fields.keys.end());

  auto found = find_revision(fields.dataset, fields.split, fields.revision, res);
  if (std::holds_alternative<Refused>(found)) return;
  const Revision& rev = std::get<0>(found)->revision;
  if (fields.shard_index >= rev.shards.size()) {
    send_error(res, 404,
               "no shard " + std::to_string(fields.shard_index) + " in revision " + std::to_string(rev.revision) +
                   " (it has " + std::to_string(rev.shards.size()) + ")");
    return;
  }
  for (const auto& key : fields.keys) {
    if (!std::binary_search(rev.keys.begin(), rev.keys.end(), key)) {
      send_error(res, 404, "unknown key \"" + key + "\" (the dataset has " + std::to_string(rev.keys.size()) + ")");
      return;
    }
  }
  ShardIdentity identity{rev.manifest_ref, std::to_string(rev.revision), fields.shard_index, fields.keys, {}};
  for (const auto& sample : rev.shards[fields.shard_index].samples) identity.sample_ids.push_back(sample.id);
  fields.content_hash = compute_content_hash(identity).hex();
  auto tar = key_group_for_ticket(fields, res);
  if (std::holds_alternative<Refused>(tar)) return;
  const KeyGroupTar& group = std::get<KeyGroupTar>(tar);

  fields.expires_at = std::chrono::duration_cast<std::chrono::seconds>(
                          (std::chrono::system_clock::now() + options_.ticket_ttl).time_since_epoch())
                          .count();
  std::string signature = origin::sign_ticket(store_.secret(), fields);
  send_json(res, {{"content_hash", fields.content_hash},
                  {"size", group.size.count()},
                  {"sha256", group.sha256.hex()},
                  {"url", origin::ticket_url(fields, signature)},
                  {"expires_at", fields.expires_at}});
}

std::variant<KeyGroupTar, Refused> ServerImpl::key_group_for_ticket(const TicketFields& fields,
                                                                    httplib::Response& res) {
  const auto hash = ContentHash::parse(fields.content_hash).value();
  if (auto existing = store_.find_key_group(hash); existing && *existing) return std::move(**existing);

  std::shared_ptr<Preparation> preparation;
  {
    std::lock_guard lock(preparing_mu_);
    if (builders_stopping_) {
      send_error(res, 503, "the server is stopping");
      return Refused{};
    }
    auto& slot = preparing_[hash.hex()];
    if (!slot) {
      slot = std::make_shared<Preparation>();
      slot->fields = fields;
      build_queue_.push_back(slot);
      build_wanted_.notify_one();
    }
    preparation = slot;
  }
  std::unique_lock lock(preparation->mu);
  // A tar of many GiB takes longer to build than a client waits for a response; the client comes back instead.
  if (!preparation->finished.wait_for(lock, options_.ticket_wait, [&] { return preparation->done; })) {
    res.set_header("Retry-After", std::to_string(k_preparing_retry_after.count()));
    send_json(res, {{"status", "preparing"}, {"content_hash", hash.hex()}}, 202);
    return Refused{};
  }
  const Prepared& done = preparation->result;
  if (done.tar) return *done.tar;
  res.status = done.status;
  res.set_content(done.body, "application/json");
  return Refused{};
}

void ServerImpl::run_builder() {
  for (;;) {
    std::shared_ptr<Preparation> preparation;
    {
      std::unique_lock lock(preparing_mu_);
      build_wanted_.wait(lock, [this] { return builders_stopping_ || !build_queue_.empty(); });
      if (builders_stopping_) return;
      preparation = std::move(build_queue_.front());
      build_queue_.pop_front();
    }
    Prepared out;
    try {
      httplib::Response scratch;
      auto made = key_group(preparation->fields, scratch);
      if (auto* tar = std::get_if<KeyGroupTar>(&made)) {
        out.tar = std::move(*tar);
      } else {
        out.status = scratch.status;
        out.body = scratch.body;
      }
    } catch (const std::exception& e) {
      LOG_ERROR("origin: building the tar of " << preparation->fields.content_hash << " failed: " << e.what());
      httplib::Response scratch;
      send_error(scratch, 500, "the store failed: internal");
      out.status = scratch.status;
      out.body = scratch.body;
    }
    finish_preparation(*preparation, std::move(out));
  }
}

void ServerImpl::finish_preparation(Preparation& preparation, Prepared result) {
  {
    std::lock_guard lock(preparing_mu_);
    // Built (or refused): from now on the store answers, or the next request queues a new build.
    auto it = preparing_.find(preparation.fields.content_hash);
    if (it != preparing_.end() && it->second.get() == &preparation) preparing_.erase(it);
  }
  {
    std::lock_guard lock(preparation.mu);
    preparation.result = std::move(result);
    preparation.done = true;
  }
  preparation.finished.notify_all();
}

void ServerImpl::stop_builders() {
  std::deque<std::shared_ptr<Preparation>> abandoned;
  {
    std::lock_guard lock(preparing_mu_);
    builders_stopping_ = true;
    abandoned.swap(build_queue_);
  }
  build_wanted_.notify_all();
  for (auto& builder : builders_) builder.join();  // a build under way finishes first
  builders_.clear();
  for (auto& preparation : abandoned) {
    httplib::Response scratch;
    send_error(scratch, 503, "the server is stopping");
    finish_preparation(*preparation, Prepared{std::nullopt, scratch.status, scratch.body});
  }
}

std::variant<KeyGroupTar, Refused> ServerImpl::key_group(const TicketFields& fields, httplib::Response& res) {
  auto hash = ContentHash::parse(fields.content_hash).value();
  auto lock_target = tar_locks_.get(hash.hex());
  std::lock_guard lock(*lock_target);
  auto existing = store_.find_key_group(hash);
  if (!existing) {
    send_store_error(res, existing.error());
    return Refused{};
  }
  if (*existing) return std::move(**existing);

  auto found = find_revision(fields.dataset, fields.split, fields.revision, res);
  if (std::holds_alternative<Refused>(found)) return Refused{};
  const Revision& rev = std::get<0>(found)->revision;
  bool known = fields.shard_index < rev.shards.size() &&
               std::all_of(fields.keys.begin(), fields.keys.end(), [&](const std::string& key) {
                 return std::binary_search(rev.keys.begin(), rev.keys.end(), key);
               });
  ShardIdentity identity{rev.manifest_ref, std::to_string(rev.revision), fields.shard_index, fields.keys, {}};
  if (known) {
    for (const auto& sample : rev.shards[fields.shard_index].samples) identity.sample_ids.push_back(sample.id);
  }
  if (!known || compute_content_hash(identity) != hash) {
    send_error(res, 404, "the shard of this ticket is not in the store");
    return Refused{};
  }
  auto made = store_.materialise_key_group(rev, fields.shard_index, fields.keys, hash);
  if (!made) {
    send_store_error(res, made.error());
    return Refused{};
  }
  return std::move(made).value();
}

void ServerImpl::handle_shard(const httplib::Request& req, httplib::Response& res) {
  std::string_view name = std::string_view(req.path).substr(std::string_view("/v1/shards/").size());
  if (!name.ends_with(".tar") || !ContentHash::parse(name.substr(0, name.size() - 4))) {
    send_error(res, 400, "invalid shard name " + origin::escape_for_message(name) + "; expected <content_hash>.tar");
    return;
  }
  auto ticket = origin::parse_ticket(name.substr(0, name.size() - 4), [&](std::string_view param) {
    std::string key(param);
    return req.has_param(key) ? std::optional<std::string>(req.get_param_value(key)) : std::nullopt;
  });
  if (!ticket) {
    send_error(res, 400, ticket.error().message);
    return;
  }
  if (!origin::verify_ticket_signature(store_.secret(), ticket->fields, ticket->signature)) {
    send_error(res, 403, "the ticket signature does not verify");
    return;
  }
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  if (ticket->fields.expires_at < now.count()) {
    send_error(res, 410, "the ticket expired at " + std::to_string(ticket->fields.expires_at) + "; ask for a new one");
    return;
  }
  auto tar = key_group(ticket->fields, res);
  if (std::holds_alternative<Refused>(tar)) return;
  const KeyGroupTar& group = std::get<KeyGroupTar>(tar);

  auto file = std::make_shared<util::UniqueFd>(::open(group.path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!file->valid() || ::fstat(file->get(), &st) != 0) {
    send_store_error(res, Error::from_errno(errno, "cannot open " + group.path));
    return;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::string etag = "\"" + group.sha256.hex() + "\"";
  res.set_header("ETag", etag);
  res.set_header("Accept-Ranges", "bytes");
  if (req.has_header("If-None-Match") && etag_matches(req.get_header_value("If-None-Match"), etag)) {
    res.status = 304;
    return;
  }
  ByteRange range{0, size - 1};
  RangeOutcome outcome = RangeOutcome::whole;
  if (req.has_header("Range")) {
    // An If-Range naming other bytes means the client's partial copy is stale: send everything.
    bool current = !req.has_header("If-Range") || req.get_header_value("If-Range") == etag;
    if (current) outcome = parse_range(req.get_header_value("Range"), size, range);
  }
  if (outcome == RangeOutcome::unsatisfiable) {
    res.set_header("Content-Range", "bytes */" + std::to_string(size));
    send_error(res, 416, "the range is outside the shard's " + std::to_string(size) + " bytes");
    return;
  }
  if (outcome == RangeOutcome::partial) {
    res.status = 206;
    res.set_header("Content-Range", "bytes " + std::to_string(range.first) + "-" + std::to_string(range.last) + "/" +
                                        std::to_string(size));
  } else {
    res.status = 200;
  }
  const std::uint64_t start = range.first;
  const std::uint64_t length = range.last - range.first + 1;
  auto buffer = std::make_shared<std::vector<char>>();
  Metrics* metrics = &metrics_;
  std::string path = group.path;
  res.set_content_provider(
      static_cast<std::size_t>(length), "application/x-tar",
      [file, buffer, start, metrics, path](std::size_t offset, std::size_t want, httplib::DataSink& sink) {
        if (buffer->empty()) buffer->resize(k_send_chunk);
        std::size_t n = std::min(want, buffer->size());
        auto read = util::pread_all(file->get(), buffer->data(), n, static_cast<off_t>(start + offset), path);
        if (!read) {
          LOG_ERROR("origin: " << read.error().message);
          return false;
        }
        // Counted before the write: once the client holds the bytes, /v1/metrics already shows them. A download
        // cut during this write counts its last chunk.
        metrics->add_bytes(Route::shard, n);
        t_request.streamed += n;
        return sink.write(buffer->data(), n);
      });
}

void ServerImpl::handle_metrics(const httplib::Request&, httplib::Response& res) {
  res.status = 200;
  res.set_content(metrics_.render(), "text/plain; version=0.0.4");
}

}  // namespace

Result<std::unique_ptr<OriginServer>> OriginServer::start(OriginServerOptions options) {
  if (options.threads < 1) return Error{ErrorCode::invalid_argument, "threads must be at least 1"};
  if (options.ticket_ttl.count() < 1) return Error{ErrorCode::invalid_argument, "ticket_ttl must be at least 1 s"};
  if (options.ticket_wait.count() < 0 || options.ticket_wait > k_max_ticket_wait) {
    return Error{ErrorCode::invalid_argument,
                 "ticket_wait must be from 0 to " + std::to_string(k_max_ticket_wait.count()) +
                     " ms: a request held longer would look stalled to clients (30 s by default)"};
  }
  if (options.token && options.token->empty()) return Error{ErrorCode::invalid_argument, "the token is empty"};
  auto store = Store::open(options.store, Store::Create::no);
  if (!store) return store.error();
  store->sweep_temporaries(k_stale_temporary_age);
  try {
    auto server = std::make_unique<ServerImpl>(std::move(options), std::move(store).value());
    DATAVO_TRY(server->run());
    return std::unique_ptr<OriginServer>(std::move(server));
  } catch (const std::exception& e) {
    return Error{ErrorCode::internal, std::string("cannot start the server: ") + e.what()};
  }
}

}  // namespace datavo
