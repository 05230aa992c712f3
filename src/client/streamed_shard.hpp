// StreamedShard: the samples of one shard read straight from a download, through verified chunks, with no local
// copy (SampleStream's ReadMode::streamed, docs/hierarchy.md "Streamed reads").
//
// A download thread runs the shard's source (OriginClient::fetch_shard) into a StreamWindow, a ByteSink that holds
// at most `window` bytes in memory; the consumer (next()) parses samples out of its verified prefix with the tar
// reader and frees the bytes of every sample it hands out.
//   - Only verified bytes are parsed: the source passes the bytes through the ticket's ChunkVerifyingSink, which
//     checks a chunk before the write that completes it reaches the window, so the bytes up to the last chunk
//     boundary the window holds (all of them once the shard is complete) are the ticket's. A chunk that fails its
//     digest ends the download; no sample with a byte in that chunk or later is handed out.
//   - Parsing: a SampleIterator over [start of the next sample, verified end). On a prefix, TarFault::truncated,
//     missing_end_marker and bad_extended_header mean "more bytes needed" until the shard is complete. A sample is
//     handed out once the first member of the next one (or the end marker) is verified too, as SampleIterator needs
//     to see it to know the sample has ended. Each re-parse starts at a sample boundary, so pax global ('g')
//     headers, which Datavo's writer never emits, do not carry over from one sample to the next.
//   - Backpressure: the download thread blocks while the window is full. A sample that cannot be completed within
//     the window (the sample, the next sample's first member and the chunk being verified) is an Error naming the
//     shard, the sample's byte offset and the window.
//   - Every sample handed out owns a copy of its fields' bytes (a ShardMapping::own block), as the window moves on.
//   - The end: once the last sample is out, the whole shard's size and SHA-256 are checked against the ticket; a
//     mismatch is an Error naming the shard after the last sample. The consumer hashes the bytes as it frees them,
//     so that the whole-shard hash runs beside the download's chunk hashing, and parses and copies without the
//     window's lock (the download writes only past the verified bytes).
//   - A ticket without chunk digests (an origin from before them) cannot be streamed with bounded memory: the
//     shard fails with ErrorCode::unsupported saying so (read it in the cached mode).
//   - The window is a ring mapped twice in a row (memfd), so that its live bytes are always one span for the tar
//     reader and nothing is moved to make room. Its memory is min(window, shard size), rounded up to a page.
//   - A transfer the transport restarts from byte 0 (a server without Range support) is verified again and the
//     bytes the window already took are dropped, so the parser never sees a byte twice. A new ticket (after one
//     expired, or a new round) goes on from the last verified chunk boundary with Range.
//   - Rounds: a consumer slower than the download holds it back (the socket is not read), and a server may drop such
//     a connection (datavo serve after 5 s); the transport resumes it, but each cut spends one of its attempts. A
//     round of the source that fails (remote or timeout) after the window held the download back for 1 s or more,
//     and that verified more bytes, is followed by another round; any other failure ends the shard with it.
//
// Thread safety: next() from one thread at a time; the download thread is internal. Destroying a StreamedShard
// stops its download at the next write and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "datavo/byte_sink.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tar.hpp"
#include "datavo/units.hpp"

namespace datavo::client {

// Counters a stream keeps over all its streamed shards. Updated by the download threads; read from any thread.
struct StreamCounters {
  std::atomic<std::uint64_t> bytes{0};         // bytes taken into the windows
  std::atomic<std::uint64_t> max_buffered{0};  // peak bytes one window held
};

// The download side: calls the source with a TicketSink and returns what the bytes must be.
using StreamSource = std::function<Result<Expectation>(const OriginClient::TicketSink& sink_for)>;

class StreamedShard {
 public:
  // Starts the download thread. `name` names the shard in errors (e.g. "3 (1d8d….tar)"). REQUIRES: window >= 2 *
  // k_min_chunk_size (SampleStream checks its option against the ticket's chunk size: window >= 2 chunks).
  // `cancelled` and `counters` are borrowed and must outlive the StreamedShard.
  StreamedShard(StreamSource source, std::string name, Bytes window, const std::atomic<bool>& cancelled,
                StreamCounters& counters);
  ~StreamedShard();
  StreamedShard(const StreamedShard&) = delete;
  StreamedShard& operator=(const StreamedShard&) = delete;

  // The next sample (its fields in archive order), nullptr after the last one once the whole shard is verified, or
  // an Error (sticky). The Sample is valid until the next call; its field bytes live in block().
  Result<const Sample*> next();
  // The owned bytes of the sample next() returned last.
  const std::shared_ptr<const ShardMapping>& block() const { return block_; }
  const std::string& name() const { return name_; }

 private:
  struct Window;  // the bounded buffer shared with the download thread (streamed_shard.cpp)

  // Copies the sample parsed at `base` out, hashes and frees its bytes up to `next_start`.
  Result<const Sample*> take(const Sample& parsed, std::uint64_t base, std::uint64_t next_start);
  Result<const Sample*> end_of_shard();
  // Waits for bytes past `verified_seen`; an Error when none will come (the download ended, the window is full of
  // one sample, the stream was stopped).
  std::optional<Error> wait_for_more(std::uint64_t verified_seen, const Error& reader_error);
  Result<const Sample*> fail(Error e);
  void download(StreamSource source);

  std::string name_;
  std::unique_ptr<Window> window_;
  std::optional<Error> error_;
  Sha256Hasher hasher_;  // the whole shard's, over the bytes as they are freed
  bool ended_ = false;
  std::shared_ptr<const ShardMapping> block_;
  std::string id_;
  std::vector<std::string> keys_;
  Sample sample_;
  std::thread thread_;  // last: joined before the rest goes
};

}  // namespace datavo::client
