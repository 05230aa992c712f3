// Tests of src/net/http_client.cpp against tests/support/http_fault_server.py on loopback.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "net/http_client.hpp"
#include "support/socket_options.hpp"
#include "support/test_server.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo::net {
namespace {

using namespace std::chrono_literals;
using test::FaultServer;
using test::StringSink;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::size_t k_big_size = 300 * 1024 + 7;  // odd, so that "half" is not a round number

std::string deterministic_bytes(std::size_t size, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(engine() & 0xff);
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Records the sleeps it is asked for and returns at once; time advances by what was "slept".
class FakeClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point now() override {
    std::lock_guard lock(mutex_);
    return base_ + slept_;
  }
  std::chrono::system_clock::time_point wall_now() override {
    std::lock_guard lock(mutex_);
    return wall_base_ + slept_;
  }
  void sleep_for(Milliseconds duration) override {
    std::lock_guard lock(mutex_);
    sleeps_.push_back(duration);
    slept_ += duration;
  }
  std::vector<Milliseconds> sleeps() {
    std::lock_guard lock(mutex_);
    return sleeps_;
  }

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point base_ = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall_base_ = std::chrono::system_clock::now();
  Milliseconds slept_{0};
  std::vector<Milliseconds> sleeps_;
};

class HttpClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                      ("datavo-http-client-test-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*root_);
    write_file(*root_ / "small.txt", "hello, shard\n");
    write_file(*root_ / "empty.bin", "");
    write_file(*root_ / "big.bin", big());
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

  static const std::string& big() {
    static const std::string bytes = deterministic_bytes(k_big_size, 42);
    return bytes;
  }

  // Fast policies: a fake clock for the backoff, short timeouts for the stall tests.
  HttpClient client(int max_attempts = 5) {
    TransportOptions options;
    options.max_attempts = max_attempts;
    options.initial_backoff = 100ms;
    options.max_backoff = 1000ms;
    options.connect_timeout = 2000ms;
    options.stall_timeout = 1s;
    return HttpClient(options, clock_);
  }

  static HttpRequest get(std::string url, ByteSink* sink = nullptr) {
    HttpRequest request;
    request.url = std::move(url);
    request.sink = sink;
    return request;
  }

  static FaultServer* server_;
  static std::filesystem::path* root_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

FaultServer* HttpClientTest::server_ = nullptr;
std::filesystem::path* HttpClientTest::root_ = nullptr;

// A cancellation request (util::request_cancel: the CLI's SIGINT and SIGTERM) stops a transfer in the middle within a
// fraction of a second, unretried, with ErrorCode::cancelled. The request is process-wide and sticky, so the case
// runs in a child process of its own (a death test re-executing this binary).
TEST_F(HttpClientTest, CancellationStopsATransferAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StringSink sink;
        HttpClient http(TransportOptions{});  // the real clock: the backoff sleeps are cancellable too
        std::thread canceller([] {
          std::this_thread::sleep_for(500ms);
          util::request_cancel(SIGINT);
        });
        const auto started = std::chrono::steady_clock::now();
        auto response = http.perform(get(server_->url("/big.bin?rate=20000"), &sink));  // 15 s at that rate
        const auto took = std::chrono::steady_clock::now() - started;
        canceller.join();
        const bool stopped = !response && response.error().code == ErrorCode::cancelled &&
                             response.error().message.find("interrupted by SIGINT") != std::string::npos;
        std::_Exit(stopped && took < 3s && sink.written().count() > 0 && server_->requests("/big.bin") == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// The real clock's sleep (the backoff between attempts) ends on a cancellation instead of sleeping it out. In a
// child process, as above: the request is process-wide and sticky.
TEST_F(HttpClientTest, TheRealClocksSleepEndsOnCancellation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        util::request_cancel(SIGTERM);
        system_clock()->sleep_for(Milliseconds{3'600'000});
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// What undoes a cancelled operation on a server (a lease release, a multipart abort) runs in a util::CleanupScope:
// the transport sends it although the cancellation was requested, and retries it as usual. In a child process.
TEST_F(HttpClientTest, ARequestInACleanupScopeIsSentAndRetriedAfterACancellation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TransportOptions options;
        options.initial_backoff = 100ms;
        HttpClient http(options);  // the real clock: its sleeps see the cancellation
        util::request_cancel(SIGINT);
        auto refused = http.perform(get(server_->url("/small.txt")));
        const bool refused_ok =
            !refused && refused.error().code == ErrorCode::cancelled && server_->requests("/small.txt") == 0;
        util::CleanupScope cleanup;
        auto sent = http.perform(get(server_->url("/faults/status503/small.txt")));  // 503, then 200
        const bool sent_ok = sent && sent->status == 200 && sent->body == "hello, shard\n" && sent->attempts == 2;
        std::_Exit(refused_ok && sent_ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A cleanup request already under way when the cancellation comes goes on (it must not leave a lease behind).
TEST_F(HttpClientTest, ACancellationDoesNotStopACleanupRequestUnderWay) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        HttpClient http(TransportOptions{});
        std::thread canceller([] {
          std::this_thread::sleep_for(200ms);
          util::request_cancel(SIGTERM);
        });
        util::CleanupScope cleanup;
        auto sent = http.perform(get(server_->url("/small.txt?delay_ms=800")));
        canceller.join();
        std::_Exit(sent && sent->status == 200 && util::cancel_requested() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// But a cleanup is bounded: a server that does not answer, or keeps failing, is given up at util::cleanup_deadline()
// (k_cleanup_budget after the cancellation), with cancelled, whatever the attempts and timeouts would allow.
TEST_F(HttpClientTest, ACleanupRequestEndsAtTheCleanupDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        HttpClient http(TransportOptions{});  // no deadline, stall timeout of many seconds
        const auto requested = std::chrono::steady_clock::now();
        util::request_cancel(SIGINT);
        util::CleanupScope cleanup;
        auto silent = http.perform(get(server_->url("/small.txt?delay_ms=30000")));
        const auto took = std::chrono::steady_clock::now() - requested;
        const bool ok = !silent && silent.error().code == ErrorCode::cancelled &&
                        silent.error().message.find("cleanup") != std::string::npos && took >= util::k_cleanup_budget &&
                        took < util::k_cleanup_budget + 2s;
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HttpClientTest, ACleanupRequestThatKeepsFailingEndsAtTheCleanupDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TransportOptions options;
        options.max_attempts = 1000;
        options.initial_backoff = 50ms;
        options.max_backoff = 200ms;
        HttpClient http(options);
        const auto requested = std::chrono::steady_clock::now();
        util::request_cancel(SIGINT);
        util::CleanupScope cleanup;
        auto failing = http.perform(get(server_->url("/faults/status503/small.txt?count=100000")));
        const auto took = std::chrono::steady_clock::now() - requested;
        const int sent = server_->requests("/faults/status503/small.txt");
        const bool ok = !failing && failing.error().code == ErrorCode::cancelled && sent >= 2 &&
                        took >= util::k_cleanup_budget && took < util::k_cleanup_budget + 2s;
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HttpClientTest, GetsBodyIntoStringWithContentLength) {
  auto http = client();
  auto response = http.perform(get(server_->url("/small.txt")));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->reason, "OK");
  EXPECT_EQ(response->body, "hello, shard\n");
  EXPECT_EQ(response->entity_size, 13u);
  EXPECT_EQ(response->body_bytes, Bytes{13});
  EXPECT_EQ(response->attempts, 1);
  EXPECT_TRUE(response->header("etag").has_value());
  EXPECT_EQ(response->header("Accept-Ranges"), "bytes");
  EXPECT_EQ(server_->requests("/small.txt"), 1);
  EXPECT_TRUE(clock_->sleeps().empty());
}

TEST_F(HttpClientTest, StreamsIntoSinkNotIntoBody) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/big.bin"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(sink.data(), big());
  EXPECT_TRUE(response->body.empty());
  EXPECT_EQ(response->entity_size, k_big_size);
  EXPECT_EQ(response->body_bytes, Bytes{k_big_size});
}

TEST_F(HttpClientTest, EmptyBodyLeavesSinkEmpty) {
  auto http = client();
  StringSink sink;
  sink.prefill("left over from an earlier attempt");
  auto response = http.perform(get(server_->url("/empty.bin"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(sink.data(), "");
  EXPECT_EQ(response->entity_size, 0u);
}

TEST_F(HttpClientTest, AnErrorBodyIsWordedByTheRequestsDescriberElseExcerpted) {
  auto http = client();
  auto plain = http.perform(get(server_->url("/missing.bin"), nullptr));
  ASSERT_FALSE(plain);
  HttpRequest worded_request = get(server_->url("/missing.bin"), nullptr);
  worded_request.describe_error_body = [](long status, std::string_view) {
    return std::string("worded for HTTP ") + std::to_string(status);
  };
  auto worded = http.perform(worded_request);
  ASSERT_FALSE(worded);
  EXPECT_EQ(worded.error().code, ErrorCode::not_found);
  EXPECT_THAT(worded.error().message, HasSubstr("HTTP 404"));
  EXPECT_THAT(worded.error().message, ::testing::EndsWith(": worded for HTTP 404"));
  // A describer with nothing to say (not its service's error body) leaves the excerpt.
  HttpRequest unworded_request = get(server_->url("/missing.bin"), nullptr);
  unworded_request.describe_error_body = [](long, std::string_view) { return std::string(); };
  auto unworded = http.perform(unworded_request);
  ASSERT_FALSE(unworded);
  EXPECT_EQ(unworded.error().message, plain.error().message);
}

TEST_F(HttpClientTest, NotFoundIsPermanentAndNotRetried) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/missing.bin"), &sink));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::not_found);
  EXPECT_THAT(response.error().message, HasSubstr("HTTP 404"));
  EXPECT_EQ(sink.data(), "");  // an error body never reaches the sink
  EXPECT_EQ(server_->requests("/missing.bin"), 1);
  EXPECT_TRUE(clock_->sleeps().empty());
}

TEST_F(HttpClientTest, ForbiddenIsPermissionDenied) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/403/small.txt")));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(server_->requests("/faults/403/small.txt"), 1);
}

TEST_F(HttpClientTest, AcceptedErrorStatusIsAResponse) {
  auto http = client();
  StringSink sink;
  auto request = get(server_->url("/missing.bin"), &sink);
  request.accepted_statuses = {404};
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->body, "no such file\n");
  EXPECT_EQ(sink.data(), "");
}

TEST_F(HttpClientTest, ServerErrorsAreRetriedWithJitteredBackoff) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/status500/small.txt?count=2")));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "hello, shard\n");
  EXPECT_EQ(response->attempts, 3);
  EXPECT_EQ(server_->requests("/faults/status500/small.txt"), 3);
  auto sleeps = clock_->sleeps();
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_LE(sleeps[0], 100ms);  // full jitter: uniform in [0, initial * 2^(n-1)]
  EXPECT_LE(sleeps[1], 200ms);
  EXPECT_EQ(response->elapsed, sleeps[0] + sleeps[1]);  // the fake clock only moves when "sleeping"
}

TEST_F(HttpClientTest, GivesUpAfterMaxAttempts) {
  auto http = client(3);
  auto response = http.perform(get(server_->url("/faults/status503/small.txt?count=100")));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::remote);
  EXPECT_THAT(response.error().message, HasSubstr("HTTP 503"));
  EXPECT_THAT(response.error().message, HasSubstr("gave up after 3 attempts"));
  EXPECT_EQ(server_->requests("/faults/status503/small.txt"), 3);
  EXPECT_EQ(clock_->sleeps().size(), 2u);
}

TEST_F(HttpClientTest, HonoursRetryAfterOn429) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/status429/small.txt")));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->attempts, 2);
  EXPECT_EQ(server_->requests("/faults/status429/small.txt"), 2);
  EXPECT_EQ(clock_->sleeps(), std::vector<Milliseconds>{1000ms});  // "Retry-After: 1", not the jittered backoff
}

TEST_F(HttpClientTest, ClampsAHugeRetryAfter) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/status503/small.txt?retry_after=86400")));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(clock_->sleeps(), std::vector<Milliseconds>{k_max_retry_after});
}

TEST_F(HttpClientTest, ResumesATruncatedBodyWithRange) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/faults/truncate/big.bin"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 206);
  EXPECT_EQ(response->entity_size, k_big_size);  // from Content-Range, not the 206's Content-Length
  EXPECT_TRUE(sink.data() == big());
  EXPECT_EQ(sink.restarts(), 0);
  EXPECT_EQ(server_->requests("/faults/truncate/big.bin"), 2);
  EXPECT_EQ(server_->ranges("/faults/truncate/big.bin"),
            std::vector<std::string>{"bytes=" + std::to_string(k_big_size / 2) + "-"});
}

TEST_F(HttpClientTest, ResumesAfterAConnectionReset) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/faults/reset/big.bin"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_TRUE(sink.data() == big());
  EXPECT_EQ(server_->requests("/faults/reset/big.bin"), 2);
  EXPECT_EQ(server_->range_requests("/faults/reset/big.bin"), 1);
}

