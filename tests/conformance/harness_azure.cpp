// The Azure Blob harnesses of the conformance suite: the Azure Blob tier (make_azure_blob_tier_with_env) on
// Azurite 3.35.0, which checks every signature, in two instances:
//   AzuriteSharedKey  the tier finds the account key in $AZURE_STORAGE_CONNECTION_STRING (of its injected
//                     environment: Azurite's connection string) and signs each request with SharedKey;
//   AzuriteSas        the tier is given an account SAS (sas_token) that this harness signs itself with the
//                     well-known Azurite key (OpenSSL HMAC-SHA256, independently of src/tier/azure/), and its
//                     environment holds no key, so that nothing but the SAS authorizes it.
//
// Every case runs in full on Azurite: it honours If-None-Match: * (409 BlobAlreadyExists) and If-Match (412), and
// serves ranges. The one difference from S3 the cases account for is a capability, not a gap: Azure's blocks need
// no session, so a big upload is Put Block x N + Put Block List with no request to start it
// (requests_to_start_an_upload() is 0). open_uploads() is unknown here (nullopt): Azure keeps no list of unfinished
// block uploads per container (uncommitted blocks are discarded after a week; the tier's abort is a no-op by
// design). Token refresh (bearer tokens from the DefaultAzureCredential chain) cannot run on Azurite without an
// identity endpoint: tests/unit/tier/azure/test_azure_tier.cpp covers it against a fake token endpoint
// (ATokenRefusedMidUploadIsRefreshed..., ATokenRefusedMidDownload..., AShortLivedTokenIsRefreshedAhead...).
//
// Each make() creates a fresh container. The harness reaches around the tier with its own requests (a plain
// HttpClient with the RequestAuth of make_azure_auth: SharedKey, or the same SAS) to store blobs whose metadata
// lies, to replace a blob and to count the blobs. With TierSetup::through_proxy the tier talks to Azurite through
// tests/support/cloud_proxy.py --flavour azure (one per process), which names Azure's operations as S3's
// (Put Block UploadPart, Put Block List CompleteMultipartUpload, ...); SharedKey does not sign the host, so the
// signatures still verify behind it.
//
// Environment (tests/support/emulators.sh up azurite exports it): AZURITE_BLOB_ENDPOINT (path-style,
// http://127.0.0.1:P/devstoreaccount1), AZURITE_CONNECTION_STRING, AZURITE_ACCOUNT_NAME, AZURITE_ACCOUNT_KEY.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <stdexcept>

#include "conformance/cloud_proxy_client.hpp"
#include "conformance/tier_conformance.hpp"
#include "datavo/azure_blob_tier.hpp"
#include "net/http_client.hpp"
#include "support/azurite_sas.hpp"
#include "support/shard_fixtures.hpp"
#include "tier/azure/azure_auth.hpp"
#include "tier/azure/azure_tier.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/cloud/xml.hpp"
#include "util/percent.hpp"

namespace datavo::conformance {
namespace {

using namespace shardtest;

enum class Mode { shared_key, sas };

class AzureHarness final : public ProxiedHarness {
 public:
  explicit AzureHarness(Mode mode)
      : mode_(mode),
        endpoint_(env_or_empty("AZURITE_BLOB_ENDPOINT")),
        connection_string_(env_or_empty("AZURITE_CONNECTION_STRING")),
        account_(env_or_empty("AZURITE_ACCOUNT_NAME")),
        key_(env_or_empty("AZURITE_ACCOUNT_KEY")),
        http_(std::make_shared<net::HttpClient>()) {
    while (endpoint_.ends_with('/')) endpoint_.pop_back();
    if (!unavailable().empty()) return;
    // http://127.0.0.1:P/devstoreaccount1: the proxy is put in front of the origin, the account path stays.
    const auto path = endpoint_.find('/', endpoint_.find("://") + 3);
    origin_ = endpoint_.substr(0, path);
    account_path_ = path == std::string::npos ? "" : endpoint_.substr(path);
    if (mode_ == Mode::sas) sas_ = azuretest::account_sas(account_, key_, std::chrono::hours(2));
    auto auth = azure::make_azure_auth({endpoint_ + "/conformance", sas_, ""}, tier_env(), http_);
    if (!auth) throw std::runtime_error("make_azure_auth: " + auth.error().message);
    const auto expected = mode_ == Mode::sas ? azure::AzureAuthMode::sas : azure::AzureAuthMode::shared_key;
    if (auth->mode != expected) throw std::runtime_error("the harness's auth is " + auth->description);
    auth_ = auth->auth;
  }

