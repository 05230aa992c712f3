// ServerImpl: the OriginServer of datavo/origin.hpp over cpp-httplib, one file per job:
//   server.cpp        start(), binding, the accept thread, stop() and wait()
//   routes.cpp        the routing table, bearer-token checks, per-request counting and the request log
//   handlers.cpp      GET /v1/instance, GET /v1/datasets/.../manifest, POST /v1/stream-tickets, GET /v1/metrics
//   shards.cpp        GET <ticket url>: the ticket's checks, then the tar streamed from disk with ranges
// and the parts they share: revision_cache (revisions and their manifests), key_groups (the tars, built once per
// content hash), builder_pool (the builds of ticket requests), metrics, ranges, auth, responses.
//
// Thread safety: httplib calls the handlers on its worker threads, any number at once; every member they use is
// thread-safe. A request's pre-routing handler, handler, content provider and logger run on one worker thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "datavo/origin.hpp"
#include "origin/builder_pool.hpp"
#include "origin/httplib_config.hpp"
#include "origin/key_groups.hpp"
#include "origin/metrics.hpp"
#include "origin/revision_cache.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"

namespace datavo::origin {

inline constexpr const char* k_server_name = "datavo-serve/0.1.0";

// Adds `bytes` that a content provider sent to the log line of the request this worker thread serves
// (routes.cpp).
void count_streamed_bytes(std::uint64_t bytes);

class ServerImpl final : public OriginServer {
 public:
  ServerImpl(OriginServerOptions options, Store store);
  ~ServerImpl() override;

  // Binds, starts the accept thread and returns once it runs.
  Result<void> run();

  std::uint16_t port() const override { return port_; }
  std::string base_url() const override;
  void wait() override;
  void stop() override;

 private:
  using Handler = void (ServerImpl::*)(const httplib::Request&, httplib::Response&);

  // routes.cpp
  void install_handlers();
  httplib::Server::Handler guarded(Handler handler);
  httplib::Server::HandlerResponse pre_routing(const httplib::Request& req, httplib::Response& res);
  void count_request(const httplib::Request& req, const httplib::Response& res);
  void log_request(const httplib::Request& req, const httplib::Response& res);

  // handlers.cpp
  void handle_instance(const httplib::Request& req, httplib::Response& res);
  void handle_manifest(const httplib::Request& req, httplib::Response& res);
  void handle_ticket(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  // The key-group tar of a ticket request: from the store, else from the builder pool within
  // options_.ticket_wait (Pending when the build takes longer).
  BuilderPool::Outcome key_group_for_ticket(const TicketFields& fields);

  // shards.cpp
  void handle_shard(const httplib::Request& req, httplib::Response& res);
  // The parsed ticket of a shard request when its name, parameters, signature and expiry pass; else the refusal.
  std::variant<ParsedTicket, Refusal> checked_ticket(const httplib::Request& req) const;
  // Sets `res` up to stream `group`'s bytes, honouring If-None-Match, Range and If-Range.
  void serve_tar(const httplib::Request& req, httplib::Response& res, const KeyGroupTar& group);

  OriginServerOptions options_;
  Store store_;
  RevisionCache revisions_{store_};
  KeyGroups key_groups_{store_, revisions_, options_.chunk_size};
  Metrics metrics_;
  httplib::Server http_;
  std::thread thread_;
  std::uint16_t port_ = 0;
  BuilderPool builders_;

  std::mutex stop_mu_;
  std::mutex state_mu_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;  // guarded by state_mu_
};

}  // namespace datavo::origin
