#!/usr/bin/env bash
# F13 (issue 7), issue 18: an eviction pass over 1,000,000 or 10,000,000 entries against the find | sort | rm floor,
# its peak RSS, and hit latency from another process during the pass (bench/bench_eviction_million.cpp). Builds the
# program in Release, mounts a fresh filesystem for the tier, runs the program there (Datavo and the floor
# interleaved at random in one run, on the same entries of the same filesystem), prints the Markdown tables of
# docs/BENCHMARKS.md, unmounts.
#
# Usage: bench/eviction_million.sh [REPETITIONS]     (default 9; root, for mount; ~10-20 min on 2 loaded cores)
#   10 million entries, gc rows only, on a tmpfs without records (about 11 GB of kernel memory while it runs):
#   DATAVO_BENCH_FS=tmpfs DATAVO_BENCH_ENTRIES=10000000 DATAVO_BENCH_RECORDS=none DATAVO_BENCH_FILTER=gc \
#     bench/eviction_million.sh 3
# Environment:
#   DATAVO_BENCH_FS      ext4 (default): a sparse image file under DATAVO_BENCH_DIR, mkfs.ext4 with 512-byte inodes
#                        (so that the three xattrs of an entry stay in its inode; with the default 256 each entry
#                        takes a 4 KiB xattr block) and enough inodes, loop-mounted without `discard`;
#                        tmpfs: a fresh tmpfs mount (no disk at all)
#   DATAVO_BENCH_DIR     where the image and the mount point go (default /var/tmp, the disk)
#   DATAVO_BENCH_ENTRIES entry count (default 1000000)
#   DATAVO_BENCH_EVICT_PERCENT  the share of the entries a pass evicts (default 1)
#   DATAVO_BENCH_RECORDS xattrs (default; sidecars where there are none) or none (no record: the hit rows are skipped)
#   DATAVO_BENCH_FILTER  all (default) or gc: the gc pass and the floor only, no hit-latency rows
#   DATAVO_BENCH_BUILD   build directory (default <repo>/build-bench); DATAVO_JOBS make's -j (default 1)
# Raw results (console and JSON) are kept in $DATAVO_BENCH_BUILD/bench-results/eviction_million.{txt,json}.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DATAVO_BENCH_BUILD:-$root/build-bench}"
reps="${1:-9}"
fs="${DATAVO_BENCH_FS:-ext4}"
parent="${DATAVO_BENCH_DIR:-/var/tmp}"
entries="${DATAVO_BENCH_ENTRIES:-1000000}"
case "${DATAVO_BENCH_FILTER:-all}" in
  all) filter='.' ;;
  gc) filter='BM_GcPass|BM_FindSortHeadRm' ;;
  *) echo "eviction_million.sh: DATAVO_BENCH_FILTER is all or gc" >&2; exit 2 ;;
esac
limit=5400  # seconds: an upper bound, so that a wedged filesystem cannot hang the run

[ "$(id -u)" = 0 ] || { echo "eviction_million.sh: needs root (it mounts the tier's filesystem)" >&2; exit 2; }
case "$fs" in ext4 | tmpfs) ;; *) echo "eviction_million.sh: DATAVO_BENCH_FS is ext4 or tmpfs" >&2; exit 2 ;; esac

echo "== build (Release, $build)" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDATAVO_BUILD_TESTS=OFF >&2
make -C "$build" -j"${DATAVO_JOBS:-1}" bench_eviction_million >&2

work="$(mktemp -d "$parent/datavo-bench-f13.XXXXXX")"
mnt="$work/mnt"
mkdir "$mnt"
cleanup() {
  if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$fs" = ext4 ]; then
  # 1.25 inodes per entry leaves room for the stash's names (hard links need no inode) and the tier's own files.
  # 8 GiB (sparse) per million entries: inode tables and directory blocks, with room.
  truncate -s $(((entries + 999999) / 1000000 * 8))G "$work/tier.img"
  mkfs.ext4 -q -F -I 512 -N $((entries + entries / 4 + 1000)) "$work/tier.img"
  # noinit_itable: no background zeroing of inode tables competing with the measurements.
  mount -o loop,noinit_itable "$work/tier.img" "$mnt"
else
  # Inodes for the entries, the stash's names and the tier's own files; the tmpfs of Linux 6.6+ charges xattrs to
  # the same budget.
  mount -t tmpfs -o size=4G,nr_inodes=$((3 * entries + 1000)) tmpfs "$mnt"
fi
results="$build/bench-results"
mkdir -p "$results"

echo "== bench_eviction_million ($entries entries, $reps repetitions, at most $limit s)" >&2
DATAVO_BENCH_DIR="$mnt" DATAVO_BENCH_ENTRIES="$entries" timeout "$limit" "$build/bench/bench_eviction_million" \
  --benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true --benchmark_filter="$filter" \
  --benchmark_enable_random_interleaving=true --benchmark_out_format=json \
  --benchmark_out="$results/eviction_million.json" >"$results/eviction_million.txt" 2>&1 ||
  { cat "$results/eviction_million.txt" >&2; echo "eviction_million.sh: the benchmark failed" >&2; exit 1; }

echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), Linux $(uname -r)"
echo "Tier filesystem: $(findmnt -n -o FSTYPE,SOURCE,OPTIONS --target "$mnt")"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Tools: $(find --version | head -n 1); $(sort --version | head -n 1)"
echo

