// OriginServer::start and the server's lifecycle: binding, the accept thread, stop() and wait().
#include <sys/socket.h>

#include "origin/server_impl.hpp"

namespace datavo {
namespace origin {
namespace {

// A worker thread waits this long for the next request on an idle keep-alive connection. Short, because a waiting
// worker serves no one else: a client pool of idle connections must not starve new connections.
constexpr time_t k_keep_alive_seconds = 1;
// Ticket requests are a few hundred bytes; anything much larger is not a ticket request.
constexpr std::size_t k_max_request_body = std::size_t{64} << 10;
// How long run() waits for the accept loop to run before giving up.
constexpr std::chrono::seconds k_start_timeout{10};
// Threads that build key-group tars for ticket requests: builds are disk-bound, and more at once only thrash.
constexpr int k_builders = 2;

}  // namespace

ServerImpl::ServerImpl(OriginServerOptions options, Store store)
    : options_(std::move(options)),
      store_(std::move(store)),
      builders_(k_builders, [this](const TicketFields& fields) { return key_groups_.get(fields); }) {}

ServerImpl::~ServerImpl() { stop(); }

std::string ServerImpl::base_url() const {
  const bool ipv6 = options_.host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(port_);
}

void ServerImpl::wait() {
  std::unique_lock lock(state_mu_);
  stopped_cv_.wait(lock, [this] { return stopped_; });
}

void ServerImpl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  http_.stop();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  builders_.stop();
  {
    std::lock_guard lock(state_mu_);
    stopped_ = true;
  }
  stopped_cv_.notify_all();
}

Result<void> ServerImpl::run() {
  install_handlers();
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server share the port.
  http_.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // httplib writes a small response as two sends, headers then body: with Nagle's algorithm the body waits for the
  // client's delayed ACK of the headers on a reused connection (about 40 ms a request). Accepted sockets inherit
  // the option from the listening one.
  http_.set_tcp_nodelay(true);
  const int threads = options_.threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  http_.set_keep_alive_timeout(k_keep_alive_seconds);
  http_.set_payload_max_length(k_max_request_body);
  http_.set_default_headers({{"Server", k_server_name}});

  int port = 0;
  if (options_.port == 0) {
    port = http_.bind_to_any_port(options_.host);
  } else if (http_.bind_to_port(options_.host, options_.port)) {
    port = options_.port;
  }
  if (port <= 0) {
    return Error{ErrorCode::io, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                    " (address in use, not local, or not permitted)"};
  }
  port_ = static_cast<std::uint16_t>(port);
  thread_ = std::thread([this] {
    http_.listen_after_bind();
    std::lock_guard lock(state_mu_);
    stopped_ = true;
    stopped_cv_.notify_all();
  });
  // stop() is a no-op until the accept loop runs, so wait for it: a stop() right after start() must not be lost.
  const auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
  while (!http_.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) return Error{ErrorCode::timeout, "the server did not start"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ok();
}

}  // namespace origin

namespace {

// Temporary files older than this, under objects/ and tars/, were left by a crashed writer.
constexpr Seconds k_stale_temporary_age{3600};
// A ticket request holds its connection silent while it waits; clients give up on a silent transfer after their
// stall window (30 s by default), so the wait stays well inside it.
constexpr Milliseconds k_max_ticket_wait{20'000};

}  // namespace

Result<std::unique_ptr<OriginServer>> OriginServer::start(OriginServerOptions options) {
  if (options.threads < 1) return Error{ErrorCode::invalid_argument, "threads must be at least 1"};
  if (options.ticket_ttl.count() < 1) return Error{ErrorCode::invalid_argument, "ticket_ttl must be at least 1 s"};
  if (options.ticket_wait.count() < 0 || options.ticket_wait > k_max_ticket_wait) {
    return Error{ErrorCode::invalid_argument,
                 "ticket_wait must be from 0 to " + std::to_string(k_max_ticket_wait.count()) +
                     " ms: a request held longer would look stalled to clients (30 s by default)"};
  }
  if (options.token && options.token->empty()) return Error{ErrorCode::invalid_argument, "the token is empty"};
  if (options.chunk_size < k_min_chunk_size || options.chunk_size > k_max_chunk_size) {
    return Error{ErrorCode::invalid_argument, "chunk_size must be from " + std::to_string(k_min_chunk_size.count()) +
                                                  " to " + std::to_string(k_max_chunk_size.count()) + " bytes, not " +
                                                  std::to_string(options.chunk_size.count())};
  }
  auto store = origin::Store::open(options.store, origin::Store::Create::no);
  if (!store) return store.error();
  store->sweep_temporaries(k_stale_temporary_age);
  try {
    auto server = std::make_unique<origin::ServerImpl>(std::move(options), std::move(store).value());
    DATAVO_TRY(server->run());
    return std::unique_ptr<OriginServer>(std::move(server));
  } catch (const std::exception& e) {
    return Error{ErrorCode::internal, std::string("cannot start the server: ") + e.what()};
  }
}

}  // namespace datavo
