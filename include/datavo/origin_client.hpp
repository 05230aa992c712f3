// OriginClient: the client side of origin protocol v1 (docs/protocol.md): manifests through a local manifest
// cache, stream tickets, and the Fetcher that downloads one key group of one shard into the cache hierarchy. The
// protocol's values (DatasetName, Manifest, StreamTicket, OriginMetrics, ...) and their JSON are in protocol.hpp.
//
// The manifest cache (docs/sample-stream.md, "Manifest cache"):
//   <dir>/<instance>/<dataset>/<split>/<revision>.json   the manifest of one revision, as the server sent it
//   <dir>/<instance>/<dataset>/<split>/latest            {"revision": R, "etag": "..."}: the last unpinned answer
// where <dir> is OriginClientOptions::manifest_cache_dir, else $DATAVO_MANIFEST_CACHE_DIR, else
// ~/.cache/altavo/datavo/manifests. Every file is written atomically (a temp file beside it, then rename), so
// concurrent processes never see a torn manifest. A revision's manifest never changes, so a cached one is used
// without asking the server:
//   - pinned revision, cached:          0 requests;
//   - offline (DATAVO_OFFLINE=1):       0 requests, from the cache only (a pinned revision, else `latest`);
//                                       nothing cached is ErrorCode::not_found, naming the directory looked in;
//   - no pin, `latest` cached:          1 conditional GET (If-None-Match); a 304 reuses the cached revision;
//                                       an origin that cannot be reached (is_unreachable(): connection refused,
//                                       host unreachable, a name that does not resolve) is not an error: the cached
//                                       revision is used (ManifestSource::fallback) with one WARNING per process,
//                                       as huggingface_hub falls back to its cache; later requests fail at once
//                                       (fail fast, below), so shards already cached read with no request at all;
//   - otherwise:                        1 GET, whose answer is validated and cached.
// A cached file that cannot be parsed is ignored with a WARNING (and refetched when online). A 404 to a manifest
// request (an unknown dataset, split or revision) is ErrorCode::invalid_argument: the caller's input is wrong.
//
// The instance (the directory of the cache entries and manifests of one server): OriginClientOptions::instance when
// given; else the server's own identity, the instance_id of GET /v1/instance, so that two URLs of one server
// (http://localhost:P and http://127.0.0.1:P, a restart on another port) share one cache. It is asked once per URL
// and remembered in the manifest cache (<dir>/.servers/, see client/manifest_cache.hpp), so a later process (or an
// offline one) makes no request for it; until then, and for a server without /v1/instance, the instance comes from
// the URL (Instance::from_server). The first manifest() call settles it: instance() may change until then.
//
// Shard identity: a shard's cache key is known from the manifest alone (ShardKey{instance, content_hash}), so
// callers look it up in the hierarchy first and only a miss calls the fetcher, which is the first point at which
// a ticket is requested. The fetcher
//   1. POSTs /v1/stream-tickets and refuses (ErrorCode::integrity) a ticket whose content_hash differs from the
//      one computed from the manifest;
//   2. GETs the ticket URL into the hierarchy's sink (HttpClient retries transient failures and resumes with
//      Range requests); the bearer token goes with it only when the URL is on the server's own origin (scheme,
//      host and port), never to a third party;
//   3. on 410 (the ticket expired mid-download) asks for a new ticket once, then gives up;
//   4. returns Expectation{size, sha256} from the ticket, so that the hierarchy discards any other bytes.
// Permanent failures (4xx) end the fetch at once with the server's error message; a 401 or 403 from the server says
// what to do about DATAVO_TOKEN. Fail fast: once a request to the
// server found it unreachable on every attempt (connection refused, host or network unreachable, a name that does
// not resolve), every later request of this client to it fails at once with that cause (ErrorCode::remote, the
// same sys_errno), so that the other shards of a run do not each pay their own retries. Offline, the fetcher fails with
// ErrorCode::not_found without any request.
//
// Thread safety: an OriginClient may be shared by any number of threads (its HTTP transport is thread-safe and
// its counters are atomic). Fetchers it returns may be called from any thread, also after the client is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/fetcher.hpp"
#include "datavo/protocol.hpp"
#include "datavo/result.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo {

// Whether the client may talk to the server.
enum class Offline { no, yes };

// Where a manifest came from; see the table at the top of this file. `fallback`: from the cache because the origin
// could not be reached.
enum class ManifestSource { cache, revalidated, fetched, fallback };
const char* to_string(ManifestSource source);

struct ResolvedManifest {
  Manifest manifest;
  ManifestSource source = ManifestSource::cache;
};

// Requests this client made, by protocol route (for tests and `datavo demo`).
struct OriginRequestCounts {
  std::uint64_t manifest = 0;      // GET manifest, 304s included
  std::uint64_t not_modified = 0;  // of which answered 304
  std::uint64_t ticket = 0;
  std::uint64_t shard = 0;  // GETs of ticket URLs (each perform(), retries inside it not counted)
  Bytes shard_bytes;        // bytes of completed shard downloads
  std::uint64_t total() const { return manifest + ticket + shard; }
};

