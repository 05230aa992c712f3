// Helpers shared by the cache-core benchmarks: fatal errors, a scratch directory on the bench disk and the main()
// that runs a program's benchmarks around its fixture.
// Header-only; each benchmark program includes it once.
#pragma once

#include <benchmark/benchmark.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace datavo::bench {

// Prints "<program>: <what>" and exits 1: a benchmark whose set-up failed has nothing to report.
[[noreturn]] inline void die(const char* program, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program, what.c_str());
  std::exit(1);
}

inline std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// A temporary directory under $DATAVO_BENCH_DIR (default /var/tmp: a real disk, where /tmp may be tmpfs),
// removed on destruction. Warns when it lands on tmpfs anyway, since the figures would then not be disk figures.
class ScratchDir {
 public:
  ScratchDir(const char* program, const char* tag) {
    constexpr std::uint32_t k_tmpfs_magic = 0x01021994;
    std::string pattern = env_or("DATAVO_BENCH_DIR", "/var/tmp") + "/datavo-bench-" + tag + ".XXXXXX";
    if (!::mkdtemp(pattern.data())) die(program, "mkdtemp " + pattern + ": " + std::strerror(errno));
    path = pattern;
    struct statfs fs {};
    if (::statfs(path.c_str(), &fs) == 0 && std::uint32_t(fs.f_type) == k_tmpfs_magic) {
      std::fprintf(stderr, "%s: WARNING: %s is on tmpfs, not a disk\n", program, path.c_str());
    }
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string path;
};

// The body of each benchmark program's main(): builds one Fixture (its set-up can take minutes), points `global` at
// it while the benchmarks run, and records `context(fixture)` (name, value pairs) in the report.
template <typename Fixture, typename Context>
int run_benchmarks(int argc, char** argv, Fixture*& global, Context context) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  {
    Fixture fixture;
    global = &fixture;
    for (const auto& [name, value] : context(fixture)) benchmark::AddCustomContext(name, value);
    benchmark::RunSpecifiedBenchmarks();
    global = nullptr;
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace datavo::bench
