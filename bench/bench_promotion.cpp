// Promotion of a 256 MiB shard from folder tier 2 into folder tier 1 (ShardCacheHierarchy::get_or_fetch on a
// tier-2 hit), against cp(1) of the same file between the same two directories, in the same run.
//
// Goal (the issue): promotion at least 0.9x cp's throughput. The folder tier fdatasyncs a staged entry before the
// rename that commits it (Durability::fsync_before_commit, the default) and cp does not sync, so four rows:
//   BM_Promote/fsync_before_commit  vs  BM_CpThenFdatasync   (both durable: apples to apples)
//   BM_Promote/no_sync              vs  BM_Cp                (neither syncs: apples to apples)
// "cp then fdatasync" is `cp SRC DST && sync -d DST` (coreutils: fdatasync of that one file). `sync -f` would
// syncfs the whole filesystem, flushing whatever else is dirty on a shared machine, so it is not used.
//
// Every row reads the source from the page cache (it was just written, and the machine has RAM to spare).
// Between iterations (untimed) the copy in tier 1 is removed: tier1->remove(key), or unlink for cp.
// BM_PromotePaired repeats both like-for-like pairs with a promotion and a copy back to back in each iteration.
// Environment: DATAVO_BENCH_DIR (default /var/tmp) must be on a real disk, not tmpfs.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

extern char** environ;

