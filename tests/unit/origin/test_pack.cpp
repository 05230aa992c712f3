#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "datavo/origin.hpp"
#include "datavo/tar.hpp"
#include "origin/store.hpp"
#include "unit/origin/origin_test_support.hpp"

namespace datavo {
namespace {

using origin::Revision;
using origin::Store;
using origintest::make_sample_dir;
using origintest::pack_or_fail;
using origintest::payload;
using origintest::read_text;
using origintest::sample_ids;
using origintest::write_text;
using shardtest::TempDir;

Revision load(const std::string& store_root, std::uint64_t revision) {
  auto store = Store::open(store_root, Store::Create::no);
  EXPECT_TRUE(store);
  if (!store) return {};
  auto rev = store->load_revision("voice", "train", revision);
  EXPECT_TRUE(rev && *rev);
  return rev && *rev ? **rev : Revision{};
}

std::vector<std::vector<std::string>> shard_ids(const Revision& rev) {
  std::vector<std::vector<std::string>> out;
  for (const auto& shard : rev.shards) {
    out.emplace_back();
    for (const auto& sample : shard.samples) out.back().push_back(sample.id);
  }
  return out;
}

Result<PackReport> pack(const std::string& source, const std::string& store, std::size_t per_shard = 2,
                        const std::string& dataset = "voice/train") {
  PackOptions options;
  options.source = source;
  options.store = store;
  options.dataset = dataset;
  options.samples_per_shard = per_shard;
  return pack_dataset(options);
}

// The object bytes of sample `id`, key `key` in `rev`.
std::string object_text(const std::string& store_root, const Revision& rev, const std::string& id,
                        const std::string& key) {
  auto column = std::find(rev.keys.begin(), rev.keys.end(), key) - rev.keys.begin();
  for (const auto& shard : rev.shards) {
    for (const auto& sample : shard.samples) {
      if (sample.id == id) return read_text(store_root + "/objects/" + sample.objects[column].sha256);
    }
  }
  return "<missing>";
}

TEST(OriginPack, FromADirectoryOfSampleFiles) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), sample_ids(0, 5));
  write_text(dir.sub("src/.DS_Store"), "hidden files are skipped");
  auto report = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->revision, 1u);
  EXPECT_EQ(report->samples_added, 5u);
  EXPECT_EQ(report->shards_added, 3u);
  EXPECT_EQ(report->total_shards, 3u);
  EXPECT_GT(report->bytes_added.count(), 0u);

  Revision rev = load(dir.sub("store"), 1);
  EXPECT_EQ(rev.keys, (std::vector<std::string>{"audio.wav", "transcript.txt"}));
  EXPECT_EQ(shard_ids(rev),
            (std::vector<std::vector<std::string>>{{"utt_0000", "utt_0001"}, {"utt_0002", "utt_0003"}, {"utt_0004"}}));
  EXPECT_TRUE(rev.manifest_ref.starts_with("voice/train@m")) << rev.manifest_ref;
  EXPECT_EQ(object_text(dir.sub("store"), rev, "utt_0003", "transcript.txt"), payload("utt_0003", "transcript.txt"));
  EXPECT_EQ(read_text(dir.sub("store/datasets/voice/train/LATEST")), "1\n");
}

TEST(OriginPack, SampleIdsKeepTheirDirectories) {
  TempDir dir;
  write_text(dir.sub("src/a/x1.img.png"), "1");
  write_text(dir.sub("src/a/x1.label.txt"), "one");
  write_text(dir.sub("src/b.v2/x2.img.png"), "2");
  write_text(dir.sub("src/b.v2/x2.label.txt"), "two");
  ASSERT_TRUE(pack(dir.sub("src"), dir.sub("store"), 10));
  Revision rev = load(dir.sub("store"), 1);
  EXPECT_EQ(shard_ids(rev), (std::vector<std::vector<std::string>>{{"a/x1", "b.v2/x2"}}));
  EXPECT_EQ(rev.keys, (std::vector<std::string>{"img.png", "label.txt"}));
}

