// The conformance harnesses' handle on tests/support/cloud_proxy.py: one proxy per upstream per process, started
// at first use and stopped at exit, and its counters as the cases read them (tier_conformance.hpp's
// RequestCounts, with the proxy's S3 operation names whatever the server's API).
//
// Thread safety: proxy_for() may be called from any thread; a CloudProxy is used by one test at a time.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "conformance/tier_conformance.hpp"
#include "net/http_client.hpp"
#include "support/temp_dir.hpp"
#include "support/test_server.hpp"

namespace datavo::conformance {

class CloudProxy {
 public:
  // Starts the proxy in front of `upstream` (http://HOST:PORT) speaking `flavour` (s3, azure, gcs: the proxy's
  // --flavour). Throws std::runtime_error when it does not start within 15 s.
  CloudProxy(const std::string& upstream, const std::string& flavour);
  // http://127.0.0.1:<port>
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  RequestCounts counts();
  void reset_counts();
  // One fault mode line (cloud_proxy.py's docstring, "The fault mode").
  void set_fault(const std::string& mode);

 private:
  std::string call(net::HttpMethod method, const std::string& path, std::string body = {});

  shardtest::TempDir dir_;
  test::ChildProcess child_;
  int port_ = 0;
  net::HttpClient http_;
};

// The process's proxy in front of `upstream`, started at first use.
CloudProxy& proxy_for(const std::string& upstream, const std::string& flavour);

// A harness whose tiers may talk to their server through a CloudProxy: the counters and faults of the cases go to
// the proxy of the last make() (proxy_, null when that tier was made without TierSetup::through_proxy).
class ProxiedHarness : public TierHarness {
 public:
  bool observable() const override { return proxy_ != nullptr; }
  RequestCounts counts() override { return proxy_ ? proxy_->counts() : RequestCounts{}; }
  void reset_counts() override {
    if (proxy_) proxy_->reset_counts();
  }
  void set_fault(const std::string& mode) override {
    if (!proxy_) throw std::runtime_error("set_fault needs a tier made with through_proxy");
    proxy_->set_fault(mode);
  }

 protected:
  CloudProxy* proxy_ = nullptr;
};

}  // namespace datavo::conformance
