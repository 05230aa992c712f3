// Eviction of a folder tier holding 100,000 entries of 1 KiB, with max_bytes set so that one pass removes ~10%:
//   BM_GcPass           one FolderTier::gc(DryRun::no) pass
//   BM_FindSortHeadRm   the shell floor removing the same number of oldest files:
//                       find DIR -type f -printf '%T@ %p\n' | sort -n | head -n N | cut -d' ' -f2- | xargs rm -f
//   BM_HitLatency/0     hit latency (get_or_fetch hits on entries that are not evicted) with no eviction running
//   BM_HitLatency/1     the same while a gc pass runs in another thread (the samples taken during the pass)
//   BM_HitLatency/2, /3 the same two windows for the syscall floor of a hit (open, fstat, futimens, close), so
//                       that the filesystem's own tail can be told apart from Datavo's
//   BM_InstallIntoLargeTier/0, /1  one 1 KiB install into the same tier, without and with max_bytes (not reached)
// Entries are made once by direct file creation in <tier>/local/<hash>.tar with distinct mtimes, entry i being
// the i-th oldest. Each of the oldest N (+ slack) also gets a second hard link in a stash directory outside the
// tier; before each pass (untimed) the evicted names are linked back, inode and mtime unchanged, so that every
// pass starts from the same 100,000 entries. Creating an inode costs ~0.5-0.9 ms on the reference machine while
// link(2) costs ~13 us, so re-creating the 10,000 evicted files before each pass would dominate the run. The
// price: an evicting unlink drops the link count 2 -> 1 instead of freeing the inode; measured there, 8.0 us vs
// 8.2 us per unlink, the same for both rows. Directory and inode caches are warm for both rows.
// Entries are sparse: st_size is 1 KiB (what usage and max_bytes count) but no data block is allocated. On a
// filesystem mounted with `discard` (the reference machine's), unlinking a file whose blocks reached the disk
// issues a synchronous discard per file, which would swamp both rows with block-layer time (and make it depend
// on whether writeback has run yet); sparse entries keep the comparison on the eviction logic and its syscalls.
// Environment: DATAVO_BENCH_DIR (default /var/tmp) must be on a real disk, not tmpfs.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"

namespace {

using namespace datavo;
using Clock = std::chrono::steady_clock;

constexpr std::size_t k_entries = 100'000;
constexpr std::size_t k_entry_bytes = 1024;
// The oldest entries (stashed and restored before each pass) cover the evicted ones with room for the stats
// file (.stats.json counts toward usage, so a pass may evict one entry more once it exists).
constexpr std::size_t k_reset_slack = 16;
// Hits only touch entries this far past the eviction boundary, so none of them is ever a candidate.
constexpr std::size_t k_hit_margin = 1000;
// How long the hit thread runs before the measured window opens, and the idle window's length.
constexpr auto k_hit_warmup = std::chrono::milliseconds(200);
constexpr auto k_idle_window = std::chrono::milliseconds(500);

[[noreturn]] void die(const std::string& what) { bench::die("bench_eviction", what); }

using bench::env_or;

struct TempDir : bench::ScratchDir {
  TempDir() : bench::ScratchDir("bench_eviction", "eviction") {}
};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// 64 lowercase hex characters, distinct per index, in no particular directory order.
std::string hash_hex(std::size_t index) {
  std::uint64_t state = index;
  char out[65];
  for (int word = 0; word < 4; ++word) {
    std::snprintf(out + 16 * word, 17, "%016llx", static_cast<unsigned long long>(splitmix64(state)));
  }
  return std::string(out, 64);
}

struct Fixture {
  TempDir dir;
  std::string root = dir.path + "/tier";
  std::string local_dir = root + "/local";
  std::string stash_dir = dir.path + "/stash";  // outside the tier root: not scanned, not an instance
  std::vector<std::string> paths;               // paths[i] is the i-th oldest entry
  std::vector<ShardKey> keys;
  std::int64_t oldest_mtime = 0;
  std::shared_ptr<FolderTier> tier;
  std::shared_ptr<ShardCacheHierarchy> hierarchy;
  std::size_t evict_count = 0;  // N: what one pass evicts, from a dry run
  double build_seconds = 0;

