// The demo's data: synthetic utterances (a 16 kHz mono 16-bit PCM WAV tone and its transcript), deterministic for
// their number, written as WebDataset tars (<id>.audio.wav, <id>.transcript.txt) that `datavo pack` reads.
//
// Thread safety: pure functions, apart from the files write_synthetic_speech() creates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::demo {

inline constexpr std::uint32_t k_sample_rate = 16'000;

// A WAV of `frames` frames at k_sample_rate: a tone of `frequency` Hz with a short fade in and out, plus a little
// noise seeded by `seed`.
std::string synthetic_wav(std::uint32_t frames, double frequency, std::uint32_t seed);

// Whether `data` starts with a RIFF/WAVE header (and is at least as long as one).
bool looks_like_wav(std::span<const std::byte> data);

// Utterance `number`: its id ("utt_000042"), WAV and transcript; 0.5 to 1 s long, pitched between 150 and 750 Hz.
struct Utterance {
  std::string id;
  std::string wav;
  std::string transcript;
};
Utterance synthetic_utterance(std::size_t number);

// Writes utterances 0..samples-1 into `directory` (which must exist) as part-<n>.tar files of 500 samples each.
// Returns the payload bytes written. io naming the file on a write failure.
Result<Bytes> write_synthetic_speech(const std::string& directory, std::size_t samples);

}  // namespace datavo::demo
