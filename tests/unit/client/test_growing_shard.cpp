// Reading while fetching (src/client/growing_shard.cpp): GrowingSamples over a staging file that grows chunk by chunk
// (written here, its verified prefix published as the hierarchy's LandingSink would), against a SampleIterator over
// the whole archive: the same samples in the same order, before the install; only samples whose bytes (and the member
// after them) are verified; a new staging file (a refetch) goes on where the reader was; a fault in verified bytes is
// an error at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "client/growing_shard.hpp"
#include "support/temp_dir.hpp"

namespace datavo::client {
namespace {

using shardtest::TempDir;

// A WebDataset tar of `count` samples with two fields each, of varied sizes so that samples straddle chunks.
std::string make_tar(std::size_t count) {
  std::string out;
  TarWriter writer([&out](std::span<const std::byte> bytes) -> Result<void> {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return ok();
  });
  for (std::size_t i = 0; i < count; ++i) {
    const std::string id = "s" + std::to_string(1000 + i);
    const std::string a(100 + 700 * (i % 5), char('a' + i % 26));
    const std::string b(30 + 2000 * (i % 3), char('A' + i % 26));
    EXPECT_TRUE(writer.add_member(id + ".a.bin", std::as_bytes(std::span(a.data(), a.size()))));
    EXPECT_TRUE(writer.add_member(id + ".b.txt", std::as_bytes(std::span(b.data(), b.size()))));
  }
  EXPECT_TRUE(writer.finish());
  return out;
}

struct Expected {
  std::string id;
  std::string first_field;
  std::uint64_t needs = 0;  // the verified bytes it takes: up to the end of the member after it (or the archive)
};

std::vector<Expected> expected_samples(const std::string& tar) {
  const auto bytes = std::as_bytes(std::span(tar.data(), tar.size()));
  std::vector<Expected> out;
  std::vector<std::uint64_t> first_member_end;  // of each sample: the end of its first member's padded payload
  auto visited = for_each_sample(bytes, "t.tar", [&](const Sample& s) -> Result<void> {
    const auto& f = s.fields.front();
    const auto end = std::uint64_t(f.data.data() + f.data.size() - bytes.data());
    first_member_end.push_back((end + 511) / 512 * 512);
    out.push_back({std::string(s.id), std::string(reinterpret_cast<const char*>(f.data.data()), f.data.size()), 0});
    return ok();
  });
  EXPECT_TRUE(visited);
  for (std::size_t i = 0; i < out.size(); ++i) out[i].needs = i + 1 < out.size() ? first_member_end[i + 1] : tar.size();
  return out;
}

// A staging file that the test fills, and the read handle the hierarchy would give the observer.
class StagingFile {
 public:
  explicit StagingFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0);
  }
  ~StagingFile() { ::close(fd_); }
  ShardHandle reader() const { return ShardHandle(::open(path_.c_str(), O_RDONLY | O_CLOEXEC), path_, Bytes{0}); }
  void append(const std::string& tar, std::size_t from, std::size_t to) {
    ASSERT_EQ(::pwrite(fd_, tar.data() + from, to - from, off_t(from)), ssize_t(to - from));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

struct Read {
  std::vector<std::string> ids;
  std::vector<std::string> first_fields;
  std::optional<Error> error;
};

// Reads every sample of `shard` (on the calling thread) until the end or an Error.
Read read_all(const std::shared_ptr<GrowingShard>& shard) {
  GrowingSamples samples(shard, "t.tar");
  Read out;
  for (;;) {
    auto sample = samples.next();
    if (!sample) {
      out.error = sample.error();
      return out;
    }
    if (*sample == nullptr) return out;
    out.ids.emplace_back((*sample)->id);
    const auto& f = (*sample)->fields.front();
    out.first_fields.emplace_back(reinterpret_cast<const char*>(f.data.data()), f.data.size());
  }
}

TEST(GrowingSamples, ReadsEverySampleInOrderWhileTheShardGrowsBeforeItIsInstalled) {
  const std::string tar = make_tar(40);
  const auto want = expected_samples(tar);
  for (std::size_t chunk : {std::size_t{4096}, std::size_t{5000}, std::size_t{65536}}) {
    TempDir dir;
    StagingFile file(dir.sub("staging"));
    auto shard = std::make_shared<GrowingShard>("t.tar");
    shard->staging(file.reader());
    Read got;
    std::thread reader([&] { got = read_all(shard); });
    for (std::size_t at = 0; at < tar.size(); at += chunk) {
      const std::size_t end = std::min(at + chunk, tar.size());
      file.append(tar, at, end);
      shard->verified(Bytes{end}, Bytes{tar.size()});
    }
    // Never complete(): the reader reaches the end marker in verified bytes alone, as before an install.
    reader.join();
    ASSERT_FALSE(got.error) << got.error->message;
    ASSERT_EQ(got.ids.size(), want.size()) << "chunk " << chunk;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got.ids[i], want[i].id);
      EXPECT_EQ(got.first_fields[i], want[i].first_field);
    }
  }
}

