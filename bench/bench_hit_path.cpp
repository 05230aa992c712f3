// The hit path: ShardCacheHierarchy::get_or_fetch on a top-tier hit, against its floor (the same syscalls in a
// loop: open, fstat, futimens UTIME_NOW, close, on the same file) and its peer (an fsspec simplecache hit on the
// same file, timed by bench/fsspec_hit.py in a child python process).
//
// Goal (the issue): get_or_fetch at most 1.5x the syscall floor. BM_HitPaired measures that ratio a second way,
// both sides interleaved every 64 calls; BM_FolderTierOpenHit (the tier alone) and BM_StatsFlush (the periodic
// stats flush that a hit pays every 2 s) split the cost. Run with
//   --benchmark_repetitions=9 --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true
// so that the rows are interleaved and their medians compared (bench/run_all.sh does, and prints the ratios).
//
// Environment: DATAVO_BENCH_DIR (default /var/tmp) is where the temporary tier goes; DATAVO_BENCH_PYTHON (default
// /usr/bin/python3) must import fsspec, else the fsspec rows are skipped with an error message.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"

#ifndef DATAVO_FSSPEC_SCRIPT
#define DATAVO_FSSPEC_SCRIPT "bench/fsspec_hit.py"
#endif

namespace {

using namespace datavo;
using Clock = std::chrono::steady_clock;

constexpr Bytes k_shard_size = MiB(1);  // the hit path does not read the bytes: the size hardly matters
// Timed fsspec hits per python process (one process per repetition); ~0.25 ms each on the reference machine.
constexpr int k_fsspec_iterations = 2000;

[[noreturn]] void die(const std::string& what) { bench::die("bench_hit_path", what); }

using bench::env_or;

struct TempDir : bench::ScratchDir {
  TempDir() : bench::ScratchDir("bench_hit_path", "hit") {}
};

ShardKey make_key() {
  auto hash = ContentHash::parse("7d1a54127b222502f5b79b5fb0803061152a44f92b37e23c6527baf665d4da9a");
  if (!hash) die("bad content hash");
  return ShardKey{Instance::local(), *hash};
}

// A fetcher that writes k_shard_size pseudo-random bytes. Called once, to install the shard.
Result<Expectation> write_shard(ByteSink& sink) {
  std::vector<std::uint64_t> block(8192);
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (std::uint64_t done = 0; done < k_shard_size.count();) {
    for (auto& word : block) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      word = x;
    }
    std::size_t n = std::min<std::uint64_t>(block.size() * sizeof block[0], k_shard_size.count() - done);
    if (auto written = sink.write(block.data(), n); !written) return written.error();
    done += n;
  }
  return Expectation{k_shard_size, std::nullopt};
}

struct Fixture {
  TempDir dir;
  std::shared_ptr<FolderTier> tier;
  std::shared_ptr<ShardCacheHierarchy> hierarchy;
  ShardKey key = make_key();
  std::string entry_path;
  Fetcher fetcher = write_shard;

  Fixture() {
    FolderTierOptions options;
    options.path = dir.path + "/tier1";
    options.name = "tier1";
    auto created = FolderTier::create(options);
    if (!created) die(created.error().message);
    tier = *created;
    auto made = ShardCacheHierarchy::create({tier});
    if (!made) die(made.error().message);
    hierarchy = *made;
    auto fetched = hierarchy->get_or_fetch(key, fetcher);
    if (!fetched || fetched->source != ServedFrom::fetched) die("cannot install the shard");
    entry_path = tier->entry_path(key);
  }
};

Fixture* g_fixture = nullptr;

void BM_HierarchyGetOrFetchHit(benchmark::State& state) {
  Fixture& f = *g_fixture;
  for (auto _ : state) {
    auto result = f.hierarchy->get_or_fetch(f.key, f.fetcher);
    if (!result || result->source != ServedFrom::hit) {
      state.SkipWithError("get_or_fetch did not hit the top tier");
      break;
    }
    benchmark::DoNotOptimize(result->handle.fd());
  }  // the handle is dropped (closed) at the end of each iteration
}
BENCHMARK(BM_HierarchyGetOrFetchHit)->UseRealTime();

// FolderTier::open alone, to split the hierarchy's overhead from the tier's.
void BM_FolderTierOpenHit(benchmark::State& state) {
  Fixture& f = *g_fixture;
  for (auto _ : state) {
    auto opened = f.tier->open(f.key);
    if (!opened || !*opened) {
      state.SkipWithError("open missed");
      break;
    }
    benchmark::DoNotOptimize((*opened)->fd());
  }
}
BENCHMARK(BM_FolderTierOpenHit)->UseRealTime();

// The floor: the syscalls a hit cannot avoid, on the same file.
void BM_SyscallFloor(benchmark::State& state) {
  const char* path = g_fixture->entry_path.c_str();
  static const struct timespec now_times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  for (auto _ : state) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || ::futimens(fd, now_times) != 0) {
      state.SkipWithError("syscall failed");
      if (fd >= 0) ::close(fd);
      break;
    }
    benchmark::DoNotOptimize(st.st_size);
    ::close(fd);
  }
}
BENCHMARK(BM_SyscallFloor)->UseRealTime();

// The same comparison interleaved finely: each iteration runs k_pair_batch floor calls and k_pair_batch
// get_or_fetch hits (alternating which goes first), each batch timed in wall and thread-CPU time. On a loaded
// machine, load changes between repetitions of the rows above; here both sides see the same load within ~1 ms.
// The counters are per call; ratio_wall and ratio_cpu are get_or_fetch / floor.
constexpr int k_pair_batch = 64;

