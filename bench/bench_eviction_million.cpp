// F13 (issue 7), issue 18: one eviction pass over a folder tier of 1,000,000 (or 10,000,000) small entries, against
// the shell floor, with the pass's peak RSS and the latency of hits made by another process while it runs.
//   BM_GcPass          one FolderTier::gc(DryRun::no) pass, in a child process (this program re-executed with
//                      --gc-child), so that its wall time includes a process start like the floor's and its peak RSS
//                      (GNU time's) is the pass's alone, not this fixture's
//   BM_FindSortHeadRm  the floor, also a child process (sh -c), removing the same N oldest entries:
//                      find DIR -type f -printf '%T@ %p\n' | sort -n | head -n N | cut -d' ' -f2- | xargs rm -f
//                      (peak RSS: the largest process of the pipeline, which is sort)
//   BM_HitLatency/0    get_or_fetch hits from a thread of this process, no eviction running
//   BM_HitLatency/1    the same while the gc child runs: the hits come from another process than the pass
//   BM_HitLatency/2,3  the same two windows for the syscalls of a hit without Datavo (open, fstat, the two fgetxattr
//                      of a first hit of an inode, futimens, close), to tell the filesystem's and the scheduler's own
//                      tail from Datavo's
// The tier is <dir>/tier/local/<64 hex>.tar, as the folder tier writes it: each entry 1 KiB (sparse: st_size is
// what usage counts, no data block, so that no unlink waits for a discard), with the three xattrs of an install
// (user.datavo.sha256, .key, .size) or, where the filesystem has no user xattrs, a <hash>.sha256 sidecar; entry i is
// the i-th oldest (mtime = start + i s) and the names are in no relation to the age. Built once per run by a C++
// generator (DATAVO_BENCH_GEN_THREADS threads, default 2). max_bytes is the usage minus one byte and the low
// watermark 1 - DATAVO_BENCH_EVICT_PERCENT/100 (default 1%, issue 18's case), so that a pass evicts that share of the
// entries. Before every timed pass, untimed, the entries evicted are linked back from a stash of hard links outside
// the tier (inode, mtime and xattrs unchanged), so that every pass of either side starts from the same entries on the
// same filesystem.
// Environment: DATAVO_BENCH_DIR: where the tier is made; bench/eviction_million.sh mounts a loop ext4 image (or a
// tmpfs) for it. DATAVO_BENCH_ENTRIES overrides the entry count. DATAVO_BENCH_RECORDS=none writes no xattrs and no
// sidecars (an entry from before records; gc never reads them): on a tmpfs, whose inodes and xattrs are kernel
// memory, 10,000,000 entries then take about 11 GB instead of 15.5 GB. The hit rows need the records.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
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

extern char** environ;

