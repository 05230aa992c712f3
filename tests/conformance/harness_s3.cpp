// The S3 harnesses of the conformance suite: the S3 tier (make_s3_tier) on @20minutes/s3rver (SigV4 checked;
// ignores conditional writes and If-Match, no ListMultipartUploads) and on moto (S3's semantics, any credentials).
//
// Each make() creates a fresh bucket. The harness reaches around the tier with its own signed requests (a plain
// HttpClient with SigV4 and the emulator's keys) to store objects whose metadata lies, to replace an object and
// to list open multipart uploads. With TierSetup::through_proxy the tier talks to the server through
// tests/support/cloud_proxy.py (one per emulator per process, started at first use, stopped at exit), whose
// counters and fault modes the cases use; the proxy forwards the Host header unchanged, so that s3rver still
// checks every signature.
//
// Environment (tests/support/emulators.sh up s3rver moto exports it): S3RVER_ENDPOINT, S3RVER_ACCESS_KEY_ID,
// S3RVER_SECRET_ACCESS_KEY, S3RVER_REGION; MOTO_S3_ENDPOINT. The tiers find their credentials through the AWS
// default chain: this file sets AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (moto accepts any).
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "conformance/cloud_proxy_client.hpp"
#include "conformance/tier_conformance.hpp"
#include "datavo/s3_tier.hpp"
#include "net/http_client.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/xml.hpp"
#include "tier/s3/aws_credentials.hpp"
#include "tier/s3/sigv4.hpp"
#include "util/percent.hpp"

namespace datavo::conformance {
namespace {

using namespace shardtest;

constexpr const char* k_region = "us-east-1";

struct Server {
  std::string kind;  // "s3rver" or "moto"
  std::string endpoint;
  std::string key_id;
  std::string secret;
};

class S3Harness final : public ProxiedHarness {
 public:
  explicit S3Harness(Server server) : server_(std::move(server)) {
    if (!server_.endpoint.empty()) {
      ::setenv("AWS_ACCESS_KEY_ID", server_.key_id.c_str(), 1);
      ::setenv("AWS_SECRET_ACCESS_KEY", server_.secret.c_str(), 1);
      ::unsetenv("AWS_SESSION_TOKEN");
      ::unsetenv("AWS_PROFILE");
      ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
      s3::AwsCredentials credentials;
      credentials.access_key_id = server_.key_id;
      credentials.secret_access_key = server_.secret;
      credentials.source = "conformance harness";
      auth_ = s3::make_sigv4_auth(s3::make_static_credentials(credentials), k_region);
    }
  }

  std::string unavailable() const override {
    if (!server_.endpoint.empty()) return {};
    const std::string var = server_.kind == "moto" ? "MOTO_S3_ENDPOINT" : "S3RVER_ENDPOINT";
    return var + " is not set: " + server_.kind +
           " is not running (start it with `eval \"$(tests/support/emulators.sh up " + server_.kind +
           ")\"`, or run tests/e2e/test_conformance.sh)";
  }

  std::shared_ptr<Tier> make(const TierSetup& setup) override {
    static int counter = 0;
    bucket_ = "conf-" + server_.kind + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    admin(net::HttpMethod::put, "/" + bucket_, {}, std::string());
    return another_view(setup);
  }

  std::shared_ptr<Tier> another_view(const TierSetup& setup) override {
    S3TierOptions options;
    options.bucket = bucket_;
    options.region = k_region;
    options.addressing_style = AddressingStyle::path;
    proxy_ = setup.through_proxy ? &proxy_for(server_.endpoint, "s3") : nullptr;
    options.endpoint_url = proxy_ ? proxy_->url() : server_.endpoint;
    options.remote.name = server_.kind + "-under-test";
    options.remote.prefix = k_prefix;
    options.remote.part_size = setup.part_size;
    options.remote.concurrency = setup.concurrency;
    options.remote.single_flight = setup.single_flight;
    options.remote.lease_duration = Seconds{3};
    // Quick to give up: the "server going away" case must not sit in backoff.
    options.remote.transport.max_attempts = 2;
    options.remote.transport.initial_backoff = Milliseconds{10};
    options.remote.transport.max_backoff = Milliseconds{50};
    options.remote.transport.connect_timeout = Milliseconds{2000};
    options.remote.transport.stall_timeout = Seconds{10};
    options_ = options.remote;
    auto tier = make_s3_tier(std::move(options));
    if (!tier) throw std::runtime_error("make_s3_tier: " + tier.error().message);
    if (proxy_) reset_counts();
    return *tier;
  }