  std::string unavailable() const override {
    std::string missing;
    for (const auto& [name, value] : {std::pair{"AZURITE_BLOB_ENDPOINT", endpoint_},
                                      {"AZURITE_CONNECTION_STRING", connection_string_},
                                      {"AZURITE_ACCOUNT_NAME", account_},
                                      {"AZURITE_ACCOUNT_KEY", key_}}) {
      if (value.empty()) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
    if (missing.empty()) return {};
    return missing + " not set: azurite is not running (start it with `eval \"$(tests/support/emulators.sh up " +
           "azurite)\"`, or run tests/e2e/test_conformance.sh)";
  }

  std::shared_ptr<Tier> make(const TierSetup& setup) override {
    static int counter = 0;
    container_ = std::string("conf-") + (mode_ == Mode::sas ? "sas" : "key") + "-" + std::to_string(::getpid()) + "-" +
                 std::to_string(++counter);
    admin(net::HttpMethod::put, "/" + container_ + "?restype=container", {}, std::string());
    return another_view(setup);
  }

  std::shared_ptr<Tier> another_view(const TierSetup& setup) override {
    AzureBlobTierOptions options;
    proxy_ = setup.through_proxy ? &proxy_for(origin_, "azure") : nullptr;
    options.container_url = (proxy_ ? proxy_->url() : origin_) + account_path_ + "/" + container_;
    if (mode_ == Mode::sas) options.sas_token = sas_;
    options.remote.name = std::string("azurite-") + (mode_ == Mode::sas ? "sas" : "sharedkey") + "-under-test";
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
    auto tier = azure::make_azure_blob_tier_with_env(std::move(options), tier_env());
    if (!tier) throw std::runtime_error("make_azure_blob_tier: " + tier.error().message);
    if (proxy_) proxy_->reset_counts();
    return *tier;
  }

  bool remote() const override { return true; }
  bool parallel_ranges() const override { return true; }
  int requests_to_start_an_upload() const override { return 0; }

  void store_mismatching(Tier&, const ShardKey& key, const std::string& bytes, const Sha256& claimed) override {
    put_blob(key, bytes, claimed);
  }
  void replace(Tier&, const ShardKey& key, const std::string& bytes) override {
    put_blob(key, bytes, sha256_of(bytes));
  }

  std::optional<Expectation> recorded(Tier&, const ShardKey& key) override {
    auto response = admin(net::HttpMethod::head, blob_path(key), {}, std::string(), {404});
    if (response.status == 404) return std::nullopt;
    Expectation out;
    if (auto sha = response.header("x-ms-meta-datavo_sha256")) {
      if (auto parsed = Sha256::parse(*sha)) out.sha256 = *parsed;
    }
    if (auto size = response.header("x-ms-meta-datavo_size")) out.size = Bytes{std::stoull(std::string(*size))};
    return out;
  }

  std::optional<int> stored_objects() override {
    auto response = admin(net::HttpMethod::get, "/" + container_ + "?restype=container&comp=list", {}, std::string());
    auto blobs = cloud::xml_records(response.body, "Blob");
    if (!blobs) throw std::runtime_error("List Blobs: malformed XML");
    return int(blobs->size());
  }

 private:
  // SharedKey: the tier finds Azurite's key where an SDK would; SAS: no key anywhere, the SAS alone.
  cloud::CredentialEnv tier_env() const {
    if (mode_ == Mode::sas) return azuretest::env_of({});
    return azuretest::env_of({{"AZURE_STORAGE_CONNECTION_STRING", connection_string_}});
  }

  std::string blob_path(const ShardKey& key) const {
    // Entry names hold only [A-Za-z0-9./_-]: no escaping needed.
    return "/" + container_ + "/" + cloud::entry_object_name(options_, key);
  }

  void put_blob(const ShardKey& key, const std::string& bytes, const Sha256& sha) {
    admin(net::HttpMethod::put, blob_path(key),
          {{"x-ms-blob-type", "BlockBlob"},
           {"Content-Type", "application/octet-stream"},
           {"x-ms-meta-datavo_sha256", sha.hex()},
           {"x-ms-meta-datavo_size", std::to_string(bytes.size())}},
          bytes);
  }

  // A request straight to Azurite (never through the proxy, never counted), signed as the tier's are.
  net::HttpResponse admin(net::HttpMethod method, const std::string& path, net::HttpHeaders headers, std::string body,
                          std::vector<long> accepted = {}) {
    net::HttpRequest request;
    request.method = method;
    request.url = endpoint_ + path;
    request.headers = std::move(headers);
    if (method == net::HttpMethod::put) request.body = std::move(body);
    request.auth = auth_.get();
    request.accepted_statuses = std::move(accepted);
    auto response = http_->perform(request);
    if (!response) throw std::runtime_error("azurite " + path + ": " + response.error().message);
    return std::move(*response);
  }

  const Mode mode_;
  std::string endpoint_, connection_string_, account_, key_;
  std::string origin_, account_path_, sas_;
  std::shared_ptr<net::HttpClient> http_;
  std::shared_ptr<net::RequestAuth> auth_;
  std::string container_;
  CloudTierOptions options_;
};

}  // namespace

TierKind azurite_shared_key_kind() {
  return {"azurite_sharedkey", [] { return std::unique_ptr<TierHarness>(new AzureHarness(Mode::shared_key)); }};
}

TierKind azurite_sas_kind() {
  return {"azurite_sas", [] { return std::unique_ptr<TierHarness>(new AzureHarness(Mode::sas)); }};
}

}  // namespace datavo::conformance
