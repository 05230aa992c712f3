#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "datavo/tar.hpp"
#include "origin/store.hpp"
#include "support/stop_wait.hpp"
#include "unit/origin/origin_test_support.hpp"

namespace datavo::origin {
namespace {

using origintest::read_text;
using origintest::write_text;
using shardtest::TempDir;

TEST(OriginStore, OpenCreatesTheLayoutOnceAndKeepsTheIdentity) {
  TempDir dir;
  const std::string root = dir.sub("store");
  auto missing = Store::open(root, Store::Create::no);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);

  auto first = Store::open(root, Store::Create::yes);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->instance_id().size(), 32u);
  EXPECT_GE(first->secret().size(), 32u);
  struct stat st {};
  ASSERT_EQ(::stat((root + "/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const char* sub : {"/objects", "/datasets", "/tars", "/instance.json"}) {
    EXPECT_TRUE(std::filesystem::exists(root + sub)) << sub;
  }

  auto again = Store::open(root, Store::Create::no);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->instance_id(), first->instance_id());
  EXPECT_EQ(again->secret(), first->secret());
}

TEST(OriginStore, ObjectsAreContentAddressedAndDeduplicated) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store);
  std::string data = "hello";
  auto put = store->put_object(std::as_bytes(std::span(data)));
  ASSERT_TRUE(put);
  EXPECT_TRUE(put->added);
  EXPECT_EQ(put->ref.sha256, origintest::sha256_hex(data));
  EXPECT_EQ(put->ref.size, 5u);
  EXPECT_EQ(read_text(store->object_path(put->ref.sha256)), "hello");

  write_text(dir.sub("file.txt"), "hello");
  auto again = store->put_object_file(dir.sub("file.txt"));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->added);
  EXPECT_EQ(again->ref.sha256, put->ref.sha256);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.sub("store/objects"))) ++entries;
  EXPECT_EQ(entries, 1u) << "no temporary file is left behind";
}

Revision two_sample_revision(const Store& store) {
  Revision rev;
  rev.dataset = "voice";
  rev.split = "train";
  rev.manifest_ref = "voice/train@mtest";
  rev.revision = 1;
  rev.keys = {"a.txt", "b.txt"};
  rev.shards.emplace_back();
  for (const char* id : {"s1", "s2"}) {
    SampleRecord sample{id, {}};
    for (const char* key : {"a.txt", "b.txt"}) {
      std::string data = std::string(key) + "@" + id;
      sample.objects.push_back(store.put_object(std::as_bytes(std::span(data))).value().ref);
    }
    rev.shards.back().samples.push_back(sample);
  }
  return rev;
}

TEST(OriginStore, RevisionsRoundTripAndLatestAdvances) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store);
  EXPECT_FALSE(*store->latest_revision("voice", "train"));
  Revision rev = two_sample_revision(*store);
  auto lock = store->lock_dataset("voice", "train");
  ASSERT_TRUE(lock);
  ASSERT_TRUE(store->publish_revision(rev));
  EXPECT_EQ(store->latest_revision("voice", "train")->value(), 1u);
  auto loaded = store->load_revision("voice", "train", 1);
  ASSERT_TRUE(loaded && *loaded);
  EXPECT_EQ((*loaded)->manifest_ref, rev.manifest_ref);
  EXPECT_EQ((*loaded)->keys, rev.keys);
  ASSERT_EQ((*loaded)->shards.size(), 1u);
  EXPECT_EQ((*loaded)->shards[0].samples[1].id, "s2");
  EXPECT_EQ((*loaded)->shards[0].samples[1].objects[0].sha256, rev.shards[0].samples[1].objects[0].sha256);
  EXPECT_FALSE(*store->load_revision("voice", "train", 2));
  EXPECT_TRUE(store->has_dataset("voice"));
  EXPECT_FALSE(store->has_dataset("other"));
}

TEST(OriginStore, ATamperedRevisionCannotPointOutsideTheStore) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store);
  const std::string sha(64, 'a');
  const std::string base = dir.sub("store/datasets/voice/train/revisions/1.json");
  const std::string good_prefix =
      R"({"format":1,"dataset":"voice","split":"train","manifest_ref":"r","revision":1,"keys":["k"],"shards":[)";
  for (const std::string& shards : std::vector<std::string>{
           R"({"index":0,"samples":[{"id":"s","objects":[{"sha256":"../../secret","size":1}]}]})",
           R"({"index":0,"samples":[{"id":"../s","objects":[{"sha256":")" + sha + R"(","size":1}]}]})",
           R"({"index":0,"samples":[{"id":"s","objects":[]}]})", R"({"index":1,"samples":[]})"}) {
    write_text(base, good_prefix + shards + "]}");
    auto loaded = store->load_revision("voice", "train", 1);
    ASSERT_FALSE(loaded) << shards;
    EXPECT_EQ(loaded.error().code, ErrorCode::integrity);
  }
  write_text(base, "{not json");
  EXPECT_FALSE(store->load_revision("voice", "train", 1));
  write_text(dir.sub("store/datasets/voice/train/LATEST"), "x\n");
  EXPECT_FALSE(store->latest_revision("voice", "train"));
}