  Fixture() {
    std::filesystem::create_directories(local_dir);
    std::filesystem::create_directories(stash_dir);
    paths.reserve(k_entries);
    keys.reserve(k_entries);
    for (std::size_t i = 0; i < k_entries; ++i) {
      std::string hex = hash_hex(i);
      auto hash = ContentHash::parse(hex);
      if (!hash) die("bad generated hash " + hex);
      keys.push_back(ShardKey{Instance::local(), *hash});
      paths.push_back(local_dir + "/" + hex + ".tar");
    }
    oldest_mtime = std::int64_t(::time(nullptr)) - std::int64_t(k_entries) - 86400;
    auto start = Clock::now();
    create_entries();
    build_seconds = std::chrono::duration<double>(Clock::now() - start).count();

    // max_bytes one byte under usage: a pass goes down to the low watermark (0.9), i.e. evicts ~10%.
    FolderTierOptions probe_options;
    probe_options.path = root;
    auto probe = FolderTier::create(probe_options);
    if (!probe) die(probe.error().message);
    auto used = (*probe)->usage();
    if (!used || used->entries != k_entries) die("unexpected usage of the built tier");
    FolderTierOptions options = probe_options;
    options.name = "evicted";
    options.max_bytes = Bytes{used->used.count() - 1};
    auto created = FolderTier::create(options);
    if (!created) die(created.error().message);
    tier = *created;
    auto dry = tier->gc(DryRun::yes);
    if (!dry) die(dry.error().message);
    evict_count = dry->entries_evicted;
    if (evict_count == 0 || evict_count + k_hit_margin + k_reset_slack >= k_entries) die("bad eviction count");
    for (std::size_t i = 0; i < evict_count + k_reset_slack; ++i) {
      if (::link(paths[i].c_str(), stash_path(i).c_str()) != 0) die("cannot link " + stash_path(i));
    }
    auto made = ShardCacheHierarchy::create({tier});
    if (!made) die(made.error().message);
    hierarchy = *made;
  }

  std::string stash_path(std::size_t i) const { return stash_dir + "/" + std::to_string(i); }

  // Every entry, each with its own old mtime.
  void create_entries() {
    for (std::size_t i = 0; i < k_entries; ++i) {
      int fd = ::open(paths[i].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) die("cannot create " + paths[i] + ": " + std::strerror(errno));
      const struct timespec times[2] = {{0, UTIME_OMIT}, {time_t(oldest_mtime + std::int64_t(i)), 0}};
      if (::ftruncate(fd, off_t(k_entry_bytes)) != 0 || ::futimens(fd, times) != 0) {
        die("cannot write " + paths[i]);
      }
      ::close(fd);
    }
  }

  // Back to all k_entries entries: the evicted ones are linked back from the stash, with their old mtimes.
  void reset() {
    for (std::size_t i = 0; i < evict_count + k_reset_slack; ++i) {
      if (::link(stash_path(i).c_str(), paths[i].c_str()) != 0 && errno != EEXIST) die("cannot restore " + paths[i]);
    }
  }