TEST_F(HttpClientTest, RestartsWhenTheServerHasNoRanges) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/faults/truncate/big.bin?ranges=0"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(sink.data() == big());
  EXPECT_EQ(sink.restarts(), 1);
  EXPECT_EQ(server_->requests("/faults/truncate/big.bin"), 2);
  EXPECT_EQ(server_->range_requests("/faults/truncate/big.bin"), 0);
}

TEST_F(HttpClientTest, RestartsWhenContentRangeStartsElsewhere) {
  auto http = client();
  StringSink sink;
  auto response = http.perform(get(server_->url("/faults/truncate+badrange/big.bin"), &sink));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_TRUE(sink.data() == big());
  EXPECT_EQ(sink.restarts(), 1);
  // truncated, then a 206 from byte 0 (rejected), then the whole entity without Range.
  EXPECT_EQ(server_->requests("/faults/truncate+badrange/big.bin"), 3);
  EXPECT_EQ(server_->range_requests("/faults/truncate+badrange/big.bin"), 1);
}

TEST_F(HttpClientTest, RetriesAShortBodyWithoutSink) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/truncate/big.bin")));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_TRUE(response->body == big());
  EXPECT_EQ(server_->requests("/faults/truncate/big.bin"), 2);
  EXPECT_EQ(server_->range_requests("/faults/truncate/big.bin"), 0);
}