TEST(GrowingSamples, HandsOutOnlySamplesWhoseBytesAndTheMemberAfterThemAreVerified) {
  const std::string tar = make_tar(12);
  const auto want = expected_samples(tar);
  for (std::uint64_t prefix : {std::uint64_t{0}, std::uint64_t{511}, std::uint64_t{4096}, want[3].needs - 1,
                               want[3].needs, want[7].needs + 100, std::uint64_t(tar.size() - 1)}) {
    TempDir dir;
    StagingFile file(dir.sub("staging"));
    auto shard = std::make_shared<GrowingShard>("t.tar");
    shard->staging(file.reader());
    file.append(tar, 0, prefix);
    // The rest of the file is garbage that was never verified: no sample may come from it.
    const std::string garbage(tar.size() - prefix, '\x7f');
    file.append(std::string(prefix, '\0') + garbage, prefix, tar.size());
    if (prefix > 0) shard->verified(Bytes{prefix}, Bytes{tar.size()});
    shard->fail(Error{ErrorCode::integrity, "chunk 5 is bad"});
    const Read got = read_all(shard);
    std::size_t expected_count = 0;
    while (expected_count < want.size() && want[expected_count].needs <= prefix) ++expected_count;
    EXPECT_EQ(got.ids.size(), expected_count) << "prefix " << prefix;
    for (std::size_t i = 0; i < got.ids.size() && i < want.size(); ++i) EXPECT_EQ(got.ids[i], want[i].id);
    ASSERT_TRUE(got.error) << "prefix " << prefix;
    EXPECT_EQ(got.error->message, "chunk 5 is bad");
  }
}

TEST(GrowingSamples, ANewStagingFileGoesOnWhereTheReaderWas) {
  const std::string tar = make_tar(30);
  const auto want = expected_samples(tar);
  TempDir dir;
  StagingFile first(dir.sub("first"));
  StagingFile second(dir.sub("second"));
  auto shard = std::make_shared<GrowingShard>("t.tar");
  shard->staging(first.reader());
  const std::size_t half = tar.size() / 2;
  first.append(tar, 0, half);
  shard->verified(Bytes{half}, Bytes{tar.size()});
  Read got;
  std::thread reader([&] { got = read_all(shard); });
  // The first download fails; the refetch starts a new file from byte 0.
  shard->staging(second.reader());
  for (std::size_t at = 0; at < tar.size(); at += 4096) {
    const std::size_t end = std::min<std::size_t>(at + 4096, tar.size());
    second.append(tar, at, end);
    shard->verified(Bytes{end}, Bytes{tar.size()});
  }
  reader.join();
  ASSERT_FALSE(got.error) << got.error->message;
  ASSERT_EQ(got.ids.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.ids[i], want[i].id);
}

TEST(GrowingSamples, AFaultInVerifiedBytesIsAnErrorAtOnce) {
  std::string tar = make_tar(10);
  const auto want = expected_samples(tar);
  tar[want[2].needs + 3] ^= 0x01;  // a header of sample 4: its checksum fails
  TempDir dir;
  StagingFile file(dir.sub("staging"));
  auto shard = std::make_shared<GrowingShard>("t.tar");
  shard->staging(file.reader());
  file.append(tar, 0, tar.size());
  shard->verified(Bytes{tar.size() - 1024}, Bytes{tar.size()});  // not complete: only the end marker is missing
  const Read got = read_all(shard);
  ASSERT_TRUE(got.error);
  EXPECT_NE(got.error->message.find("checksum"), std::string::npos) << got.error->message;
  EXPECT_LE(got.ids.size(), 4u);
}

