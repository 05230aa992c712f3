#include "datavo/origin_client.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "client/manifest_cache.hpp"
#include "net/chunk_verifying_sink.hpp"
#include "net/http_client.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"
#include "util/text.hpp"

namespace datavo {
namespace {

// The manifest cache a client uses: the one it was given, else the default.
Result<std::string> manifest_dir_of(const std::optional<std::string>& given) {
  if (given && !given->empty()) return *given;
  return client::default_manifest_cache_dir();
}

// A 202 "preparing" without a usable Retry-After is asked again after this; a longer Retry-After is capped.
constexpr Milliseconds k_default_preparing_wait{1'000};
constexpr Milliseconds k_max_preparing_wait{10'000};
// A Retry-After of 0 (or a date in the past) would make the loop spin.
constexpr Milliseconds k_min_preparing_wait{100};

Result<Offline> offline_from_env() {
  const char* value = std::getenv("DATAVO_OFFLINE");
  if (value == nullptr) return Offline::no;
  const std::string text = util::to_lower(value);
  if (text.empty() || text == "0" || text == "false" || text == "no" || text == "off") return Offline::no;
  if (text == "1" || text == "true" || text == "yes" || text == "on") return Offline::yes;
  return Error{ErrorCode::invalid_argument,
               "DATAVO_OFFLINE=" + std::string(value) + ": expected 1, 0, true, false, yes, no, on or off"};
}

bool is_absolute_url(std::string_view url) { return url.starts_with("http://") || url.starts_with("https://"); }

// "http://host:port" of an absolute URL, lowercased, for same-origin checks.
std::string origin_of(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  const auto end = url.find_first_of("/?#", scheme_end + 3);
  return util::to_lower(url.substr(0, end));
}

// The message of a protocol error body, cut to 200 bytes, or "" when the body is not one.
std::string server_message(std::string_view body) {
  auto error = ErrorBody::parse(body);
  return error ? error->message.substr(0, 200) : std::string();
}

// Prefixes an Error's message with what was being done, keeping its code.
Error in_context(Error error, const std::string& context) {
  error.message = context + ": " + error.message;
  return error;
}

}  // namespace

const char* to_string(ManifestSource source) {
  switch (source) {
    case ManifestSource::cache: return "cache";
    case ManifestSource::revalidated: return "revalidated";
    case ManifestSource::fetched: return "fetched";
    case ManifestSource::fallback: return "fallback";
  }
  return "?";
}

// --- the client -------------------------------------------------------------------------------------------------

struct OriginClient::Impl {
  std::string server;
  Instance instance = Instance::local();
  Offline offline = Offline::no;
  std::string manifest_dir;
  std::unique_ptr<client::ManifestCache> cache;
  std::unique_ptr<net::HttpClient> http;
  // The bearer token, or nullptr. Sent to the server's own origin only: ticket URLs on another origin (a CDN, a
  // bucket) are authorised by the ticket's signature, and the token must not leak to a third party.
  std::shared_ptr<net::RequestAuth> token;
  Seconds preparing_timeout{3600};

  std::atomic<std::uint64_t> manifest_requests{0}, not_modified{0}, ticket_requests{0}, shard_requests{0},
      shard_bytes{0};

  // Fail fast: the first request to the server that found it unreachable on every attempt (is_unreachable()),
  // after which every request to it fails at once with that cause instead of paying its own retries.
  mutable std::mutex unreachable_mu;
  std::optional<Error> unreachable;  // guarded by unreachable_mu

  // See the top of origin_client.hpp: the instance is settled by the first manifest() call.
  std::mutex instance_mu;
  bool instance_settled = false;  // guarded by instance_mu
  Result<void> settle_instance();

  std::string url(std::string_view path) const { return server + std::string(path); }

  // http->perform(), failing at once once the server was found unreachable (see `unreachable`). Requests to other
  // origins (a ticket URL on a CDN) are neither stopped nor counted.
  Result<net::HttpResponse> perform(const net::HttpRequest& request) {
    const bool to_server = origin_of(request.url) == origin_of(server);
    if (to_server) {
      std::lock_guard lock(unreachable_mu);
      if (unreachable) {
        return Error{unreachable->code,
                     "not attempted: an earlier request found the origin unreachable: " + unreachable->message,
                     unreachable->sys_errno};
      }
    }
    auto response = http->perform(request);
    if (!response && to_server && is_unreachable(response.error())) {
      std::lock_guard lock(unreachable_mu);
      if (!unreachable) unreachable = response.error();
    }
    if (!response && to_server && response.error().code == ErrorCode::permission_denied) {
      // A 401 or 403 from the origin: almost always the bearer token, which the message then names.
      Error error = std::move(response).error();
      error.message += token ? " (the origin refused DATAVO_TOKEN: check it against the first line of the "
                               "server's --token-file)"
                             : " (the origin requires a bearer token: set DATAVO_TOKEN to the first line of the "
                               "server's --token-file)";
      return error;
    }
    return response;
  }

  Result<void> require_online(const std::string& what) const {
    if (offline == Offline::no) return ok();
    return Error{ErrorCode::not_found, what + ": not available offline (DATAVO_OFFLINE=1), and not cached"};
  }

  Result<ResolvedManifest> manifest(const DatasetName& name, std::optional<std::uint64_t> revision);
  Result<net::HttpResponse> get_manifest(const DatasetName& name, std::optional<std::uint64_t> revision,
                                         const std::string* etag);
  // POSTs a ticket request until the origin stops answering 202 "preparing" (for at most preparing_timeout).
  Result<net::HttpResponse> post_until_prepared(const net::HttpRequest& request, const std::string& context);
  Result<StreamTicket> request_ticket(const TicketRequest& ticket_request);
};

Result<net::HttpResponse> OriginClient::Impl::get_manifest(const DatasetName& name,
                                                           std::optional<std::uint64_t> revision,
                                                           const std::string* etag) {
  net::HttpRequest request;
  request.url = url("/v1/datasets/" + name.dataset + "/" + name.split + "/manifest");
  if (revision) request.url += "?revision=" + std::to_string(*revision);
  if (etag != nullptr) request.headers.push_back({"If-None-Match", *etag});
  // 404 names an unknown dataset, split or revision: the caller's input, answered below with invalid_argument.
  request.accepted_statuses = {404};
  request.auth = token.get();
  manifest_requests.fetch_add(1, std::memory_order_relaxed);
  auto response = perform(request);
  if (!response) return in_context(std::move(response).error(), "manifest of " + name.full());
  if (response->status == 304) not_modified.fetch_add(1, std::memory_order_relaxed);
  return response;
}

Result<void> OriginClient::Impl::settle_instance() {
  std::lock_guard lock(instance_mu);
  if (instance_settled) return ok();
  if (offline == Offline::yes) {
    instance_settled = true;  // no network: the remembered identity, else the URL's
    return ok();
  }
  net::HttpRequest request;
  request.url = url("/v1/instance");
  request.auth = token.get();
  request.accepted_statuses = {404};
  auto response = perform(request);
  if (!response) {
    // Unreachable: the URL's instance for now (the manifest falls back to its cache); asked again next time.
    if (is_unreachable(response.error())) return ok();
    return in_context(std::move(response).error(), "the identity of the origin");
  }
  instance_settled = true;
  if (response->status == 404) {
    LOG_DEBUG(log::redact_url(server) << " has no /v1/instance; its cache instance comes from the URL");
    return ok();
  }
  const auto info = InstanceInfo::parse(response->body);
  auto id = info ? Instance::parse(info->instance_id) : Result<Instance>(info.error());
  if (!id) {
    LOG_WARNING(log::redact_url(server) << "/v1/instance: " << id.error().message << "; the cache instance comes from "
                                        << "the URL (" << instance.name() << ")");
    return ok();
  }
  instance = std::move(*id);
  cache = std::make_unique<client::ManifestCache>(manifest_dir, instance);
  if (auto stored = client::store_server_instance(manifest_dir, server, instance); !stored)
    LOG_WARNING("cannot remember the instance of " << log::redact_url(server) << ": " << stored.error().message);
  return ok();
}

Result<ResolvedManifest> OriginClient::Impl::manifest(const DatasetName& name, std::optional<std::uint64_t> revision) {
  DATAVO_TRY(settle_instance());
  if (revision) {
    if (auto cached = cache->load(name, *revision)) return ResolvedManifest{std::move(*cached), ManifestSource::cache};
  }
  std::optional<client::LatestRecord> latest;
  std::optional<Manifest> latest_manifest;
  if (!revision) {
    latest = cache->load_latest(name);
    if (latest) latest_manifest = cache->load(name, latest->revision);
    if (!latest_manifest) latest.reset();
  }
  if (offline == Offline::yes) {
    if (latest_manifest) return ResolvedManifest{std::move(*latest_manifest), ManifestSource::cache};
    return Error{ErrorCode::not_found, "offline (DATAVO_OFFLINE=1) and no cached manifest of " + name.full() +
                                           (revision ? " revision " + std::to_string(*revision) : std::string()) +
                                           " for instance " + instance.name() + " under " + cache->directory(name) +
                                           ": read it once online first (or unset DATAVO_OFFLINE)"};
  }

  const bool conditional = latest && !latest->etag.empty();
  auto response = get_manifest(name, revision, conditional ? &latest->etag : nullptr);
  if (!response) {
    // huggingface_hub's automatic offline fallback: an origin that cannot be reached at all (not one that answers
    // with an error) does not stop a read whose manifest is cached. One WARNING per process and server.
    if (latest_manifest && is_unreachable(response.error())) {
      log::warn_once("offline-fallback:" + server,
                     "the origin " + log::redact_url(server) + " cannot be reached (" +
                         std::strerror(response.error().sys_errno) + "); reading " + name.full() + " revision " +
                         std::to_string(latest_manifest->revision) +
                         " from the cached manifest (DATAVO_OFFLINE=1 skips the network altogether)");
      return ResolvedManifest{std::move(*latest_manifest), ManifestSource::fallback};
    }
    return std::move(response).error();
  }
  if (response->status == 404) {
    // Bad input (exit 2 in the CLI) that names something absent: ENOENT says which kind, for the Python SDK's
    // FileNotFoundError.
    std::string detail = server_message(response->body);
    return Error{ErrorCode::invalid_argument,
                 "manifest of " + name.full() + (revision ? " revision " + std::to_string(*revision) : std::string()) +
                     ": the origin " + log::redact_url(server) + " has no such dataset, split or revision (HTTP 404" +
                     (detail.empty() ? std::string() : ": " + detail) + ")",
                 ENOENT};
  }
  if (response->status == 304) {
    if (conditional) return ResolvedManifest{std::move(*latest_manifest), ManifestSource::revalidated};
    return Error{ErrorCode::remote, "manifest of " + name.full() + ": HTTP 304 to an unconditional request"};
  }
  if (response->status != 200) {
    return Error{ErrorCode::remote,
                 "manifest of " + name.full() + ": unexpected HTTP " + std::to_string(response->status)};
  }
  auto parsed = Manifest::parse(response->body);
  if (!parsed) return in_context(std::move(parsed).error(), "manifest of " + name.full() + " from " + server);
  if (parsed->name.dataset != name.dataset || parsed->name.split != name.split) {
    return Error{ErrorCode::integrity,
                 "manifest of " + name.full() + " from " + server + " describes " + parsed->name.full()};
  }
  if (revision && parsed->revision != *revision) {
    return Error{ErrorCode::integrity, "manifest of " + name.full() + " revision " + std::to_string(*revision) +
                                           " from " + server + " has revision " + std::to_string(parsed->revision)};
  }
  // A cache that cannot be written (read-only home, full disk) costs requests later, never this read.
  if (auto stored = cache->store(name, parsed->revision, response->body); !stored) {
    LOG_WARNING("cannot cache the manifest of " << name.full() << ": " << stored.error().message);
  } else if (!revision) {
    const auto etag = response->header("ETag");
    client::LatestRecord record{parsed->revision, etag ? std::string(*etag) : std::string()};
    if (auto stored_latest = cache->store_latest(name, record); !stored_latest)
      LOG_WARNING("cannot cache the latest revision of " << name.full() << ": " << stored_latest.error().message);
  }
  return ResolvedManifest{std::move(*parsed), ManifestSource::fetched};
}

Result<net::HttpResponse> OriginClient::Impl::post_until_prepared(const net::HttpRequest& request,
                                                                  const std::string& context) {
  const auto deadline = std::chrono::steady_clock::now() + preparing_timeout;
  bool told = false;
  for (;;) {
    ticket_requests.fetch_add(1, std::memory_order_relaxed);
    auto response = perform(request);
    if (!response) return in_context(std::move(response).error(), context);
    if (response->status != 202) return response;
    // The origin is building the shard's tar: ask again after Retry-After, for as long as preparing_timeout allows.
    Milliseconds wait = k_default_preparing_wait;
    if (auto header = response->header("Retry-After")) {
      if (auto parsed = net::parse_retry_after(*header, std::chrono::system_clock::now())) wait = *parsed;
    }
    wait = std::clamp(wait, k_min_preparing_wait, k_max_preparing_wait);
    const auto left = std::chrono::duration_cast<Milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= Milliseconds{0}) {
      return Error{ErrorCode::timeout, context + ": the origin was still preparing the shard after " +
                                           std::to_string(preparing_timeout.count()) + " s"};
    }
    wait = std::min(wait, left);  // and ask a last time at the deadline
    if (!told) {
      const auto preparing = TicketPreparing::parse(response->body);
      LOG_INFO(context << ": the origin is preparing the shard"
                       << (preparing ? " (content hash " + preparing->content_hash.hex() + ")" : std::string())
                       << "; asking again every " << wait.count() << " ms");
      told = true;
    }
    DATAVO_TRY(util::sleep_unless_cancelled(wait, context));
  }
}

Result<StreamTicket> OriginClient::Impl::request_ticket(const TicketRequest& ticket_request) {
  const std::string context = "ticket for shard " + std::to_string(ticket_request.shard_index) + " of " +
                              ticket_request.name.full() + " revision " + std::to_string(ticket_request.revision);
  DATAVO_TRY(require_online(context));
  net::HttpRequest request;
  request.method = net::HttpMethod::post;
  request.url = url("/v1/stream-tickets");
  request.headers.push_back({"Content-Type", "application/json"});
  request.body = ticket_request.to_json();
  // Issuing a ticket changes nothing on the server that a second identical request could double.
  request.idempotent = true;
  request.auth = token.get();
  auto response = post_until_prepared(request, context);
  if (!response) return std::move(response).error();
  if (response->status != 200)
    return Error{ErrorCode::remote, context + ": unexpected HTTP " + std::to_string(response->status)};
  auto ticket = StreamTicket::parse(response->body);
  if (!ticket) return in_context(std::move(ticket).error(), context);
  if (!is_absolute_url(ticket->url))
    ticket->url = ticket->url.front() == '/' ? url(ticket->url) : url("/" + ticket->url);
  return ticket;
}

OriginClient::OriginClient() : impl_(std::make_shared<Impl>()) {}
OriginClient::~OriginClient() = default;

Result<std::shared_ptr<OriginClient>> OriginClient::create(OriginClientOptions options) {
  std::shared_ptr<OriginClient> client(new OriginClient());
  Impl& impl = *client->impl_;
  impl.server = options.server;
  if (impl.server.empty()) {
    if (const char* env = std::getenv("DATAVO_SERVER"); env != nullptr) impl.server = env;
  }
  while (impl.server.ends_with('/')) impl.server.pop_back();
  if (options.offline) {
    impl.offline = *options.offline;
  } else {
    auto offline = offline_from_env();
    if (!offline) return std::move(offline).error();
    impl.offline = *offline;
  }
  if (!impl.server.empty() && !is_absolute_url(impl.server)) {
    return Error{ErrorCode::invalid_argument,
                 "server '" + log::redact_url(impl.server) + "': expected an http:// or https:// URL"};
  }
  auto dir = manifest_dir_of(options.manifest_cache_dir);
  if (!dir) return std::move(dir).error();
  impl.manifest_dir = std::move(*dir);
  if (options.instance && !options.instance->empty()) {
    auto instance = Instance::parse(*options.instance);
    if (!instance) return std::move(instance).error();
    impl.instance = std::move(*instance);
    impl.instance_settled = true;
  } else if (!impl.server.empty()) {
    auto instance = Instance::from_server(impl.server);
    if (!instance) return std::move(instance).error();
    impl.instance = std::move(*instance);
    if (auto known = client::load_server_instance(impl.manifest_dir, impl.server)) {
      impl.instance = std::move(*known);
      impl.instance_settled = true;
    }
  } else if (impl.offline == Offline::yes) {
    return Error{ErrorCode::invalid_argument,
                 "offline without a server: set DATAVO_SERVER (or --server, or --instance) so that the cache of the "
                 "right instance is read"};
  } else {
    return Error{ErrorCode::invalid_argument, "no origin server: pass --server URL or set DATAVO_SERVER"};
  }

  impl.cache = std::make_unique<client::ManifestCache>(impl.manifest_dir, impl.instance);

  TransportOptions transport = std::move(options.transport);
  if (options.token) {
    if (!options.token->empty()) impl.token = net::bearer_auth(*options.token);
  } else if (const char* token = std::getenv("DATAVO_TOKEN"); token != nullptr && *token != '\0') {
    impl.token = net::bearer_auth(token);
  }
  if (options.stall_timeout) {
    if (options.stall_timeout->count() < 1)
      return Error{ErrorCode::invalid_argument, "stall_timeout must be at least 1 s (0 would abort every transfer)"};
    transport.stall_timeout = *options.stall_timeout;
  } else {
    auto from_env = stall_timeout_from_env();
    if (!from_env) return std::move(from_env).error();
    if (*from_env) transport.stall_timeout = **from_env;
  }
  impl.preparing_timeout = options.preparing_timeout;
  impl.http = std::make_unique<net::HttpClient>(std::move(transport));
  return client;
}

const Instance& OriginClient::instance() const { return impl_->instance; }
const std::string& OriginClient::server() const { return impl_->server; }
Offline OriginClient::offline() const { return impl_->offline; }
const std::string& OriginClient::manifest_cache_dir() const { return impl_->manifest_dir; }

Result<ResolvedManifest> OriginClient::manifest(const DatasetName& name, std::optional<std::uint64_t> revision) {
  return impl_->manifest(name, revision);
}

ShardKey OriginClient::shard_key(const Manifest& manifest, std::size_t position,
                                 const std::vector<std::string>& keys) const {
  return ShardKey{impl_->instance, compute_content_hash(manifest.identity(position, keys))};
}

void OriginClient::remember_shard(const Manifest& manifest, std::size_t position,
                                  const std::vector<std::string>& keys) const {
  const ContentHash hash = compute_content_hash(manifest.identity(position, keys));
  const client::ShardRecord record{manifest.name.dataset, manifest.name.split, manifest.revision,
                                   manifest.shards.at(position).index, keys};
  if (auto stored = impl_->cache->store_shard(hash, record); !stored)
    LOG_DEBUG("cannot record shard " << record.shard_index << " in the shard index: " << stored.error().message);
}

Result<Instance> OriginClient::server_instance(const std::string* explicit_name, std::string server,
                                               std::optional<std::string> manifest_cache_dir) {
  if (explicit_name != nullptr && !explicit_name->empty()) return Instance::parse(*explicit_name);
  if (server.empty()) {
    if (const char* env = std::getenv("DATAVO_SERVER"); env != nullptr) server = env;
  }
  while (server.ends_with('/')) server.pop_back();
  if (server.empty()) return Instance::local();
  // The SDK resolves on every get_or_fetch, hits included: a remembered identity costs one small file read, and no
  // client is made.
  if (auto dir = manifest_dir_of(manifest_cache_dir)) {
    if (auto known = client::load_server_instance(*dir, server)) return std::move(*known);
  }
  OriginClientOptions options;
  options.server = std::move(server);
  options.manifest_cache_dir = std::move(manifest_cache_dir);
  auto client = create(std::move(options));
  if (!client) return std::move(client).error();
  DATAVO_TRY((*client)->impl_->settle_instance());
  return (*client)->instance();
}

Result<StreamTicket> OriginClient::request_ticket(const Manifest& manifest, std::size_t position,
                                                  const std::vector<std::string>& keys) {
  return impl_->request_ticket(
      TicketRequest{manifest.name, manifest.revision, manifest.shards.at(position).index, keys});
}

struct OriginClient::FetchJob {
  std::shared_ptr<Impl> impl;
  DatasetName name;
  std::uint64_t revision;
  std::uint64_t shard_index;
  std::vector<std::string> keys;
  ContentHash expected;

