// The GCS harness of the conformance suite: the GCS tier (make_gcs_tier_with_env) on the firebase-tools 15.34.2
// Storage emulator (tests/support/emulators.sh's gcs: its GCS JSON API, no auth), instance FirebaseGcs.
//
// In short: every case runs, none is skipped; but on this emulator ABigObjectGoesUpInPartsAndComesBackWhole and
// ServerGoingAwayMidUploadIsAnErrorAndLeavesNothing cannot upload in parts (no chunked resumable uploads), and the
// conditional creates of AlreadyPresentKeepsTheStoredObject, ALeaseIsHeldByOneVmAtATime and CheckSaysWhatWorks-
// AndLeavesNothingBehind cannot be refused (no preconditions). ALookupIsOneRequest and RangesOfALargeObject... count
// one more request (HeadObject) than on GCS. Details:
//
// What the emulator does not do, and how the cases adapt (through the TierHarness traits, never by passing a case
// that did not run):
//   - No preconditions: it ignores ifGenerationMatch, on uploads (ifGenerationMatch=0, the conditional create) and
//     on reads. honours_conditional_create() is false, so AlreadyPresentKeepsTheStoredObject,
//     ABigObjectGoesUpInPartsAndComesBackWhole, ALeaseIsHeldByOneVmAtATime and CheckSaysWhatWorksAndLeavesNothing-
//     Behind expect what they expect of s3rver (the second create overwrites; `cache check` refuses single_flight).
//     Pinned reads still hold here: the tier compares each answer's x-goog-generation with the generation it pinned
//     (and the object resource's with the first answer's), so honours_if_match() is true and
//     AnObjectChangedDuringTheReadIsNeverAMixVouchedFor runs in full. The 412 answers themselves are covered by
//     tests/unit/tier/gcs/test_gcs_tier.cpp against its fake GCS server (ACreateOfAnExistingObjectIsRefusedWith412...,
//     AnObjectCreatedByAnotherVmBeforeTheLastChunk..., ARangePinnedToAGenerationThatChangedIs412...).
//   - No chunked resumable uploads (a session takes its object in one PUT only). uploads_in_parts() is false: the
//     tiers made here write with a part size (64 MiB) above every object of the cases, so that each goes up in one
//     request with all its bytes (uploadType=multipart up to 8 MiB, above it a resumable session and its one PUT),
//     and read with the case's part_size, so that the parallel ranged reads do run on the emulator (each tier is
//     two views of one bucket, SplitTier below). ABigObjectGoesUp... then checks one session and one chunk and the
//     object read back whole; ServerGoingAwayMidUpload drops that chunk.
//     Chunked resumable uploads (256 KiB multiples, 308 and the persisted Range, resuming a chunk from the offset
//     the server reports, a refused chunk not resumed, the session DELETE) are covered by
//     tests/unit/tier/gcs/test_gcs_tier.cpp (ALargeObjectIsAChunkedResumableUploadInOrder, AChunkThatTheServer-
//     PersistedInPart..., AFailureMidChunkIsResumed..., AFailedResumableUploadCancelsItsSession...).
//   - Its media answers carry no x-goog-meta-* headers: metadata_in_read_answers() is false, and the cases expect
//     the tier's one extra request (the object resource, HeadObject) after the first range of a hit.
//   - No auth: token refresh (401 mid-transfer, short-lived tokens) is covered by
//     tests/unit/tier/gcs/test_gcs_tier.cpp with fake token endpoints (ABearerTokenRefusedMidUpload...,
//     AShortLivedTokenIsRefreshedAheadOfItsExpiryBetweenChunks).
// open_uploads() is unknown (nullopt): the emulator cannot list resumable sessions.
//
// The bucket of each make() is new: the emulator has no bucket API and makes a bucket at its first upload; an
// absent bucket lists as empty. The harness reaches around the tier with its own requests (no auth) to store an
// object whose metadata lies (uploadType=multipart, metadata in "metadata"), to replace one and to count them.
// With TierSetup::through_proxy the tier talks to the emulator through tests/support/cloud_proxy.py --flavour gcs.
//
// Environment (tests/support/emulators.sh up gcs exports it): STORAGE_EMULATOR_HOST, given to the tier in its
// injected environment (so that it uses no credentials and never looks for ADC).
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conformance/cloud_proxy_client.hpp"
#include "conformance/tier_conformance.hpp"
#include "datavo/gcs_tier.hpp"
#include "net/http_client.hpp"
#include "support/shard_fixtures.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/credential_env.hpp"
#include "tier/gcs/gcs_tier.hpp"
#include "util/percent.hpp"

