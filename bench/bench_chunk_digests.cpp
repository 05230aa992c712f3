// The cost of chunk digests (docs/protocol.md, "Chunk digests"; issue 19), in one run, alternating the two sides:
//
//   build:  the origin's key-group tar build (Store::materialise_key_group: objects read, tar written, hashed,
//           fsynced, renamed), with chunk digests, against the same pass with the whole-shard SHA-256 only (the
//           pass as it was before chunk digests, rebuilt here from the same TarWriter, objects and fsync). Wall and
//           CPU seconds of each build.
//   verify: the client's hashing CPU per GiB of download: today's whole-shard SHA-256 only, against the
//           ChunkVerifyingSink (what chunk digests add on the download thread) plus that same whole-shard SHA-256.
//           In memory (no disk, no network), 256 KiB writes as the transport delivers them.
//
// Usage: bench_chunk_digests [--dir DIR] [--shard-mib N] [--rounds R] [--verify-gib G]
// Prints one JSON object: per side, every round and the median.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "datavo/chunk_digests.hpp"
#include "datavo/tar.hpp"
#include "flag_pairs.hpp"
#include "net/chunk_verifying_sink.hpp"
#include "origin/store.hpp"
#include "util/atomic_file.hpp"
#include "util/fs.hpp"
#include "util/temp_name.hpp"