TEST(GrowingSamples, AReaderWaitingForBytesStopsWhenItsStreamIsCancelled) {
  auto shard = std::make_shared<GrowingShard>("t.tar");
  std::atomic<bool> stop{false};
  GrowingSamples samples(shard, "t.tar", &stop);
  Result<const Sample*> got = Error{ErrorCode::internal, "not run"};
  std::thread reader([&] { got = samples.next(); });  // no byte is ever verified: it waits
  stop.store(true);
  reader.join();
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::cancelled) << got.error().message;
}

TEST(GrowingShard, TheInstalledShardEndsTheWaitAndAFailureIsTheSameForEveryReader) {
  auto shard = std::make_shared<GrowingShard>("t.tar");
  shard->fail(Error{ErrorCode::remote, "origin gone"});
  for (int reader = 0; reader < 2; ++reader) {
    auto seen = shard->wait_beyond(0);
    ASSERT_FALSE(seen);
    EXPECT_EQ(seen.error().message, "origin gone");
  }
  EXPECT_EQ(shard->prefixes_published(), 0u);
}

TEST(GrowingShardFlight, AFollowerReadsTheLeadersVerifiedPrefixAndIsNotFailedByIt) {
  const std::string tar = make_tar(30);
  const auto want = expected_samples(tar);
  TempDir dir;
  StagingFile leaders(dir.sub("leader"));
  StagingFile own(dir.sub("own"));
  auto leader = std::make_shared<GrowingShard>("t.tar", "local/flight-1");
  auto follower = std::make_shared<GrowingShard>("t.tar", "local/flight-1");
  auto stranger = std::make_shared<GrowingShard>("t.tar", "local/flight-2");
  leader->join_flight();
  follower->join_flight();
  stranger->join_flight();
  // The leader's fetch stages a file and verifies half of the shard, then fails.
  leader->staging(leaders.reader());
  const std::size_t half = tar.size() / 2;
  leaders.append(tar, 0, half);
  leader->verified(Bytes{half}, Bytes{tar.size()});
  EXPECT_GT(follower->prefixes_published(), 0u) << "the follower did not see the leader's prefix";
  EXPECT_EQ(stranger->prefixes_published(), 0u) << "another shard's flight followed this one";
  Read got;
  std::thread reader([&] { got = read_all(follower); });
  leader->fail(Error{ErrorCode::remote, "origin gone"});
  leader->leave_flight();
  // The follower's own fetch then takes over with its own staging file (as its get_or_fetch would, given the lock).
  follower->staging(own.reader());
  for (std::size_t at = 0; at < tar.size(); at += 8192) {
    const std::size_t end = std::min<std::size_t>(at + 8192, tar.size());
    own.append(tar, at, end);
    follower->verified(Bytes{end}, Bytes{tar.size()});
  }
  reader.join();
  follower->leave_flight();
  stranger->leave_flight();
  ASSERT_FALSE(got.error) << got.error->message;
  ASSERT_EQ(got.ids.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.ids[i], want[i].id);
}

TEST(GrowingShardFlight, AFollowerThatJoinsLateStartsFromWhatTheLeaderHasVerified) {
  const std::string tar = make_tar(10);
  TempDir dir;
  StagingFile file(dir.sub("leader"));
  auto leader = std::make_shared<GrowingShard>("t.tar", "local/flight-3");
  leader->join_flight();
  leader->staging(file.reader());
  file.append(tar, 0, tar.size());
  leader->verified(Bytes{tar.size()}, Bytes{tar.size()});
  auto late = std::make_shared<GrowingShard>("t.tar", "local/flight-3");
  late->join_flight();
  const Read got = read_all(late);  // never completed: everything came from the leader's file
  ASSERT_FALSE(got.error) << got.error->message;
  EXPECT_EQ(got.ids.size(), 10u);
  late->leave_flight();
  leader->leave_flight();
}

}  // namespace
}  // namespace datavo::client
