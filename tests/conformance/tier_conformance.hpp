// The tier conformance suite: one set of cases (test_tier_conformance.cpp) that every tier type must pass, run
// against each type through a TierHarness that knows how to make that type and how to reach around it (store
// bytes that do not match their metadata, replace an object behind the tier's back, make its server fail).
//
// Instances (the end of test_tier_conformance.cpp), one INSTANTIATE_TEST_SUITE_P line each:
//   Folder/..., Memory/...         in-process, run by ctest as unit tests;
//   S3rver/..., Moto/...           S3 on the emulators, run by tests/e2e/test_conformance.sh, which starts them with
//                                  tests/support/emulators.sh and exports their endpoints (S3RVER_*, MOTO_S3_ENDPOINT);
//   AzuriteSharedKey/..., AzuriteSas/...
//                                  Azure Blob on Azurite, signed with the account key and with an account SAS
//                                  (harness_azure.cpp; AZURITE_BLOB_ENDPOINT, AZURITE_CONNECTION_STRING);
//   FirebaseGcs/...                GCS on the firebase-tools Storage emulator (harness_gcs.cpp; STORAGE_EMULATOR_HOST).
// Each harness's header comment says which cases its server cannot run in full, why, and where the paths they
// skip are tested instead.
// A harness whose server is not configured skips its cases, naming the emulator and how to start it, unless
// DATAVO_REQUIRE_EMULATORS=1: then every case fails instead (the e2e wrapper sets it, so that a missing emulator
// never passes silently).
//
// Adding a tier type: write its TierHarness (harness_<type>.cpp, see harness_s3.cpp), declare
// its factory below, and add one INSTANTIATE_TEST_SUITE_P line at the end of test_tier_conformance.cpp.
//
// Thread safety: a harness is used by one test at a time; the tiers it makes are thread-safe.
#pragma once

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "datavo/tier.hpp"
#include "datavo/units.hpp"

namespace datavo::conformance {

// The key prefix under which the cloud harnesses keep their objects.
inline constexpr const char* k_prefix = "conformance";

// The value of the environment variable `name` (an emulator's endpoint or key), or "" when it is not set.
inline std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// What a case asks of the tier it gets.
struct TierSetup {
  Bytes part_size = MiB(5);  // the smallest S3 allows: objects above it are read as ranges, written as multipart
  std::size_t concurrency = 4;
  bool single_flight = true;
  // Remote tiers: requests go through tests/support/cloud_proxy.py, whose counters and faults the harness exposes.
  bool through_proxy = false;
};

// Requests the server saw, by operation (the proxy's names: GetObject, UploadPart, Lease:PutObject, ...).
struct RequestCounts {
  std::map<std::string, int> ops;
  std::map<std::string, int> peak_in_flight;
  int with_if_match = 0;  // GETs pinned to a version
  int count(const std::string& op) const {
    auto it = ops.find(op);
    return it == ops.end() ? 0 : it->second;
  }
};

class TierHarness {
 public:
  virtual ~TierHarness() = default;

  // Why this harness cannot run here (e.g. "MOTO_S3_ENDPOINT is not set: ..."); empty when it can.
  virtual std::string unavailable() const { return {}; }
  // A fresh, empty tier (a new directory, a new bucket).
  virtual std::shared_ptr<Tier> make(const TierSetup& setup) = 0;
  // A second tier object on the storage of the last make() (another process's view of the same bucket).
  virtual std::shared_ptr<Tier> another_view(const TierSetup& setup) = 0;

  // Traits.
  virtual bool remote() const = 0;  // not directly readable: the hierarchy reads it with read_into()
  // Objects above part_size are read with parallel ranged reads into a positional sink.
  virtual bool parallel_ranges() const { return false; }
  // A second conditional create of one object is refused (If-None-Match: * honoured).
  virtual bool honours_conditional_create() const { return true; }
  // A read pinned to a version fails when the object changed (If-Match honoured).
  virtual bool honours_if_match() const { return true; }
  // Why an empty object cannot be read back here (a server bug), or empty when it can.
  virtual std::string empty_object_problem() const { return {}; }
  // Objects above part_size go up in parts (multipart, blocks, resumable chunks). false: the server cannot take
  // parts, and the harness's tiers write with a part size above every object of the cases (they still read with
  // the case's part_size), so that a big object goes up in one request with all its bytes: a PutObject, or the one
  // UploadPart of a session that a CreateMultipartUpload opened (GCS's resumable upload in one chunk).
  virtual bool uploads_in_parts() const { return true; }
  // The requests that start a multipart upload (S3: CreateMultipartUpload; Azure's blocks need none).
  virtual int requests_to_start_an_upload() const { return 1; }
  // A read's answer carries the object's metadata (datavo-sha256). false: the tier reads it with a second request
  // (HeadObject) after the first range of a read, as the server's media answers omit custom metadata.
  virtual bool metadata_in_read_answers() const { return true; }

  // Stores `bytes` under `key` with metadata claiming `claimed` (as bit rot, or a buggy writer, would leave it).
  virtual void store_mismatching(Tier& tier, const ShardKey& key, const std::string& bytes, const Sha256& claimed) = 0;
  // Another writer replaces the object under `key` with `bytes` (and matching metadata), bypassing the tier.
  virtual void replace(Tier& tier, const ShardKey& key, const std::string& bytes) = 0;
  // What the storage recorded about the object (size, SHA-256), read without the tier; nullopt when unknown.
  virtual std::optional<Expectation> recorded(Tier& tier, const ShardKey& key) = 0;
  // Multipart uploads still open in the bucket; nullopt when the server cannot list them.
  virtual std::optional<int> open_uploads() { return std::nullopt; }
  // Every object in the storage, entries or not (leases, probes); nullopt when the harness cannot tell.
  virtual std::optional<int> stored_objects() { return std::nullopt; }

  // Through the proxy (TierSetup::through_proxy) only: the counters since the last reset, and a fault mode line
  // (tests/support/cloud_proxy.py: "reset op=GetObject", "drop op=UploadPart", "ok").
  virtual bool observable() const { return false; }
  virtual RequestCounts counts() { return {}; }
  virtual void reset_counts() {}
  virtual void set_fault(const std::string& mode) { (void)mode; }
};

struct TierKind {
  std::string name;  // the test-name suffix: folder, memory, s3rver, moto, azurite_sharedkey, azurite_sas, gcs
  std::function<std::unique_ptr<TierHarness>()> make;
};
// How GoogleTest prints a parameter (its name, instead of a byte dump).
inline void PrintTo(const TierKind& kind, std::ostream* os) { *os << kind.name; }

TierKind folder_kind();
TierKind memory_kind();
TierKind s3rver_kind();
TierKind moto_kind();
TierKind azurite_shared_key_kind();
TierKind azurite_sas_kind();
TierKind firebase_gcs_kind();

// DATAVO_REQUIRE_EMULATORS=1: a harness that is unavailable fails instead of skipping.
bool emulators_required();

}  // namespace datavo::conformance