TEST_F(HttpClientTest, AStallTimesOutAndIsRetried) {
  auto http = client();
  StringSink sink;
  const auto started = std::chrono::steady_clock::now();
  auto response = http.perform(get(server_->url("/faults/stall/big.bin?stall_s=20"), &sink));
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_TRUE(sink.data() == big());
  EXPECT_EQ(server_->requests("/faults/stall/big.bin"), 2);
  EXPECT_EQ(server_->range_requests("/faults/stall/big.bin"), 1);
  EXPECT_LT(took, 10s);  // detected by the 1 s stall timeout, not by the server giving up after 20 s
}

TEST_F(HttpClientTest, AStallOnEveryAttemptIsATimeout) {
  auto http = client(1);
  auto response = http.perform(get(server_->url("/faults/stall/big.bin?stall_s=20")));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout);
  EXPECT_THAT(response.error().message, HasSubstr("stalled"));
}

TEST_F(HttpClientTest, ConnectionRefusedIsRetriedThenRemote) {
  // A port that was free a moment ago: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ::close(fd);
  const int port = ntohs(address.sin_port);

  auto http = client(2);
  auto response = http.perform(get("http://127.0.0.1:" + std::to_string(port) + "/x"));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::remote);
  EXPECT_THAT(response.error().message, HasSubstr("gave up after 2 attempts"));
  // The cause is kept for callers that go offline or fail fast (is_unreachable, result.hpp).
  EXPECT_EQ(response.error().sys_errno, ECONNREFUSED);
  EXPECT_THAT(response.error().message, HasSubstr("Connection refused"));
  EXPECT_TRUE(is_unreachable(response.error()));
  EXPECT_EQ(clock_->sleeps().size(), 1u);
}

