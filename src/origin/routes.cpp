// The server's routing table, its bearer-token check, and what happens around every request: counting it for the
// metrics and logging it.
#include <unistd.h>

#include <cstdio>

#include "origin/auth.hpp"
#include "origin/responses.hpp"
#include "origin/server_impl.hpp"
#include "util/log.hpp"

namespace datavo::origin {
namespace {

// Per-request bookkeeping. httplib runs a request's pre-routing handler, handler, content provider and logger on
// one worker thread, so thread-local state follows the request.
struct RequestState {
  std::chrono::steady_clock::time_point start{};
  bool started = false;
  std::uint64_t streamed = 0;  // bytes sent by a content provider
};
thread_local RequestState t_request;

// The error answer of a request httplib refused itself (a malformed request, no route, a bad Range), unless a
// handler already wrote one.
httplib::Server::HandlerResponse answer_refused_request(const httplib::Request& req, httplib::Response& res) {
  const_cast<httplib::Request&>(req).ranges.clear();
  if (!res.body.empty() || res.content_length_ > 0) return httplib::Server::HandlerResponse::Unhandled;
  std::string message;
  switch (res.status) {
    case 400: message = "malformed request"; break;
    case 404: message = "no such resource: " + req.method + " " + log::redact_url(req.target); break;
    case 413: message = "the request body is too large"; break;
    case 416: message = "malformed or unsatisfiable Range"; break;
    default: message = "HTTP " + std::to_string(res.status); break;
  }
  send_error(res, res.status, message);
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

void count_streamed_bytes(std::uint64_t bytes) { t_request.streamed += bytes; }

httplib::Server::Handler ServerImpl::guarded(Handler handler) {
  return [this, handler](const httplib::Request& req, httplib::Response& res) {
    try {
      (this->*handler)(req, res);
    } catch (const std::exception& e) {
      LOG_ERROR("origin: " << req.method << " " << req.path << ": " << e.what());
      send_error(res, 500, "internal error");
    }
  };
}

void ServerImpl::install_handlers() {
  http_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return pre_routing(req, res); });
  http_.Get("/v1/instance", guarded(&ServerImpl::handle_instance));
  http_.Get("/v1/datasets/(.*)", guarded(&ServerImpl::handle_manifest));
  http_.Post("/v1/stream-tickets", guarded(&ServerImpl::handle_ticket));
  http_.Get("/v1/shards/(.*)", guarded(&ServerImpl::handle_shard));
  http_.Get("/v1/metrics", guarded(&ServerImpl::handle_metrics));
  http_.set_error_handler(httplib::Server::HandlerWithResponse(answer_refused_request));
  http_.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    LOG_ERROR("origin: " << req.method << " " << req.path << ": unhandled exception");
    send_error(res, 500, "internal error");
  });
  // Counted before the response is written (httplib runs the post-routing handler first), so that a client that
  // has its answer and then reads /v1/metrics always finds its request there; the logger runs after the write.
  http_.set_post_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { count_request(req, res); });
  http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log_request(req, res); });
}

httplib::Server::HandlerResponse ServerImpl::pre_routing(const httplib::Request& req, httplib::Response& res) {
  t_request = RequestState{std::chrono::steady_clock::now(), true, 0};
  // Ranges are applied by the shard handler alone (httplib's own application neither checks bounds nor spares
  // JSON bodies). The Request is httplib's non-const object, passed to us as const.
  const_cast<httplib::Request&>(req).ranges.clear();
  if (!options_.token) return httplib::Server::HandlerResponse::Unhandled;
  if ((req.method == "GET" || req.method == "HEAD") && req.path == "/v1/metrics")
    return httplib::Server::HandlerResponse::Unhandled;
  const std::string header = req.get_header_value("Authorization");
  if (bearer_token_matches(header, *options_.token)) return httplib::Server::HandlerResponse::Unhandled;
  res.set_header("WWW-Authenticate", "Bearer realm=\"datavo\"");
  send_error(res, 401, header.empty() ? "a bearer token is required" : "the bearer token is not valid");
  return httplib::Server::HandlerResponse::Handled;
}

void ServerImpl::count_request(const httplib::Request& req, const httplib::Response& res) {
  const Route route = route_of(req.path);
  metrics_.add_bytes(route, req.method == "HEAD" ? 0 : res.body.size());
  metrics_.count_request(route, res.status);
}

void ServerImpl::log_request(const httplib::Request& req, const httplib::Response& res) {
  const std::uint64_t bytes = (req.method == "HEAD" ? 0 : res.body.size()) + t_request.streamed;
  if (options_.log_requests) {
    char elapsed[32] = "-";
    if (t_request.started) {
      auto us =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t_request.start);
      std::snprintf(elapsed, sizeof elapsed, "%.1fms", static_cast<double>(us.count()) / 1000.0);
    }
    const std::string line = "datavo-serve: " + req.remote_addr + " \"" + req.method + " " +
                             log::redact_url(req.target) + "\" " + std::to_string(res.status) + " " +
                             std::to_string(bytes) + " " + elapsed + "\n";
    // One write(2) per line, so that lines of concurrent requests do not interleave.
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
  }
  t_request = RequestState{};
}

}  // namespace datavo::origin