python3 - "$results/eviction_million.json" <<'PY'
import json, sys

with open(sys.argv[1]) as f:
    data = json.load(f)
ctx = data["context"]
rows, each = {}, {}  # aggregates by name; the repetitions themselves
for b in data["benchmarks"]:
    key = "/".join(p for p in b["run_name"].split("/") if not p.startswith("iterations:") and p != "manual_time")
    if b.get("run_type") == "aggregate":
        rows.setdefault(key, {})[b["aggregate_name"]] = b
    elif not b.get("error_occurred"):
        each.setdefault(key, []).append(b)


def ms(key, agg="median"):
    b = rows[key][agg]
    return b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]


def cv(key):
    return f"{rows[key]['cv']['real_time'] * 100:.0f}%" if "cv" in rows[key] else "n/a"


def c(key, name, agg="median"):
    return rows[key][agg][name]


gc, fl = "BM_GcPass", "BM_FindSortHeadRm"
print(f"Entries: {int(ctx['entries']):,} ({ctx['digest_records']}), one pass evicting {int(c(gc, 'evicted')):,} "
      f"(low watermark {float(ctx['low_watermark']):.2f}); "
      f"built in {float(ctx['build_seconds']):.0f} s, stash of hard links in {float(ctx['stash_seconds']):.0f} s; "
      f"{rows[gc]['median']['repetitions']} repetitions.\n")
print("| Row (a child process each) | Median wall | CV | vs floor | Median CPU (user+sys) | Median peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
for key, label in ((gc, "FolderTier::gc(DryRun::no) (`datavo cache gc`'s pass)"),
                   (fl, "find -printf '%T@ %p' \\| sort -n \\| head -n N \\| cut \\| xargs rm -f")):
    print(f"| {label} | {ms(key):.0f} ms | {cv(key)} | {ms(key) / ms(fl):.2f}x | {c(key, 'cpu_s'):.2f} s | "
          f"{c(key, 'maxrss_MiB'):.1f} MiB |")
ratio = ms(gc) / ms(fl)
print(f"\nGoal gc pass <= 1.5x the floor's time: {ratio:.2f}x, {'**met**' if ratio <= 1.5 else '**NOT met**'} "
      f"(CPU {c(gc, 'cpu_s') / c(fl, 'cpu_s'):.2f}x; the gc() call alone, inside the child: "
      f"{c(gc, 'gc_call_s') * 1e3:.0f} ms).\n")
if "BM_HitLatency/0" not in rows:
    sys.exit(0)
print("| Hit latency (each cell the median over the repetitions) | p50 us | p99 us | p99.9 us | max us | "
      "longest gap ms | fewest hits in a 1/20 of the window | samples | window s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for arg, label in ((0, "get_or_fetch, no eviction running"), (1, "get_or_fetch, during a gc pass in another process"),
                   (2, "syscall floor, no eviction running"), (3, "syscall floor, during a gc pass")):
    k = f"BM_HitLatency/{arg}"
    print(f"| {label} | {c(k, 'p50_us'):.1f} | {c(k, 'p99_us'):.1f} | {c(k, 'p999_us'):.0f} | {c(k, 'max_us'):.0f} | "
          f"{c(k, 'longest_gap_ms'):.1f} | {c(k, 'min_slice_hits'):.0f} | {c(k, 'samples'):.0f} | "
          f"{c(k, 'window_s'):.2f} |")
worst = max(b["longest_gap_ms"] for b in each["BM_HitLatency/1"])
worst_max = max(b["max_us"] for b in each["BM_HitLatency/1"]) / 1e3
print(f"\nDuring the pass: p99 {c('BM_HitLatency/1', 'p99_us') / c('BM_HitLatency/0', 'p99_us'):.2f}x idle "
      f"(floor {c('BM_HitLatency/3', 'p99_us') / c('BM_HitLatency/2', 'p99_us'):.2f}x); longest stretch with no hit "
      f"completing, worst repetition: {worst:.1f} ms (slowest hit {worst_max:.1f} ms), against a pass of {c('BM_HitLatency/1', 'window_s'):.1f} s.")
PY
