// SamplePipeline: a producer thread that reads a SampleStream ahead of its consumer, in bounded batches, so that
// the stream's own work (tar headers, the manifest check of each sample, the mapping's page faults) runs on another
// core than the consumer's (the Python SDK's Sample objects and loop body). While the consumer uses batch k, the
// producer fills batch k+1, hands it over as soon as batch k has been taken, and goes on with k+2.
//
// Contract:
//   - Ownership: the pipeline borrows the stream, which must outlive it. While the pipeline lives only its producer
//     calls stream.next(); stream.stats() and stream.cancel() may still be called by any thread (sample_stream.hpp).
//     Samples move from producer to consumer by value (a SampleView owns its shard's mapping, so it can be read on
//     any thread).
//   - Threads: taking a batch (try_take(), take()) and give_back() are for one consumer thread at a time; take()
//     may wait (a caller holding a lock the producer never takes, such as Python's GIL, should release it). stop()
//     is for any thread.
//   - Bounded: besides the batch the consumer holds, at most two exist: one handed over and one being filled.
//   - Batch sizes: the first batch holds `first_batch_size` samples, each later one twice as many as the one before,
//     up to the largest multiple of first_batch_size that is at most `batch_size`; only a last batch (with `error`
//     or `end`) holds fewer. So the consumer's first samples come after a small batch, and when the consumer is the
//     faster side it waits (a futex sleep and wake-up, costing both threads CPU time) once per large batch, not
//     once per small one; and every batch but the last is a whole number of first_batch_size-sample slices.
//   - Memory: the consumer hands each batch it is done with back (give_back()); the producer destroys its samples
//     and refills the same vector. So samples are made and freed on the producer's thread, and a mapping's reference
//     count is only changed there (no cache line bouncing between the cores per sample).
//   - Order and errors: the batches hold the stream's samples in its order. A batch with `error` or `end` is the
//     last one: the error came after its samples (the stream's sticky error: nothing follows).
//   - Shutdown: stop() cancels the stream, so that a producer blocked in next() on a shard fetch returns promptly
//     (the download is cancelled at its next chunk, no new shard is started), and a consumer waiting in take() gets
//     an end. The destructor stops and joins the producer; it is never detached. stop_sample_pipelines() does the
//     same for every pipeline still alive (at interpreter exit, for one an iterator still holds).
//   - Fork: the producer starts in the constructor, so make the pipeline in the process that consumes it (a
//     DataLoader worker makes its own after the fork). A process forked while a pipeline lives has the pipeline's
//     memory but not its thread (and maybe a lock the thread held): there forked() is true, and the pipeline must be
//     leaked, never used or destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/sample_stream.hpp"

namespace datavo {

// Tells a process forked after this value was made (where the threads of the process that made it do not exist).
// It counts forks with a pthread_atfork child handler: cheaper than getpid() per call, and it sees every fork
// (os.fork, multiprocessing, a C library's). Thread-safe; copyable.
class ForkDetector {
 public:
  ForkDetector();
  // Whether this process is a fork of the one (or a fork older than the one) that made this value.
  bool forked() const;

 private:
  std::uint64_t forks_;  // forks that led to the process that made this value
};

// One batch the producer filled, and how the stream stood after its last sample.
struct SampleBatch {
  std::vector<SampleView> samples;
  std::optional<Error> error;  // the stream failed after `samples` (its sticky error: nothing follows)
  bool end = false;            // the stream ended, or the pipeline was stopped, after `samples`
};

class SamplePipeline {
 public:
  static constexpr std::size_t k_default_batch_size = 64;

  // Starts the producer, which fills batches of up to `batch_size` samples from `first_batch_size` on (see Batch
  // sizes above). A batch_size of 0 is taken as 1; a first_batch_size of 0, or above batch_size, as batch_size (every
  // batch the same size). REQUIRES: `stream` outlives the pipeline and nothing else calls its next() meanwhile.
  explicit SamplePipeline(SampleStream& stream, std::size_t batch_size = k_default_batch_size,
                          std::size_t first_batch_size = 0);
  // Stops and joins the producer (see Shutdown above). REQUIRES: !forked().
  ~SamplePipeline();
  SamplePipeline(const SamplePipeline&) = delete;
  SamplePipeline& operator=(const SamplePipeline&) = delete;

  // Whether this process is a fork of the one that started the producer (see Fork above).
  bool forked() const;

  // Stops the producer and cancels the stream; a take() waiting then returns an end. Idempotent, any thread.
  void stop();

  // The next batch if the producer has handed it over, else std::nullopt. Never waits (but for a lock the producer
  // holds only to hand a batch over).
  std::optional<SampleBatch> try_take();
  // The next batch, waiting for the producer; an empty batch with `end` once stopped, and after the last batch.
  SampleBatch take();
  // Hands back the samples of a batch the consumer is done with, for the producer to destroy and reuse (see
  // Memory above). Never waits but for that same lock.
  void give_back(std::vector<SampleView>&& spent);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Stops and joins the producer of every pipeline of this process still alive (not those inherited by a fork), for
// an atexit handler: none then runs on while the runtime shuts down. Their consumers see the end of their streams.
// May wait until a producer's fetch reaches its next chunk.
void stop_sample_pipelines();

}  // namespace datavo