TEST_F(HttpClientTest, SinkErrorsEndTheRequestWithoutRetry) {
  auto http = client();
  StringSink sink;
  sink.fail_writes_with = Error{ErrorCode::no_space, "staging disk full"};
  auto response = http.perform(get(server_->url("/big.bin"), &sink));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::no_space);
  EXPECT_EQ(response.error().message, "staging disk full");
  EXPECT_EQ(server_->requests("/big.bin"), 1);
}

TEST_F(HttpClientTest, NonHttpUrlsAreInvalidArguments) {
  auto http = client();
  for (const char* url : {"ftp://127.0.0.1/x", "file:///etc/passwd", "not a url"}) {
    auto response = http.perform(get(url));
    ASSERT_FALSE(response) << url;
    EXPECT_EQ(response.error().code, ErrorCode::invalid_argument) << url << ": " << response.error().message;
  }
}

TEST_F(HttpClientTest, HeaderInjectionIsRefused) {
  auto http = client();
  auto request = get(server_->url("/small.txt"));
  request.headers = {{"X-Test", "a\r\nX-Evil: 1"}};
  auto response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(server_->requests("/small.txt"), 0);
}

TEST_F(HttpClientTest, IfNoneMatchGivesNotModified) {
  auto http = client();
  auto first = http.perform(get(server_->url("/small.txt")));
  ASSERT_TRUE(first) << first.error().message;
  auto etag = first->header("ETag");
  ASSERT_TRUE(etag);
  auto request = get(server_->url("/small.txt"));
  request.headers = {{"If-None-Match", std::string(*etag)}};
  auto second = http.perform(request);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->status, 304);
  EXPECT_EQ(second->body, "");
  EXPECT_EQ(second->header("ETag"), *etag);
}

