// datavo::run_demo: the main job, self-contained (`datavo demo`). It generates a synthetic speech dataset (16 kHz
// WAV tones and their transcripts), packs it into an origin store, serves it on an ephemeral loopback port, and reads
// it twice through a fresh folder tier with SampleStream: a cold pass that fetches every shard from the origin, and
// a warm pass that reads every shard from the cache and only revalidates the manifest. Everything lives in a
// temporary directory ($TMPDIR, else /tmp), removed at the end unless kept.
//
// Thread safety: run_demo() may run alongside anything (it touches nothing outside its directory and its port).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

enum class KeepDirectory { no, yes };

// The dataset made, served and about to be read.
struct DemoSetup {
  std::size_t samples = 0;
  Bytes generated;  // the payload bytes of every sample
  std::size_t shards = 0;
  std::string origin_url;
  std::string store;      // the origin's store directory
  std::string cache_dir;  // the fresh folder tier's directory
};

struct DemoRequest {
  std::size_t samples = 2000;           // utterances to generate; >= 1
  std::size_t samples_per_shard = 200;  // >= 1
  KeepDirectory keep = KeepDirectory::no;
  // Called once the dataset is served, before the first pass (to say what is about to be read).
  std::function<void(const DemoSetup&)> on_ready;
  // With KeepDirectory::yes: called with the temporary directory as run_demo() returns (also after a failure).
  std::function<void(const std::string& directory)> on_kept;
};

// The requests of a pass, from the origin's /v1/metrics.
struct DemoRequests {
  std::uint64_t manifest = 0;
  std::uint64_t not_modified = 0;  // of which answered 304
  std::uint64_t ticket = 0;
  std::uint64_t shard = 0;
};

struct DemoPass {
  std::chrono::duration<double> elapsed{0};
  std::uint64_t samples = 0;
  std::uint64_t valid_wavs = 0;  // samples whose audio.wav has a WAV header
  Bytes field_bytes;
  std::uint64_t origin_shards = 0;  // shards fetched from the origin
  DemoRequests requests;
};

struct DemoReport {
  DemoSetup setup;
  DemoPass cold;
  DemoPass warm;
  // internal when a pass did not read every sample as a valid WAV, or the warm pass asked the origin for a shard.
  std::optional<Error> error;
};

// Errors (no report): invalid_argument for a zero count; io for the temporary directory or the generated files;
// whatever packing, serving or a pass returns.
Result<DemoReport> run_demo(const DemoRequest& request);

}  // namespace datavo