  bool exists(std::size_t i) const {
    struct stat st {};
    return ::stat(paths[i].c_str(), &st) == 0;
  }
};

Fixture* g_fixture = nullptr;

void BM_GcPass(benchmark::State& state) {
  Fixture& f = *g_fixture;
  std::uint64_t evicted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    f.reset();
    state.ResumeTiming();
    auto report = f.tier->gc(DryRun::no);
    if (!report) {
      state.SkipWithError(report.error().message.c_str());
      break;
    }
    evicted += report->entries_evicted;
  }
  state.counters["evicted"] = benchmark::Counter(double(evicted), benchmark::Counter::kAvgIterations);
  state.counters["entries"] = double(k_entries);
}
BENCHMARK(BM_GcPass)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_FindSortHeadRm(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const std::string command = "export LC_ALL=C; find '" + f.local_dir +
                              "' -type f -printf '%T@ %p\\n' | sort -n | head -n " + std::to_string(f.evict_count) +
                              " | cut -d' ' -f2- | xargs rm -f";
  for (auto _ : state) {
    state.PauseTiming();
    f.reset();
    state.ResumeTiming();
    if (std::system(command.c_str()) != 0) {
      state.SkipWithError(("failed: " + command).c_str());
      break;
    }
    state.PauseTiming();
    bool right = !f.exists(0) && !f.exists(f.evict_count - 1) && f.exists(f.evict_count);
    state.ResumeTiming();
    if (!right) {
      state.SkipWithError("the pipeline did not remove exactly the oldest N entries");
      break;
    }
  }
  state.counters["evicted"] = double(f.evict_count);
  state.counters["entries"] = double(k_entries);
}
BENCHMARK(BM_FindSortHeadRm)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

struct Sample {
  Clock::time_point start;
  Clock::duration latency;
};

// The syscalls of a hit, without Datavo: open, fstat, futimens UTIME_NOW, close.
bool raw_hit(const std::string& path) {
  static const struct timespec now_times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && ::futimens(fd, now_times) == 0;
  ::close(fd);
  return ok;
}

// Hits random surviving entries until `stop`; every call is recorded.
void hit_loop(Fixture& f, bool raw, const std::atomic<bool>& stop, std::vector<Sample>& samples,
              std::atomic<bool>& failed) {
  const std::size_t first = f.evict_count + k_hit_margin;
  const std::size_t span = k_entries - first;
  Fetcher no_fetch = [](ByteSink&) -> Result<Expectation> { return Error{ErrorCode::internal, "must not fetch"}; };
  std::uint64_t rng = 12345;
  while (!stop.load(std::memory_order_relaxed)) {
    const std::size_t index = first + splitmix64(rng) % span;
    bool hit;
    auto t0 = Clock::now();
    if (raw) {
      hit = raw_hit(f.paths[index]);
    } else {
      auto result = f.hierarchy->get_or_fetch(f.keys[index], no_fetch);
      hit = result && result->source == ServedFrom::hit;
    }
    auto t1 = Clock::now();
    if (!hit) {
      failed = true;
      return;
    }
    samples.push_back(Sample{t0, t1 - t0});
  }
}

double percentile_us(std::vector<double>& sorted_us, double p) {
  if (sorted_us.empty()) return 0;
  std::size_t index = std::min(sorted_us.size() - 1, std::size_t(p * double(sorted_us.size())));
  return sorted_us[index];
}

