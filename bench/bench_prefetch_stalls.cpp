// The consumer of the stalls benchmark (bench/prefetch_stalls.sh; docs/BENCHMARKS.md, "Stalls"): one SampleStream
// over a dataset, doing a fixed amount of work per sample (a sleep, so that the consumer's rate does not depend on
// the CPU that the origin and the proxy share with it), and reporting how long it waited for shards.
//
// Usage: bench_prefetch_stalls --dataset D/S --key K --server URL --config SHARDS_YAML --prefetch N
//                              [--budget F] [--work-us MICROSECONDS_PER_SAMPLE] [--limit-shards N]
// Prints one JSON object: the options, "seconds" (the whole pass), "work_seconds" (the sleeps), "shards",
// "samples", "shard_wait_seconds", "shard_wait_after_first_seconds", "max_prefetched", "max_prefetched_bytes",
// "prefetch_window_bytes" (null: no byte bound) and "origin_fetches". Exit 1 with a message on a stream error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "datavo/sample_stream.hpp"
#include "flag_pairs.hpp"

namespace {

struct Args {
  std::string dataset, key, server, config;
  std::size_t prefetch = 8;
  double budget = 0.1;
  std::chrono::microseconds work{0};
  std::size_t limit_shards = 0;  // 0: every shard
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_prefetch_stalls: %s\nusage: bench_prefetch_stalls --dataset D/S --key K --server URL --config "
               "SHARDS_YAML --prefetch N [--budget F] [--work-us US] [--limit-shards N]\n",
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
    } else if (flag == "--config") {
      a.config = value;
    } else if (flag == "--prefetch") {
      a.prefetch = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--budget") {
      a.budget = std::strtod(value.c_str(), nullptr);
    } else if (flag == "--work-us") {
      a.work = std::chrono::microseconds(std::strtoll(value.c_str(), nullptr, 10));
    } else if (flag == "--limit-shards") {
      a.limit_shards = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      return false;
    }
    return true;
  });
  if (a.dataset.empty() || a.key.empty() || a.server.empty() || a.config.empty()) usage("missing a required flag");
  return a;
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

void print(const Args& a, const datavo::SampleStreamStats& s, std::chrono::nanoseconds total,
           std::chrono::nanoseconds worked) {
  std::printf("{\"prefetch\": %zu, \"budget\": %.3f, \"work_us\": %lld, \"seconds\": %.4f, \"work_seconds\": %.4f, ",
              a.prefetch, a.budget, static_cast<long long>(a.work.count()), seconds(total), seconds(worked));
  std::printf("\"shards\": %llu, \"samples\": %llu, \"shard_wait_seconds\": %.4f, ",
              static_cast<unsigned long long>(s.shards), static_cast<unsigned long long>(s.samples),
              seconds(s.shard_wait));
  std::printf("\"shard_wait_after_first_seconds\": %.4f, \"max_prefetched\": %zu, \"max_prefetched_bytes\": %llu, ",
              seconds(s.shard_wait_after_first), s.max_prefetched,
              static_cast<unsigned long long>(s.max_prefetched_bytes.count()));
  if (s.prefetch_window_bytes) {
    std::printf("\"prefetch_window_bytes\": %llu, ", static_cast<unsigned long long>(s.prefetch_window_bytes->count()));
  } else {
    std::printf("\"prefetch_window_bytes\": null, ");
  }
  std::printf("\"origin_fetches\": %llu}\n", static_cast<unsigned long long>(s.origin_fetches));
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  datavo::SampleStreamOptions options;
  options.keys = {args.key};
  options.cache_config_path = args.config;
  options.origin.server = args.server;
  options.prefetch_shards = args.prefetch;
  options.prefetch_budget = args.budget;
  const auto started = std::chrono::steady_clock::now();
  auto stream = datavo::SampleStream::from_dataset(args.dataset, std::move(options));
  if (!stream) {
    std::fprintf(stderr, "bench_prefetch_stalls: %s\n", stream.error().message.c_str());
    return 1;
  }
  std::chrono::nanoseconds worked{0};
  while (true) {
    auto sample = stream->next();
    if (!sample) {
      std::fprintf(stderr, "bench_prefetch_stalls: %s\n", sample.error().message.c_str());
      return 1;
    }
    if (!*sample) break;
    if (args.limit_shards && stream->stats().shards > args.limit_shards) break;
    const auto before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(args.work);
    worked += std::chrono::steady_clock::now() - before;
  }
  print(args, stream->stats(), std::chrono::steady_clock::now() - started, worked);
  return 0;
}