namespace {

using namespace datavo;

double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Timing {
  std::vector<double> wall, cpu;
};

std::string json_list(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The tar build as it was before chunk digests: the same TarWriter pass with the whole-shard SHA-256 only.
Result<Sha256> build_whole_only(const origin::Store& store, const origin::Revision& rev, const std::string& target) {
  auto file = util::AtomicFile::create(util::temp_name_beside(target), 0644);
  if (!file) return file.error();
  Sha256Hasher hasher;
  const int out = file->fd();
  TarWriter writer([&](std::span<const std::byte> bytes) -> Result<void> {
    hasher.update(bytes.data(), bytes.size());
    return util::write_all(out, bytes.data(), bytes.size(), target);
  });
  for (const auto& sample : rev.shards[0].samples) {
    const origin::ObjectRef& object = sample.objects[0];
    const std::string path = store.object_path(object.sha256);
    util::UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    DATAVO_TRY(writer.begin_member(sample.id + "." + rev.keys[0], Bytes{object.size}));
    DATAVO_TRY(util::read_chunks(in.get(), 0, object.size, path,
                                 [&](std::span<const char> chunk) { return writer.write(std::as_bytes(chunk)); }));
  }
  DATAVO_TRY(writer.finish());
  DATAVO_TRY(file->sync());
  Sha256 sha = hasher.finish();
  DATAVO_TRY(util::write_file_atomic(target + ".sha256", sha.hex() + "\n", 0644));
  auto committed = file->commit(target, util::AtomicFile::Replace::yes);
  if (!committed) return committed.error();
  return sha;
}

// A store holding one shard of `shard_mib` MiB (samples of 4 MiB of random bytes, one key).
origin::Revision make_store(const origin::Store& store, std::uint64_t shard_mib) {
  origin::Revision rev{"bench", "train", "bench/train@mbench", 1, {"bin"}, {origin::ShardRecord{}}};
  std::mt19937_64 rng(19);
  std::string payload(std::size_t{4} << 20, '\0');
  for (std::uint64_t i = 0; i < shard_mib / 4; ++i) {
    for (std::size_t j = 0; j + 8 <= payload.size(); j += 8) {
      const std::uint64_t word = rng();
      std::memcpy(payload.data() + j, &word, 8);
    }
    char id[32];
    std::snprintf(id, sizeof id, "s_%06llu", static_cast<unsigned long long>(i));
    auto put = store.put_object(std::as_bytes(std::span(payload))).value();
    rev.shards[0].samples.push_back(origin::SampleRecord{id, {put.ref}});
  }
  return rev;
}

void bench_build(const std::string& dir, std::uint64_t shard_mib, int rounds, Timing& with, Timing& without) {
  auto store = origin::Store::open(dir + "/store", origin::Store::Create::yes).value();
  const origin::Revision rev = make_store(store, shard_mib);
  const auto hash = ContentHash::parse(std::string(64, 'b')).value();
  const std::vector<std::string> keys = {"bin"};
  const std::string baseline_target = store.tars_dir() + "/baseline.tar";
  for (int round = 0; round < rounds; ++round) {
    for (int side = 0; side < 2; ++side) {  // alternate, so that drift hits both sides alike
      const bool chunks = (side + round) % 2 == 0;
      ::sync();
      const double w0 = wall_seconds(), c0 = cpu_seconds();
      if (chunks) {
        store.materialise_key_group(rev, 0, keys, hash, k_default_chunk_size).value();
      } else {
        build_whole_only(store, rev, baseline_target).value();
      }
      Timing& t = chunks ? with : without;
      t.wall.push_back(wall_seconds() - w0);
      t.cpu.push_back(cpu_seconds() - c0);
      std::filesystem::remove(chunks ? store.tar_path(hash) : baseline_target);
    }
  }
}

// A sink that hashes what it gets, as the staging file's trailing digest does, and keeps nothing.
class WholeHashSink final : public ByteSink {
 public:
  Result<void> write(const void* data, std::size_t size) override {
    hasher_.update(data, size);
    written_ += Bytes{size};
    return ok();
  }
  Bytes written() const override { return written_; }
  Result<void> restart() override { return ok(); }
  Sha256 digest() { return hasher_.finish(); }

 private:
  Sha256Hasher hasher_;
  Bytes written_;
};

void bench_verify(double gib, int rounds, std::vector<double>& whole, std::vector<double>& chunked) {
  const std::size_t piece = std::size_t{256} << 10;
  std::string buffer(std::size_t{256} << 20, 'x');
  std::mt19937_64 rng(7);
  for (auto& c : buffer) c = static_cast<char>(rng());
  const std::uint64_t total = static_cast<std::uint64_t>(gib * double(std::uint64_t{1} << 30));
  ChunkDigests chunks{k_default_chunk_size, {}};
  {
    ChunkHasher hasher(k_default_chunk_size);
    for (std::uint64_t at = 0; at < total; at += buffer.size())
      hasher.update(buffer.data(), std::min<std::uint64_t>(buffer.size(), total - at));
    chunks = hasher.finish();
  }
  const auto feed = [&](ByteSink& sink) {
    for (std::uint64_t at = 0; at < total; at += piece) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece, total - at));
      if (!sink.write(buffer.data() + (at % buffer.size()), n)) std::abort();
    }
  };
  for (int round = 0; round < rounds; ++round) {
    for (int side = 0; side < 2; ++side) {
      const bool with_chunks = (side + round) % 2 == 0;
      WholeHashSink inner;
      const double c0 = cpu_seconds();
      if (with_chunks) {
        net::ChunkVerifyingSink sink(inner, chunks, Bytes{total}, "bench");
        feed(sink);
      } else {
        feed(inner);
      }
      (void)inner.digest();
      (with_chunks ? chunked : whole).push_back((cpu_seconds() - c0) / gib);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  std::uint64_t shard_mib = 1024;
  int rounds = 5;
  double verify_gib = 2;
  for_each_flag(
      argc, argv,
      [](const std::string& why) {
        std::cerr << "bench_chunk_digests: " << why
                  << "\nusage: bench_chunk_digests [--dir DIR] [--shard-mib N] [--rounds R] [--verify-gib G]\n";
        std::exit(2);
      },
      [&](const std::string& flag, const std::string& value) {
        if (flag == "--dir")
          dir = value;
        else if (flag == "--shard-mib")
          shard_mib = std::stoull(value);
        else if (flag == "--rounds")
          rounds = std::stoi(value);
        else if (flag == "--verify-gib")
          verify_gib = std::stod(value);
        else
          return false;
        return true;
      });
  const std::string work = dir + "/bench_chunk_digests." + std::to_string(::getpid());
  std::filesystem::create_directories(work);
  Timing with, without;
  bench_build(work, shard_mib, rounds, with, without);
  std::filesystem::remove_all(work);
  std::vector<double> whole, chunked;
  bench_verify(verify_gib, rounds, whole, chunked);
  std::cout << "{\"build\": {\"shard_mib\": " << shard_mib << ", \"rounds\": " << rounds
            << ",\n  \"with_chunks\": {\"wall_s\": " << json_list(with.wall) << ", \"cpu_s\": " << json_list(with.cpu)
            << ", \"median_wall_s\": " << median(with.wall) << ", \"median_cpu_s\": " << median(with.cpu) << "},"
            << "\n  \"whole_only\": {\"wall_s\": " << json_list(without.wall)
            << ", \"cpu_s\": " << json_list(without.cpu) << ", \"median_wall_s\": " << median(without.wall)
            << ", \"median_cpu_s\": " << median(without.cpu) << "}},\n"
            << " \"verify\": {\"gib\": " << verify_gib << ",\n  \"whole_only_cpu_s_per_gib\": " << json_list(whole)
            << ", \"median\": " << median(whole) << ",\n  \"chunks_and_whole_cpu_s_per_gib\": " << json_list(chunked)
            << ", \"median_chunked\": " << median(chunked) << "}}\n";
  return 0;
}