TEST(OriginStore, MaterialisedKeyGroupIsTheDocumentedTar) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store);
  Revision rev = two_sample_revision(*store);
  auto hash = ContentHash::parse(std::string(64, 'c')).value();
  EXPECT_FALSE(*store->find_key_group(hash, k_default_chunk_size));
  const std::vector<std::string> keys = {"b.txt"};
  auto made = store->materialise_key_group(rev, 0, keys, hash, k_default_chunk_size);
  ASSERT_TRUE(made) << made.error().message;
  std::string bytes = read_text(made->path);
  EXPECT_EQ(made->size.count(), bytes.size());
  EXPECT_EQ(made->sha256.hex(), origintest::sha256_hex(bytes));
  EXPECT_EQ(read_text(dir.sub("store/tars/" + hash.hex() + ".sha256")), made->sha256.hex() + "\n");

  std::vector<std::string> names;
  std::vector<std::string> payloads;
  auto archive = std::as_bytes(std::span(bytes));
  TarReader reader(archive, "key group");
  for (;;) {
    auto member = reader.next();
    ASSERT_TRUE(member) << member.error().message;
    if (!*member) break;
    names.emplace_back((*member)->name);
    payloads.emplace_back(reinterpret_cast<const char*>((*member)->data.data()), (*member)->data.size());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"s1.b.txt", "s2.b.txt"}));
  EXPECT_EQ(payloads, (std::vector<std::string>{"b.txt@s1", "b.txt@s2"}));
  // mtime 0, uid/gid 0, mode 0644: the header of the first member.
  EXPECT_EQ(bytes.substr(100, 7), "0000644");
  EXPECT_EQ(bytes.substr(108, 7), "0000000");
  EXPECT_EQ(bytes.substr(136, 11), "00000000000");
  const std::vector<TarEntryInfo> entries = {{"s1.b.txt", Bytes{8}}, {"s2.b.txt", Bytes{8}}};
  EXPECT_EQ(tar_archive_size(entries)->count(), bytes.size());

  auto found = store->find_key_group(hash, k_default_chunk_size);
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->sha256, made->sha256);
  EXPECT_EQ((*found)->chunks, made->chunks);

  std::filesystem::remove(store->object_path(rev.shards[0].samples[1].objects[1].sha256));
  auto broken = store->materialise_key_group(rev, 0, keys, ContentHash::parse(std::string(64, 'd')).value(),
                                             k_default_chunk_size);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::integrity);
  EXPECT_FALSE(std::filesystem::exists(dir.sub("store/tars/" + std::string(64, 'd') + ".tar")));
}

// The chunk digests are computed in the pass that writes and hashes the tar, and stored beside it (.chunks) before
// the tar is renamed into place; a tar whose .chunks is missing or of another chunk size is materialised again.
TEST(OriginStore, MaterialisedKeyGroupHasItsChunkDigestsBesideIt) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store);
  Revision rev = two_sample_revision(*store);
  auto hash = ContentHash::parse(std::string(64, 'c')).value();
  const std::vector<std::string> keys = {"a.txt", "b.txt"};
  auto made = store->materialise_key_group(rev, 0, keys, hash, KiB(4));
  ASSERT_TRUE(made) << made.error().message;
  const std::string bytes = read_text(made->path);
  ASSERT_GT(bytes.size(), 4096u);  // 4 members and the end marker: 5 KiB, so two chunks
  ChunkHasher reference(KiB(4));
  reference.update(bytes.data(), bytes.size());
  const ChunkDigests want = reference.finish();
  ASSERT_EQ(want.digests.size(), ChunkDigests::count_for(Bytes{bytes.size()}, KiB(4)));
  EXPECT_EQ(made->chunks, want);
  const std::string chunks_file = dir.sub("store/tars/" + hash.hex() + ".chunks");
  EXPECT_EQ(read_text(chunks_file), "chunk_size 4096\n" + want.canonical());

  auto found = store->find_key_group(hash, KiB(4));
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->chunks, want);
  // Another chunk size, a missing or a damaged list: not found, so the server materialises it again.
  EXPECT_FALSE(*store->find_key_group(hash, KiB(8)));
  write_text(chunks_file, "chunk_size 4096\n" + want.digests[0].hex() + "\n");  // one digest short
  EXPECT_FALSE(*store->find_key_group(hash, KiB(4)));
  std::filesystem::remove(chunks_file);
  EXPECT_FALSE(*store->find_key_group(hash, KiB(4)));
  auto again = store->materialise_key_group(rev, 0, keys, hash, KiB(4));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->chunks, want);
  EXPECT_EQ(again->sha256, made->sha256);
}

// A pack waits for another pack of the same dataset (its .pack.lock), and leaves that wait at once when its work is
// stopped or cancelled (util::flock_exclusive): a Ctrl-C is not ignored until the other pack ends.
TEST(OriginStore, APackWaitingForTheDatasetsLockLeavesWhenItsWorkIsStopped) {
  TempDir dir;
  auto store = Store::open(dir.sub("store"), Store::Create::yes);
  ASSERT_TRUE(store) << store.error().message;
  auto held = store->lock_dataset("voice", "train");
  ASSERT_TRUE(held) << held.error().message;
  stoptest::expect_stopped(stoptest::wait_and_stop([&]() -> Result<void> {
    auto waited = store->lock_dataset("voice", "train");
    if (!waited) return std::move(waited).error();
    return {};
  }));
  auto other = store->lock_dataset("voice", "test");
  EXPECT_TRUE(other) << "another dataset's lock is another lock";
  held->reset();
  EXPECT_TRUE(store->lock_dataset("voice", "train")) << "the lock could not be taken once its holder let it go";
}

}  // namespace
}  // namespace datavo::origin