struct OriginClientOptions {
  // The server's base URL, e.g. "http://127.0.0.1:8080". Empty: $DATAVO_SERVER.
  std::string server;
  // The bearer token. nullopt: $DATAVO_TOKEN (unset or empty means none).
  std::optional<std::string> token;
  // nullopt: $DATAVO_MANIFEST_CACHE_DIR, else ~/.cache/altavo/datavo/manifests.
  std::optional<std::string> manifest_cache_dir;
  // nullopt: Offline::yes when $DATAVO_OFFLINE is 1, true, yes or on.
  std::optional<Offline> offline;
  // The cache instance. nullopt: the server's identity (see the top of this file). Needed offline when there is no
  // server.
  std::optional<std::string> instance;
  // Retries, timeouts and backoff of every request. stall_timeout is overwritten by `stall_timeout`.
  TransportOptions transport;
  // A transfer that moves no byte for this long is retried. nullopt: $DATAVO_STALL_TIMEOUT (whole seconds,
  // 1..86400; anything else is invalid_argument), else transport.stall_timeout (30 s).
  std::optional<Seconds> stall_timeout;
  // A ticket request the origin answers 202 ("preparing": it is building the shard's tar) is asked again after
  // its Retry-After (at most 10 s) until this much time has passed; then it fails with ErrorCode::timeout.
  Seconds preparing_timeout{3600};
};

class OriginClient {
 public:
  // Resolves the options against the environment. Does no network I/O. invalid_argument when there is no server
  // (and, offline, no instance either), the server URL has no host, or $DATAVO_OFFLINE is not a boolean.
  static Result<std::shared_ptr<OriginClient>> create(OriginClientOptions options);
  ~OriginClient();
  OriginClient(const OriginClient&) = delete;
  OriginClient& operator=(const OriginClient&) = delete;

  // See the top of this file: settled by the first manifest() call.
  const Instance& instance() const;
  const std::string& server() const;  // empty when offline without a server
  Offline offline() const;
  const std::string& manifest_cache_dir() const;

  // The manifest of `name` at `revision` (latest when nullopt), through the manifest cache (see the top).
  Result<ResolvedManifest> manifest(const DatasetName& name, std::optional<std::uint64_t> revision);

  // The cache key of the key group `keys` of the shard at `position` of `manifest`. No I/O.
  // REQUIRES: `keys` normalized (Manifest::normalize_keys) and position < manifest.shards.size().
  ShardKey shard_key(const Manifest& manifest, std::size_t position, const std::vector<std::string>& keys) const;
  // Records in the manifest cache which dataset, revision, shard and keys shard_key() names (for `datavo cache
  // ls` and `cache rm --dataset`), once per content hash. Best effort: a failure is logged at DEBUG.
  void remember_shard(const Manifest& manifest, std::size_t position, const std::vector<std::string>& keys) const;

  // The one resolver of the instance every front end uses (the CLI's cache commands, the SDK's get_or_fetch and
  // cache.rm; SampleStream and warm settle the same identity through manifest()), so that they share one namespace:
  // the instance whose cache entries belong to `server` (empty: $DATAVO_SERVER). `explicit_name` when given; else
  // "local" when there is no server; else the identity remembered for that URL; else the server is asked
  // (GET /v1/instance, once: the answer is remembered for every later process), as the first manifest() call would,
  // so that a front end used first on a machine (the SDK's get_or_fetch, `datavo cache fetch`) keys its entries as
  // warm and read will. No request offline ($DATAVO_OFFLINE, then Instance::from_server), nor when the server
  // cannot be reached (the URL's instance then; asked again next time). `manifest_cache_dir` as in
  // OriginClientOptions. Errors: those of create(), and a server that answers /v1/instance with an error.
  static Result<Instance> server_instance(const std::string* explicit_name, std::string server = {},
                                          std::optional<std::string> manifest_cache_dir = std::nullopt);

  // POST /v1/stream-tickets for that key group, asked again while the origin answers 202 (preparing_timeout). The
  // ticket's url is made absolute (a relative one is resolved against the server). Does not check the content
  // hash (the fetcher does).
  Result<StreamTicket> request_ticket(const Manifest& manifest, std::size_t position,
                                      const std::vector<std::string>& keys);

  // The fetcher described at the top of this file. It keeps what it needs (the client included) alive.
  Fetcher shard_fetcher(const Manifest& manifest, std::size_t position, std::vector<std::string> keys);

  // Where a streamed download goes: called with each ticket before its GET (again with a new ticket when one
  // expired mid-download), returns the sink for that ticket's bytes, or an Error that ends the fetch with it.
  using TicketSink = std::function<Result<ByteSink*>(const StreamTicket& ticket)>;
  // The fetcher's steps (ticket, content-hash check, GET with resume, a new ticket on 410) into the sink `sink_for`
  // gives, for a reader that consumes the bytes as they arrive (SampleStream's ReadMode::streamed). The bytes pass
  // through a ChunkVerifyingSink when the ticket carries chunk digests. Returns what the bytes must be; checking
  // the whole shard against it is the caller's.
  Result<Expectation> fetch_shard(const Manifest& manifest, std::size_t position, std::vector<std::string> keys,
                                  const TicketSink& sink_for);

  // GET /v1/metrics (no token needed).
  Result<OriginMetrics> metrics();

  // Requests made through this client so far.
  OriginRequestCounts requests() const;

 private:
  OriginClient();
  struct Impl;
  struct FetchJob;  // one shard's fetch: shard_fetcher() and fetch_shard() (origin_client.cpp)
  std::shared_ptr<Impl> impl_;
};

}  // namespace datavo
