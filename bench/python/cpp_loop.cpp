// cpp_loop: the C++ side of the Python SDK benchmark (bench/python/bench_sdk.py, docs/BENCHMARKS-python.md).
//
//   cpp_loop DATASET REVISION KEY[,KEY...] [PASSES]
//
// The exact loop that bench_sdk.py runs in Python, with the C++ SampleStream: from_dataset over the cache of
// $DATAVO_SHARD_CACHE_DIR / $DATAVO_SHARD_CACHE_CONFIG and the origin of $DATAVO_SERVER, the revision pinned (a
// cached manifest makes no request), the default prefetch; for every field its size and first byte. Prints one JSON
// line with the set-up (the first from_dataset) and the loop timed apart, each as wall time and as process CPU time
// (every thread, the prefetcher's included), as the Python side measures them. PASSES (default 1) passes, each a
// stream of its own (a SampleStream is one pass; the later ones' from_dataset is in the loop's time), so that a run
// is long enough to time.
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "datavo/sample_stream.hpp"

namespace {

double wall() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "cpp_loop: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) die("usage: cpp_loop DATASET REVISION KEY[,KEY...] [PASSES]");
  const int passes = argc == 5 ? std::stoi(argv[4]) : 1;
  datavo::SampleStreamOptions options;
  std::stringstream keys(argv[3]);
  for (std::string key; std::getline(keys, key, ',');) options.keys.push_back(key);
  options.revision = std::stoull(argv[2]);

  const double wall0 = wall(), cpu0 = cpu();
  auto stream = datavo::SampleStream::from_dataset(argv[1], options);
  if (!stream) die(stream.error().message);
  const double wall1 = wall(), cpu1 = cpu();
  std::uint64_t samples = 0, fields = 0, bytes = 0, checksum = 0;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0) {
      stream = datavo::SampleStream::from_dataset(argv[1], options);
      if (!stream) die(stream.error().message);
    }
    for (;;) {
      auto sample = stream->next();
      if (!sample) die(sample.error().message);
      if (!*sample) break;
      ++samples;
      for (const auto& field : (*sample)->fields) {
        ++fields;
        bytes += field.data.size();
        if (!field.data.empty()) checksum += static_cast<unsigned char>(field.data[0]);
      }
    }
  }
  const double wall2 = wall(), cpu2 = cpu();
  std::printf(
      "{\"samples\": %llu, \"fields\": %llu, \"bytes\": %llu, \"checksum\": %llu, \"setup_seconds\": %.6f, "
      "\"loop_seconds\": %.6f, \"setup_cpu\": %.6f, \"loop_cpu\": %.6f, \"seconds\": %.6f}\n",
      static_cast<unsigned long long>(samples), static_cast<unsigned long long>(fields),
      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(checksum), wall1 - wall0, wall2 - wall1,
      cpu1 - cpu0, cpu2 - cpu1, wall2 - wall0);
  return 0;
}