// Arg 0: Datavo hits, no eviction running (a k_idle_window window). Arg 1: Datavo hits in the window of one gc
// pass run by this thread. Args 2 and 3: the same for the syscall floor. The reported time is the window's
// length; the latencies are in the counters (microseconds).
void BM_HitLatency(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const bool during_gc = state.range(0) % 2 == 1;
  const bool raw = state.range(0) >= 2;
  std::vector<double> latencies_us;
  for (auto _ : state) {
    f.reset();
    std::vector<Sample> samples;
    samples.reserve(4'000'000);
    std::atomic<bool> stop{false}, failed{false};
    std::thread hitter(hit_loop, std::ref(f), raw, std::cref(stop), std::ref(samples), std::ref(failed));
    std::this_thread::sleep_for(k_hit_warmup);
    const auto window_start = Clock::now();
    std::uint64_t evicted = 0;
    if (during_gc) {
      auto report = f.tier->gc(DryRun::no);
      evicted = report ? report->entries_evicted : 0;
    } else {
      std::this_thread::sleep_for(k_idle_window);
    }
    const auto window_end = Clock::now();
    stop = true;
    hitter.join();
    if (failed || (during_gc && evicted == 0)) {
      state.SkipWithError("a hit missed, or the gc pass evicted nothing");
      break;
    }
    for (const Sample& s : samples) {
      if (s.start >= window_start && s.start < window_end) {
        latencies_us.push_back(std::chrono::duration<double, std::micro>(s.latency).count());
      }
    }
    state.SetIterationTime(std::chrono::duration<double>(window_end - window_start).count());
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  state.counters["samples"] = double(latencies_us.size());
  state.counters["p50_us"] = percentile_us(latencies_us, 0.50);
  state.counters["p99_us"] = percentile_us(latencies_us, 0.99);
  state.counters["p999_us"] = percentile_us(latencies_us, 0.999);
  state.counters["max_us"] = latencies_us.empty() ? 0.0 : latencies_us.back();
  state.counters["over_1ms"] =
      double(std::count_if(latencies_us.begin(), latencies_us.end(), [](double us) { return us > 1000.0; }));
  state.SetLabel(std::string(raw ? "syscall floor, " : "get_or_fetch, ") +
                 (during_gc ? "during a gc pass" : "no eviction running"));
}
BENCHMARK(BM_HitLatency)->DenseRange(0, 3)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// The cost of one install (a get_or_fetch miss writing a 1 KiB shard) into the same 100,000-entry tier, with
// Durability::no_sync so that only the tier's own work is timed. Arg 0: no max_bytes. Arg 1: max_bytes at twice
// the usage, so the tier is far under budget and nothing is evicted: the difference is what the install pays for
// the budget check (FolderTier::enforce_budget). The installed entry is removed between iterations.
void BM_InstallIntoLargeTier(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const bool budgeted = state.range(0) == 1;
  FolderTierOptions options;
  options.path = f.root;
  options.name = budgeted ? "budgeted" : "unbounded";
  options.durability = Durability::no_sync;
  if (budgeted) options.max_bytes = Bytes{2 * k_entries * k_entry_bytes};
  auto tier = FolderTier::create(options);
  auto hierarchy = tier ? ShardCacheHierarchy::create({*tier}) : Error{ErrorCode::internal, "no tier"};
  if (!hierarchy) {
    state.SkipWithError("cannot create the tier");
    return;
  }
  Fetcher small = [](ByteSink& sink) -> Result<Expectation> {
    static const char payload[k_entry_bytes] = {};
    if (auto written = sink.write(payload, sizeof payload); !written) return written.error();
    return Expectation{Bytes{k_entry_bytes}, std::nullopt};
  };
  std::size_t next = 2 * k_entries;  // hash_hex() of indices past k_entries names keys not in the tier
  std::uint64_t evicted_before = (*tier)->counters().evictions.load();
  for (auto _ : state) {
    auto hash = ContentHash::parse(hash_hex(next++));
    if (!hash) {
      state.SkipWithError("bad generated hash");
      break;
    }
    const ShardKey key{Instance::local(), *hash};
    auto result = (*hierarchy)->get_or_fetch(key, small);
    if (!result || result->source != ServedFrom::fetched) {
      state.SkipWithError("the install failed");
      break;
    }
    state.PauseTiming();
    result = Error{ErrorCode::internal, "dropped"};  // closes the handle
    (void)(*tier)->remove(key);
    state.ResumeTiming();
  }
  // remove() counts as an eviction: anything beyond one per iteration was evicted by the budget check.
  const std::uint64_t evicted = (*tier)->counters().evictions.load() - evicted_before;
  state.counters["evicted_by_budget"] = double(evicted - std::min<std::uint64_t>(evicted, state.iterations()));
  state.SetLabel(budgeted ? "max_bytes set, far under budget" : "no max_bytes");
}
BENCHMARK(BM_InstallIntoLargeTier)->Arg(0)->Arg(1)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return datavo::bench::run_benchmarks(argc, argv, g_fixture, [](const Fixture& fixture) {
    return std::vector<std::pair<std::string, std::string>>{
        {"bench_dir", fixture.dir.path},
        {"entries", std::to_string(k_entries)},
        {"entry_bytes", std::to_string(k_entry_bytes)},
        {"evicted_per_pass", std::to_string(fixture.evict_count)},
        {"build_seconds", std::to_string(fixture.build_seconds)},
    };
  });
}