namespace {

using namespace datavo;
using Clock = std::chrono::steady_clock;

constexpr std::size_t k_default_entries = 1'000'000;
constexpr std::size_t k_entry_bytes = 1024;
// The stash covers the evicted entries with room for .stats.json, which counts toward usage (the hit thread's
// hierarchy flushes it), so that a pass may evict a few entries more once it exists.
constexpr std::size_t k_reset_slack = 64;
// Hits only touch entries this far past the eviction boundary, so none of them is ever a candidate.
constexpr std::size_t k_hit_margin = 10'000;
constexpr auto k_hit_warmup = std::chrono::milliseconds(200);
constexpr auto k_idle_window = std::chrono::milliseconds(1000);
// The pass window is cut into this many slices to show that hits complete in every part of it.
constexpr int k_slices = 20;

[[noreturn]] void die(const std::string& what) { bench::die("bench_eviction_million", what); }

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// 64 lowercase hex characters, distinct per index, in no relation to the index's order.
std::string hash_hex(std::size_t index) {
  std::uint64_t state = index;
  char out[65];
  for (int word = 0; word < 4; ++word) {
    std::snprintf(out + 16 * word, 17, "%016llx", static_cast<unsigned long long>(splitmix64(state)));
  }
  return std::string(out, 64);
}

// The share of the entries one pass evicts, in percent.
double evict_percent() { return std::stod(bench::env_or("DATAVO_BENCH_EVICT_PERCENT", "1")); }

bool write_records() { return bench::env_or("DATAVO_BENCH_RECORDS", "xattrs") != "none"; }

std::size_t entry_count() {
  const std::string text = bench::env_or("DATAVO_BENCH_ENTRIES", "");
  return text.empty() ? k_default_entries : std::size_t(std::stoull(text));
}

struct ChildRun {
  double seconds = 0;  // spawn to reap
  double cpu_seconds = 0;
  double maxrss_mib = 0;
  int status = 0;
  std::string out;
};

// GNU time reports the peak RSS and CPU of the command and the descendants it reaped. wait4's own ru_maxrss cannot be
// used here: a child made by posix_spawn (vfork) or fork starts from this process's memory, whose high-water mark
// exec records as the child's (and this fixture holds hundreds of MiB).
constexpr const char* k_gnu_time = "/usr/bin/time";

// Runs args to completion under GNU time with stdout to `out_path`; times it from spawn to reap (GNU time's own
// fork and exec, about a millisecond, are in it for every row alike).
ChildRun run_child(const std::vector<std::string>& args, const std::string& out_path) {
  const std::string usage_path = out_path + ".usage";
  std::vector<std::string> wrapped = {k_gnu_time, "-f", "%M %U %S", "-o", usage_path};
  wrapped.insert(wrapped.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (const auto& a : wrapped) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ChildRun run;
  pid_t pid = 0;
  const auto start = Clock::now();
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) die("cannot spawn " + args[0]);
  while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  posix_spawn_file_actions_destroy(&actions);
  if (FILE* f = std::fopen(usage_path.c_str(), "r")) {
    // The last line: GNU time writes "Command exited with non-zero status N" before it when the command failed.
    char line[256];
    double maxrss_kib = 0, user = 0, system = 0;
    while (std::fgets(line, sizeof line, f)) std::sscanf(line, "%lf %lf %lf", &maxrss_kib, &user, &system);
    std::fclose(f);
    run.maxrss_mib = maxrss_kib / 1024.0;
    run.cpu_seconds = user + system;
  }
  if (FILE* f = std::fopen(out_path.c_str(), "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, f)) run.out += buffer;
    std::fclose(f);
  }
  return run;
}

std::string self_exe() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) die("cannot read /proc/self/exe");
  return path.string();
}

struct Fixture {
  bench::ScratchDir dir{"bench_eviction_million", "eviction-million"};
  const std::size_t entries = entry_count();
  std::string root = dir.path + "/tier";
  std::string local_dir = root + "/local";
  std::string stash_dir = dir.path + "/stash";  // outside the tier root: not scanned, not an instance
  std::int64_t oldest_mtime = 0;
  std::uint64_t max_bytes = 0;
  std::size_t evict_count = 0;  // N: what one pass evicts, from a dry run
  double build_seconds = 0;
  double stash_seconds = 0;
  double low_watermark = 1.0 - evict_percent() / 100.0;
  bool records = write_records();
  bool sidecars = false;  // the filesystem has no user xattrs: the digest is in sidecars
  std::shared_ptr<FolderTier> tier;
  std::shared_ptr<ShardCacheHierarchy> hierarchy;
  std::string exe = self_exe();

  Fixture() {
    if (::access(k_gnu_time, X_OK) != 0) die(std::string(k_gnu_time) + " is missing (Debian package `time`)");
    std::filesystem::create_directories(local_dir);
    std::filesystem::create_directories(stash_dir);
    oldest_mtime = std::int64_t(::time(nullptr)) - std::int64_t(entries) - 86400;
    auto start = Clock::now();
    generate();
    build_seconds = std::chrono::duration<double>(Clock::now() - start).count();

    FolderTierOptions probe_options;
    probe_options.path = root;
    auto probe = FolderTier::create(probe_options);
    if (!probe) die(probe.error().message);
    auto used = (*probe)->usage();
    if (!used || used->entries != entries) die("unexpected usage of the built tier");
    max_bytes = used->used.count() - 1;
    FolderTierOptions options = probe_options;
    options.name = "evicted";
    options.max_bytes = Bytes{max_bytes};
    options.low_watermark = low_watermark;
    auto created = FolderTier::create(options);
    if (!created) die(created.error().message);
    tier = *created;
    auto dry = tier->gc(DryRun::yes);
    if (!dry) die(dry.error().message);
    evict_count = dry->entries_evicted;
    if (evict_count == 0 || evict_count + k_hit_margin + k_reset_slack >= entries) die("bad eviction count");
    start = Clock::now();
    for (std::size_t i = 0; i < evict_count + k_reset_slack; ++i) {
      if (::link(entry_path(i).c_str(), stash_path(i).c_str()) != 0) die("cannot link " + stash_path(i));
    }
    stash_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    auto made = ShardCacheHierarchy::create({tier});
    if (!made) die(made.error().message);
    hierarchy = *made;
  }

