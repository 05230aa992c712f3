#include "conformance/cloud_proxy_client.hpp"

#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace datavo::conformance {

CloudProxy::CloudProxy(const std::string& upstream, const std::string& flavour) {
  const std::string port_file = dir_.sub("port");
  std::string error;
  if (!child_.start({"python3", test::source_dir() + "/tests/support/cloud_proxy.py", "--upstream", upstream,
                     "--flavour", flavour, "--port-file", port_file},
                    &error)) {
    throw std::runtime_error("cannot start cloud_proxy.py: " + error);
  }
  for (int i = 0; i < 300 && port_ == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port_)) port_ = 0;
    if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (port_ == 0) throw std::runtime_error("cloud_proxy.py did not write its port within 15 s");
}

std::string CloudProxy::call(net::HttpMethod method, const std::string& path, std::string body) {
  net::HttpRequest request;
  request.method = method;
  request.url = url() + path;
  if (method == net::HttpMethod::post) request.body = std::move(body);
  auto response = http_.perform(request);
  if (!response) throw std::runtime_error("cloud proxy " + path + ": " + response.error().message);
  return response->body;
}

RequestCounts CloudProxy::counts() {
  RequestCounts out;
  auto stats = nlohmann::json::parse(call(net::HttpMethod::get, "/_proxy/stats"));
  for (auto& [op, n] : stats["ops"].items()) out.ops[op] = n.get<int>();
  for (auto& [op, n] : stats["peak_in_flight"].items()) out.peak_in_flight[op] = n.get<int>();
  for (auto& record : stats["log"]) {
    if (record["op"] == "GetObject" && !record["if_match"].is_null()) ++out.with_if_match;
  }
  return out;
}

void CloudProxy::reset_counts() { call(net::HttpMethod::post, "/_proxy/reset"); }

void CloudProxy::set_fault(const std::string& mode) { call(net::HttpMethod::post, "/_proxy/mode", mode); }

CloudProxy& proxy_for(const std::string& upstream, const std::string& flavour) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<CloudProxy>> proxies;
  std::lock_guard lock(mu);
  auto& slot = proxies[flavour + " " + upstream];
  if (!slot) slot = std::make_unique<CloudProxy>(upstream, flavour);
  return *slot;
}

}  // namespace datavo::conformance
