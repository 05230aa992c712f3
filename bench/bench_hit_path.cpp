// The hit path: ShardCacheHierarchy::get_or_fetch on a top-tier hit, against its floors (the same syscalls in a
// loop on the same file: open, fstat, futimens UTIME_NOW, close; and open, fstat, close, what a hot hit does when
// the entry's mtime is younger than lru_resolution) and its peer (an fsspec simplecache hit on the same file, timed
// by bench/fsspec_hit.py in a child python process).
//
// Goals: get_or_fetch at most 1.5x the syscall floor (issue 8); a hot hit at or below 1.0x the floor with futimens
// (issue 18: the default lru_resolution of 10 s skips the bump of a fresh entry). BM_HierarchyGetOrFetchHitTouching
// is the same hierarchy with lru_resolution 0 (a bump on every hit, as before issue 18). BM_HitPaired measures the
// ratios a second way, the three sides interleaved every 64 calls; BM_FolderTierOpenHit (the tier alone) and
// BM_StatsFlush (the periodic stats flush that a hit pays every 2 s) split the cost. Run with
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
  std::shared_ptr<ShardCacheHierarchy> touching;  // the same directory with lru_resolution 0
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
    options.lru_resolution = Seconds{0};
    auto bumping = FolderTier::create(options);
    if (!bumping) die(bumping.error().message);
    auto made_touching = ShardCacheHierarchy::create({*bumping});
    if (!made_touching) die(made_touching.error().message);
    touching = *made_touching;
    auto fetched = hierarchy->get_or_fetch(key, fetcher);
    if (!fetched || fetched->source != ServedFrom::fetched) die("cannot install the shard");
    entry_path = tier->entry_path(key);
  }
};

Fixture* g_fixture = nullptr;

// get_or_fetch hits on `hierarchy`, the handle dropped (closed) at the end of each iteration.
void hit_loop(benchmark::State& state, ShardCacheHierarchy& hierarchy) {
  Fixture& f = *g_fixture;
  for (auto _ : state) {
    auto result = hierarchy.get_or_fetch(f.key, f.fetcher);
    if (!result || result->source != ServedFrom::hit) {
      state.SkipWithError("get_or_fetch did not hit the top tier");
      break;
    }
    benchmark::DoNotOptimize(result->handle.fd());
  }
}

void BM_HierarchyGetOrFetchHit(benchmark::State& state) { hit_loop(state, *g_fixture->hierarchy); }
BENCHMARK(BM_HierarchyGetOrFetchHit)->UseRealTime();

// The same with lru_resolution 0: every hit bumps the mtime.
void BM_HierarchyGetOrFetchHitTouching(benchmark::State& state) { hit_loop(state, *g_fixture->touching); }
BENCHMARK(BM_HierarchyGetOrFetchHitTouching)->UseRealTime();

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

// The floor of a hot hit, which leaves a fresh mtime alone: open, fstat, close.
void BM_SyscallFloorNoTouch(benchmark::State& state) {
  const char* path = g_fixture->entry_path.c_str();
  for (auto _ : state) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      state.SkipWithError("syscall failed");
      if (fd >= 0) ::close(fd);
      break;
    }
    benchmark::DoNotOptimize(st.st_size);
    ::close(fd);
  }
}
BENCHMARK(BM_SyscallFloorNoTouch)->UseRealTime();

// The same comparison interleaved finely: each iteration runs k_pair_batch calls of each side (the floor with
// futimens, the floor without, get_or_fetch hits), in an order rotated every iteration, each batch timed in wall and
// thread-CPU time. On a loaded machine, load changes between repetitions of the rows above; here the sides see the
// same load within ~1 ms. The counters are per call; ratio_wall and ratio_cpu are get_or_fetch / the floor with
// futimens, ratio_plain_wall and ratio_plain_cpu get_or_fetch / open+fstat+close.
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
  enum Side { floor_touch, floor_plain, datavo, k_sides };
  double wall[k_sides] = {}, cpu[k_sides] = {};
  bool ok = true;
  auto floor_batch = [&](bool touch) {
    for (int i = 0; i < k_pair_batch; ++i) {
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      struct stat st {};
      ok = ok && fd >= 0 && ::fstat(fd, &st) == 0 && (!touch || ::futimens(fd, now_times) == 0);
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
  int first = 0;
  for (auto _ : state) {
    for (int k = 0; k < k_sides; ++k) {
      const int side = (first + k) % k_sides;
      const Stamp t0 = Stamp::now();
      if (side == datavo)
        datavo_batch();
      else
        floor_batch(side == floor_touch);
      const Stamp t1 = Stamp::now();
      wall[side] += std::chrono::duration<double, std::nano>(t1.wall - t0.wall).count();
      cpu[side] += t1.cpu_ns - t0.cpu_ns;
    }
    first = (first + 1) % k_sides;
  }
  if (!ok) {
    state.SkipWithError("a syscall failed or get_or_fetch missed");
    return;
  }
  const double calls = double(state.iterations()) * k_pair_batch;
  state.counters["floor_ns"] = wall[floor_touch] / calls;
  state.counters["floor_plain_ns"] = wall[floor_plain] / calls;
  state.counters["datavo_ns"] = wall[datavo] / calls;
  state.counters["floor_cpu_ns"] = cpu[floor_touch] / calls;
  state.counters["floor_plain_cpu_ns"] = cpu[floor_plain] / calls;
  state.counters["datavo_cpu_ns"] = cpu[datavo] / calls;
  state.counters["ratio_wall"] = wall[datavo] / wall[floor_touch];
  state.counters["ratio_cpu"] = cpu[datavo] / cpu[floor_touch];
  state.counters["ratio_plain_wall"] = wall[datavo] / wall[floor_plain];
  state.counters["ratio_plain_cpu"] = cpu[datavo] / cpu[floor_plain];
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
