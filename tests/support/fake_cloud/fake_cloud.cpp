#include <thread>

#include "support/fake_cloud/store_state.hpp"
#include "util/text.hpp"

namespace datavo::fakecloud {
namespace {

SeenRequest describe(const httplib::Request& req) {
  SeenRequest seen;
  seen.method = req.method;
  seen.path = req.path;
  for (const auto& [key, value] : req.params) seen.query[key] = value;
  for (const auto& [name, value] : req.headers) seen.headers[util::to_lower(name)] = value;
  seen.body_bytes = req.body.size();
  return seen;
}

}  // namespace

struct FakeCloud::Server {
  httplib::Server http;
  int port = 0;
  std::thread thread;

  ~Server() {
    http.stop();
    if (thread.joinable()) thread.join();
  }
};

FakeCloud::FakeCloud(Dialect dialect) : ObjectStore(dialect), server_(std::make_unique<Server>()) {
  httplib::Server& http = server_->http;
  // One request per connection: a keep-alive connection in a client's pool would hold stop() for 5 s.
  http.set_keep_alive_max_count(1);
  // Ranges are applied by the front ends, not by httplib (which would also slice error bodies).
  http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    const_cast<httplib::Request&>(req).ranges.clear();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->port = http.bind_to_any_port("127.0.0.1");
  switch (dialect) {
    case Dialect::s3: front_ = make_s3_front(); break;
    case Dialect::gcs: front_ = make_gcs_front(url()); break;
    case Dialect::azure: front_ = make_azure_front(); break;
  }
  auto route = [this](const httplib::Request& req, httplib::Response& res) {
    SeenRequest seen = describe(req);
    front_->classify(req, seen);
    if (seen.op == "Token") {  // neither logged nor hooked: the tests count the storage requests
      auto state = lock();
      front_->handle(req, res, *state, seen);
      return;
    }
    if (auto hooked = hook()) hooked(seen);
    auto state = lock();
    if (const InjectedFault* fault = state->fault_for(seen)) {
      if (fault->retry_after) res.set_header("Retry-After", std::to_string(fault->retry_after->count()));
      const std::string code =
          fault->code.empty() ? (fault->status == 503 ? "SlowDown" : "InternalError") : fault->code;
      front_->error(res, fault->status, code, "injected by the test");
    } else if (front_->authorize(req, res, *state)) {
      front_->handle(req, res, *state, seen);
    }
    seen.status = res.status == -1 ? 200 : res.status;
    state->seen.push_back(std::move(seen));
  };
  // cpp-httplib answers HEAD through the GET handler (and drops the body).
  http.Get(".*", route);
  http.Put(".*", route);
  http.Post(".*", route);
  http.Delete(".*", route);
  http.Patch(".*", route);
  // The thread gets the Server itself: reading server_ from it raced with ~FakeCloud's reset() under TSan.
  server_->thread = std::thread([server = server_.get()] { server->http.listen_after_bind(); });
  while (!server_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeCloud::~FakeCloud() { server_.reset(); }

std::string FakeCloud::url() const { return "http://127.0.0.1:" + std::to_string(server_->port); }

std::string FakeCloud::container_url(const std::string& bucket) const {
  if (dialect() == Dialect::azure) return url() + "/" + k_azure_account + "/" + bucket;
  return url();
}

}  // namespace datavo::fakecloud
