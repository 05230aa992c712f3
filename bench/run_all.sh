#!/usr/bin/env bash
# Builds the benchmarks in Release (in build-bench/) and runs all three programs, each measuring Datavo beside its
# floor or peer in one process, with repetitions interleaved at random; then prints the Markdown tables of
# docs/BENCHMARKS.md (medians over the repetitions, and their ratios).
#
# Usage: bench/run_all.sh [REPETITIONS]   (default 9; the programs take ~4.5 min on 2 cores, a cold build ~6 more)
# Environment:
#   DATAVO_BENCH_DIR     parent of the temporary directories (default /var/tmp; must be a disk, not tmpfs)
#   DATAVO_BENCH_PYTHON  a python3 that imports fsspec (default /usr/bin/python3, for Debian's python3-fsspec)
#   DATAVO_BENCH_BUILD   build directory (default <repo>/build-bench)
# Raw results (console and JSON) are kept in $DATAVO_BENCH_BUILD/bench-results/.
# Run on their own (docs/BENCHMARKS.md, sections 5 and 6; they need cli/datavo in the same build):
#   bench/epoch_hit_ratio.sh 1 2 3   the epoch-aware hit ratio against Belady and LRU (issue 18), about 70 s a seed
#   bench/prefetch_stalls.sh 5       the consumer's shard wait behind a throttled origin (issue 18), about 2.5 min
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
reps="${1:-9}"
python="${DATAVO_BENCH_PYTHON:-/usr/bin/python3}"
parent="${DATAVO_BENCH_DIR:-/var/tmp}"
# Upper bounds per program, so that a wedged filesystem cannot hang the run.
limit_hit=300 limit_promotion=420 limit_eviction=600

echo "== build (Release, $build)" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDATAVO_BUILD_TESTS=OFF >&2
make -C "$build" -j1 bench_hit_path bench_promotion bench_eviction >&2

if ! "$python" -c 'import fsspec' 2>/dev/null; then
  echo "run_all.sh: $python cannot import fsspec (set DATAVO_BENCH_PYTHON); the fsspec rows will be skipped" >&2
fi

work="$(mktemp -d "$parent/datavo-bench-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fstype="$(df --output=fstype "$work" | tail -n 1 | tr -d ' ')"
if [ "$fstype" = tmpfs ]; then
  echo "run_all.sh: WARNING: $work is on tmpfs; set DATAVO_BENCH_DIR to a directory on a disk" >&2
fi
results="$build/bench-results"
mkdir -p "$results"

# Each program makes its temporary directory inside $work, removed by the trap even if a program is killed.
export DATAVO_BENCH_DIR="$work" DATAVO_BENCH_PYTHON="$python"
flags=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
       --benchmark_enable_random_interleaving=true --benchmark_out_format=json)
for name in hit_path promotion eviction; do
  limit_var="limit_${name%_path}"
  echo "== bench_$name (${reps} repetitions, at most ${!limit_var} s)" >&2
  timeout "${!limit_var}" "$build/bench/bench_$name" "${flags[@]}" --benchmark_out="$results/$name.json" \
    >"$results/$name.txt" 2>&1 || { cat "$results/$name.txt" >&2; echo "run_all.sh: bench_$name failed" >&2; exit 1; }
done

{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), " \
       "$(free -g | awk '/^Mem:/ {print $2}') GiB RAM, Linux $(uname -r)"
  echo "Bench directory filesystem: $fstype on $(df --output=source "$work" | tail -n 1)" \
       "(mount options: $(findmnt -n -o OPTIONS --target "$work"))"
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "Tools: $(g++ --version | head -n 1); $(cp --version | head -n 1);" \
       "fsspec $("$python" -c 'import fsspec; print(fsspec.__version__)' 2>/dev/null || echo missing)"
  echo
} >"$results/machine.txt"
cat "$results/machine.txt"

"$python" - "$results" <<'PY'
import json, os, sys

results = sys.argv[1]
UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(name):
    with open(os.path.join(results, name + ".json")) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        key = "/".join(p for p in b["run_name"].split("/")
                       if not p.startswith("iterations:") and p not in ("real_time", "manual_time"))
        rows.setdefault(key, {})[b["aggregate_name"]] = b
    return rows


def ns(row, agg="median", field="real_time"):
    b = row[agg]
    return b[field] * UNIT_NS[b["time_unit"]]


def cv(row):
    b = row.get("cv")
    return f"{b['real_time'] * 100:.0f}%" if b else "n/a"


