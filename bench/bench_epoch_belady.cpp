// The offline side of the epoch-aware hit-ratio benchmark (bench/epoch_hit_ratio.sh; docs/BENCHMARKS.md, "Epoch-
// aware hit ratio"): the sequence of shard reads of E shuffled epochs, exactly as the library orders them
// (datavo::epoch_order, the order of all shards before the split among ranks, epochs 0..E-1 concatenated), and
// the hits of a cache of a given capacity over that sequence under four policies:
//   belady            demand paging (every miss is installed), evicting the resident with the furthest next use,
//                     one entry at a time until the new one fits: Belady's optimum (MIN) for entries of equal size
//   lru               the same, evicting the least recently used
//   belady_watermark  as the folder tier evicts: when a new entry would take the tier over max_bytes, evict (in
//   lru_watermark     the policy's order) until the entries and the new one fit in low_watermark * max_bytes
// Entries are all of one size (--entry-bytes; the benchmark packs shards of equal size), so bytes and counts agree:
// the capacity is floor(capacity_bytes / entry_bytes) entries.
//
// Usage: bench_epoch_belady --shards N --seed S --epochs E --entry-bytes B --capacity-bytes C
//                           [--low-watermark 0.9]
// Prints one JSON object: the inputs, "capacity_entries", "reads", and per policy {"hits", "hit_ratio",
// "epoch_hits": [per epoch], "miss_bytes"}.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "datavo/sample_stream.hpp"
#include "flag_pairs.hpp"

namespace {

struct Args {
  std::size_t shards = 200;
  std::uint64_t seed = 1;
  std::size_t epochs = 4;
  std::uint64_t entry_bytes = 0;
  std::uint64_t capacity_bytes = 0;
  double low_watermark = 0.9;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_epoch_belady: %s\nusage: bench_epoch_belady --shards N --seed S --epochs E --entry-bytes B "
               "--capacity-bytes C [--low-watermark W]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for_each_flag(argc, argv, usage, [&a](const std::string& flag, const std::string& text) {
    const char* value = text.c_str();
    if (flag == "--shards") {
      a.shards = std::strtoull(value, nullptr, 10);
    } else if (flag == "--seed") {
      a.seed = std::strtoull(value, nullptr, 10);
    } else if (flag == "--epochs") {
      a.epochs = std::strtoull(value, nullptr, 10);
    } else if (flag == "--entry-bytes") {
      a.entry_bytes = std::strtoull(value, nullptr, 10);
    } else if (flag == "--capacity-bytes") {
      a.capacity_bytes = std::strtoull(value, nullptr, 10);
    } else if (flag == "--low-watermark") {
      a.low_watermark = std::strtod(value, nullptr);
    } else {
      return false;
    }
    return true;
  });
  if (a.shards == 0 || a.epochs == 0 || a.entry_bytes == 0 || a.capacity_bytes < a.entry_bytes) {
    usage("need --shards, --epochs > 0 and --capacity-bytes >= --entry-bytes > 0");
  }
  if (!(a.low_watermark > 0.0 && a.low_watermark <= 1.0)) usage("--low-watermark must be in (0, 1]");
  return a;
}

enum class Policy { belady, lru };
enum class Watermark { none, folder_tier };

struct Outcome {
  std::size_t hits = 0;
  std::vector<std::size_t> epoch_hits;
};

// next_use[i]: the index of the next read of the shard read at i; size() when there is none.
std::vector<std::size_t> next_uses(const std::vector<std::size_t>& sequence, std::size_t shards) {
  std::vector<std::size_t> next(sequence.size(), sequence.size());
  std::vector<std::size_t> seen(shards, sequence.size());
  for (std::size_t i = sequence.size(); i-- > 0;) {
    next[i] = seen[sequence[i]];
    seen[sequence[i]] = i;
  }
  return next;
}