  std::string entry_path(std::size_t i) const { return local_dir + "/" + hash_hex(i) + ".tar"; }
  std::string stash_path(std::size_t i) const { return stash_dir + "/" + std::to_string(i); }

  // Entry i of `entries`, as an install leaves it (size, xattrs or sidecar), with mtime oldest_mtime + i.
  void make_entry(int dir_fd, std::size_t i) {
    const std::string hex = hash_hex(i);
    const std::string name = hex + ".tar";
    int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0664);
    if (fd < 0) die("cannot create " + name + ": " + std::strerror(errno));
    if (::ftruncate(fd, off_t(k_entry_bytes)) != 0) die("cannot size " + name);
    if (!records) {
      set_mtime(fd, i, name);
      return;
    }
    // The digest is not that of the bytes (a hit with the default `verify: size` only checks the size).
    const std::string digest = hash_hex(i + (std::size_t{1} << 40));
    const std::string key = "local/" + hex;
    const std::string size = std::to_string(k_entry_bytes);
    if (!sidecars) {
      if (::fsetxattr(fd, "user.datavo.sha256", digest.data(), digest.size(), 0) == 0 &&
          ::fsetxattr(fd, "user.datavo.key", key.data(), key.size(), 0) == 0 &&
          ::fsetxattr(fd, "user.datavo.size", size.data(), size.size(), 0) == 0) {
      } else if (errno == ENOTSUP && i == 0) {
        sidecars = true;  // decided on the first entry, before the threads start
      } else {
        die("cannot set the xattrs of " + name + ": " + std::strerror(errno));
      }
    }
    if (sidecars) {
      const std::string text = digest + " " + size + "\n";
      int side = ::openat(dir_fd, (hex + ".sha256").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0664);
      if (side < 0 || ::write(side, text.data(), text.size()) != ssize_t(text.size())) die("cannot write a sidecar");
      ::close(side);
    }
    set_mtime(fd, i, name);
  }

  // Entry i's mtime, oldest_mtime + i; closes fd.
  void set_mtime(int fd, std::size_t i, const std::string& name) const {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {time_t(oldest_mtime + std::int64_t(i)), 0}};
    if (::futimens(fd, times) != 0) die("cannot set the mtime of " + name);
    ::close(fd);
  }

  void generate() {
    int dir_fd = ::open(local_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) die("cannot open " + local_dir);
    make_entry(dir_fd, 0);
    const int threads = std::max(1, std::atoi(bench::env_or("DATAVO_BENCH_GEN_THREADS", "2").c_str()));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([this, dir_fd, t, threads] {
        for (std::size_t i = 1 + std::size_t(t); i < entries; i += std::size_t(threads)) make_entry(dir_fd, i);
      });
    }
    for (auto& w : workers) w.join();
    ::close(dir_fd);
  }

  // Back to all the entries: the evicted ones are linked back from the stash, with their old mtimes.
  void reset() {
    for (std::size_t i = 0; i < evict_count + k_reset_slack; ++i) {
      if (::link(stash_path(i).c_str(), entry_path(i).c_str()) != 0 && errno != EEXIST) {
        die("cannot restore " + entry_path(i));
      }
    }
  }

  bool exists(std::size_t i) const {
    struct stat st {};
    return ::stat(entry_path(i).c_str(), &st) == 0;
  }

  // The oldest `n` are gone, the next one is still there.
  bool evicted_the_oldest(std::size_t n) const { return !exists(0) && !exists(n - 1) && exists(n); }

  std::vector<std::string> gc_child_command() const {
    return {exe, "--gc-child", root, std::to_string(max_bytes), std::to_string(low_watermark)};
  }

  std::string floor_command() const {
    return "export LC_ALL=C; find '" + local_dir + "' -type f -printf '%T@ %p\\n' | sort -n | head -n " +
           std::to_string(evict_count) + " | cut -d' ' -f2- | xargs rm -f";
  }
};

Fixture* g_fixture = nullptr;

// The gc pass of BM_GcPass, in its own process: prints "<entries evicted> <seconds of the gc call>".
int gc_child(const char* root, const char* max_bytes, const char* low_watermark) {
  FolderTierOptions options;
  options.path = root;
  options.name = "evicted";
  options.max_bytes = Bytes{std::stoull(max_bytes)};
  options.low_watermark = std::stod(low_watermark);
  auto tier = FolderTier::create(options);
  if (!tier) die(tier.error().message);
  const auto start = Clock::now();
  auto report = (*tier)->gc(DryRun::no);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!report) die(report.error().message);
  std::printf("%llu %.6f\n", static_cast<unsigned long long>(report->entries_evicted), seconds);
  return 0;
}

