// Tests of make_url_fetcher (src/net/url_fetcher.cpp): http:// against tests/support/http_fault_server.py on
// loopback, and file://.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "datavo/url_fetcher.hpp"
#include "support/test_server.hpp"

namespace datavo {
namespace {

using namespace std::chrono_literals;
using test::FaultServer;
using test::StringSink;

constexpr std::size_t k_shard_size = 256 * 1024 + 3;

std::string shard_bytes() {
  static const std::string bytes = [] {
    std::mt19937 engine(7);
    std::string out(k_shard_size, '\0');
    for (auto& c : out) c = static_cast<char>(engine() & 0xff);
    return out;
  }();
  return bytes;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Real sleeps (make_url_fetcher has no clock seam), so the backoff is kept tiny.
TransportOptions fast_options() {
  TransportOptions options;
  options.initial_backoff = 10ms;
  options.max_backoff = 50ms;
  options.connect_timeout = 2000ms;
  options.stall_timeout = 1s;
  return options;
}

class UrlFetcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                      ("datavo-url-fetcher-test-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*root_ / "with space");
    write_file(*root_ / "shard.tar", shard_bytes());
    write_file(*root_ / "with space" / "s.tar", "spaced\n");
    server_ = new FaultServer(test::FaultServerOptions{.root = root_->string()});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::filesystem::remove_all(*root_);
    delete root_;
    root_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->started()) << server_->error();
    ASSERT_TRUE(server_->reset());
  }

  static Result<Expectation> fetch(const std::string& url, StringSink& sink, TransportOptions options = fast_options(),
                                   std::optional<std::string> bearer_token = std::nullopt) {
    return make_url_fetcher(url, std::move(options), std::move(bearer_token))(sink);
  }

  static FaultServer* server_;
  static std::filesystem::path* root_;
};

FaultServer* UrlFetcherTest::server_ = nullptr;
std::filesystem::path* UrlFetcherTest::root_ = nullptr;

TEST_F(UrlFetcherTest, DownloadsAndReportsContentLength) {
  StringSink sink;
  auto expectation = fetch(server_->url("/shard.tar"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(expectation->size, Bytes{k_shard_size});
  EXPECT_FALSE(expectation->sha256.has_value());
  EXPECT_TRUE(sink.data() == shard_bytes());
  EXPECT_EQ(server_->requests("/shard.tar"), 1);
}

TEST_F(UrlFetcherTest, NotFoundIsNotRetried) {
  StringSink sink;
  auto expectation = fetch(server_->url("/absent.tar"), sink);
  ASSERT_FALSE(expectation);
  EXPECT_EQ(expectation.error().code, ErrorCode::not_found);
  EXPECT_EQ(server_->requests("/absent.tar"), 1);
}

TEST_F(UrlFetcherTest, ForbiddenIsPermissionDenied) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/403/shard.tar"), sink);
  ASSERT_FALSE(expectation);
  EXPECT_EQ(expectation.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(server_->requests("/faults/403/shard.tar"), 1);
}

TEST_F(UrlFetcherTest, ServerErrorsAreRetried) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/status500/shard.tar?count=2"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_TRUE(sink.data() == shard_bytes());
  EXPECT_EQ(server_->requests("/faults/status500/shard.tar"), 3);
}

TEST_F(UrlFetcherTest, HonoursRetryAfter) {
  StringSink sink;
  const auto started = std::chrono::steady_clock::now();
  auto expectation = fetch(server_->url("/faults/status429/shard.tar"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - started, 900ms);  // "Retry-After: 1", not the 10 ms backoff
  EXPECT_EQ(server_->requests("/faults/status429/shard.tar"), 2);
}

TEST_F(UrlFetcherTest, ResumesATruncatedDownloadWithRange) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/truncate/shard.tar"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(expectation->size, Bytes{k_shard_size});  // the whole entity, not the 206's length
  EXPECT_TRUE(sink.data() == shard_bytes());
  EXPECT_EQ(sink.restarts(), 0);
  EXPECT_EQ(server_->ranges("/faults/truncate/shard.tar"),
            std::vector<std::string>{"bytes=" + std::to_string(k_shard_size / 2) + "-"});
}

TEST_F(UrlFetcherTest, RestartsWhenTheServerHasNoRanges) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/truncate/shard.tar?ranges=0"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(expectation->size, Bytes{k_shard_size});
  EXPECT_TRUE(sink.data() == shard_bytes());
  EXPECT_EQ(sink.restarts(), 1);
  EXPECT_EQ(server_->requests("/faults/truncate/shard.tar"), 2);
  EXPECT_EQ(server_->range_requests("/faults/truncate/shard.tar"), 0);
}

TEST_F(UrlFetcherTest, RetriesAfterAStall) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/stall/shard.tar?stall_s=20"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_TRUE(sink.data() == shard_bytes());
  EXPECT_EQ(server_->requests("/faults/stall/shard.tar"), 2);
}