TEST_F(HttpClientTest, HeadReportsTheEntitySize) {
  auto http = client();
  auto request = get(server_->url("/big.bin"));
  request.method = HttpMethod::head;
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->entity_size, k_big_size);
  EXPECT_EQ(response->body, "");
}

TEST_F(HttpClientTest, PostsAStringBody) {
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::post;
  request.url = server_->url("/_echo");
  request.headers = {{"Content-Type", "application/json"}};
  request.body = std::string(R"({"shard": 3})");
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, R"({"shard": 3})");
  EXPECT_EQ(response->header("X-Echo-Method"), "POST");
  EXPECT_EQ(response->header("X-Echo-Content-Type"), "application/json");
}

TEST_F(HttpClientTest, PostWithoutContentTypeIsNotAForm) {
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::post;
  request.url = server_->url("/_echo");
  request.body = std::string("raw");
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->header("X-Echo-Content-Type"), "");
}

TEST_F(HttpClientTest, PutsAFileBodyAndResendsItOnRetry) {
  const auto path = *root_ / "upload.bin";
  write_file(path, big());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::put;
  request.url = server_->url("/faults/status500/_echo");
  request.body = FileBody{fd, Bytes{k_big_size}};
  auto response = http.perform(request);
  ::close(fd);
  std::filesystem::remove(path);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->header("X-Echo-Method"), "PUT");
  EXPECT_TRUE(response->body == big());
  EXPECT_EQ(response->attempts, 2);
}

TEST_F(HttpClientTest, PostIsNotRetriedAfterAServerError) {
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::post;
  request.url = server_->url("/faults/status500/_echo");
  request.body = std::string("ticket");
  auto response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::remote);
  EXPECT_EQ(server_->requests("/faults/status500/_echo"), 1);
}

TEST_F(HttpClientTest, PostIsRetriedWhenTheServerRefusedIt) {
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::post;
  request.url = server_->url("/faults/status503/_echo");
  request.body = std::string("ticket");
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "ticket");
  EXPECT_EQ(server_->requests("/faults/status503/_echo"), 2);
}

TEST_F(HttpClientTest, BearerAuthSendsTheToken) {
  auto http = client();
  auto auth = bearer_auth("tok-123");
  auto request = get(server_->url("/_echo"));
  request.auth = auth.get();
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->header("X-Echo-Authorization"), "Bearer tok-123");

  response = http.perform(get(server_->url("/_echo")));  // per request: another request goes without it
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->header("X-Echo-Authorization"), "");
}

// A fixed token is the caller's own: one holding a line break is its mistake (invalid_argument), and a refusal has
// no fresher token to repeat with. (A token from a provider: tests/unit/tier/cloud/test_bearer_auth.cpp.)
TEST(FixedBearerAuth, RefusesALineBreakAndNeverRepeatsARefusal) {
  auto auth = bearer_auth(std::string("tok\r\nX-Injected: 1"));
  PreparedRequest prepared;
  prepared.url = "http://127.0.0.1:1/o";
  auto result = auth->prepare(prepared, 1);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
  EXPECT_FALSE(find_header(prepared.headers, "Authorization"));
  EXPECT_FALSE(bearer_auth("tok-123")->refresh_after_refusal(401, {}, ""));
}

// Records what it saw of every attempt and signs it with the attempt number.
class RecordingAuth final : public RequestAuth {
 public:
  Result<void> prepare(PreparedRequest& request, int attempt) override {
    std::lock_guard lock(mutex);
    seen.push_back(request.headers);
    attempts.push_back(attempt);
    urls.push_back(request.url);
    request.headers.push_back(
        {"Authorization", "Sig attempt=" + std::to_string(attempt) +
                              " range=" + std::string(find_header(request.headers, "Range").value_or("none"))});
    if (!query.empty()) request.url += (request.url.find('?') == std::string::npos ? "?" : "&") + query;
    return datavo::ok();
  }
  bool refresh_after_refusal(long status, const HttpHeaders&, std::string_view body) override {
    std::lock_guard lock(mutex);
    refusals.push_back({status, std::string(body)});
    return refresh;
  }
  std::mutex mutex;
  std::vector<HttpHeaders> seen;
  std::vector<int> attempts;
  std::vector<std::string> urls;
  std::vector<std::pair<long, std::string>> refusals;
  std::string query;
  bool refresh = false;
};