namespace datavo::conformance {
namespace {

using namespace shardtest;

// Above every object of the cases (the biggest is 21 MiB and a bit), a multiple of 256 KiB.
constexpr Bytes k_write_part_size = MiB(64);
constexpr const char* k_boundary = "conformance-harness-boundary";

// One tier made of two views of one bucket: installs go through `writer` (part_size above every object: one
// request each), everything else through `reader` (the case's part_size). Counters are the wrapper's own, as the
// hierarchy keeps them on the tier it holds.
class SplitTier final : public Tier {
 public:
  SplitTier(std::shared_ptr<Tier> reader, std::shared_ptr<Tier> writer)
      : reader_(std::move(reader)), writer_(std::move(writer)) {}
  const std::string& name() const override { return reader_->name(); }
  std::string_view type() const override { return reader_->type(); }
  std::optional<Bytes> max_bytes() const override { return reader_->max_bytes(); }
  bool supports_direct_read() const override { return reader_->supports_direct_read(); }
  bool read_only() const override { return reader_->read_only(); }
  std::string location() const override { return reader_->location(); }
  Result<bool> contains(const ShardKey& key) override { return reader_->contains(key); }
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    return reader_->read_into(key, sink);
  }
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    return writer_->install_copy(key, source, digest);
  }
  Result<bool> remove(const ShardKey& key) override { return reader_->remove(key); }
  Result<TierUsage> usage() override { return reader_->usage(); }
  Result<std::vector<EntryInfo>> list() override { return reader_->list(); }
  UploadMode upload_mode() const override { return reader_->upload_mode(); }
  RemoteCoordination* coordination() override { return reader_->coordination(); }
  CheckReport check() override { return reader_->check(); }

 private:
  std::shared_ptr<Tier> reader_, writer_;
};

class GcsHarness final : public ProxiedHarness {
 public:
  GcsHarness() : endpoint_(env_or_empty("STORAGE_EMULATOR_HOST")) {
    if (!endpoint_.empty() && endpoint_.find("://") == std::string::npos) endpoint_ = "http://" + endpoint_;
    while (endpoint_.ends_with('/')) endpoint_.pop_back();
  }

  std::string unavailable() const override {
    if (!endpoint_.empty()) return {};
    return "STORAGE_EMULATOR_HOST is not set: the firebase-tools Storage emulator is not running (start it with "
           "`eval \"$(tests/support/emulators.sh up gcs)\"`, or run tests/e2e/test_conformance.sh)";
  }

  std::shared_ptr<Tier> make(const TierSetup& setup) override {
    static int counter = 0;
    bucket_ = "conf-gcs-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    return another_view(setup);
  }

  std::shared_ptr<Tier> another_view(const TierSetup& setup) override {
    proxy_ = setup.through_proxy ? &proxy_for(endpoint_, "gcs") : nullptr;
    auto reader = view(setup, setup.part_size);
    auto writer = view(setup, std::max(setup.part_size, k_write_part_size));
    if (proxy_) proxy_->reset_counts();
    return std::make_shared<SplitTier>(std::move(reader), std::move(writer));
  }

  bool remote() const override { return true; }
  bool parallel_ranges() const override { return true; }
  bool honours_conditional_create() const override { return false; }
  bool uploads_in_parts() const override { return false; }
  bool metadata_in_read_answers() const override { return false; }

  void store_mismatching(Tier&, const ShardKey& key, const std::string& bytes, const Sha256& claimed) override {
    upload(key, bytes, claimed);
  }
  void replace(Tier&, const ShardKey& key, const std::string& bytes) override { upload(key, bytes, sha256_of(bytes)); }

