// iterate_shard: the sample-iteration side of the main-job benchmarks (docs/BENCHMARKS-main-job.md, items 2, 3, 5).
//
// Built by bench/main_job/build.sh against build-bench3/src/libdatavo.a; driven by bench/main_job/bench_main_job.py.
//
//   iterate_shard tar PATH first|sum
//       mmaps PATH (a cached shard) read-only and iterates its samples with SampleIterator.
//   iterate_shard read PATH [sum]
//       the `cat PATH > /dev/null` work done in-process: read() into a 128 KiB buffer until EOF (cat's buffer size),
//       so that the cost of starting a process linked against libcurl/libcrypto/yaml-cpp can be told apart. With
//       `sum`, every byte read is also summed: the floor for any consumer that touches every byte of the file.
//   iterate_shard stream DATASET REVISION KEY[,KEY...] first|sum
//       SampleStream::from_dataset over the cache of $DATAVO_SHARD_CACHE_CONFIG and the origin of $DATAVO_SERVER,
//       pinned revision (so a cached manifest makes no request), default prefetch.
//
//   first: touch the first byte of each field (what a loader that hands out zero-copy views pays);
//   sum:   add up every byte of every field (what a loader that decodes every byte pays at least).
//
// Prints one JSON line: {"mode":…, "samples":N, "fields":N, "bytes":N, "seconds":S, "checksum":C}. `seconds`
// is measured inside the process, from before the open/mmap to after the unmap; the driver also measures the
// whole process from outside.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "datavo/sample_stream.hpp"
#include "datavo/tar.hpp"

namespace {

using Clock = std::chrono::steady_clock;

enum class Touch { first, sum };

struct Totals {
  std::uint64_t samples = 0;
  std::uint64_t fields = 0;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "iterate_shard: %s\n", message.c_str());
  std::exit(1);
}

// Sums every byte. On x86-64, SSE2's psadbw adds 16 bytes at a time into two 64-bit lanes (four accumulators to
// hide latency), which runs at memory speed, as a decoder's first pass over the bytes would; elsewhere a plain
// loop that the compiler vectorises as best it can.
std::uint64_t sum_bytes(std::span<const std::byte> data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t n = data.size();
  std::uint64_t total = 0;
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  __m128i acc[4] = {zero, zero, zero, zero};
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16 * k));
      acc[k] = _mm_add_epi64(acc[k], _mm_sad_epu8(bytes, zero));
    }
  }
  __m128i both = _mm_add_epi64(_mm_add_epi64(acc[0], acc[1]), _mm_add_epi64(acc[2], acc[3]));
  std::uint64_t lanes[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), both);
  total = lanes[0] + lanes[1];
#endif
  for (; i < n; ++i) total += p[i];
  return total;
}

void touch(std::span<const std::byte> data, Touch mode, Totals& totals) {
  ++totals.fields;
  totals.bytes += data.size();
  if (data.empty()) return;
  if (mode == Touch::first) {
    totals.checksum += static_cast<unsigned char>(data[0]);
  } else {
    totals.checksum += sum_bytes(data);
  }
}

Touch parse_touch(std::string_view text) {
  if (text == "first") return Touch::first;
  if (text == "sum") return Touch::sum;
  die("expected first or sum, got " + std::string(text));
}

Totals iterate_tar(const std::string& path, Touch mode) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) die("cannot stat " + path);
  auto size = static_cast<std::size_t>(st.st_size);
  // MAP_PRIVATE read-only, as ShardMapping does (src/client/shard_mapping.cpp).
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) die("cannot mmap " + path);
  ::close(fd);
  Totals totals;
  datavo::SampleIterator samples(std::span(static_cast<const std::byte*>(base), size), path);
  while (true) {
    auto sample = samples.next();
    if (!sample) die(sample.error().message);
    if (*sample == nullptr) break;
    ++totals.samples;
    for (const auto& field : (*sample)->fields) touch(field.data, mode, totals);
  }
  ::munmap(base, size);
  return totals;
}

Totals read_file(const std::string& path, bool sum) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open " + path);
  std::vector<char> buffer(128 * 1024);
  Totals totals;
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) die("cannot read " + path);
    if (n == 0) break;
    totals.bytes += static_cast<std::uint64_t>(n);
    if (sum) totals.checksum += sum_bytes(std::as_bytes(std::span(buffer.data(), static_cast<std::size_t>(n))));
  }
  ::close(fd);
  return totals;
}

Totals iterate_stream(const std::string& dataset, std::uint64_t revision, std::string_view keys, Touch mode) {
  datavo::SampleStreamOptions options;
  while (!keys.empty()) {
    auto comma = keys.find(',');
    options.keys.emplace_back(keys.substr(0, comma));
    keys = comma == std::string_view::npos ? std::string_view{} : keys.substr(comma + 1);
  }
  options.revision = revision;
  auto stream = datavo::SampleStream::from_dataset(dataset, std::move(options));
  if (!stream) die(stream.error().message);
  Totals totals;
  while (true) {
    auto sample = stream->next();
    if (!sample) die(sample.error().message);
    if (!*sample) break;
    ++totals.samples;
    for (const auto& field : (*sample)->fields) touch(field.data, mode, totals);
  }
  auto stats = stream->stats();
  if (stats.origin_fetches != 0) {
    std::fprintf(stderr, "iterate_shard: warning: %llu shards came from the origin (the cache was not warm)\n",
                 static_cast<unsigned long long>(stats.origin_fetches));
  }
  return totals;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    die("usage: iterate_shard tar PATH first|sum | read PATH [sum] | stream DATASET REVISION KEYS first|sum");
  }
  const auto start = Clock::now();
  Totals totals;
  std::string mode(args[0]);
  if (mode == "tar" && args.size() == 3) {
    totals = iterate_tar(std::string(args[1]), parse_touch(args[2]));
    mode += std::string("-") + std::string(args[2]);
  } else if (mode == "read" && (args.size() == 2 || (args.size() == 3 && args[2] == "sum"))) {
    totals = read_file(std::string(args[1]), args.size() == 3);
    if (args.size() == 3) mode += "-sum";
  } else if (mode == "stream" && args.size() == 5) {
    totals = iterate_stream(std::string(args[1]), std::stoull(std::string(args[2])), args[3], parse_touch(args[4]));
    mode += std::string("-") + std::string(args[4]);
  } else {
    die("bad arguments; see the top of iterate_shard.cpp");
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "{\"mode\": \"%s\", \"samples\": %llu, \"fields\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
      "\"checksum\": %llu}\n",
      mode.c_str(), static_cast<unsigned long long>(totals.samples), static_cast<unsigned long long>(totals.fields),
      static_cast<unsigned long long>(totals.bytes), seconds, static_cast<unsigned long long>(totals.checksum));
  return 0;
}