  Result<Expectation> run(const TicketSink& sink_for) const;
};

Fetcher OriginClient::shard_fetcher(const Manifest& manifest, std::size_t position, std::vector<std::string> keys) {
  auto job =
      std::make_shared<FetchJob>(FetchJob{impl_, manifest.name, manifest.revision, manifest.shards.at(position).index,
                                          keys, compute_content_hash(manifest.identity(position, keys))});
  return [job](ByteSink& sink) -> Result<Expectation> {
    return job->run([&sink](const StreamTicket&) -> Result<ByteSink*> { return &sink; });
  };
}

Result<Expectation> OriginClient::fetch_shard(const Manifest& manifest, std::size_t position,
                                              std::vector<std::string> keys, const TicketSink& sink_for) {
  const FetchJob job{impl_,
                     manifest.name,
                     manifest.revision,
                     manifest.shards.at(position).index,
                     keys,
                     compute_content_hash(manifest.identity(position, keys))};
  return job.run(sink_for);
}

Result<Expectation> OriginClient::FetchJob::run(const TicketSink& sink_for) const {
  Impl& owner = *impl;
  const std::string what =
      "shard " + std::to_string(shard_index) + " of " + name.full() + " revision " + std::to_string(revision);
  // A second expiry in a row means the clocks or the TTL are wrong: more tickets would not help.
  constexpr int k_ticket_rounds = 2;
  for (int round = 1;; ++round) {
    auto ticket = owner.request_ticket(TicketRequest{name, revision, shard_index, keys});
    if (!ticket) return std::move(ticket).error();
    if (ticket->content_hash != expected) {
      return Error{ErrorCode::integrity, what + ": the origin's ticket names content hash " +
                                             ticket->content_hash.hex() + " but the manifest gives " + expected.hex() +
                                             "; refusing to download it"};
    }
    // With the ticket's chunk digests, every chunk is checked as it arrives and the first bad one ends the
    // download; without them (an origin from before chunk digests) the whole-shard check below is the only one.
    auto sink_of_ticket = sink_for(*ticket);
    if (!sink_of_ticket) return std::move(sink_of_ticket).error();
    ByteSink& sink = **sink_of_ticket;
    std::optional<net::ChunkVerifyingSink> verifying;
    if (ticket->chunks) verifying.emplace(sink, *ticket->chunks, ticket->size, "content hash " + expected.hex());
    net::HttpRequest request;
    request.url = ticket->url;
    request.sink = verifying ? static_cast<ByteSink*>(&*verifying) : &sink;
    // A download left half-done by a killed process goes on from where it stopped: the ticket's SHA-256 is
    // checked over the whole shard before anything is installed.
    request.resume = net::Resume::continue_sink;
    request.accepted_statuses = {410};
    if (origin_of(ticket->url) == origin_of(owner.server)) request.auth = owner.token.get();
    owner.shard_requests.fetch_add(1, std::memory_order_relaxed);
    auto response = owner.perform(request);
    if (!response) return in_context(std::move(response).error(), what);
    if (response->status == 410) {
      if (round < k_ticket_rounds) {
        LOG_INFO(what << ": the ticket expired during the download; asking for a new one");
        continue;
      }
      return Error{ErrorCode::remote, what + ": the ticket expired again (HTTP 410) right after being issued"};
    }
    if (response->status != 200 && response->status != 206)
      return Error{ErrorCode::remote, what + ": unexpected HTTP " + std::to_string(response->status)};
    owner.shard_bytes.fetch_add(sink.written().count(), std::memory_order_relaxed);
    return Expectation{ticket->size, ticket->sha256};
  }
}

Result<OriginMetrics> OriginClient::metrics() {
  DATAVO_TRY(impl_->require_online("origin metrics"));
  net::HttpRequest request;
  request.url = impl_->url("/v1/metrics");
  auto response = impl_->perform(request);
  if (!response) return in_context(std::move(response).error(), "origin metrics");
  return OriginMetrics::parse(response->body);
}

OriginRequestCounts OriginClient::requests() const {
  OriginRequestCounts counts;
  counts.manifest = impl_->manifest_requests.load(std::memory_order_relaxed);
  counts.not_modified = impl_->not_modified.load(std::memory_order_relaxed);
  counts.ticket = impl_->ticket_requests.load(std::memory_order_relaxed);
  counts.shard = impl_->shard_requests.load(std::memory_order_relaxed);
  counts.shard_bytes = Bytes{impl_->shard_bytes.load(std::memory_order_relaxed)};
  return counts;
}

}  // namespace datavo
