// Reading a shard while it is fetched (docs/hierarchy.md, "Reading while fetching"): the verified prefix of the
// staging file, shared between the thread that fetches the shard and the reader of its samples. Internal to
// src/client (SampleStream).
//
// GrowingShard is the LandingObserver of one get_or_fetch: it maps each staging file the hierarchy begins (read
// only, MAP_SHARED, the shard's full size, touched only below the verified prefix: pages past the file's end are
// never read) and publishes the verified prefix; the fetching thread then reports the end, complete() with the
// installed file or fail(). A new staging file (a refetch, or the next landing tier) starts at 0 verified bytes;
// its bytes are the same bytes (the chunk digests of one ticket), so a reader simply waits for it to pass the point
// it had reached. A mapping that samples point into stays valid whatever happens to its file (removed, renamed).
//
// GrowingSamples yields the samples of a GrowingShard as its prefix grows, with the one tar reader
// (SampleIterator): each iterator runs over the verified bytes from the start of a sample on; a read that runs past
// them (TarFault::truncated, or missing_end_marker when they end between two members) is not an error while the
// shard is incomplete: the reader waits for more and starts a new iterator where the unfinished sample begins. A
// sample is handed out only once every byte of it and the header of the member after it are verified, so a sample
// that spans chunks waits for all of them. Limitation: a pax global header ('g', which Datavo's own tars never hold)
// applies only to the members read by the same iterator, and error offsets count from that iterator's start.
//
// Flights: the streams of one process that read the same shard at once (`flight`, the shard's key) share what
// the one that fetches it publishes. Each joins the flight before its get_or_fetch; the first whose fetch begins a
// staging file leads, and every other member follows its verified prefix (the same mapping) while its own
// get_or_fetch waits on the single-flight lock; that call then ends as a hit on the installed shard, or, when the
// leader's fetch failed, fetches the shard itself into its own staging file, which replaces what it followed. A
// follower is never failed by its leader: only its own fetch ends it. Other processes are followed by the hierarchy
// itself (core::ProgressFollower): their staging file and prefixes reach this observer as a landing of its own.
//
// Thread safety: GrowingShard is thread-safe (the fetching thread reports, one reader waits). A GrowingSamples is
// used by one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "datavo/hierarchy.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tar.hpp"

namespace datavo::client {

// What a reader may read of a shard being fetched.
struct GrowingView {
  std::shared_ptr<const ShardMapping> mapping;  // nullptr while no byte of the current staging file is verified
  std::uint64_t verified = 0;                   // the first `verified` bytes of `mapping` may be read
  bool complete = false;                        // installed: `mapping` is the whole shard and will not grow
};

class GrowingShard final : public LandingObserver, public std::enable_shared_from_this<GrowingShard> {
 public:
  // `name` names the shard in messages (as ShardMapping's); `flight` is the key of its flight (see the top), empty
  // for none.
  explicit GrowingShard(std::string name, std::string flight = {})
      : name_(std::move(name)), flight_(std::move(flight)) {}
  // Joins and leaves the shard's flight: join before the fetch, leave once it ended (complete() or fail()).
  void join_flight();
  void leave_flight();

  void staging(ShardHandle staged) override;
  void verified(Bytes prefix, Bytes total) override;
  // The fetch ended: the shard is installed and mapped as `installed`, or it failed with `error`. Wakes the reader.
  void complete(std::shared_ptr<const ShardMapping> installed);
  void fail(Error error);

  // Blocks until more than `than` bytes are verified or the shard is complete (the view), or the fetch failed with
  // no more than `than` bytes verified (its Error: the same for every reader).
  Result<GrowingView> wait_beyond(std::uint64_t than);
  // Blocks at most `bound` for the same; nullopt when it did not come in time.
  std::optional<Result<GrowingView>> wait_beyond_for(std::uint64_t than, std::chrono::milliseconds bound);
  // How many times a verified prefix was published: > 0 once a reader could start before the install.
  std::uint64_t prefixes_published() const;
  // Whether every byte of the shard has arrived and is verified (the install may still be to come), or it is
  // installed.
  bool all_verified() const;

 private:
  bool ready(std::uint64_t than) const { return error_ || view_.complete || view_.verified > than; }
  Result<GrowingView> answer(std::uint64_t than) const;
  // What a follower takes from its leader: ignored once its own fetch staged a file or ended.
  void mirror(const GrowingView& leader);
  // Gives `view` to every other member of the flight.
  void lead(const GrowingView& view);
  GrowingView view() const;

  const std::string name_;
  const std::string flight_;
  bool own_file_ = false;  // this shard's own fetch began a staging file: no more following
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::optional<ShardHandle> unmapped_;  // the current staging file, until its first verified prefix maps it
  GrowingView view_;
  std::optional<Error> error_;
  std::uint64_t published_ = 0;
};

class GrowingSamples {
 public:
  // `stop` (may be nullptr; must outlive this object): once true, a next() waiting for bytes returns a cancelled
  // Error within k_stop_poll.
  GrowingSamples(std::shared_ptr<GrowingShard> shard, std::string name, const std::atomic<bool>* stop = nullptr)
      : shard_(std::move(shard)), name_(std::move(name)), stop_(stop) {}
  static constexpr std::chrono::milliseconds k_stop_poll{50};

  // The next sample (valid until the next call), nullptr at the end of the shard, or an Error: the fetch's, or the
  // tar reader's on verified bytes. Blocks while the bytes it needs are not verified yet. Sticky after an Error.
  Result<const Sample*> next();
  // The mapping the last sample's fields point into.
  const std::shared_ptr<const ShardMapping>& mapping() const { return mapping_; }
  // Whether the last sample came from a shard not installed yet (read out of its staging file).
  bool before_install() const { return !complete_; }

 private:
  // A new iterator over the verified bytes from base_ on.
  void restart_at_base(const GrowingView& view);

  std::shared_ptr<GrowingShard> shard_;
  const std::string name_;
  const std::atomic<bool>* const stop_;
  std::uint64_t base_ = 0;          // where the iterator's span begins: the first header of a sample
  std::uint64_t iterator_end_ = 0;  // where its span ends: the verified prefix it was made over
  std::uint64_t next_sample_ = 0;   // where the sample after the last one returned begins
  std::uint64_t need_ = 0;          // the next iterator waits for more than this many verified bytes
  std::shared_ptr<const ShardMapping> mapping_;
  std::optional<SampleIterator> iterator_;
  bool complete_ = false;  // the iterator runs over the installed shard
  std::optional<Error> error_;
};

}  // namespace datavo::client