TEST(OriginPack, RevisionsAdvanceAndOldOnesStayReadable) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), sample_ids(0, 3));
  ASSERT_TRUE(pack(dir.sub("src"), dir.sub("store")));
  const Revision first = load(dir.sub("store"), 1);

  auto unchanged = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(unchanged->revision, 1u) << "nothing new: no new revision";
  EXPECT_EQ(unchanged->samples_added, 0u);

  make_sample_dir(dir.sub("src"), sample_ids(3, 2));
  auto second = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->revision, 2u);
  EXPECT_EQ(second->samples_added, 2u);
  EXPECT_EQ(second->shards_added, 1u);
  EXPECT_EQ(second->total_shards, 3u);

  Revision rev2 = load(dir.sub("store"), 2);
  EXPECT_EQ(rev2.manifest_ref, first.manifest_ref);
  EXPECT_EQ(shard_ids(rev2),
            (std::vector<std::vector<std::string>>{{"utt_0000", "utt_0001"}, {"utt_0002"}, {"utt_0003", "utt_0004"}}))
      << "existing shards never change, even a short last one";
  Revision rev1 = load(dir.sub("store"), 1);
  EXPECT_EQ(shard_ids(rev1), shard_ids(first));
  EXPECT_EQ(read_text(dir.sub("store/datasets/voice/train/LATEST")), "2\n");
}

TEST(OriginPack, IdenticalPayloadsAreStoredOnce) {
  TempDir dir;
  for (const char* id : {"s1", "s2", "s3"}) write_text(dir.sub(std::string("src/") + id + ".txt"), "same bytes");
  auto report = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_TRUE(report);
  EXPECT_EQ(report->bytes_added.count(), 10u);
}

// Writes a WebDataset tar with TarWriter.
void write_tar(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members) {
  std::ofstream out(path, std::ios::binary);
  TarWriter writer([&](std::span<const std::byte> bytes) -> Result<void> {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return ok();
  });
  for (const auto& [name, data] : members) ASSERT_TRUE(writer.add_member(name, std::as_bytes(std::span(data))));
  ASSERT_TRUE(writer.finish());
}

TEST(OriginPack, FromTarShardsInFileOrderThenArchiveOrder) {
  TempDir dir;
  std::filesystem::create_directories(dir.sub("tars"));
  write_tar(dir.sub("tars/shard-001.tar"), {{"z9.cls", "9"}, {"z9.jpg", "J9"}, {"a1.cls", "1"}, {"a1.jpg", "J1"}});
  write_tar(dir.sub("tars/shard-000.tar"), {{"m5.jpg", "J5"}, {"m5.cls", "5"}, {"README", "no key: skipped"}});
  auto report = pack(dir.sub("tars"), dir.sub("store"), 2);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->samples_added, 3u);
  Revision rev = load(dir.sub("store"), 1);
  EXPECT_EQ(shard_ids(rev), (std::vector<std::vector<std::string>>{{"m5", "z9"}, {"a1"}}));
  EXPECT_EQ(rev.keys, (std::vector<std::string>{"cls", "jpg"}));
  EXPECT_EQ(object_text(dir.sub("store"), rev, "z9", "jpg"), "J9");

  // A single .tar file is a source too, and extends the dataset.
  write_tar(dir.sub("more.tar"), {{"q1.cls", "q"}, {"q1.jpg", "Jq"}});
  auto more = pack(dir.sub("more.tar"), dir.sub("store"), 2);
  ASSERT_TRUE(more) << more.error().message;
  EXPECT_EQ(more->revision, 2u);
}

// bsdtar and an unsorted GNU tar (`tar cf x.tar .`) list a.wav b.wav a.txt b.txt: two samples, not four.
TEST(OriginPack, GroupsTheMembersOfASampleWhereverTheTarListsThem) {
  TempDir dir;
  write_tar(dir.sub("apart.tar"),
            {{"b.wav", "Wb"}, {"a.wav", "Wa"}, {"b.txt", "Tb"}, {"README", "skipped"}, {"a.txt", "Ta"}});
  auto report = pack(dir.sub("apart.tar"), dir.sub("store"), 10);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->samples_added, 2u);
  Revision rev = load(dir.sub("store"), 1);
  EXPECT_EQ(shard_ids(rev), (std::vector<std::vector<std::string>>{{"b", "a"}}));  // order of first members
  EXPECT_EQ(rev.keys, (std::vector<std::string>{"txt", "wav"}));
  EXPECT_EQ(object_text(dir.sub("store"), rev, "a", "txt"), "Ta");
  EXPECT_EQ(object_text(dir.sub("store"), rev, "b", "wav"), "Wb");

  write_tar(dir.sub("twice.tar"), {{"a.wav", "1"}, {"b.wav", "2"}, {"a.wav", "3"}});
  auto twice = pack(dir.sub("twice.tar"), dir.sub("store2"), 10);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(twice.error().message.find("\"a\" has the key \"wav\" twice"), std::string::npos) << twice.error().message;
}

bool have_gnu_tar() { return std::system("tar --version 2>/dev/null | grep -q 'GNU tar'") == 0; }