void record_child(benchmark::State& state, const std::vector<ChildRun>& runs) {
  // One iteration per repetition: these are that iteration's figures.
  if (runs.empty()) return;
  state.counters["maxrss_MiB"] = runs.back().maxrss_mib;
  state.counters["cpu_s"] = runs.back().cpu_seconds;
}

void BM_GcPass(benchmark::State& state) {
  Fixture& f = *g_fixture;
  std::vector<ChildRun> runs;
  double evicted = 0, in_call = 0;
  for (auto _ : state) {
    f.reset();
    ChildRun run = run_child(f.gc_child_command(), f.dir.path + "/gc.out");
    unsigned long long n = 0;
    double seconds = 0;
    if (run.status != 0 || std::sscanf(run.out.c_str(), "%llu %lf", &n, &seconds) != 2 || n < f.evict_count ||
        n > f.evict_count + k_reset_slack || !f.evicted_the_oldest(n)) {
      state.SkipWithError(("the gc child failed or evicted other entries: " + run.out).c_str());
      break;
    }
    evicted = double(n);
    in_call = seconds;
    state.SetIterationTime(run.seconds);
    runs.push_back(run);
  }
  record_child(state, runs);
  state.counters["evicted"] = evicted;
  state.counters["gc_call_s"] = in_call;  // the gc() call alone, timed inside the child
  state.counters["entries"] = double(f.entries);
}
BENCHMARK(BM_GcPass)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_FindSortHeadRm(benchmark::State& state) {
  Fixture& f = *g_fixture;
  std::vector<ChildRun> runs;
  for (auto _ : state) {
    f.reset();
    ChildRun run = run_child({"/bin/sh", "-c", f.floor_command()}, f.dir.path + "/floor.out");
    if (run.status != 0 || !f.evicted_the_oldest(f.evict_count)) {
      state.SkipWithError("the pipeline failed or did not remove exactly the oldest N entries");
      break;
    }
    state.SetIterationTime(run.seconds);
    runs.push_back(run);
  }
  record_child(state, runs);
  state.counters["evicted"] = double(f.evict_count);
  state.counters["entries"] = double(f.entries);
}
BENCHMARK(BM_FindSortHeadRm)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

struct Sample {
  Clock::time_point end;
  Clock::duration latency;
};

// The syscalls of a hit on an inode this process has not checked yet, without Datavo.
bool raw_hit(const std::string& path) {
  static const struct timespec now_times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  char value[128];
  bool ok = ::fstat(fd, &st) == 0 && ::fgetxattr(fd, "user.datavo.size", value, sizeof value) > 0 &&
            ::fgetxattr(fd, "user.datavo.key", value, sizeof value) > 0 && ::futimens(fd, now_times) == 0;
  ::close(fd);
  return ok;
}

// Hits random surviving entries until `stop`; every call is recorded.
void hit_loop(Fixture& f, bool raw, const std::atomic<bool>& stop, std::vector<Sample>& samples,
              std::atomic<bool>& failed) {
  const std::size_t first = f.evict_count + k_hit_margin;
  const std::size_t span = f.entries - first;
  Fetcher no_fetch = [](ByteSink&) -> Result<Expectation> { return Error{ErrorCode::internal, "must not fetch"}; };
  std::uint64_t rng = 12345;
  while (!stop.load(std::memory_order_relaxed)) {
    const std::size_t index = first + splitmix64(rng) % span;
    // The name is made before the clock starts: it is the benchmark's, not the hit's.
    const std::string hex = hash_hex(index);
    const std::string path = f.local_dir + "/" + hex + ".tar";
    auto hash = ContentHash::parse(hex);
    const ShardKey key{Instance::local(), *hash};
    bool hit;
    const auto t0 = Clock::now();
    if (raw) {
      hit = raw_hit(path) || f.sidecars;
    } else {
      auto result = f.hierarchy->get_or_fetch(key, no_fetch);
      hit = result && result->source == ServedFrom::hit;
    }
    const auto t1 = Clock::now();
    if (!hit) {
      failed = true;
      return;
    }
    samples.push_back(Sample{t1, t1 - t0});
  }
}

double percentile_us(const std::vector<double>& sorted_us, double p) {
  if (sorted_us.empty()) return 0;
  return sorted_us[std::min(sorted_us.size() - 1, std::size_t(p * double(sorted_us.size())))];
}

