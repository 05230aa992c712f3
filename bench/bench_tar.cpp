// Tar throughput over an in-memory shard: member iteration, sample grouping and writing.
//
// The shard holds samples of two fields, an audio payload (the benchmark argument, in bytes) and a 100-byte
// transcript, about 64 MiB in all. Reading is zero-copy, so its cost is per header, not per payload byte: the
// reader rows report members (or samples) per second only; the small-payload rows also pay cache misses, since
// their headers are spread over the whole 64 MiB.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "datavo/tar.hpp"

namespace {

constexpr std::size_t k_shard_bytes = std::size_t{64} << 20;
constexpr std::size_t k_transcript_bytes = 100;

struct Shard {
  std::string bytes;
  std::size_t members = 0;
};

const Shard& shard_for(std::size_t audio_bytes) {
  static std::vector<std::pair<std::size_t, Shard>> cache;
  for (const auto& [size, shard] : cache) {
    if (size == audio_bytes) return shard;
  }
  Shard shard;
  datavo::TarWriter writer([&shard](std::span<const std::byte> b) -> datavo::Result<void> {
    shard.bytes.append(reinterpret_cast<const char*>(b.data()), b.size());
    return datavo::ok();
  });
  const std::string audio(audio_bytes, 'a');
  const std::string transcript(k_transcript_bytes, 't');
  char id[32];
  for (std::size_t i = 0; shard.bytes.size() < k_shard_bytes; ++i) {
    std::snprintf(id, sizeof id, "utt_%08zu", i);
    (void)writer.add_member(std::string(id) + ".audio.wav", std::as_bytes(std::span(audio)));
    (void)writer.add_member(std::string(id) + ".transcript.txt", std::as_bytes(std::span(transcript)));
    shard.members += 2;
  }
  (void)writer.finish();
  cache.emplace_back(audio_bytes, std::move(shard));
  return cache.back().second;
}

void BM_TarReaderMembers(benchmark::State& state) {
  const Shard& shard = shard_for(static_cast<std::size_t>(state.range(0)));
  const auto archive = std::as_bytes(std::span(shard.bytes));
  for (auto _ : state) {
    datavo::TarReader reader(archive, "bench.tar");
    std::size_t payload = 0;
    for (;;) {
      auto member = reader.next();
      if (!member || !*member) break;
      payload += (*member)->data.size();
    }
    benchmark::DoNotOptimize(payload);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * shard.members));
}

void BM_TarSamples(benchmark::State& state) {
  const Shard& shard = shard_for(static_cast<std::size_t>(state.range(0)));
  const auto archive = std::as_bytes(std::span(shard.bytes));
  for (auto _ : state) {
    datavo::SampleIterator samples(archive, "bench.tar");
    std::size_t fields = 0;
    for (;;) {
      auto sample = samples.next();
      if (!sample || *sample == nullptr) break;
      fields += (*sample)->fields.size();
    }
    benchmark::DoNotOptimize(fields);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * shard.members / 2));
}

void BM_TarWriter(benchmark::State& state) {
  const auto audio_bytes = static_cast<std::size_t>(state.range(0));
  const std::string audio(audio_bytes, 'a');
  const std::string transcript(k_transcript_bytes, 't');
  const std::size_t samples = shard_for(audio_bytes).members / 2;
  std::vector<std::string> names;
  char id[32];
  for (std::size_t i = 0; i < samples; ++i) {
    std::snprintf(id, sizeof id, "utt_%08zu", i);
    names.push_back(std::string(id) + ".audio.wav");
    names.push_back(std::string(id) + ".transcript.txt");
  }
  std::uint64_t written = 0;
  for (auto _ : state) {
    // A sink that only counts: measures the writer, not a copy into memory.
    datavo::TarWriter writer([&written](std::span<const std::byte> b) -> datavo::Result<void> {
      written += b.size();
      return datavo::ok();
    });
    for (std::size_t i = 0; i < names.size(); i += 2) {
      (void)writer.add_member(names[i], std::as_bytes(std::span(audio)));
      (void)writer.add_member(names[i + 1], std::as_bytes(std::span(transcript)));
    }
    (void)writer.finish();
  }
  benchmark::DoNotOptimize(written);
  state.SetBytesProcessed(static_cast<std::int64_t>(written));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * names.size()));
}

BENCHMARK(BM_TarReaderMembers)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TarSamples)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TarWriter)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