TEST_F(HttpClientTest, RequestAuthSignsEveryAttemptAfterTheTransportsOwnHeaders) {
  auto http = client();
  RecordingAuth auth;
  StringSink sink;
  auto request = get(server_->url("/faults/truncate/big.bin"), &sink);
  request.auth = &auth;
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_TRUE(sink.data() == big());
  ASSERT_EQ(auth.attempts, (std::vector<int>{1, 2}));  // the retry is signed afresh
  EXPECT_FALSE(find_header(auth.seen[0], "Range"));
  // The resume's Range and If-Range are there when the signer runs, so that a signature covers them.
  auto range = find_header(auth.seen[1], "Range");
  ASSERT_TRUE(range);
  EXPECT_EQ(*range, "bytes=" + std::to_string(k_big_size / 2) + "-");
  EXPECT_TRUE(find_header(auth.seen[1], "If-Range"));
}

TEST_F(HttpClientTest, RequestAuthMayExtendTheUrlAndItIsNotLogged) {
  auto http = client();
  RecordingAuth auth;
  auth.query = "sig=SAS-SECRET";
  auto request = get(server_->url("/faults/403/small.txt"));
  request.auth = &auth;
  auto response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(response.error().message, Not(HasSubstr("SAS-SECRET")));
  EXPECT_THAT(server_->stats_json(), HasSubstr("sig=SAS-SECRET"));  // the server did get it
}

TEST_F(HttpClientTest, ARefusalAfterARefreshedCredentialIsRepeatedOnceWithoutCostingAnAttempt) {
  auto http = client(/*max_attempts=*/1);
  RecordingAuth auth;
  auth.refresh = true;
  // require_auth refuses every attempt: the first refusal is refreshed and repeated, the second is the answer.
  auto request = get(server_->url("/small.txt?require_auth=never"));
  request.auth = &auth;
  auto response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(auth.attempts, (std::vector<int>{1, 2}));
  ASSERT_EQ(auth.refusals.size(), 1u);
  EXPECT_EQ(auth.refusals[0].first, 401);
  EXPECT_EQ(clock_->sleeps(), (std::vector<Milliseconds>{0ms}));  // repeated at once
  EXPECT_EQ(server_->requests("/small.txt"), 2);

  RecordingAuth stale_is_final;  // a RequestAuth that refreshes nothing: a refusal is final at once
  request.auth = &stale_is_final;
  ASSERT_TRUE(server_->reset());
  response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(stale_is_final.attempts, (std::vector<int>{1}));
  EXPECT_EQ(server_->requests("/small.txt"), 1);
}

TEST_F(HttpClientTest, AnErrorFromTheRequestAuthEndsThePerformUnretried) {
  class NoCredentials final : public RequestAuth {
   public:
    Result<void> prepare(PreparedRequest&, int) override {
      return Error{ErrorCode::permission_denied, "no credentials found (looked in the environment)"};
    }
  } auth;
  auto http = client();
  auto request = get(server_->url("/small.txt"));
  request.auth = &auth;
  auto response = http.perform(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(response.error().message, HasSubstr("no credentials found"));
  EXPECT_EQ(server_->requests("/small.txt"), 0);
}

TEST_F(HttpClientTest, TheDeadlineBoundsTheWholePerformRetriesIncluded) {
  TransportOptions options;
  options.max_attempts = 100;
  options.initial_backoff = 200ms;
  options.max_backoff = 200ms;
  HttpClient http(options);  // the real clock: the deadline is real time
  auto request = get(server_->url("/faults/status500/small.txt?count=1000"));
  request.deadline = 1500ms;
  const auto started = std::chrono::steady_clock::now();
  auto response = http.perform(request);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout);
  EXPECT_THAT(response.error().message, HasSubstr("deadline of 1500 ms"));
  EXPECT_LT(took, 5s);
  EXPECT_LT(server_->requests("/faults/status500/small.txt"), 100);

  // A transfer that outlives the deadline is cut by it (the body trickles at 1 KiB/s).
  StringSink sink;
  auto slow = get(server_->url("/big.bin?rate=1024"), &sink);
  slow.deadline = 1000ms;
  auto cut = http.perform(slow);
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().code, ErrorCode::timeout);
  EXPECT_THAT(cut.error().message, HasSubstr("deadline"));
}

