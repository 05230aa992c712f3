#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "datavo/origin.hpp"
#include "datavo/tar.hpp"
#include "origin/store.hpp"
#include "unit/origin/origin_test_support.hpp"
#include "util/cancel.hpp"

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

// A pack whose work is stopped (a Ctrl-C in the CLI, a stopped StopScope) ends with cancelled before its next
// sample: no revision is published and no temporary file is left in the store.
TEST(OriginPack, AStoppedPackPublishesNothingAndLeavesNoTemporaryFile) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), sample_ids(0, 5));
  util::StopToken token;
  token.request_stop();
  Result<PackReport> report = Error{ErrorCode::internal, "not run"};
  {
    util::StopScope scope(token);
    report = pack(dir.sub("src"), dir.sub("store"));
  }
  ASSERT_FALSE(report) << "a stopped pack published revision " << report->revision;
  EXPECT_EQ(report.error().code, ErrorCode::cancelled) << report.error().message;
  EXPECT_NE(report.error().message.find("pack: storing sample utt_0000"), std::string::npos) << report.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir.sub("store/datasets/voice/train/LATEST")));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.sub("store"))) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
  // Nothing is held: the same pack, not stopped, publishes revision 1.
  auto again = pack(dir.sub("src"), dir.sub("store"));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->revision, 1u);
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

// Runs a shell command, failing the test when it fails.
void shell(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

// Writes a tar with TarWriter, then compresses it in place with `tool` (gzip, zstd, ...) to `path`.
void write_compressed_tar(const std::string& path, const std::string& tool,
                          const std::vector<std::pair<std::string, std::string>>& members) {
  write_tar(path + ".plain", members);
  shell(tool + " -q -c '" + path + ".plain' > '" + path + "' && rm '" + path + ".plain'");
}

// Entries of `dir` whose name holds ".tmp.": temporaries left behind.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(entry.path());
  }
  return found;
}

TEST(OriginPack, ReadsGzipAndZstdCompressedTarShards) {
  TempDir dir;
  std::filesystem::create_directories(dir.sub("tars"));
  write_compressed_tar(dir.sub("tars/shard-0.tar.gz"), "gzip", {{"a1.cls", "1"}, {"a1.jpg", "J1"}});
  write_compressed_tar(dir.sub("tars/shard-1.tgz"), "gzip", {{"b2.cls", "2"}, {"b2.jpg", "J2"}});
  write_compressed_tar(dir.sub("tars/shard-2.tar.zst"), "zstd", {{"c3.cls", "3"}, {"c3.jpg", "J3"}});
  write_tar(dir.sub("tars/shard-3.tar"), {{"d4.cls", "4"}, {"d4.jpg", "J4"}});
  auto report = pack(dir.sub("tars"), dir.sub("store"), 10);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->samples_added, 4u);
  Revision rev = load(dir.sub("store"), 1);
  EXPECT_EQ(rev.keys, (std::vector<std::string>{"cls", "jpg"})) << "not one sample per file with the key \"tar.gz\"";
  EXPECT_EQ(shard_ids(rev), (std::vector<std::vector<std::string>>{{"a1", "b2", "c3", "d4"}}));
  EXPECT_EQ(object_text(dir.sub("store"), rev, "b2", "jpg"), "J2");
  EXPECT_EQ(object_text(dir.sub("store"), rev, "c3", "jpg"), "J3");
  EXPECT_EQ(temporaries(dir.sub("store")), std::vector<std::string>{}) << "the scratch files went away";

  // One compressed file is a source too; so is gzip data named .tar (tar itself reads it by its content).
  write_compressed_tar(dir.sub("one.tar.zst"), "zstd", {{"e5.cls", "5"}, {"e5.jpg", "J5"}});
  auto one = pack(dir.sub("one.tar.zst"), dir.sub("store"), 10);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->samples_added, 1u);
  write_compressed_tar(dir.sub("misnamed.tar"), "gzip", {{"f6.cls", "6"}, {"f6.jpg", "J6"}});
  auto misnamed = pack(dir.sub("misnamed.tar"), dir.sub("store"), 10);
  ASSERT_TRUE(misnamed) << misnamed.error().message;
  EXPECT_EQ(object_text(dir.sub("store"), load(dir.sub("store"), 3), "f6", "jpg"), "J6");
}