// Arg 0: Datavo hits, no eviction running (a k_idle_window window). Arg 1: Datavo hits while the gc child runs (the
// window is the child's life). Args 2 and 3: the same for the syscall floor of a hit. The reported time is the
// window's length; the latencies are in the counters (microseconds). `longest_gap_ms` is the longest time in the
// window during which no hit completed; `min_slice_hits` the fewest hits completed in any twentieth of it.
void BM_HitLatency(benchmark::State& state) {
  Fixture& f = *g_fixture;
  if (!f.records) {
    state.SkipWithError("the hit rows need the entries' records (DATAVO_BENCH_RECORDS=none)");
    return;
  }
  const bool during_gc = state.range(0) % 2 == 1;
  const bool raw = state.range(0) >= 2;
  std::vector<double> latencies_us;
  double longest_gap_ms = 0, window_s = 0, pass_s = 0;
  std::size_t min_slice = 0;
  for (auto _ : state) {
    f.reset();
    std::vector<Sample> samples;
    samples.reserve(8'000'000);
    std::atomic<bool> stop{false}, failed{false};
    std::thread hitter(hit_loop, std::ref(f), raw, std::cref(stop), std::ref(samples), std::ref(failed));
    std::this_thread::sleep_for(k_hit_warmup);
    const auto window_start = Clock::now();
    bool pass_ok = true;
    if (during_gc) {
      ChildRun run = run_child(f.gc_child_command(), f.dir.path + "/gc-hits.out");
      unsigned long long n = 0;
      double seconds = 0;
      pass_ok = run.status == 0 && std::sscanf(run.out.c_str(), "%llu %lf", &n, &seconds) == 2 && n >= f.evict_count &&
                f.evicted_the_oldest(n);
      pass_s = seconds;
    } else {
      std::this_thread::sleep_for(k_idle_window);
    }
    const auto window_end = Clock::now();
    stop = true;
    hitter.join();
    if (failed || !pass_ok) {
      state.SkipWithError("a hit missed, or the gc pass failed");
      break;
    }
    window_s = std::chrono::duration<double>(window_end - window_start).count();
    std::vector<std::size_t> slices(k_slices, 0);
    auto last = window_start;
    for (const Sample& s : samples) {
      if (s.end < window_start || s.end - s.latency >= window_end) continue;  // overlaps the window: counted
      latencies_us.push_back(std::chrono::duration<double, std::micro>(s.latency).count());
      const auto end = std::min(s.end, window_end);
      longest_gap_ms = std::max(longest_gap_ms, std::chrono::duration<double, std::milli>(end - last).count());
      last = std::max(last, end);
      const double at = std::chrono::duration<double>(end - window_start).count() / window_s;
      slices[std::min(k_slices - 1, int(at * k_slices))]++;
    }
    longest_gap_ms = std::max(longest_gap_ms, std::chrono::duration<double, std::milli>(window_end - last).count());
    min_slice = *std::min_element(slices.begin(), slices.end());
    state.SetIterationTime(window_s);
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  state.counters["samples"] = double(latencies_us.size());
  state.counters["p50_us"] = percentile_us(latencies_us, 0.50);
  state.counters["p99_us"] = percentile_us(latencies_us, 0.99);
  state.counters["p999_us"] = percentile_us(latencies_us, 0.999);
  state.counters["max_us"] = latencies_us.empty() ? 0.0 : latencies_us.back();
  state.counters["longest_gap_ms"] = longest_gap_ms;
  state.counters["min_slice_hits"] = double(min_slice);
  state.counters["window_s"] = window_s;
  if (during_gc) state.counters["gc_call_s"] = pass_s;
  state.SetLabel(std::string(raw ? "syscall floor, " : "get_or_fetch, ") +
                 (during_gc ? "during a gc pass (another process)" : "no eviction running"));
}
BENCHMARK(BM_HitLatency)->DenseRange(0, 3)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--gc-child") == 0) return gc_child(argv[2], argv[3], argv[4]);
  return datavo::bench::run_benchmarks(argc, argv, g_fixture, [](const Fixture& fixture) {
    return std::vector<std::pair<std::string, std::string>>{
        {"bench_dir", fixture.dir.path},
        {"entries", std::to_string(fixture.entries)},
        {"entry_bytes", std::to_string(k_entry_bytes)},
        {"evicted_per_pass", std::to_string(fixture.evict_count)},
        {"digest_records", !fixture.records   ? "none"
                           : fixture.sidecars ? "sidecars"
                                              : "xattrs"},
        {"low_watermark", std::to_string(fixture.low_watermark)},
        {"build_seconds", std::to_string(fixture.build_seconds)},
        {"stash_seconds", std::to_string(fixture.stash_seconds)},
    };
  });
}