TEST_F(HttpClientTest, AFileBodySendsItsRangeOfTheFile) {
  const auto path = *root_ / "parts.bin";
  write_file(path, big());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto http = client();
  HttpRequest request;
  request.method = HttpMethod::put;
  request.url = server_->url("/faults/status500/_echo");
  request.body = FileBody{fd, Bytes{1000}, 4096};
  auto response = http.perform(request);
  ::close(fd);
  std::filesystem::remove(path);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->attempts, 2);  // resent whole from its own offset
  EXPECT_TRUE(response->body == big().substr(4096, 1000));
}

TEST_F(HttpClientTest, OneClientServesManyThreads) {
  auto http = client();
  constexpr int k_threads = 8;
  constexpr int k_requests = 4;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < k_requests; ++i) {
        StringSink sink;
        auto response = http.perform(get(server_->url("/big.bin"), &sink));
        if (response && sink.data() == big()) ++good;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(good.load(), k_threads * k_requests);
  EXPECT_EQ(server_->requests("/big.bin"), k_threads * k_requests);
}

// --- Pure policy functions -------------------------------------------------------------------------------------

// A server on loopback that answers one request with a small body and keeps the connection open until told, so
// that the client's end of it can be looked at.
class OneAnswerServer {
 public:
  OneAnswerServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size) != 0)
      return;
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneAnswerServer() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }
  // The client's port of the connection served.
  std::uint16_t client_port() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return client_port_ != 0 || done_; });
    return client_port_;
  }

 private:
  void serve() {
    sockaddr_storage peer{};
    socklen_t size = sizeof peer;
    const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::string request;
    char buffer[1024];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) break;
      request.append(buffer, static_cast<std::size_t>(n));
    }
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    [[maybe_unused]] auto written = ::write(fd, answer.data(), answer.size());
    std::unique_lock lock(mu_);
    client_port_ = test::port_of(peer);
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
    ::close(fd);
  }

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint16_t client_port_ = 0;  // guarded by mu_
  bool done_ = false;              // guarded by mu_
};

// Small requests and answers go out at once on a kept-alive connection: no wait for a delayed ACK.
TEST(HttpConnections, TheClientsConnectionsSendWithoutDelay) {
  OneAnswerServer server;
  ASSERT_NE(server.port(), 0);
  HttpClient http;
  HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/x";
  auto response = http.perform(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "ok");
  // The connection stays in the client's pool after the response.
  const auto sockets = test::tcp_sockets(server.client_port(), server.port());
  ASSERT_EQ(sockets.size(), 1u);
  EXPECT_TRUE(test::tcp_nodelay(sockets[0]));
}

TEST(HttpPolicy, StatusesMapToErrorCodes) {
  EXPECT_EQ(error_for_status(400, "x").code, ErrorCode::invalid_argument);
  EXPECT_EQ(error_for_status(401, "x").code, ErrorCode::permission_denied);
  EXPECT_EQ(error_for_status(403, "x").code, ErrorCode::permission_denied);
  EXPECT_EQ(error_for_status(404, "x").code, ErrorCode::not_found);
  EXPECT_EQ(error_for_status(408, "x").code, ErrorCode::timeout);
  EXPECT_EQ(error_for_status(409, "x").code, ErrorCode::remote);
  EXPECT_EQ(error_for_status(500, "x").code, ErrorCode::remote);
  EXPECT_EQ(error_for_status(404, "GET u").message, "GET u: HTTP 404");
}

TEST(HttpPolicy, TransientStatuses) {
  for (long status : {408L, 429L, 500L, 502L, 503L, 504L, 599L}) EXPECT_TRUE(is_transient_status(status)) << status;
  for (long status : {200L, 304L, 400L, 401L, 403L, 404L, 416L, 501L, 505L})
    EXPECT_FALSE(is_transient_status(status)) << status;
}

TEST(HttpPolicy, FullJitterBackoffIsCapped) {
  EXPECT_EQ(full_jitter_backoff(1, 200ms, 10s, 0.0), 0ms);
  EXPECT_EQ(full_jitter_backoff(1, 200ms, 10s, 0.5), 100ms);
  EXPECT_EQ(full_jitter_backoff(3, 200ms, 10s, 0.5), 400ms);  // 0.5 * 200 * 2^2
  EXPECT_EQ(full_jitter_backoff(10, 200ms, 10s, 0.999), 9990ms);
  EXPECT_EQ(full_jitter_backoff(1000, 200ms, 10s, 1.0), 10s);  // no overflow however many retries
}

