#include "client/streamed_shard.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo::client {
namespace {

constexpr std::uint64_t k_tar_block = 512;
// Waits poll the stream's cancel flag this often (SampleStream::cancel() may come from any thread).
constexpr auto k_poll = std::chrono::milliseconds(100);
// A download held back by a full window for this long may have been dropped by the server (datavo serve gives a
// client that reads nothing 5 s; object stores and proxies have idle timeouts too): a round cut after such a wait
// is the consumer's pause, not the source's fault, and is followed by another (StreamedShard::download).
constexpr auto k_held_back = std::chrono::seconds(1);

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

// Memory of size() bytes mapped twice in a row, so that any size() bytes of it from any offset are one span: the
// window is a ring whose live bytes the tar reader sees whole, and nothing is ever moved to make room.
class WindowRing {
 public:
  // `at_least` rounded up to whole pages. io error when the memory cannot be had.
  static Result<WindowRing> create(std::uint64_t at_least) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const auto size = static_cast<std::size_t>(std::max<std::uint64_t>(1, (at_least + page - 1) / page) * page);
    util::UniqueFd fd(::memfd_create("datavo-stream-window", MFD_CLOEXEC));
    if (!fd.valid() || ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
      return Error::from_errno(errno, "cannot allocate a stream window of " + std::to_string(size) + " bytes");
    void* both = ::mmap(nullptr, 2 * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (both == MAP_FAILED) return Error::from_errno(errno, "cannot reserve a stream window");
    WindowRing ring(static_cast<std::byte*>(both), size);
    for (std::byte* half : {ring.data_, ring.data_ + size}) {
      if (::mmap(half, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd.get(), 0) == MAP_FAILED)
        return Error::from_errno(errno, "cannot map a stream window");
    }
    return ring;
  }
  WindowRing(WindowRing&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  WindowRing& operator=(WindowRing&&) = delete;
  WindowRing(const WindowRing&) = delete;
  ~WindowRing() {
    if (data_ != nullptr) ::munmap(data_, 2 * size_);
  }
  // The byte at shard offset `offset`; the size() bytes from there are contiguous.
  std::byte* at(std::uint64_t offset) const { return data_ + offset % size_; }

 private:
  WindowRing(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  std::size_t size_;
};

}  // namespace

// The bytes [base, end) of the shard, in a ring of at least min(window, shard size) bytes. The consumer frees from the
// front (base), the download appends at the back and waits while `cap` bytes are held.
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
  std::optional<WindowRing> ring;
  std::uint64_t base = 0;      // the first byte the consumer still needs: the start of the next sample
  std::uint64_t end = 0;       // bytes taken so far (each byte once, however often the transfer restarts)
  std::uint64_t pass = 0;      // the position of the current transfer (written())
  std::uint64_t verified = 0;  // [0, verified) passed its chunk digests
  std::optional<std::uint64_t> size;
  std::uint64_t chunk = 0;
  std::optional<Sha256> sha256;
  bool consumer_waiting = false;
  bool producer_blocked = false;
  // The longest time the download waited for room in the current round of the source (see StreamedShard::download).
  std::chrono::steady_clock::duration longest_block{0};
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
    if (size && (*size != ticket.size.count() || *sha256 != ticket.sha256))
      return Error{ErrorCode::integrity, "shard " + name + ": a second ticket names another size or SHA-256"};
    if (!ring) {
      auto made = WindowRing::create(std::min(cap, ticket.size.count()));
      if (!made) return std::move(made).error();
      ring.emplace(std::move(*made));
    }
    size = ticket.size.count();
    chunk = chunk_size;
    sha256 = ticket.sha256;
    // A new ticket's transfer (a new round, or a new ticket after one expired) goes on from the last verified chunk
    // boundary, so that the ticket's ChunkVerifyingSink checks every chunk it passes on whole; the bytes taken past
    // that boundary were never verified and are dropped. A list of another chunk size (the origin's, after a read
    // through a tier's list failed) starts at its own last boundary at or before them: its bytes up to `end` were
    // verified by the first list, and write() skips them.
    end = verified;
    pass = verified / chunk_size * chunk_size;
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
    std::optional<std::chrono::steady_clock::time_point> blocked_since;
    while (n > 0) {
      if (stopped()) return Error{ErrorCode::cancelled, "streamed read of shard " + name + " stopped"};
      const std::uint64_t room = cap - (end - base);
      if (room == 0) {
        if (!blocked_since) blocked_since = std::chrono::steady_clock::now();
        producer_blocked = true;
        cv.notify_all();
        cv.wait_for(lock, k_poll);
        producer_blocked = false;
        continue;
      }
      if (blocked_since) {
        longest_block = std::max(longest_block, std::chrono::steady_clock::now() - *blocked_since);
        blocked_since.reset();
      }
      const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(n, room));
      std::memcpy(ring->at(end), bytes, k);
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

  // Starts a round of the source: returns the verified bytes so far.
  std::uint64_t start_round() {
    std::lock_guard lock(mu);
    longest_block = std::chrono::steady_clock::duration{0};
    return verified;
  }

  // Whether a round that failed with `error` was cut while the consumer held the download back, after verified bytes
  // went past `verified_before`: then it is worth another round.
  bool cut_while_held_back(const Error& error, std::uint64_t verified_before) {
    std::lock_guard lock(mu);
    const bool transient = error.code == ErrorCode::remote || error.code == ErrorCode::timeout;
    return transient && !stopped() && longest_block >= k_held_back && verified > verified_before;
  }

  void finish(Result<Expectation> outcome) {
    std::lock_guard lock(mu);
    if (!outcome) {
      failure = std::move(outcome).error();
    } else if (!size || verified != *size) {
      failure = Error{ErrorCode::integrity, "shard " + name + ": the download ended after " + std::to_string(end) +
                                                " bytes, the ticket gives " + std::to_string(size.value_or(0))};
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

// Rounds of the source: each asks for a ticket and GETs the shard from the last verified chunk on, with the
// transport's own retries and resumes. A slow consumer holds the download back, and a server may drop a connection
// that reads nothing for a while; each such cut would spend one of the transport's attempts, so a round cut after
// the consumer held it back (and that verified more bytes) is followed by another. Other failures end the shard.
void StreamedShard::download(StreamSource source) {
  Window& w = *window_;
  for (;;) {
    const std::uint64_t verified_before = w.start_round();
    auto outcome = source([&w](const StreamTicket& ticket) { return w.begin(ticket); });
    if (!outcome && w.cut_while_held_back(outcome.error(), verified_before)) {
      LOG_INFO("shard " << name_ << ": the download was cut while the reader held it back (" << outcome.error().message
                        << "); going on from the last verified chunk");
      continue;
    }
    w.finish(std::move(outcome));
    return;
  }
}

Result<const Sample*> StreamedShard::next() {
  if (error_) return *error_;
  if (ended_) return static_cast<const Sample*>(nullptr);
  Window& w = *window_;
  for (;;) {
    std::uint64_t base = 0, verified = 0;
    const std::byte* first = nullptr;
    bool complete = false;
    {
      std::lock_guard lock(w.mu);
      base = w.base;
      verified = w.verified;
      first = w.ring ? w.ring->at(base) : nullptr;
      complete = w.size && verified == *w.size;
    }
    // [base, verified) is the consumer's until it moves base: the download only writes past `verified`, so the
    // parsing and copying run without the lock, beside the download.
    const std::span<const std::byte> bytes(first, static_cast<std::size_t>(verified - base));
    SampleIterator parser(bytes, name_ + " (counting from its byte " + std::to_string(base) + ")");
    auto sample = parser.next();
    if (sample && *sample) {
      const SampleField& last = (*sample)->fields.back();
      const auto field_end = static_cast<std::uint64_t>(last.data.data() + last.data.size() - bytes.data());
      return take(**sample, base, base + (field_end + k_tar_block - 1) / k_tar_block * k_tar_block);
    }
    if (sample) return end_of_shard();
    if (!needs_more_bytes(parser.fault()) || complete) return fail(std::move(sample).error());
    if (auto stop = wait_for_more(verified, sample.error())) return fail(std::move(*stop));
  }
}

Result<const Sample*> StreamedShard::fail(Error e) {
  error_ = e;
  return e;
}

std::optional<Error> StreamedShard::wait_for_more(std::uint64_t verified_seen, const Error& reader_error) {
  Window& w = *window_;
  std::unique_lock lock(w.mu);
  if (w.verified != verified_seen) return std::nullopt;  // more came while the bytes were parsed
  if (w.done) return w.failure ? *w.failure : Error{ErrorCode::internal, "shard " + name_ + ": stream ended"};
  if (w.producer_blocked && w.end - w.base == w.cap) {
    return Error{ErrorCode::invalid_argument,
                 "shard " + name_ + ": the sample at byte offset " + std::to_string(w.base) +
                     " does not fit in the stream window of " + std::to_string(w.cap) +
                     " bytes, which must hold it, the first member of the next sample and the chunk being "
                     "verified; raise the window (--stream-window, stream_window=). Where the tar reader ran out "
                     "of window: " +
                     reader_error.message};
  }
  if (w.stopped()) return Error{ErrorCode::cancelled, "streamed read of shard " + name_ + " stopped"};
  w.consumer_waiting = true;
  w.cv.notify_all();
  w.cv.wait_for(lock, k_poll);
  w.consumer_waiting = false;
  return std::nullopt;
}

// The end marker: the samples are all out. Once the download has ended, the whole shard's SHA-256.
Result<const Sample*> StreamedShard::end_of_shard() {
  Window& w = *window_;
  std::unique_lock lock(w.mu);
  while (!w.done) {
    if (w.stopped()) return fail(Error{ErrorCode::cancelled, "streamed read of shard " + name_ + " stopped"});
    w.cv.wait_for(lock, k_poll);
  }
  if (w.failure) return fail(*w.failure);
  // What follows the end marker (tar's padding) is the shard's too.
  hasher_.update(w.ring->at(w.base), static_cast<std::size_t>(w.verified - w.base));
  if (const Sha256 got = hasher_.finish(); got != *w.sha256) {
    return fail(Error{ErrorCode::integrity, "shard " + name_ + ": the SHA-256 of the streamed bytes is " + got.hex() +
                                                ", the ticket gives " + w.sha256->hex() +
                                                " (every chunk matched its digest: the chunk list lies)"});
  }
  ended_ = true;
  return static_cast<const Sample*>(nullptr);
}

Result<const Sample*> StreamedShard::take(const Sample& parsed, std::uint64_t base, std::uint64_t next_start) {
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
  std::vector<std::uint64_t> header_offsets;
  for (const SampleField& f : parsed.fields) header_offsets.push_back(base + f.header_offset);
  // The whole shard's SHA-256 is the consumer's, so that it runs beside the download's chunk hashing: every byte is
  // hashed once, in order, as the window lets it go.
  Window& w = *window_;
  hasher_.update(w.ring->at(base), static_cast<std::size_t>(next_start - base));
  {
    std::lock_guard lock(w.mu);
    w.base = next_start;
  }
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
