#include "ops/demo/synthetic_speech.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "datavo/tar.hpp"
#include "util/fs.hpp"
#include "util/human.hpp"

namespace datavo::demo {
namespace {

void put_u16(std::string& out, std::uint16_t v) {
  out += char(v & 0xff);
  out += char(v >> 8);
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out += char((v >> shift) & 0xff);
}

// The 44-byte header of a mono 16-bit PCM WAV of `frames` frames.
void put_wav_header(std::string& out, std::uint32_t frames) {
  out += "RIFF";
  put_u32(out, 36 + frames * 2);
  out += "WAVEfmt ";
  put_u32(out, 16);
  put_u16(out, 1);  // PCM
  put_u16(out, 1);  // mono
  put_u32(out, k_sample_rate);
  put_u32(out, k_sample_rate * 2);
  put_u16(out, 2);
  put_u16(out, 16);
  out += "data";
  put_u32(out, frames * 2);
}

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// Writes the utterances [first, end) as one tar at `path`.
Result<Bytes> write_tar(const std::string& path, std::size_t first, std::size_t end) {
  util::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return Error::from_errno(errno, "cannot create " + path);
  TarWriter writer([&fd, &path](std::span<const std::byte> bytes) -> Result<void> {
    return util::write_all(fd.get(), bytes.data(), bytes.size(), path);
  });
  Bytes written;
  for (std::size_t i = first; i < end; ++i) {
    const Utterance utterance = synthetic_utterance(i);
    DATAVO_TRY(writer.add_member(utterance.id + ".audio.wav", bytes_of(utterance.wav)));
    DATAVO_TRY(writer.add_member(utterance.id + ".transcript.txt", bytes_of(utterance.transcript)));
    written += Bytes{utterance.wav.size() + utterance.transcript.size()};
  }
  DATAVO_TRY(writer.finish());
  return written;
}

}  // namespace

std::string synthetic_wav(std::uint32_t frames, double frequency, std::uint32_t seed) {
  std::string out;
  out.reserve(44 + std::size_t(frames) * 2);
  put_wav_header(out, frames);
  std::uint32_t noise = seed * 2654435761u + 1;
  const double fade = 0.02 * k_sample_rate;
  for (std::uint32_t i = 0; i < frames; ++i) {
    noise = noise * 1664525u + 1013904223u;
    const double envelope = std::min({1.0, double(i) / fade, double(frames - i) / fade});
    const double t = double(i) / k_sample_rate;
    const double value = 0.3 * envelope * std::sin(2 * std::numbers::pi * frequency * t) +
                         0.02 * (double(noise >> 8) / 16777216.0 - 0.5);
    put_u16(out, std::uint16_t(std::int16_t(std::lround(value * 32767))));
  }
  return out;
}

bool looks_like_wav(std::span<const std::byte> data) {
  if (data.size() < 44) return false;
  const auto* p = reinterpret_cast<const char*>(data.data());
  return std::string_view(p, 4) == "RIFF" && std::string_view(p + 8, 8) == "WAVEfmt ";
}

Utterance synthetic_utterance(std::size_t number) {
  char id[32];
  std::snprintf(id, sizeof id, "utt_%06zu", number);
  // 0.5 to 1 s, and a pitch between 150 and 750 Hz, varied but reproducible.
  const auto frames = std::uint32_t(k_sample_rate / 2 + (number * 7919) % (k_sample_rate / 2 + 1));
  const double frequency = 150.0 + double((number * 37) % 600);
  std::string transcript = "synthetic utterance " + std::to_string(number) + ": a " + util::fixed_point(frequency, 0) +
                           " hertz tone lasting " + util::fixed_point(double(frames) / k_sample_rate, 2) + " seconds\n";
  return Utterance{id, synthetic_wav(frames, frequency, std::uint32_t(number)), std::move(transcript)};
}

Result<Bytes> write_synthetic_speech(const std::string& directory, std::size_t samples) {
  // WebDataset tars rather than one file per member: on a busy disk, thousands of small creates and unlinks would
  // cost more than the whole read.
  constexpr std::size_t k_samples_per_tar = 500;
  Bytes generated;
  for (std::size_t first = 0; first < samples; first += k_samples_per_tar) {
    const std::string path = directory + "/part-" + std::to_string(first / k_samples_per_tar) + ".tar";
    auto written = write_tar(path, first, std::min(samples, first + k_samples_per_tar));
    if (!written) return std::move(written).error();
    generated += *written;
  }
  return generated;
}

}  // namespace datavo::demo