TEST(HttpPolicy, RetryAfterSecondsAndHttpDate) {
  const auto now = std::chrono::system_clock::from_time_t(1445412475);  // Wed, 21 Oct 2015 07:27:55 GMT
  EXPECT_EQ(parse_retry_after("120", now), 120s);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0ms);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now), 5s);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), 0ms);  // in the past: retry now
  EXPECT_EQ(parse_retry_after("soon", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("", now), std::nullopt);
}

TEST(HttpPolicy, FindHeaderIsCaseInsensitive) {
  HttpHeaders headers = {{"Content-Length", "5"}, {"etag", "\"x\""}};
  EXPECT_EQ(find_header(headers, "content-length"), "5");
  EXPECT_EQ(find_header(headers, "ETag"), "\"x\"");
  EXPECT_EQ(find_header(headers, "Range"), std::nullopt);
}

// --- Redaction ----------------------------------------------------------------------------------------------------

TEST(HttpLog, RedactsQueryStringsAndCredentialsInUrls) {
  const std::string line =
      describe_for_log(HttpMethod::get, "https://alice:pw123@example.com/b/k.tar?X-Amz-Signature=abc");
  EXPECT_EQ(line, "GET https://<redacted>@example.com/b/k.tar?<redacted>");
  EXPECT_EQ(describe_for_log(HttpMethod::put, "http://h/p?sig=s3cr3t"), "PUT http://h/p?<redacted>");
  EXPECT_EQ(describe_for_log(HttpMethod::delete_, "http://h/p"), "DELETE http://h/p");
}

TEST(HttpLog, RedactsCredentialHeaders) {
  const std::string line = headers_for_log({{"Authorization", "Bearer s3cr3t"},
                                            {"X-Amz-Security-Token", "tok"},
                                            {"x-api-key", "k"},
                                            {"X-IDENTITY-HEADER", "app-service-secret"},
                                            {"Range", "bytes=5-"}});
  EXPECT_EQ(line,
            "Authorization: <redacted>, X-Amz-Security-Token: <redacted>, x-api-key: <redacted>, "
            "X-IDENTITY-HEADER: <redacted>, Range: bytes=5-");
}

// Runs `body` with stderr (where log lines go) captured into a string.
template <typename F>
std::string capture_stderr(F body) {
  const auto path = std::filesystem::temp_directory_path() / ("datavo-stderr-" + std::to_string(::getpid()));
  const int file = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  body();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return text;
}

TEST_F(HttpClientTest, LogLinesNeverCarrySecrets) {
  const auto previous = log::level();
  log::set_level(log::Level::debug);
  TransportOptions options;
  options.initial_backoff = 1ms;
  HttpClient http(options, clock_);
  auto auth = bearer_auth("BEARER-SECRET");
  const std::string url = "http://alice:PASSWORD-SECRET@127.0.0.1:" + std::to_string(server_->port()) +
                          "/faults/status500/small.txt?sig=QUERY-SECRET";
  Result<HttpResponse> response = Error{};
  const std::string logged = capture_stderr([&] {
    auto request = get(url);
    request.headers = {{"X-Amz-Security-Token", "HEADER-SECRET"}};
    request.auth = auth.get();
    response = http.perform(request);
  });
  log::set_level(previous);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_THAT(logged, HasSubstr("retrying"));  // the retry was logged...
  EXPECT_THAT(logged, HasSubstr("<redacted>"));
  for (const char* secret : {"BEARER-SECRET", "PASSWORD-SECRET", "QUERY-SECRET", "HEADER-SECRET", "alice"})
    EXPECT_THAT(logged, Not(HasSubstr(secret)));  // ...without a secret
}

TEST_F(HttpClientTest, ErrorMessagesCarryTheRedactedUrl) {
  auto http = client();
  auto response = http.perform(get(server_->url("/faults/403/small.txt?sig=QUERY-SECRET")));
  ASSERT_FALSE(response);
  EXPECT_THAT(response.error().message, Not(HasSubstr("QUERY-SECRET")));
  EXPECT_THAT(response.error().message, HasSubstr("/faults/403/small.txt?<redacted>"));
}

}  // namespace
}  // namespace datavo::net
