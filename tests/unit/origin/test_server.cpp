// OriginServer's start and lifecycle (src/origin/server.cpp): options, the identity it serves across restarts,
// stopping, ports, and the socket options of its connections.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "support/socket_options.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;

class OriginServerTest : public ServerTest {};

TEST_F(OriginServerTest, InstanceIsStableAcrossRestarts) {
  start();
  auto r = get("/v1/instance");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  json body = json_of(r);
  EXPECT_EQ(body["protocol_version"], 1);
  EXPECT_EQ(body["server"], "datavo-serve/0.1.0");
  const std::string id = body["instance_id"];
  EXPECT_FALSE(id.empty());
  server_.reset();
  start();
  EXPECT_EQ(json_of(get("/v1/instance"))["instance_id"], id);
  EXPECT_TRUE(server_->base_url().starts_with("http://127.0.0.1:"));
  EXPECT_GT(server_->port(), 0);
}

TEST_F(OriginServerTest, TicketWaitBeyondTheClientsStallWindowIsRefused) {
  OriginServerOptions options;
  options.store = store_root();
  options.ticket_wait = Milliseconds{20'001};
  auto started = OriginServer::start(options);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(started.error().message.find("ticket_wait must be from 0 to 20000 ms"), std::string::npos)
      << started.error().message;
}

TEST(OriginServer, StopEndsWaitAndAUsedPortIsRefused) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), {"s1"});
  pack_or_fail(dir.sub("src"), dir.sub("store"), "voice/train", 2);
  auto server = OriginServer::start(quiet(dir.sub("store")));
  ASSERT_TRUE(server) << server.error().message;
  auto taken = OriginServer::start(quiet(dir.sub("store"), (*server)->port()));
  EXPECT_FALSE(taken) << "the port is in use";

  std::thread waiter([&] { (*server)->wait(); });
  auto begin = std::chrono::steady_clock::now();
  (*server)->stop();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
  (*server)->stop();  // idempotent

  auto missing = OriginServer::start(quiet(dir.sub("no-store")));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

// A small answer is written as two sends (headers, then body): without TCP_NODELAY the body of every answer after
// the first on a kept-alive connection waits for the client's delayed ACK.
TEST_F(OriginServerTest, AcceptedConnectionsSendWithoutDelay) {
  start();
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string request = "GET /v1/instance HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::write(client, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  char answer[16] = {};
  ASSERT_GT(::read(client, answer, sizeof answer - 1), 0);
  EXPECT_TRUE(std::string(answer).starts_with("HTTP/1.1 200")) << answer;
  sockaddr_storage local{};
  socklen_t size = sizeof local;
  ASSERT_EQ(::getsockname(client, reinterpret_cast<sockaddr*>(&local), &size), 0);
  // The server's end of this connection, waiting in keep-alive for a next request.
  const auto accepted = test::tcp_sockets(server_->port(), test::port_of(local));
  ASSERT_EQ(accepted.size(), 1u);
  EXPECT_TRUE(test::tcp_nodelay(accepted[0]));
  ::close(client);
}

}  // namespace
}  // namespace datavo