TEST(OriginPack, FromGnuTarInGnuAndPaxFormats) {
  if (!have_gnu_tar()) GTEST_SKIP() << "GNU tar is not installed";
  const std::string long_dir(120, 'd');  // beyond ustar's 100-byte name: GNU 'L' / pax path records
  for (const char* format : {"gnu", "pax"}) {
    TempDir dir;
    make_sample_dir(dir.sub("src/" + long_dir), {"utt_1", "utt_2"});
    make_sample_dir(dir.sub("src"), {"utt_0"});
    std::filesystem::create_directories(dir.sub("tars"));
    std::string command = "cd '" + dir.sub("src") + "' && tar --format=" + format + " --sort=name -cf '" +
                          dir.sub("tars/all.tar") + "' utt_0.audio.wav utt_0.transcript.txt " + long_dir;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    auto report = pack(dir.sub("tars"), dir.sub("store"), 10);
    ASSERT_TRUE(report) << format << ": " << report.error().message;
    Revision rev = load(dir.sub("store"), 1);
    EXPECT_EQ(shard_ids(rev),
              (std::vector<std::vector<std::string>>{{"utt_0", long_dir + "/utt_1", long_dir + "/utt_2"}}))
        << format;
    EXPECT_EQ(object_text(dir.sub("store"), rev, long_dir + "/utt_2", "audio.wav"), payload("utt_2", "audio.wav"));
  }
}

TEST(OriginPack, RefusesSamplesWithoutEveryKey) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), sample_ids(0, 2));
  std::filesystem::remove(dir.sub("src/utt_0001.transcript.txt"));
  auto report = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(report.error().message.find("utt_0001"), std::string::npos) << report.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir.sub("store/datasets/voice/train/LATEST")));

  // Extending: new samples need exactly the dataset's keys.
  TempDir dir2;
  make_sample_dir(dir2.sub("a"), sample_ids(0, 2));
  ASSERT_TRUE(pack(dir2.sub("a"), dir2.sub("store")));
  make_sample_dir(dir2.sub("b"), sample_ids(5, 1), {"audio.wav", "transcript.txt", "extra.json"});
  auto extended = pack(dir2.sub("b"), dir2.sub("store"));
  ASSERT_FALSE(extended);
  EXPECT_NE(extended.error().message.find("extra.json"), std::string::npos) << extended.error().message;
}

TEST(OriginPack, RefusesBadInputNamingIt) {
  TempDir dir;
  write_text(dir.sub("nokey/README"), "x");
  auto nokey = pack(dir.sub("nokey"), dir.sub("store"));
  ASSERT_FALSE(nokey);
  EXPECT_NE(nokey.error().message.find("README"), std::string::npos) << nokey.error().message;

  write_text(dir.sub("badkey/s1.a b"), "x");
  auto badkey = pack(dir.sub("badkey"), dir.sub("store"));
  ASSERT_FALSE(badkey);
  EXPECT_NE(badkey.error().message.find("s1.a b"), std::string::npos) << badkey.error().message;

  make_sample_dir(dir.sub("mixed"), {"s1"});
  write_tar(dir.sub("mixed/x.tar"), {{"s2.audio.wav", "a"}});
  auto mixed = pack(dir.sub("mixed"), dir.sub("store"));
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.error().message.find("both"), std::string::npos) << mixed.error().message;

  std::filesystem::create_directories(dir.sub("dups"));
  write_tar(dir.sub("dups/1.tar"), {{"s1.k", "a"}});
  write_tar(dir.sub("dups/2.tar"), {{"s1.k", "b"}});
  auto dups = pack(dir.sub("dups"), dir.sub("store"));
  ASSERT_FALSE(dups);
  EXPECT_NE(dups.error().message.find("2.tar"), std::string::npos) << dups.error().message;

  std::filesystem::create_directories(dir.sub("empty"));
  EXPECT_FALSE(pack(dir.sub("empty"), dir.sub("store")));
  EXPECT_FALSE(pack(dir.sub("missing"), dir.sub("store")));
  make_sample_dir(dir.sub("ok"), {"s1"});
  EXPECT_FALSE(pack(dir.sub("ok"), dir.sub("store"), 0));
  for (const char* name : {"voice", "../x/train", "voice/..", "/abs/train", "voice/tr ain"}) {
    auto bad = pack(dir.sub("ok"), dir.sub("store"), 2, name);
    ASSERT_FALSE(bad) << name;
    EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.sub("x"))) << "nothing is created outside the store";
}

}  // namespace
}  // namespace datavo
