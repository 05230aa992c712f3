// The reference origin: packing datasets into a store and serving them over origin protocol v1
// (docs/protocol.md). `datavo pack` and `datavo serve` are thin wrappers over these functions; tests and
// `datavo demo` start an OriginServer in-process on an ephemeral loopback port.
//
// Thread safety: pack_dataset() may run next to a server on the same store (the server picks up the new revision);
// two packs of one dataset are serialised by a lock file. An OriginServer's methods may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "datavo/chunk_digests.hpp"
#include "datavo/result.hpp"
#include "datavo/tar.hpp"
#include "datavo/units.hpp"

namespace datavo {

struct PackOptions {
  // A directory of <sample_id>.<key> files, a directory of WebDataset tar shards, or one tar shard (rules in
  // docs/protocol.md, "datavo pack"). A tar shard is a file named *.tar, or a compressed one: *.tar.gz / *.tgz and
  // *.tar.zst / *.tzst are read (decompressed into an unnamed scratch file in the store directory, which goes away
  // with the pack); *.tar.bz2 / *.tbz2 and *.tar.xz / *.txz are refused, saying to decompress them. Whatever its
  // name, a shard is recognised by its content: a gzip or zstd file named *.tar is read as well.
  std::string source;
  std::string store;                     // the store directory (created if missing)
  std::string dataset;                   // "<dataset>/<split>"
  std::size_t samples_per_shard = 1000;  // at most this many samples per new shard; >= 1
  // Whether a source tar must end with the end-of-archive marker (datavo/tar.hpp): by default a tar without it is
  // refused as cut short; EndMarker::optional accepts one from a tool that omits it (--allow-missing-end-marker).
  EndMarker end_marker = EndMarker::required;
};

struct PackReport {
  std::uint64_t revision = 0;  // the new revision watermark (unchanged when nothing was added)
  std::size_t samples_added = 0;
  std::size_t shards_added = 0;
  std::size_t total_shards = 0;
  Bytes bytes_added;  // new object bytes written to the store
  // Members of the source tars that are not part of any sample: links and special files (only regular files carry
  // bytes), and files not named <sample_id>.<key>. describe_skips() words them; directories are counted, not news.
  TarSkips skipped;
};

// Builds or extends a dataset in a store (rules in docs/protocol.md, "The store"): the source's samples that are not
// yet in the dataset become new shards of a new revision (LATEST + 1); existing shards never change. When nothing is
// new, no revision is written and the report gives the current one.
// Errors: invalid_argument for bad input (a bad dataset name, a file not named <sample_id>.<key>, an invalid id or
// key, a sample without exactly the dataset's keys, a repeated sample id, an empty source, a malformed, truncated or
// bzip2/xz-compressed source tar), naming the offending file or sample; integrity for a malformed store; io /
// permission_denied / no_space from the filesystem; cancelled when the process is cancelled (util/cancel.hpp: the
// CLI's Ctrl-C) or the calling thread's work is stopped, while it waits for the dataset's lock, between source tars
// or between samples. A failed or cancelled pack publishes nothing (it may leave unreferenced objects, which are
// harmless: complete, content-addressed, and reused by the next pack of the same bytes).
// Concurrent packs of one dataset are serialised with a lock file in the store (the second waits).
Result<PackReport> pack_dataset(const PackOptions& options);

struct OriginServerOptions {
  std::string store;
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  std::uint16_t port = 0;          // 0: an ephemeral port, see OriginServer::port()
  // When set, every request but GET /v1/metrics needs "Authorization: Bearer <token>".
  std::optional<std::string> token;
  Seconds ticket_ttl{900};  // lifetime of stream tickets; >= 1 s
  // How long a ticket request waits for its key-group tar to be built before it is answered 202 ("preparing",
  // with Retry-After) while the build goes on in the background (two builds at a time). Zero answers 202 whenever a
  // build is needed; at most 20 s, so that a waiting request never looks stalled to a client.
  Milliseconds ticket_wait{5'000};
  // The chunk size of the chunk digests in tickets (docs/protocol.md, "Chunk digests"): from k_min_chunk_size
  // (4 KiB) to k_max_chunk_size (1 GiB).
  Bytes chunk_size = k_default_chunk_size;
  bool log_requests = true;  // one line per request on stderr (tickets redacted)
  int threads = 8;           // worker threads, each serving one connection at a time; >= 1
};

// A running origin server. Serving happens on background threads; the destructor stops it.
class OriginServer {
 public:
  // Binds and starts serving; returns once the socket is listening and the accept loop runs. The store must exist
  // (not_found otherwise); instance.json and secret are created in it when missing. Errors: invalid_argument for bad
  // options, io when the address cannot be bound (e.g. the port is in use: the socket is not shared with
  // SO_REUSEPORT).
  static Result<std::unique_ptr<OriginServer>> start(OriginServerOptions options);
  virtual ~OriginServer() = default;
  virtual std::uint16_t port() const = 0;
  // "http://<host>:<port>"
  virtual std::string base_url() const = 0;
  // Blocks until the server has stopped (stop() from another thread, or the accept loop ending on its own).
  virtual void wait() = 0;
  // Stops accepting, cuts in-flight downloads, joins the serving threads and wakes wait(). Idempotent and
  // thread-safe, but not async-signal-safe: from a signal, call it on a thread that sigwait()s (as `datavo serve`).
  virtual void stop() = 0;
};

}  // namespace datavo