  std::optional<Expectation> recorded(Tier&, const ShardKey& key) override {
    auto response = admin(net::HttpMethod::get, object_path(key), {}, std::string(), {404});
    if (response.status == 404) return std::nullopt;
    auto resource = nlohmann::json::parse(response.body);
    Expectation out;
    const auto& metadata = resource["metadata"];
    if (metadata.is_object() && metadata.contains("datavo-sha256")) {
      if (auto parsed = Sha256::parse(metadata["datavo-sha256"].get<std::string>())) out.sha256 = *parsed;
    }
    if (metadata.is_object() && metadata.contains("datavo-size"))
      out.size = Bytes{std::stoull(metadata["datavo-size"].get<std::string>())};
    return out;
  }

  std::optional<int> stored_objects() override {
    auto response = admin(net::HttpMethod::get, "/storage/v1/b/" + bucket_ + "/o", {}, std::string());
    auto page = nlohmann::json::parse(response.body);
    if (page.contains("nextPageToken")) throw std::runtime_error("more objects than one page: not expected here");
    return page.contains("items") ? int(page["items"].size()) : 0;
  }

 private:
  std::shared_ptr<Tier> view(const TierSetup& setup, Bytes part_size) {
    GcsTierOptions options;
    options.bucket = bucket_;
    options.remote.name = "gcs-under-test";
    options.remote.prefix = k_prefix;
    options.remote.part_size = part_size;
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
    // STORAGE_EMULATOR_HOST, and nothing else: no credentials, no ADC lookup, no metadata server.
    cloud::CredentialEnv env;
    env.getenv = [host = proxy_ ? proxy_->url() : endpoint_](const std::string& name) -> std::optional<std::string> {
      if (name == "STORAGE_EMULATOR_HOST") return host;
      return std::nullopt;
    };
    auto tier = gcs::make_gcs_tier_with_env(std::move(options), std::move(env));
    if (!tier) throw std::runtime_error("make_gcs_tier: " + tier.error().message);
    return *tier;
  }

  std::string object_path(const ShardKey& key) const {
    return "/storage/v1/b/" + bucket_ + "/o/" + util::percent_encode(cloud::entry_object_name(options_, key));
  }

  void upload(const ShardKey& key, const std::string& bytes, const Sha256& sha) {
    const nlohmann::json resource = {
        {"name", cloud::entry_object_name(options_, key)},
        {"metadata", {{"datavo-sha256", sha.hex()}, {"datavo-size", std::to_string(bytes.size())}}}};
    const std::string body = std::string("--") + k_boundary +
                             "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" + resource.dump() + "\r\n--" +
                             k_boundary + "\r\nContent-Type: application/octet-stream\r\n\r\n" + bytes + "\r\n--" +
                             k_boundary + "--\r\n";
    admin(net::HttpMethod::post, "/upload/storage/v1/b/" + bucket_ + "/o?uploadType=multipart",
          {{"Content-Type", std::string("multipart/related; boundary=") + k_boundary}}, body);
  }

  // A request straight to the emulator (never through the proxy, never counted).
  net::HttpResponse admin(net::HttpMethod method, const std::string& path, net::HttpHeaders headers, std::string body,
                          std::vector<long> accepted = {}) {
    net::HttpRequest request;
    request.method = method;
    request.url = endpoint_ + path;
    request.headers = std::move(headers);
    if (method == net::HttpMethod::post) request.body = std::move(body);
    request.accepted_statuses = std::move(accepted);
    auto response = http_.perform(request);
    if (!response) throw std::runtime_error("gcs emulator " + path + ": " + response.error().message);
    return std::move(*response);
  }

  std::string endpoint_;
  net::HttpClient http_;
  std::string bucket_;
  CloudTierOptions options_;
};

}  // namespace

TierKind firebase_gcs_kind() {
  return {"gcs", [] { return std::unique_ptr<TierHarness>(new GcsHarness()); }};
}

}  // namespace datavo::conformance
