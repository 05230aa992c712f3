// Tests of the demo's data (src/ops/demo/synthetic_speech.cpp): WAV headers, determinism, and tars that the tar
// reader reads back as samples.
#include <gtest/gtest.h>

#include <cstring>

#include "datavo/tar.hpp"
#include "ops/demo/synthetic_speech.hpp"
#include "support/temp_dir.hpp"
#include "util/fs.hpp"

namespace datavo::demo {
namespace {

std::uint32_t u32_at(const std::string& bytes, std::size_t offset) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | std::uint8_t(bytes[offset + std::size_t(i)]);
  return v;
}

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

TEST(SyntheticSpeechTest, AWavHasTheHeaderOfMono16BitPcmAt16Khz) {
  const std::string wav = synthetic_wav(800, 440.0, 1);
  ASSERT_EQ(wav.size(), 44u + 1600u);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(u32_at(wav, 4), 36u + 1600u);
  EXPECT_EQ(wav.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(u32_at(wav, 24), k_sample_rate);
  EXPECT_EQ(wav.substr(36, 4), "data");
  EXPECT_EQ(u32_at(wav, 40), 1600u);
  EXPECT_TRUE(looks_like_wav(bytes_of(wav)));
  EXPECT_FALSE(looks_like_wav(bytes_of(wav.substr(0, 43))));
  EXPECT_FALSE(looks_like_wav(bytes_of(std::string(64, 'x'))));
}

TEST(SyntheticSpeechTest, UtterancesAreDeterministicAndVaried) {
  const Utterance a = synthetic_utterance(42);
  const Utterance b = synthetic_utterance(42);
  const Utterance c = synthetic_utterance(43);
  EXPECT_EQ(a.id, "utt_000042");
  EXPECT_EQ(a.wav, b.wav);
  EXPECT_EQ(a.transcript, b.transcript);
  EXPECT_NE(a.wav, c.wav);
  const std::size_t frames = (a.wav.size() - 44) / 2;
  EXPECT_GE(frames, k_sample_rate / 2);
  EXPECT_LE(frames, k_sample_rate);
  EXPECT_EQ(a.transcript.rfind("synthetic utterance 42: a ", 0), 0u) << a.transcript;
}

TEST(SyntheticSpeechTest, WritesTarsOfFiveHundredSamplesThatReadBack) {
  shardtest::TempDir dir;
  auto generated = write_synthetic_speech(dir.path(), 501);
  ASSERT_TRUE(generated) << generated.error().message;
  auto first = util::read_file(dir.sub("part-0.tar"));
  auto second = util::read_file(dir.sub("part-1.tar"));
  ASSERT_TRUE(first && second);
  std::uint64_t payload = 0;
  std::size_t samples = 0;
  for (const std::string* tar : {&*first, &*second}) {
    SampleIterator it(bytes_of(*tar), "part");
    for (;;) {
      auto sample = it.next();
      ASSERT_TRUE(sample) << sample.error().message;
      if (*sample == nullptr) break;
      ++samples;
      ASSERT_EQ((*sample)->fields.size(), 2u);
      for (const auto& field : (*sample)->fields) payload += field.data.size();
    }
  }
  EXPECT_EQ(samples, 501u);
  EXPECT_EQ(Bytes{payload}, *generated);
  EXPECT_FALSE(write_synthetic_speech(dir.sub("missing"), 1)) << "io naming the file";
}

}  // namespace
}  // namespace datavo::demo