// The resident to evict: the furthest next use (belady) or the oldest last use (lru).
std::size_t victim(const std::vector<std::size_t>& resident, const std::vector<std::size_t>& next_use_of,
                   const std::vector<std::size_t>& last_use_of, Policy policy) {
  std::size_t best = 0;
  for (std::size_t r = 1; r < resident.size(); ++r) {
    const std::size_t a = resident[r], b = resident[best];
    const bool better = policy == Policy::belady ? next_use_of[a] > next_use_of[b] : last_use_of[a] < last_use_of[b];
    if (better) best = r;
  }
  return best;
}

Outcome simulate(const Args& args, const std::vector<std::size_t>& sequence, Policy policy, Watermark watermark) {
  const std::size_t capacity = args.capacity_bytes / args.entry_bytes;
  // With the watermark, a miss that would not fit makes room down to low_watermark * max_bytes, the new entry
  // included (the folder tier counts the staged download in its usage when it evicts).
  const auto low = static_cast<std::size_t>(double(args.capacity_bytes) * args.low_watermark) / args.entry_bytes;
  const std::size_t keep = watermark == Watermark::none ? capacity - 1 : (low == 0 ? 0 : low - 1);
  const std::vector<std::size_t> next = next_uses(sequence, args.shards);
  std::vector<std::size_t> next_use_of(args.shards, 0), last_use_of(args.shards, 0);
  std::vector<bool> present(args.shards, false);
  std::vector<std::size_t> resident;
  Outcome out;
  out.epoch_hits.assign(args.epochs, 0);
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    const std::size_t shard = sequence[i];
    if (present[shard]) {
      ++out.hits;
      ++out.epoch_hits[i / args.shards];
    } else {
      if (resident.size() + 1 > capacity) {
        while (resident.size() > keep) {
          const std::size_t r = victim(resident, next_use_of, last_use_of, policy);
          present[resident[r]] = false;
          resident.erase(resident.begin() + static_cast<std::ptrdiff_t>(r));
        }
      }
      resident.push_back(shard);
      present[shard] = true;
    }
    next_use_of[shard] = next[i];
    last_use_of[shard] = i;
  }
  return out;
}

void print_outcome(const char* name, const Outcome& o, const Args& args, std::size_t reads, bool last) {
  std::printf("  \"%s\": {\"hits\": %zu, \"hit_ratio\": %.4f, \"miss_bytes\": %llu, \"epoch_hits\": [", name, o.hits,
              double(o.hits) / double(reads), static_cast<unsigned long long>((reads - o.hits) * args.entry_bytes));
  for (std::size_t e = 0; e < o.epoch_hits.size(); ++e) std::printf("%s%zu", e ? ", " : "", o.epoch_hits[e]);
  std::printf("]}%s\n", last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::vector<std::size_t> sequence;
  for (std::size_t e = 0; e < args.epochs; ++e) {
    const auto order = datavo::epoch_order(args.shards, datavo::ShardOrder::shuffled, args.seed, e);
    sequence.insert(sequence.end(), order.begin(), order.end());
  }
  std::printf(
      "{\n  \"shards\": %zu, \"seed\": %llu, \"epochs\": %zu, \"entry_bytes\": %llu, \"capacity_bytes\": %llu,\n",
      args.shards, static_cast<unsigned long long>(args.seed), args.epochs,
      static_cast<unsigned long long>(args.entry_bytes), static_cast<unsigned long long>(args.capacity_bytes));
  std::printf("  \"low_watermark\": %.3f, \"capacity_entries\": %llu, \"reads\": %zu,\n", args.low_watermark,
              static_cast<unsigned long long>(args.capacity_bytes / args.entry_bytes), sequence.size());
  print_outcome("belady", simulate(args, sequence, Policy::belady, Watermark::none), args, sequence.size(), false);
  print_outcome("lru", simulate(args, sequence, Policy::lru, Watermark::none), args, sequence.size(), false);
  print_outcome("belady_watermark", simulate(args, sequence, Policy::belady, Watermark::folder_tier), args,
                sequence.size(), false);
  print_outcome("lru_watermark", simulate(args, sequence, Policy::lru, Watermark::folder_tier), args, sequence.size(),
                true);
  std::printf("}\n");
  return 0;
}