namespace {

using namespace datavo;

constexpr Bytes k_shard_size = MiB(256);
// A durable copy of 256 MiB takes seconds on a virtual disk; a page-cache copy a tenth of that.
constexpr int k_synced_iterations = 1;
constexpr int k_unsynced_iterations = 4;

[[noreturn]] void die(const std::string& what) { bench::die("bench_promotion", what); }

using bench::env_or;

struct TempDir : bench::ScratchDir {
  TempDir() : bench::ScratchDir("bench_promotion", "promotion") {}
};

// Runs argv[0] (looked up in PATH) and waits; true when it exits 0.
bool run(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

ShardKey make_key() {
  auto hash = ContentHash::parse("3b5d5c3712955042212316173ccf37be800c82c7b25e4ae3d2a1b1c1e5f1d0a2");
  if (!hash) die("bad content hash");
  return ShardKey{Instance::local(), *hash};
}

Result<Expectation> write_shard(ByteSink& sink) {
  std::vector<std::uint64_t> block(1 << 17);  // 1 MiB
  std::uint64_t x = 0x2545f4914f6cdd1dULL;
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

std::shared_ptr<FolderTier> make_tier(const std::string& path, const std::string& name, Durability durability) {
  FolderTierOptions options;
  options.path = path;
  options.name = name;
  options.durability = durability;
  auto created = FolderTier::create(options);
  if (!created) die(created.error().message);
  return *created;
}

struct Fixture {
  TempDir dir;
  ShardKey key = make_key();
  // Synced, so that no writeback of the source runs during the measurements.
  std::shared_ptr<FolderTier> tier2 = make_tier(dir.path + "/tier2", "tier2", Durability::fsync_before_commit);
  // Two tier objects on the same tier-1 directory, differing only in durability.
  std::shared_ptr<FolderTier> tier1_sync = make_tier(dir.path + "/tier1", "tier1", Durability::fsync_before_commit);
  std::shared_ptr<FolderTier> tier1_nosync = make_tier(dir.path + "/tier1", "tier1", Durability::no_sync);
  std::shared_ptr<ShardCacheHierarchy> hierarchy_sync, hierarchy_nosync;
  std::string source_path, cp_target;

  Fixture() {
    // The shard goes into tier 2 only, through a hierarchy of tier 2 alone.
    auto lower_only = ShardCacheHierarchy::create({tier2});
    if (!lower_only) die(lower_only.error().message);
    auto fetched = (*lower_only)->get_or_fetch(key, write_shard, Expectation{k_shard_size, std::nullopt});
    if (!fetched || fetched->source != ServedFrom::fetched) die("cannot install the shard in tier 2");
    source_path = tier2->entry_path(key);
    auto sync = ShardCacheHierarchy::create({tier1_sync, tier2});
    auto nosync = ShardCacheHierarchy::create({tier1_nosync, tier2});
    if (!sync || !nosync) die("cannot create the hierarchies");
    hierarchy_sync = *sync;
    hierarchy_nosync = *nosync;
    // cp copies into the directory the tier promotes into, under a name the tier does not treat as an entry.
    std::filesystem::create_directories(dir.path + "/tier1/local");
    cp_target = dir.path + "/tier1/local/cp-copy.tar";
    // Warm the source into the page cache for every row alike.
    int fd = ::open(source_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("cannot open " + source_path);
    std::vector<char> buffer(1 << 20);
    while (::read(fd, buffer.data(), buffer.size()) > 0) {
    }
    ::close(fd);
  }
};

Fixture* g_fixture = nullptr;

Result<Expectation> no_fetch(ByteSink&) { return Error{ErrorCode::internal, "must not fetch"}; }

// One promotion into tier 1 (removed first); true when get_or_fetch promoted.
bool promote_once(Fixture& f, bool durable) {
  auto result = (durable ? f.hierarchy_sync : f.hierarchy_nosync)->get_or_fetch(f.key, no_fetch);
  return result && result->source == ServedFrom::promoted && result->tier_index == 0;
}
void remove_promoted(Fixture& f) { (void)f.tier1_sync->remove(f.key); }

bool copy_once(Fixture& f, bool then_sync) {
  bool ok = run({"cp", f.source_path, f.cp_target});
  return ok && (!then_sync || run({"sync", "-d", f.cp_target}));
}
void remove_copy(Fixture& f) { ::unlink(f.cp_target.c_str()); }

// Arg 0: Durability::fsync_before_commit (default); arg 1: Durability::no_sync.
void BM_Promote(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const bool durable = state.range(0) == 0;
  for (auto _ : state) {
    state.PauseTiming();
    remove_promoted(f);
    state.ResumeTiming();
    if (!promote_once(f, durable)) {
      state.SkipWithError("get_or_fetch did not promote into tier 1");
      break;
    }
  }
  remove_promoted(f);  // the timer has stopped once the loop is done
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(k_shard_size.count()));
  state.SetLabel(durable ? "fsync_before_commit (default)" : "no_sync");
}
BENCHMARK(BM_Promote)->Arg(0)->Iterations(k_synced_iterations)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Promote)->Arg(1)->Iterations(k_unsynced_iterations)->UseRealTime()->Unit(benchmark::kMillisecond);

void copy_rows(benchmark::State& state, bool then_sync) {
  Fixture& f = *g_fixture;
  for (auto _ : state) {
    state.PauseTiming();
    remove_copy(f);
    state.ResumeTiming();
    if (!copy_once(f, then_sync)) {
      state.SkipWithError("cp (or sync -d) failed");
      break;
    }
  }
  remove_copy(f);
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(k_shard_size.count()));
}

void BM_Cp(benchmark::State& state) { copy_rows(state, false); }
BENCHMARK(BM_Cp)->Iterations(k_unsynced_iterations)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpThenFdatasync(benchmark::State& state) { copy_rows(state, true); }
BENCHMARK(BM_CpThenFdatasync)->Iterations(k_synced_iterations)->UseRealTime()->Unit(benchmark::kMillisecond);

// The like-for-like pairs again, interleaved finely: each iteration runs one promotion and one copy back to back
// (alternating which goes first), so that both see the same load. Arg 0: default durability vs cp + fdatasync;
// arg 1: no_sync vs plain cp. Counters: the median milliseconds per copy of each side over the iterations, and
// ratio = Datavo's throughput / cp's from those medians. Medians, because on the reference VM a copy now and
// then stalls for ~1 s (either side, at random), which would dominate a mean of a few iterations.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void BM_PromotePaired(benchmark::State& state) {
  Fixture& f = *g_fixture;
  const bool durable = state.range(0) == 0;
  std::vector<double> datavo_s, cp_s;
  bool datavo_first = true;
  for (auto _ : state) {
    remove_promoted(f);
    remove_copy(f);
    bool ok = true;
    for (int side = 0; side < 2; ++side) {
      const bool datavo_turn = (side == 0) == datavo_first;
      auto t0 = std::chrono::steady_clock::now();
      ok = ok && (datavo_turn ? promote_once(f, durable) : copy_once(f, durable));
      (datavo_turn ? datavo_s : cp_s)
          .push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!ok) {
      state.SkipWithError("a promotion or a copy failed");
      break;
    }
    datavo_first = !datavo_first;
    state.SetIterationTime(datavo_s.back() + cp_s.back());  // the pair; the counters carry the result
  }
  remove_promoted(f);
  remove_copy(f);
  const double datavo_median = median(datavo_s), cp_median = median(cp_s);
  state.counters["datavo_ms"] = datavo_median * 1e3;
  state.counters["cp_ms"] = cp_median * 1e3;
  state.counters["ratio"] = datavo_median > 0 ? cp_median / datavo_median : 0.0;
  state.SetLabel(durable ? "fsync_before_commit vs cp + fdatasync" : "no_sync vs cp");
}
// An even count, so that each side goes first equally often.
constexpr int k_paired_iterations = 4;
BENCHMARK(BM_PromotePaired)
    ->DenseRange(0, 1)
    ->Iterations(k_paired_iterations)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return datavo::bench::run_benchmarks(argc, argv, g_fixture, [](const Fixture& fixture) {
    return std::vector<std::pair<std::string, std::string>>{
        {"bench_dir", fixture.dir.path},
        {"shard_bytes", std::to_string(k_shard_size.count())},
    };
  });
}