TEST_F(UrlFetcherTest, ReportsTheServersSizeForWrongBytes) {
  StringSink sink;
  auto expectation = fetch(server_->url("/faults/wrongbytes/shard.tar"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;  // the hierarchy's SHA-256 check catches these
  EXPECT_EQ(expectation->size, Bytes{k_shard_size});
  EXPECT_EQ(sink.data().size(), k_shard_size);
  EXPECT_FALSE(sink.data() == shard_bytes());

  StringSink longer;
  expectation = fetch(server_->url("/faults/wrongsize/shard.tar"), longer);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(expectation->size, Bytes{k_shard_size + 1});
}

TEST_F(UrlFetcherTest, StartsOverOnASinkThatHoldsBytes) {
  StringSink sink;
  sink.prefill("stale bytes of an earlier attempt");
  auto expectation = fetch(server_->url("/shard.tar"), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_TRUE(sink.data() == shard_bytes());
}

TEST_F(UrlFetcherTest, SendsTheBearerToken) {
  const std::string url = server_->url("/shard.tar?require_auth=Bearer%20t0ken");
  StringSink anonymous;
  auto refused = fetch(url, anonymous);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);

  StringSink sink;
  auto expectation = fetch(url, sink, fast_options(), "t0ken");
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_TRUE(sink.data() == shard_bytes());
}

TEST_F(UrlFetcherTest, ReadsFileUrls) {
  StringSink sink;
  auto expectation = fetch("file://" + (*root_ / "shard.tar").string(), sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(expectation->size, Bytes{k_shard_size});
  EXPECT_TRUE(sink.data() == shard_bytes());
}

TEST_F(UrlFetcherTest, FileUrlsWithLocalhostAndEscapes) {
  StringSink sink;
  auto expectation = fetch("file://localhost" + root_->string() + "/with%20space/s.tar", sink);
  ASSERT_TRUE(expectation) << expectation.error().message;
  EXPECT_EQ(sink.data(), "spaced\n");
  EXPECT_EQ(expectation->size, Bytes{7});
}

TEST_F(UrlFetcherTest, MissingFileIsNotFound) {
  StringSink sink;
  auto expectation = fetch("file://" + (*root_ / "absent.tar").string(), sink);
  ASSERT_FALSE(expectation);
  EXPECT_EQ(expectation.error().code, ErrorCode::not_found);
}

TEST_F(UrlFetcherTest, FileUrlsOfOtherHostsOrDirectoriesAreRefused) {
  StringSink sink;
  auto other_host = fetch("file://otherhost/etc/hostname", sink);
  ASSERT_FALSE(other_host);
  EXPECT_EQ(other_host.error().code, ErrorCode::invalid_argument);
  auto directory = fetch("file://" + root_->string(), sink);
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().code, ErrorCode::invalid_argument);
}

TEST_F(UrlFetcherTest, UnsupportedSchemesAreInvalidArguments) {
  StringSink sink;
  auto expectation = fetch("gopher://example.com/shard.tar?token=s3cr3t", sink);
  ASSERT_FALSE(expectation);
  EXPECT_EQ(expectation.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(expectation.error().message.find("s3cr3t"), std::string::npos);
}

}  // namespace
}  // namespace datavo