TEST(OriginPack, RefusesBzip2AndXzShardsAndCorruptCompressedOnesNamingThem) {
  TempDir dir;
  for (const auto& [tool, name] :
       std::vector<std::pair<std::string, std::string>>{{"bzip2", "s.tar.bz2"}, {"xz", "s.tar.xz"}}) {
    write_compressed_tar(dir.sub(name), tool, {{"a.cls", "1"}});
    auto report = pack(dir.sub(name), dir.sub("store"));
    ASSERT_FALSE(report) << name;
    EXPECT_EQ(report.error().code, ErrorCode::invalid_argument);
    EXPECT_EQ(report.error().message, dir.sub(name) + ": at byte offset 0: " + tool +
                                          "-compressed data; pack reads tars that are uncompressed, gzip- or "
                                          "zstd-compressed: decompress it first (" +
                                          tool + " -d)");
  }

  write_compressed_tar(dir.sub("cut.tar.gz"), "gzip", {{"a.cls", std::string(5000, 'x')}, {"b.cls", "2"}});
  std::filesystem::resize_file(dir.sub("cut.tar.gz"), std::filesystem::file_size(dir.sub("cut.tar.gz")) - 10);
  auto cut = pack(dir.sub("cut.tar.gz"), dir.sub("store"));
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(cut.error().message.find(dir.sub("cut.tar.gz") + ": at compressed byte offset "), std::string::npos)
      << cut.error().message;

  // A malformed tar inside good compression: the reader's message names the decompressed shard.
  std::filesystem::create_directories(dir.sub("torn"));
  write_tar(dir.sub("torn/t.tar.plain"), {{"a.cls", "1"}, {"b.cls", "2"}});
  std::filesystem::resize_file(dir.sub("torn/t.tar.plain"), 1024);
  shell("gzip -q -c '" + dir.sub("torn/t.tar.plain") + "' > '" + dir.sub("torn/t.tar.gz") + "' && rm '" +
        dir.sub("torn/t.tar.plain") + "'");
  auto torn = pack(dir.sub("torn"), dir.sub("store"));
  ASSERT_FALSE(torn);
  EXPECT_EQ(torn.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(
      torn.error().message.find("shard " + dir.sub("torn/t.tar.gz") + " (gzip-decompressed): at byte offset 1024"),
      std::string::npos)
      << torn.error().message;
  EXPECT_EQ(temporaries(dir.sub("store")), std::vector<std::string>{});
}

TEST(OriginPack, ReportsTheLinksAndSpecialMembersItSkips) {
  if (!have_gnu_tar()) GTEST_SKIP() << "GNU tar is not installed";
  TempDir dir;
  make_sample_dir(dir.sub("src"), {"s1"}, {"wav", "txt"});
  shell("cd '" + dir.sub("src") +
        "' && ln -s s1.wav s2.wav && ln -s s1.txt s2.txt && ln s1.wav s3.wav && "
        "ln s1.txt s3.txt && mkdir sub && echo readme > README");
  std::filesystem::create_directories(dir.sub("tars"));
  shell("cd '" + dir.sub("src") + "' && tar cf '" + dir.sub("tars/links.tar") +
        "' s1.wav s1.txt s2.wav s2.txt s3.wav s3.txt sub README");
  auto report = pack(dir.sub("tars"), dir.sub("store"));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->samples_added, 1u);
  EXPECT_EQ(report->skipped, (TarSkips{.directories = 1, .symlinks = 2, .hard_links = 2, .unnamed = 1}));
  EXPECT_EQ(describe_skips(report->skipped), "2 symbolic links, 2 hard links, 1 file not named <sample_id>.<key>");

  // A tar of links only makes no sample: the error says why.
  shell("cd '" + dir.sub("src") + "' && tar cf '" + dir.sub("only-links.tar") + "' s2.wav s2.txt");
  auto none = pack(dir.sub("only-links.tar"), dir.sub("store2"));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(none.error().message, dir.sub("only-links.tar") +
                                      ": holds no samples (its tars hold only members that make none: 2 symbolic "
                                      "links)");

  // A sample directory (not a tar) reports nothing.
  make_sample_dir(dir.sub("plain"), {"p1"});
  auto files = pack(dir.sub("plain"), dir.sub("store3"));
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(files->skipped, TarSkips{});
}

TEST(OriginPack, ATarWithoutTheEndMarkerIsRefusedWithAHintOrAcceptedWhenAsked) {
  TempDir dir;
  write_tar(dir.sub("whole.tar"), {{"a.cls", "1"}, {"b.cls", "2"}});
  std::filesystem::create_directories(dir.sub("tars"));
  std::filesystem::copy_file(dir.sub("whole.tar"), dir.sub("tars/no-end.tar"));
  std::filesystem::resize_file(dir.sub("tars/no-end.tar"), 2048);
  auto refused = pack(dir.sub("tars"), dir.sub("store"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(refused.error().message,
            "shard " + dir.sub("tars/no-end.tar") +
                ": at byte offset 2048: archive ends without the end-of-archive marker (two zero blocks): it was "
                "cut short, or written by a tool that omits the marker; if the tar is complete, pack it with "
                "--allow-missing-end-marker");

  PackOptions options;
  options.source = dir.sub("tars");
  options.store = dir.sub("store");
  options.dataset = "voice/train";
  options.end_marker = EndMarker::optional;
  auto accepted = pack_dataset(options);
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_EQ(accepted->samples_added, 2u);

  // Still refused with the option: a tar cut inside a member.
  std::filesystem::resize_file(dir.sub("tars/no-end.tar"), 1500);
  options.store = dir.sub("store2");
  auto torn = pack_dataset(options);
  ASSERT_FALSE(torn);
  EXPECT_NE(torn.error().message.find("truncated"), std::string::npos) << torn.error().message;
}

TEST(OriginPack, MessagesQuoteLongAndBinaryMemberNamesEscapedAndCut) {
  TempDir dir;
  const std::string long_id(1000, 'a');
  write_tar(dir.sub("long.tar"), {{long_id + ".wav", "x"}});
  auto report = pack(dir.sub("long.tar"), dir.sub("store"));
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, ErrorCode::invalid_argument);
  EXPECT_LT(report.error().message.size(), dir.sub("long.tar").size() + 200) << report.error().message;
  EXPECT_NE(report.error().message.find("invalid sample id \"aaaa"), std::string::npos) << report.error().message;
  EXPECT_NE(report.error().message.find("\u2026"), std::string::npos) << report.error().message;
  EXPECT_NE(report.error().message.find("longer than 512 bytes"), std::string::npos) << report.error().message;

  write_tar(dir.sub("binary.tar"), {{"s\x01\x9f.wav", "x"}});
  auto binary = pack(dir.sub("binary.tar"), dir.sub("store"));
  ASSERT_FALSE(binary);
  EXPECT_NE(binary.error().message.find("\"s\\x01\\x9f\""), std::string::npos) << binary.error().message;
}

}  // namespace
}  // namespace datavo