def fmt_time(t_ns):
    if t_ns >= 1e6:
        return f"{t_ns / 1e6:.1f} ms"
    if t_ns >= 1e3:
        return f"{t_ns / 1e3:.2f} us"
    return f"{t_ns:.0f} ns"


def met(ok):
    return "**met**" if ok else "**NOT met**"


hit = load("hit_path")
floor = ns(hit["BM_SyscallFloor"])
floor_cpu = ns(hit["BM_SyscallFloor"], field="cpu_time")
print("### 1. Hit path (per call, median of the repetitions)\n")
print("| Row | Median per call (wall) | CV | vs syscall floor | Median CPU per call | CPU vs floor |")
print("|---|---:|---:|---:|---:|---:|")
hit_rows = [("BM_SyscallFloor", "syscall floor: open, fstat, futimens(UTIME_NOW), close"),
            ("BM_SyscallFloorNoTouch", "syscall floor without the bump: open, fstat, close"),
            ("BM_FolderTierOpenHit", "ShardCacheTier::open (tier alone)"),
            ("BM_HierarchyGetOrFetchHit", "ShardCacheHierarchy::get_or_fetch, top-tier hit (hot: mtime fresh)"),
            ("BM_HierarchyGetOrFetchHitTouching", "the same with lru_resolution 0 (a bump on every hit)"),
            ("BM_FsspecSimplecacheHit/1", "fsspec simplecache hit, fs.open(path).close()"),
            ("BM_FsspecSimplecacheHit/0", "fsspec simplecache hit, with fsspec.open('simplecache::file://...')")]
for key, label in hit_rows:
    if key not in hit:
        print(f"| {label} | skipped | | | | |")
    elif key.startswith("BM_Fsspec"):  # timed by the child itself: no CPU time of ours to compare
        print(f"| {label} | {fmt_time(ns(hit[key]))} | {cv(hit[key])} | {ns(hit[key]) / floor:.2f}x | n/a | n/a |")
    else:
        cpu = ns(hit[key], field="cpu_time")
        print(f"| {label} | {fmt_time(ns(hit[key]))} | {cv(hit[key])} | {ns(hit[key]) / floor:.2f}x | "
              f"{fmt_time(cpu)} | {cpu / floor_cpu:.2f}x |")
datavo = ns(hit["BM_HierarchyGetOrFetchHit"])
datavo_cpu = ns(hit["BM_HierarchyGetOrFetchHit"], field="cpu_time")
print(f"\nGoal get_or_fetch <= 1.5x the syscall floor: {datavo / floor:.2f}x in wall time, "
      f"{met(datavo / floor <= 1.5)} ({datavo_cpu / floor_cpu:.2f}x in CPU time).")
print(f"Goal (issue 18) a hot hit <= 1.0x the floor with futimens: {datavo / floor:.2f}x in wall time, "
      f"{met(datavo / floor <= 1.0)}; against open+fstat+close: "
      f"{datavo / ns(hit['BM_SyscallFloorNoTouch']):.2f}x.")
if "BM_HitPaired" in hit:
    m = hit["BM_HitPaired"]["median"]
    print(f"Paired (the two interleaved every 64 calls in one loop, medians of the per-repetition means): "
          f"get_or_fetch {m['datavo_ns'] / 1e3:.2f} us vs floor {m['floor_ns'] / 1e3:.2f} us per call, "
          f"{m['ratio_wall']:.2f}x in wall time, {met(m['ratio_wall'] <= 1.5)} "
          f"({m['datavo_cpu_ns'] / 1e3:.2f} vs {m['floor_cpu_ns'] / 1e3:.2f} us CPU, {m['ratio_cpu']:.2f}x); "
          f"against open+fstat+close ({m['floor_plain_ns'] / 1e3:.2f} us): {m['ratio_plain_wall']:.2f}x in wall "
          f"time, {m['ratio_plain_cpu']:.2f}x in CPU time.")
for key, label in (("BM_FsspecSimplecacheHit/1", "fs.open"), ("BM_FsspecSimplecacheHit/0", "fsspec.open(url)")):
    if key in hit:
        print(f"fsspec simplecache ({label}) takes {ns(hit[key]) / datavo:.1f}x the time of a Datavo hit.")
if "BM_StatsFlush" in hit:
    print(f"The stats flush that one get_or_fetch call in every 2 s runs inline: "
          f"{fmt_time(ns(hit['BM_StatsFlush']))} (CV {cv(hit['BM_StatsFlush'])}).")

