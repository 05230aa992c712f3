// The threads row of the time-to-first-sample benchmark (bench/first_sample.sh; docs/BENCHMARKS.md, "Time to first
// sample"): N threads of one process, each with a SampleStream of its own over the same dataset, started together
// on a cold cache. The streams of one process that read the same shard at once follow the one that fetches it, so
// with reading while fetching every thread should get its first sample as early as the fetching one.
//
// Usage: bench_first_sample_threads --dataset D/S --key K --server URL --threads N --read-while-fetching on|off
// The cache is the one the environment names (DATAVO_SHARD_CACHE_CONFIG or DATAVO_SHARD_CACHE_DIR, config.hpp).
// Prints one JSON object: "first_sample_seconds" (per thread, from the moment the threads are released to the
// thread's first sample; the streams are opened before that, so the manifest and the ticket are not in it),
// "seconds" (per thread, to its last sample), "samples" (per thread), "samples_before_install" and
// "origin_fetches" (summed over the threads). Exit 1 with a message on a stream error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "datavo/sample_stream.hpp"
#include "flag_pairs.hpp"

namespace {

struct Args {
  std::string dataset, key, server;
  std::size_t threads = 8;
  datavo::ReadWhileFetching read_while_fetching = datavo::ReadWhileFetching::on;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_first_sample_threads: %s\nusage: bench_first_sample_threads --dataset D/S --key K --server URL "
               "--threads N --read-while-fetching on|off\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for_each_flag(argc, argv, usage, [&a](const std::string& flag, const std::string& value) {
    if (flag == "--dataset") {
      a.dataset = value;
    } else if (flag == "--key") {
      a.key = value;
    } else if (flag == "--server") {
      a.server = value;
    } else if (flag == "--threads") {
      a.threads = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--read-while-fetching" && (value == "on" || value == "off")) {
      a.read_while_fetching = value == "on" ? datavo::ReadWhileFetching::on : datavo::ReadWhileFetching::off;
    } else {
      return false;
    }
    return true;
  });
  if (a.dataset.empty() || a.key.empty() || a.server.empty() || a.threads == 0) usage("missing a required flag");
  return a;
}

struct Reader {
  double first_sample_seconds = -1;
  double seconds = 0;
  std::uint64_t samples = 0;
  datavo::SampleStreamStats stats;
  std::string error;
};

// Reads `stream` to its end, timing from `released`.
void read_all(datavo::SampleStream& stream, std::chrono::steady_clock::time_point released, Reader& out) {
  while (true) {
    auto sample = stream.next();
    if (!sample) {
      out.error = sample.error().message;
      return;
    }
    if (!*sample) break;
    if (out.samples++ == 0) {
      out.first_sample_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - released).count();
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - released).count();
  out.stats = stream.stats();
}

void print_list(const char* name, const std::vector<Reader>& readers, double Reader::*field) {
  std::printf("\"%s\": [", name);
  for (std::size_t i = 0; i < readers.size(); ++i) std::printf("%s%.4f", i ? ", " : "", readers[i].*field);
  std::printf("], ");
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::vector<datavo::SampleStream> streams;
  for (std::size_t i = 0; i < args.threads; ++i) {
    datavo::SampleStreamOptions options;
    options.keys = {args.key};
    options.origin.server = args.server;
    options.read_while_fetching = args.read_while_fetching;
    auto stream = datavo::SampleStream::from_dataset(args.dataset, std::move(options));
    if (!stream) {
      std::fprintf(stderr, "bench_first_sample_threads: %s\n", stream.error().message.c_str());
      return 1;
    }
    streams.push_back(std::move(*stream));
  }
  std::vector<Reader> readers(args.threads);
  std::latch start(1);
  std::chrono::steady_clock::time_point released;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < args.threads; ++i) {
    threads.emplace_back([&, i] {
      start.wait();
      read_all(streams[i], released, readers[i]);
    });
  }
  released = std::chrono::steady_clock::now();
  start.count_down();
  for (auto& t : threads) t.join();
  std::uint64_t before_install = 0, fetches = 0;
  for (const auto& r : readers) {
    if (!r.error.empty()) {
      std::fprintf(stderr, "bench_first_sample_threads: %s\n", r.error.c_str());
      return 1;
    }
    before_install += r.stats.samples_before_install;
    fetches += r.stats.origin_fetches;
  }
  std::printf("{\"threads\": %zu, ", args.threads);
  print_list("first_sample_seconds", readers, &Reader::first_sample_seconds);
  print_list("seconds", readers, &Reader::seconds);
  std::printf("\"samples\": [");
  for (std::size_t i = 0; i < readers.size(); ++i) {
    std::printf("%s%llu", i ? ", " : "", static_cast<unsigned long long>(readers[i].samples));
  }
  std::printf("], \"samples_before_install\": %llu, \"origin_fetches\": %llu}\n",
              static_cast<unsigned long long>(before_install), static_cast<unsigned long long>(fetches));
  return 0;
}
