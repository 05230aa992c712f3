#include "client/streamed_shard.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace datavo::client {
namespace {

constexpr std::uint64_t k_tar_block = 512;
// Waits poll the stream's cancel flag this often (SampleStream::cancel() may come from any thread).
constexpr auto k_poll = std::chrono::milliseconds(100);

bool needs_more_bytes(TarFault fault) {
  // What a verified prefix of a good archive can look like to the reader: a header or payload cut by the prefix's
  // end, the prefix ending between members, or an extended header whose member header is still to come.
  return fault == TarFault::truncated || fault == TarFault::missing_end_marker ||
         fault == TarFault::bad_extended_header;
}

void raise_to(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (seen < value && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

// The bytes [base, end) of the shard, at buf[head, head + end - base). The consumer frees from the front (base);
// the download appends at the back and moves the bytes to the front of buf only when that frees a quarter of it or
// the consumer waits for them, so that freeing one small sample does not cost a copy of the whole window.
struct StreamedShard::Window final : ByteSink {
  Window(std::string shard, Bytes window, const std::atomic<bool>& cancelled_flag, StreamCounters& counters_ref)
      : name(std::move(shard)), cap(window.count()), cancelled(cancelled_flag), counters(counters_ref) {}

  const std::string name;
  const std::uint64_t cap;
  const std::atomic<bool>& cancelled;
  StreamCounters& counters;

  std::mutex mu;
  std::condition_variable cv;
  // All below guarded by mu.
  std::vector<std::byte> buf;
  std::size_t head = 0;
  std::uint64_t base = 0;      // the first byte the consumer still needs: the start of the next sample
  std::uint64_t end = 0;       // bytes taken so far (each byte once, however often the transfer restarts)
  std::uint64_t pass = 0;      // the position of the current transfer (written())
  std::uint64_t verified = 0;  // [0, verified) passed its chunk digests
  std::optional<std::uint64_t> size;
  std::uint64_t chunk = 0;
  std::optional<Sha256> sha256;
  Sha256Hasher hasher;  // over [0, end)
  bool consumer_waiting = false;
  bool producer_blocked = false;
  bool closed = false;  // the StreamedShard is going
  bool done = false;    // the download ended; `failure` says how
  std::optional<Error> failure;

  bool stopped() const { return closed || cancelled.load(std::memory_order_relaxed); }

  // The sink for `ticket`'s bytes (OriginClient::TicketSink).
  Result<ByteSink*> begin(const StreamTicket& ticket) {
    if (!ticket.chunks) {
      return Error{ErrorCode::unsupported,
                   "shard " + name +
                       ": the origin's ticket carries no chunk digests (a server from before them), so its bytes "
                       "cannot be verified before the whole shard is in: a streamed read needs them; read this "
                       "dataset without --stream (stream=False)"};
    }
    const std::uint64_t chunk_size = ticket.chunks->chunk_size.count();
    if (cap < 2 * chunk_size) {
      return Error{ErrorCode::invalid_argument, "shard " + name + ": the stream window of " + std::to_string(cap) +
                                                    " bytes holds fewer than 2 of the origin's chunks of " +
                                                    std::to_string(chunk_size) + " bytes; raise it"};
    }
    std::lock_guard lock(mu);
    if (size && *size != ticket.size.count())
      return Error{ErrorCode::integrity, "shard " + name + ": a second ticket names another size"};
    size = ticket.size.count();
    chunk = chunk_size;
    sha256 = ticket.sha256;
    if (buf.empty()) buf.resize(static_cast<std::size_t>(std::min(cap, *size)));
    // A new ticket's transfer starts at byte 0, so that every chunk of it is checked again (a ChunkVerifyingSink
    // over a sink that holds a partial chunk could not check that chunk); the bytes already taken are dropped.
    pass = 0;
    return static_cast<ByteSink*>(this);
  }

  Result<void> write(const void* data, std::size_t n) override {
    const auto* bytes = static_cast<const std::byte*>(data);
    std::unique_lock lock(mu);
    // The source's ChunkVerifyingSink checked every chunk this write completes before passing it on.
    const std::uint64_t write_end = pass + n;
    const std::uint64_t proven = size && write_end >= *size ? write_end : write_end / chunk * chunk;
    if (pass < end) {
      const auto seen = static_cast<std::size_t>(std::min<std::uint64_t>(n, end - pass));
      bytes += seen, n -= seen, pass += seen;
    }
    while (n > 0) {
      if (stopped()) return Error{ErrorCode::cancelled, "streamed read of shard " + name + " stopped"};
      const std::uint64_t held = end - base;
      std::size_t tail = buf.size() - head - static_cast<std::size_t>(held);
      if (tail < n && head > 0 && (head >= buf.size() / 4 || consumer_waiting)) {
        std::memmove(buf.data(), buf.data() + head, static_cast<std::size_t>(held));
        head = 0;
        tail = buf.size() - static_cast<std::size_t>(held);
      }
      if (tail == 0) {
        producer_blocked = true;
        cv.notify_all();
        cv.wait_for(lock, k_poll);
        producer_blocked = false;
        continue;
      }
      const std::size_t k = std::min(n, tail);
      std::memcpy(buf.data() + head + held, bytes, k);
      hasher.update(bytes, k);
      bytes += k, n -= k, pass += k, end += k;
      verified = std::max(verified, std::min(end, proven));
      counters.bytes.fetch_add(k, std::memory_order_relaxed);
      raise_to(counters.max_buffered, end - base);
      cv.notify_all();
    }
    return ok();
  }

  Bytes written() const override { return Bytes{pass}; }
  Result<void> restart() override {
    std::lock_guard lock(mu);
    pass = 0;
    return ok();
  }

  void finish(Result<Expectation> outcome) {
    std::lock_guard lock(mu);
    if (!outcome) {
      failure = std::move(outcome).error();
    } else if (!size || end != *size) {
      failure = Error{ErrorCode::integrity, "shard " + name + ": the download ended after " + std::to_string(end) +
                                                " bytes, the ticket gives " + std::to_string(size.value_or(0))};
    } else if (const Sha256 got = hasher.finish(); got != *sha256) {
      failure = Error{ErrorCode::integrity, "shard " + name + ": the SHA-256 of the streamed bytes is " + got.hex() +
                                                ", the ticket gives " + sha256->hex() +
                                                " (every chunk matched its digest: the chunk list lies)"};
    }
    done = true;
    cv.notify_all();
  }
};

StreamedShard::StreamedShard(StreamSource source, std::string name, Bytes window, const std::atomic<bool>& cancelled,
                             StreamCounters& counters)
    : name_(std::move(name)), window_(std::make_unique<Window>(name_, window, cancelled, counters)) {
  thread_ = std::thread([this, source = std::move(source)] { download(source); });
}

StreamedShard::~StreamedShard() {
  {
    std::lock_guard lock(window_->mu);
    window_->closed = true;
  }
  window_->cv.notify_all();
  thread_.join();
}

void StreamedShard::download(StreamSource source) {
  Window& w = *window_;
  auto outcome = source([&w](const StreamTicket& ticket) { return w.begin(ticket); });
  w.finish(std::move(outcome));
}

Result<const Sample*> StreamedShard::next() {
  if (error_) return *error_;
  Window& w = *window_;
  std::unique_lock lock(w.mu);
  const auto fail = [this](Error e) -> Result<const Sample*> {
    error_ = e;
    return e;
  };
  for (;;) {
    const bool complete = w.size && w.verified == *w.size;
    const std::span<const std::byte> verified(w.buf.data() + w.head, static_cast<std::size_t>(w.verified - w.base));
    SampleIterator parser(verified, name_ + " (counting from its byte " + std::to_string(w.base) + ")");
    auto sample = parser.next();
    if (sample && *sample) {
      const SampleField& last = (*sample)->fields.back();
      const auto field_end = static_cast<std::uint64_t>(last.data.data() + last.data.size() - verified.data());
      return take(**sample, w.base + (field_end + k_tar_block - 1) / k_tar_block * k_tar_block);
    }
    if (sample || !needs_more_bytes(parser.fault()) || complete) {
      if (!sample) return fail(std::move(sample).error());
      // The end marker: the samples are all out; the shard's own check is the download's last step.
      while (!w.done) {
        if (w.stopped()) return fail(Error{ErrorCode::cancelled, "streamed read of shard " + name_ + " stopped"});
        w.cv.wait_for(lock, k_poll);
      }
      if (w.failure) return fail(*w.failure);
      return static_cast<const Sample*>(nullptr);
    }
    if (w.done) return fail(w.failure ? *w.failure : Error{ErrorCode::internal, "shard " + name_ + ": stream ended"});
    if (w.producer_blocked && w.end - w.base == w.cap) {
      return fail(Error{ErrorCode::invalid_argument,
                        "shard " + name_ + ": the sample at byte offset " + std::to_string(w.base) +
                            " does not fit in the stream window of " + std::to_string(w.cap) +
                            " bytes, which must hold it, the first member of the next sample and the chunk being "
                            "verified; raise the window (--stream-window, stream_window=). Where the tar reader "
                            "ran out of window: " +
                            std::move(sample).error().message});
    }
    if (w.stopped()) return fail(Error{ErrorCode::cancelled, "streamed read of shard " + name_ + " stopped"});
    w.consumer_waiting = true;
    w.cv.notify_all();
    w.cv.wait_for(lock, k_poll);
    w.consumer_waiting = false;
  }
}

Result<const Sample*> StreamedShard::take(const Sample& parsed, std::uint64_t next_start) {
  std::size_t total = 0;
  for (const SampleField& f : parsed.fields) total += f.data.size();
  std::vector<std::byte> owned(total);
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // (offset, size) of each field in `owned`
  std::size_t at = 0;
  for (const SampleField& f : parsed.fields) {
    if (!f.data.empty()) std::memcpy(owned.data() + at, f.data.data(), f.data.size());
    ranges.emplace_back(at, f.data.size());
    at += f.data.size();
  }
  id_ = std::string(parsed.id);
  keys_.clear();
  for (const SampleField& f : parsed.fields) keys_.emplace_back(f.key);
  const auto header_offsets = [&] {
    std::vector<std::uint64_t> offsets;
    for (const SampleField& f : parsed.fields) offsets.push_back(window_->base + f.header_offset);
    return offsets;
  }();
  // The sample is copied out: its bytes in the window are free (the caller holds the window's lock).
  Window& w = *window_;
  w.head += static_cast<std::size_t>(next_start - w.base);
  w.base = next_start;
  w.cv.notify_all();

  block_ = ShardMapping::own(std::move(owned), name_);
  const std::span<const std::byte> bytes = block_->bytes();
  sample_.id = id_;
  sample_.fields.clear();
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    sample_.fields.push_back(
        SampleField{keys_[i], bytes.subspan(ranges[i].first, ranges[i].second), header_offsets[i]});
  }
  return static_cast<const Sample*>(&sample_);
}

}  // namespace datavo::client
