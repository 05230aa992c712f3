#include "datavo/sample_pipeline.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace datavo {
namespace {

std::atomic<std::uint64_t> g_forks{0};
void count_fork_in_child() { g_forks.fetch_add(1, std::memory_order_relaxed); }

// Forks since the handler was registered, which is before the first value that compares counts exists.
std::uint64_t fork_count() {
  static const bool registered = pthread_atfork(nullptr, nullptr, count_fork_in_child) == 0;
  (void)registered;  // without the handler (ENOMEM) no fork is seen, as before any was registered
  return g_forks.load(std::memory_order_relaxed);
}

// The most sample slots fill() reserves up front; a larger batch grows its vector as it fills.
constexpr std::size_t k_largest_reserve = 4096;

}  // namespace

ForkDetector::ForkDetector() : forks_(fork_count()) {}
bool ForkDetector::forked() const { return fork_count() != forks_; }

struct SamplePipeline::Impl {
  Impl(SampleStream& read, std::size_t first, std::size_t largest)
      : stream(read), largest_batch(largest - largest % first), next_batch(first) {}

  void run();
  // Fills one batch from the stream, reusing the samples' vector the consumer gave back.
  SampleBatch fill();
  void stop();
  // REQUIRES: not called concurrently with itself (the destructor runs it after leaving the registry, and
  // stop_sample_pipelines() only for registered pipelines, holding the registry's lock).
  void stop_and_join();

  SampleStream& stream;
  const std::size_t largest_batch;  // a multiple of the first batch's size
  std::size_t next_batch;           // the producer's: the size of the batch it fills next
  const ForkDetector fork;          // the process that started the producer

  std::mutex mu;
  std::condition_variable cv;        // ready filled or emptied, or stopping set
  std::optional<SampleBatch> ready;  // guarded by mu: the batch handed over, not yet taken
  std::vector<SampleView> spent;     // guarded by mu: the samples of a batch the consumer gave back
  bool stopping = false;             // guarded by mu
  bool finished = false;             // guarded by mu: the last batch (with its error or end) was handed over

  std::thread thread;  // started once every other member is initialised; joined, never detached
};

namespace {

// The live pipelines of this process, for stop_sample_pipelines(). Deliberately leaked: an atexit handler may run
// after static destructors.
struct PipelineRegistry {
  std::mutex mu;
  std::set<SamplePipeline::Impl*> live;  // guarded by mu
};
PipelineRegistry& registry() {
  static auto* r = new PipelineRegistry();
  return *r;
}

}  // namespace

SampleBatch SamplePipeline::Impl::fill() {
  SampleBatch batch;
  {
    std::lock_guard lock(mu);
    batch.samples.swap(spent);  // a batch given back (or nothing): its samples are destroyed on this thread
  }
  batch.samples.clear();
  const std::size_t size = next_batch;
  next_batch = size > largest_batch / 2 ? largest_batch : size * 2;
  batch.samples.reserve(std::min(size, k_largest_reserve));  // a huge batch_size is a bound, not memory to take
  while (batch.samples.size() < size) {
    auto sample = stream.next();  // after stop() (stream.cancel()): a cancelled Error at once
    if (!sample) {
      batch.error = std::move(sample).error();
      break;
    }
    if (!*sample) {
      batch.end = true;
      break;
    }
    batch.samples.push_back(std::move(**sample));
  }
  return batch;
}

void SamplePipeline::Impl::run() {
  for (;;) {
    SampleBatch batch = fill();
    const bool last = batch.error || batch.end;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return !ready || stopping; });
      if (stopping) return;
      ready = std::move(batch);
      finished = last;
    }
    cv.notify_all();
    if (last) return;  // nothing follows an error or the end: the thread ends, join() is immediate
  }
}

void SamplePipeline::Impl::stop() {
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  cv.notify_all();
  stream.cancel();
}

void SamplePipeline::Impl::stop_and_join() {
  stop();
  if (thread.joinable()) thread.join();
}

SamplePipeline::SamplePipeline(SampleStream& stream, std::size_t batch_size, std::size_t first_batch_size)
    : impl_(std::make_unique<Impl>(stream,
                                   first_batch_size == 0 || first_batch_size > batch_size
                                       ? std::max<std::size_t>(batch_size, 1)
                                       : first_batch_size,
                                   std::max<std::size_t>(batch_size, 1))) {
  Impl* impl = impl_.get();
  impl->thread = std::thread([impl] { impl->run(); });
  std::lock_guard lock(registry().mu);  // once the thread exists: a failed start registers nothing
  registry().live.insert(impl);
}

SamplePipeline::~SamplePipeline() {
  {
    // Unregistered first: once this returns, stop_sample_pipelines() is not (and will not be) joining this thread.
    std::lock_guard lock(registry().mu);
    registry().live.erase(impl_.get());
  }
  impl_->stop_and_join();
}

bool SamplePipeline::forked() const { return impl_->fork.forked(); }

void SamplePipeline::stop() { impl_->stop(); }

std::optional<SampleBatch> SamplePipeline::try_take() {
  std::optional<SampleBatch> batch;
  {
    std::lock_guard lock(impl_->mu);
    batch.swap(impl_->ready);
  }
  if (batch) impl_->cv.notify_all();  // the producer may wait for `ready` to be empty
  return batch;
}

SampleBatch SamplePipeline::take() {
  std::optional<SampleBatch> batch;
  {
    std::unique_lock lock(impl_->mu);
    impl_->cv.wait(lock, [&] { return impl_->ready.has_value() || impl_->stopping || impl_->finished; });
    batch.swap(impl_->ready);
  }
  if (!batch) return SampleBatch{{}, std::nullopt, true};
  impl_->cv.notify_all();
  return std::move(*batch);
}

void SamplePipeline::give_back(std::vector<SampleView>&& spent) {
  if (spent.empty()) return;
  std::lock_guard lock(impl_->mu);
  if (impl_->spent.empty()) impl_->spent.swap(spent);  // else the producer has not taken the last one yet: freed here
}

void stop_sample_pipelines() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  for (SamplePipeline::Impl* pipeline : r.live)
    if (!pipeline->fork.forked()) pipeline->stop_and_join();  // inherited by a fork: no thread here
}

}  // namespace datavo