  bool remote() const override { return true; }
  bool parallel_ranges() const override { return true; }
  bool honours_conditional_create() const override { return server_.kind == "moto"; }
  bool honours_if_match() const override { return server_.kind == "moto"; }
  std::string empty_object_problem() const override {
    if (server_.kind != "s3rver") return {};
    return "s3rver 4.0.4 answers a Range on an empty object with 206 \"bytes 0-0/0\" and Content-Length 1 but no "
           "body (AWS and moto answer 416, which the tier handles); shards are never empty";
  }

  void store_mismatching(Tier&, const ShardKey& key, const std::string& bytes, const Sha256& claimed) override {
    put_object(key, bytes, claimed, Bytes{bytes.size()});
  }
  void replace(Tier&, const ShardKey& key, const std::string& bytes) override {
    put_object(key, bytes, sha256_of(bytes), Bytes{bytes.size()});
  }

  std::optional<Expectation> recorded(Tier&, const ShardKey& key) override {
    auto response = admin(net::HttpMethod::head, object_path(key), {}, std::string(), {404});
    if (response.status == 404) return std::nullopt;
    Expectation out;
    if (auto sha = response.header("x-amz-meta-datavo-sha256")) {
      if (auto parsed = Sha256::parse(*sha)) out.sha256 = *parsed;
    }
    if (auto size = response.header("x-amz-meta-datavo-size")) out.size = Bytes{std::stoull(std::string(*size))};
    return out;
  }

  std::optional<int> open_uploads() override {
    if (server_.kind != "moto") return std::nullopt;  // s3rver answers ListMultipartUploads with 501
    auto response = admin(net::HttpMethod::get, "/" + bucket_ + "?uploads=", {}, std::string());
    auto uploads = cloud::xml_records(response.body, "Upload");
    if (!uploads) throw std::runtime_error("ListMultipartUploads: malformed XML");
    return int(uploads->size());
  }

  std::optional<int> stored_objects() override {
    auto response = admin(net::HttpMethod::get, "/" + bucket_ + "?list-type=2", {}, std::string());
    auto objects = cloud::xml_records(response.body, "Contents");
    if (!objects) throw std::runtime_error("ListObjectsV2: malformed XML");
    return int(objects->size());
  }

 private:
  std::string object_path(const ShardKey& key) const {
    return "/" + bucket_ + "/" + util::percent_encode(cloud::entry_object_name(options_, key), util::Slash::keep);
  }

  void put_object(const ShardKey& key, const std::string& bytes, const Sha256& sha, Bytes size) {
    admin(net::HttpMethod::put, object_path(key),
          {{"Content-Type", "application/octet-stream"},
           {"x-amz-meta-datavo-sha256", sha.hex()},
           {"x-amz-meta-datavo-size", std::to_string(size.count())}},
          bytes);
  }

  // A signed request straight to the server (never through the proxy, never counted).
  net::HttpResponse admin(net::HttpMethod method, const std::string& path, net::HttpHeaders headers, std::string body,
                          std::vector<long> accepted = {}) {
    net::HttpRequest request;
    request.method = method;
    request.url = server_.endpoint + path;
    request.headers = std::move(headers);
    if (method == net::HttpMethod::put || method == net::HttpMethod::post) request.body = std::move(body);
    request.auth = auth_.get();
    request.accepted_statuses = std::move(accepted);
    auto response = http_.perform(request);
    if (!response) throw std::runtime_error(server_.kind + " " + path + ": " + response.error().message);
    return std::move(*response);
  }

  Server server_;
  std::shared_ptr<net::RequestAuth> auth_;
  net::HttpClient http_;
  std::string bucket_;
  CloudTierOptions options_;
};

}  // namespace

TierKind s3rver_kind() {
  return {"s3rver", [] {
            Server server{"s3rver", env_or_empty("S3RVER_ENDPOINT"), env_or_empty("S3RVER_ACCESS_KEY_ID"),
                          env_or_empty("S3RVER_SECRET_ACCESS_KEY")};
            return std::unique_ptr<TierHarness>(new S3Harness(std::move(server)));
          }};
}

TierKind moto_kind() {
  return {"moto", [] {
            // moto accepts any credentials; these are the ones the proxy's counters will show.
            Server server{"moto", env_or_empty("MOTO_S3_ENDPOINT"), "AKIDCONFORMANCE", "conformance-secret"};
            return std::unique_ptr<TierHarness>(new S3Harness(std::move(server)));
          }};
}

}  // namespace datavo::conformance
