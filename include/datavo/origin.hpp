// The reference origin: packing datasets into a store and serving them over origin protocol v1
// (docs/protocol.md). `datavo pack` and `datavo serve` are thin wrappers over these functions; tests and
// `datavo demo` start an OriginServer in-process on an ephemeral loopback port.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

struct PackOptions {
  std::string source;       // a directory of <sample_id>.<key> files, or of WebDataset .tar shards
  std::string store;        // the store directory (created if missing)
  std::string dataset;      // "<dataset>/<split>"
  std::size_t samples_per_shard = 1000;
};

struct PackReport {
  std::uint64_t revision = 0;        // the new revision watermark (unchanged when nothing was added)
  std::size_t samples_added = 0;
  std::size_t shards_added = 0;
  std::size_t total_shards = 0;
  Bytes bytes_added;                 // new object bytes written to the store
};

// Builds or extends a dataset in a store (rules in docs/protocol.md, "The store"). Existing shards never change.
// Errors name the offending file. Not safe against a concurrent pack of the same dataset (serialised with a lock
// file in the store).
Result<PackReport> pack_dataset(const PackOptions& options);

struct OriginServerOptions {
  std::string store;
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  std::uint16_t port = 0;          // 0: an ephemeral port, see OriginServer::port()
  std::optional<std::string> token;  // when set, every /v1/ call but metrics needs "Authorization: Bearer <token>"
  Seconds ticket_ttl{900};
  bool log_requests = true;        // one line per request on stderr
  int threads = 8;
};

// A running origin server. Serving happens on background threads; the destructor stops it.
class OriginServer {
 public:
  // Binds and starts serving; returns once the socket is listening.
  static Result<std::unique_ptr<OriginServer>> start(OriginServerOptions options);
  virtual ~OriginServer() = default;
  virtual std::uint16_t port() const = 0;
  // "http://<host>:<port>"
  virtual std::string base_url() const = 0;
  // Blocks until stop() is called from another thread or a signal handler.
  virtual void wait() = 0;
  virtual void stop() = 0;
};

}  // namespace datavo