struct Stamp {
  Clock::time_point wall;
  double cpu_ns;
  static Stamp now() {
    struct timespec ts {};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return Stamp{Clock::now(), double(ts.tv_sec) * 1e9 + double(ts.tv_nsec)};
  }
};

void BM_HitPaired(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const char* path = f.entry_path.c_str();
  static const struct timespec now_times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  double floor_wall = 0, floor_cpu = 0, datavo_wall = 0, datavo_cpu = 0;
  bool ok = true;
  auto floor_batch = [&] {
    for (int i = 0; i < k_pair_batch; ++i) {
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      struct stat st {};
      ok = ok && fd >= 0 && ::fstat(fd, &st) == 0 && ::futimens(fd, now_times) == 0;
      benchmark::DoNotOptimize(st.st_size);
      if (fd >= 0) ::close(fd);
    }
  };
  auto datavo_batch = [&] {
    for (int i = 0; i < k_pair_batch; ++i) {
      auto result = f.hierarchy->get_or_fetch(f.key, f.fetcher);
      ok = ok && result && result->source == ServedFrom::hit;
      if (result) benchmark::DoNotOptimize(result->handle.fd());
    }
  };
  bool floor_first = true;
  for (auto _ : state) {
    Stamp t0 = Stamp::now();
    floor_first ? floor_batch() : datavo_batch();
    Stamp t1 = Stamp::now();
    floor_first ? datavo_batch() : floor_batch();
    Stamp t2 = Stamp::now();
    const double first_wall = std::chrono::duration<double, std::nano>(t1.wall - t0.wall).count();
    const double second_wall = std::chrono::duration<double, std::nano>(t2.wall - t1.wall).count();
    (floor_first ? floor_wall : datavo_wall) += first_wall;
    (floor_first ? datavo_wall : floor_wall) += second_wall;
    (floor_first ? floor_cpu : datavo_cpu) += t1.cpu_ns - t0.cpu_ns;
    (floor_first ? datavo_cpu : floor_cpu) += t2.cpu_ns - t1.cpu_ns;
    floor_first = !floor_first;
  }
  if (!ok) {
    state.SkipWithError("a syscall failed or get_or_fetch missed");
    return;
  }
  const double calls = double(state.iterations()) * k_pair_batch;
  state.counters["floor_ns"] = floor_wall / calls;
  state.counters["datavo_ns"] = datavo_wall / calls;
  state.counters["floor_cpu_ns"] = floor_cpu / calls;
  state.counters["datavo_cpu_ns"] = datavo_cpu / calls;
  state.counters["ratio_wall"] = datavo_wall / floor_wall;
  state.counters["ratio_cpu"] = datavo_cpu / floor_cpu;
}
BENCHMARK(BM_HitPaired)->UseRealTime();

// What one hit in k_stats_flush_interval (2 s) also pays: get_or_fetch calls flush_stats() inline once the interval
// has passed, and that writes .stats.json with an fsync. Timed alone here (one counted hit before each, untimed).
void BM_StatsFlush(benchmark::State& state) {
  Fixture& f = *g_fixture;
  for (auto _ : state) {
    state.PauseTiming();
    if (auto opened = f.tier->open(f.key); !opened || !*opened) {
      state.SkipWithError("open missed");
      break;
    }
    state.ResumeTiming();
    f.hierarchy->flush_stats();
  }
}
BENCHMARK(BM_StatsFlush)->Iterations(200)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The peer: one python process per repetition, timing k_fsspec_iterations hits itself with perf_counter (so the
// interpreter start-up is not counted). The reported time is per call. Arg 0: fsspec.open("simplecache::...")
// as a user writes it; arg 1: a simplecache filesystem object's .open(), the cheaper form.
void BM_FsspecSimplecacheHit(benchmark::State& state) {
  const char* variant = state.range(0) == 0 ? "url" : "fs";
  const std::string cache_dir = g_fixture->dir.path + "/fsspec-" + variant;
  std::string command;
  for (const std::string& word :
       {env_or("DATAVO_BENCH_PYTHON", "/usr/bin/python3"), std::string(DATAVO_FSSPEC_SCRIPT), g_fixture->entry_path,
        std::string("--variant"), std::string(variant), std::string("--runs"), std::string("1"),
        std::string("--iterations"), std::to_string(k_fsspec_iterations), std::string("--cache-dir"), cache_dir,
        std::string("--format"), std::string("ns")}) {
    command.append(command.empty() ? "'" : " '").append(word).append("'");  // no quote in any of these words
  }
  for (auto _ : state) {
    FILE* child = ::popen(command.c_str(), "r");
    char line[128] = {};
    bool got = child && std::fgets(line, sizeof line, child) != nullptr;
    int status = child ? ::pclose(child) : -1;
    double ns = got ? std::strtod(line, nullptr) : 0.0;
    if (status != 0 || !(ns > 0.0)) {
      state.SkipWithError(("fsspec peer failed (is fsspec importable by DATAVO_BENCH_PYTHON?): " + command).c_str());
      break;
    }
    state.SetIterationTime(ns * 1e-9);
  }
  state.SetLabel(std::string("fsspec simplecache, ") + variant + ", per call");
}
BENCHMARK(BM_FsspecSimplecacheHit)->Arg(0)->Arg(1)->Iterations(1)->UseManualTime();

}  // namespace

int main(int argc, char** argv) {
  return datavo::bench::run_benchmarks(argc, argv, g_fixture, [](const Fixture& fixture) {
    return std::vector<std::pair<std::string, std::string>>{
        {"bench_dir", fixture.dir.path},
        {"shard_bytes", std::to_string(k_shard_size.count())},
    };
  });
}