promo = load("promotion")
size_mib = 256
print("\n### 2. Promotion of a 256 MiB shard, tier 2 -> tier 1 (median of the repetitions)\n")
print("| Row | Median time | Throughput | CV |")
print("|---|---:|---:|---:|")
promo_rows = [("BM_Promote/0", "get_or_fetch promotion, Durability::fsync_before_commit (default)"),
              ("BM_CpThenFdatasync", "cp, then `sync -d` (fdatasync) of the copy"),
              ("BM_Promote/1", "get_or_fetch promotion, Durability::no_sync"),
              ("BM_Cp", "cp")]
for key, label in promo_rows:
    t = ns(promo[key])
    print(f"| {label} | {fmt_time(t)} | {size_mib / (t / 1e9):.0f} MiB/s | {cv(promo[key])} |")
print("\n| Comparison (throughput ratio, Datavo / cp) | Ratio | Goal >= 0.9x |")
print("|---|---:|---|")
pairs = (("BM_Promote/0", "BM_CpThenFdatasync", "default vs cp + fdatasync (both durable: apples to apples)"),
         ("BM_Promote/1", "BM_Cp", "no_sync vs cp (neither syncs: apples to apples)"),
         ("BM_Promote/0", "BM_Cp", "default vs plain cp (the goal as worded; not like for like)"))
for a, b, label in pairs:
    r = ns(promo[b]) / ns(promo[a])
    print(f"| {label} | {r:.2f}x | {met(r >= 0.9)} |")
for arg, label in ((0, "paired in each iteration: default vs cp + fdatasync"),
                   (1, "paired in each iteration: no_sync vs cp")):
    key = f"BM_PromotePaired/{arg}"
    if key in promo:
        m = promo[key]["median"]
        print(f"| {label} (Datavo {m['datavo_ms']:.0f} ms, cp {m['cp_ms']:.0f} ms) | {m['ratio']:.2f}x | "
              f"{met(m['ratio'] >= 0.9)} |")

ev = load("eviction")
gc, find = ns(ev["BM_GcPass"]), ns(ev["BM_FindSortHeadRm"])
evicted = int(ev["BM_GcPass"]["median"].get("evicted", 0))
print(f"\n### 3. Eviction, 100,000 entries of 1 KiB, one pass removing {evicted} (median of the repetitions)\n")
print("| Row | Median time | CV | vs floor |")
print("|---|---:|---:|---:|")
print(f"| ShardCacheTier::gc(DryRun::no) | {fmt_time(gc)} | {cv(ev['BM_GcPass'])} | {gc / find:.2f}x |")
print(f"| find -printf '%T@ %p' \\| sort -n \\| head -n N \\| cut \\| xargs rm -f | {fmt_time(find)} | "
      f"{cv(ev['BM_FindSortHeadRm'])} | 1.00x |")
print(f"\ngc takes {gc / find:.2f}x the time of the shell floor ({find / gc:.2f}x its speed).")
print("\n| Hit latency (us; each column is the median over the repetitions) | p50 | p99 | p99.9 | max | calls > 1 ms "
      "| samples |")
print("|---|---:|---:|---:|---:|---:|---:|")
for arg, label in ((0, "get_or_fetch, no eviction running"), (1, "get_or_fetch, during a gc pass"),
                   (2, "syscall floor, no eviction running"), (3, "syscall floor, during a gc pass")):
    m = ev[f"BM_HitLatency/{arg}"]["median"]
    print(f"| {label} | {m['p50_us']:.1f} | {m['p99_us']:.1f} | {m['p999_us']:.0f} | {m['max_us']:.0f} | "
          f"{m['over_1ms']:.0f} | {m['samples']:.0f} |")
idle, busy = ev["BM_HitLatency/0"]["median"]["p99_us"], ev["BM_HitLatency/1"]["median"]["p99_us"]
print(f"\np99 of a hit during a gc pass / with no eviction: {busy / idle:.2f}x.")
if "BM_InstallIntoLargeTier/0" in ev:
    free, budget = ns(ev["BM_InstallIntoLargeTier/0"]), ns(ev["BM_InstallIntoLargeTier/1"])
    print("\n| One 1 KiB install (get_or_fetch miss, no_sync) into the 100,000-entry tier | Median time | CV |")
    print("|---|---:|---:|")
    print(f"| no max_bytes | {fmt_time(free)} | {cv(ev['BM_InstallIntoLargeTier/0'])} |")
    print(f"| max_bytes set, far under budget (nothing evicted) | {fmt_time(budget)} | "
          f"{cv(ev['BM_InstallIntoLargeTier/1'])} |")
    print(f"\nA budget makes every install {budget / free:.0f}x slower on a tier of 100,000 entries.")
PY
