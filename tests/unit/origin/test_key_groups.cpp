// Key-group tars (src/origin/key_groups.cpp): their content hashes, materialised once and again when missing.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "origin/key_groups.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;
using origin::KeyGroupTar;

class OriginKeyGroupsTest : public ServerTest {};

TEST_F(OriginKeyGroupsTest, ConcurrentFirstTicketsForOneKeyGroupAgree) {
  start();
  constexpr int k_clients = 8;
  std::vector<json> tickets(k_clients);
  std::vector<std::string> bodies(k_clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_clients; ++i) {
    threads.emplace_back([&, i] {
      auto r = post_ticket(R"({"dataset":"voice","split":"train","revision":1,"shard_index":1,
                              "keys":["audio.wav","transcript.txt"]})");
      tickets[i] = json_of(r);
      if (r.status == 200) bodies[i] = get(tickets[i]["url"]).body;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < k_clients; ++i) {
    ASSERT_TRUE(tickets[i].is_object() && tickets[i].contains("sha256")) << tickets[i].dump();
    EXPECT_EQ(tickets[i]["sha256"], tickets[0]["sha256"]);
    EXPECT_EQ(sha256_hex(bodies[i]), tickets[0]["sha256"]);
  }
  for (const auto& entry : std::filesystem::directory_iterator(store_root() + "/tars")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST_F(OriginKeyGroupsTest, AMissingTarIsMaterialisedAgain) {
  start();
  json t = ticket(1, 0, {"audio.wav"});
  std::filesystem::remove_all(store_root() + "/tars");
  std::filesystem::create_directories(store_root() + "/tars");
  const std::string bytes = download(t);
  EXPECT_EQ(sha256_hex(bytes), t["sha256"]);
}

TEST_F(OriginKeyGroupsTest, TheHashOfAKeyGroupIsTheDocumentedOne) {
  auto store = origin::Store::open(store_root(), origin::Store::Create::no);
  ASSERT_TRUE(store);
  auto revision = store->load_revision("voice", "train", 1);
  ASSERT_TRUE(revision && *revision);
  const origin::Revision& rev = **revision;
  const std::vector<std::string> keys = {"audio.wav", "transcript.txt"};
  const auto hash = origin::key_group_hash(rev, 1, keys);
  ASSERT_TRUE(hash);
  EXPECT_EQ(*hash, compute_content_hash(ShardIdentity{rev.manifest_ref, "1", 1, keys, {"utt_0002", "utt_0003"}}));
  EXPECT_FALSE(origin::key_group_hash(rev, 3, keys)) << "no shard 3";
  EXPECT_FALSE(origin::key_group_hash(rev, 0, std::vector<std::string>{"video.mp4"})) << "no such key";
}

TEST_F(OriginKeyGroupsTest, ATicketWhoseHashTheRevisionDoesNotGiveIsRefused) {
  auto store = origin::Store::open(store_root(), origin::Store::Create::no);
  ASSERT_TRUE(store);
  origin::RevisionCache revisions(*store);
  origin::KeyGroups groups(*store, revisions, k_default_chunk_size);
  origin::TicketFields fields;
  fields.content_hash = std::string(64, 'e');
  fields.dataset = "voice";
  fields.split = "train";
  fields.revision = 1;
  fields.shard_index = 0;
  fields.keys = {"audio.wav"};
  auto refused = groups.get(fields);
  ASSERT_TRUE(std::holds_alternative<origin::Refusal>(refused));
  EXPECT_EQ(std::get<origin::Refusal>(refused).status, 404);
  fields.content_hash =
      origin::key_group_hash(*store->load_revision("voice", "train", 1).value(), 0, fields.keys)->hex();
  auto made = groups.get(fields);
  ASSERT_TRUE(std::holds_alternative<KeyGroupTar>(made));
  EXPECT_EQ(sha256_hex(read_text(std::get<KeyGroupTar>(made).path)), std::get<KeyGroupTar>(made).sha256.hex());
}

}  // namespace
}  // namespace datavo
