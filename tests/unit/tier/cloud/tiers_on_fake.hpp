// A tier of each cloud type on the fake object store (tests/support/fake_cloud/fake_cloud.hpp), for the tests of
// the backends and of the layer they share: the one place that points a test environment at the fake's
// credentials (S3: its access key in the environment; GCS: STORAGE_EMULATOR_HOST, no credentials; Azure: its
// account key, so that every request is signed with SharedKey) and makes the tier with the environment seam.
// Header-only test support.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "datavo/units.hpp"
#include "support/fake_cloud/fake_cloud.hpp"
#include "support/temp_dir.hpp"
#include "tier/azure/azure_tier.hpp"
#include "tier/cloud/chunk_metadata.hpp"
#include "tier/gcs/gcs_tier.hpp"
#include "tier/s3/s3_tier.hpp"
#include "unit/tier/credential_test_support.hpp"

namespace datavo::fakecloud {

// The account key of the Azure front end (any base64 will do).
inline constexpr const char* k_azure_key = "ZmFrZS1jbG91ZC1henVyZS1hY2NvdW50LWtleS1ieXRlcw==";

struct TierSetup {
  Bytes part_size = MiB(5);
  std::size_t concurrency = 4;
  bool single_flight = true;
  int max_attempts = 3;
  std::optional<std::string> prefix = std::nullopt;
  Access access = Access::read_write;
  std::string name = "cloud";
  std::optional<Seconds> max_age = std::nullopt;
};

// The datavo-chunks value that install_copy records with `bytes` (tier/cloud/chunk_metadata.hpp).
inline std::string chunks_value_of(std::string_view bytes) {
  ChunkHasher hasher(*cloud::object_chunk_size(Bytes{bytes.size()}));
  hasher.update(bytes.data(), bytes.size());
  return cloud::encode_chunk_metadata(hasher.finish());
}

// An environment that reads nothing of the machine's, with the fake's credentials in it.
inline void point_at(credtest::FakeEnvironment& env, FakeCloud& cloud, const std::string& home) {
  std::filesystem::create_directories(home);
  env.set_home(home);
  env.set("PATH", "/nonexistent");
  env.set("GCE_METADATA_HOST", "127.0.0.1:" + std::to_string(credtest::closed_port()));
  env.set("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:" + std::to_string(credtest::closed_port()));
  env.set("AWS_EC2_METADATA_DISABLED", "true");
  env.set("AWS_CONFIG_FILE", home + "/no-aws-config");
  env.set("AWS_SHARED_CREDENTIALS_FILE", home + "/no-aws-credentials");
  switch (cloud.dialect()) {
    case Dialect::s3:
      env.set("AWS_ACCESS_KEY_ID", k_s3_key_id);
      env.set("AWS_SECRET_ACCESS_KEY", k_s3_secret);
      break;
    case Dialect::gcs: env.set("STORAGE_EMULATOR_HOST", cloud.url()); break;
    case Dialect::azure:
      cloud.set_azure_account_key(k_azure_key);
      env.set("AZURE_STORAGE_ACCOUNT", k_azure_account);
      env.set("AZURE_STORAGE_KEY", k_azure_key);
      break;
  }
}

// A fake cloud of `dialect` holding one empty bucket, and an environment that reaches it (its home under `home`).
struct FakeBucket {
  FakeBucket(Dialect dialect, const std::string& bucket, const std::string& home) : cloud(dialect) {
    cloud.add_bucket(bucket);
    point_at(env, cloud, home);
  }
  FakeCloud cloud;
  credtest::FakeEnvironment env;
};

inline CloudTierOptions remote_options(const TierSetup& setup) {
  CloudTierOptions remote;
  remote.name = setup.name;
  remote.prefix = setup.prefix;
  remote.access = setup.access;
  remote.part_size = setup.part_size;
  remote.concurrency = setup.concurrency;
  remote.single_flight = setup.single_flight;
  remote.max_age = setup.max_age;
  remote.lease_duration = Seconds{3};
  remote.transport.connect_timeout = Milliseconds{2'000};
  remote.transport.stall_timeout = Seconds{10};
  remote.transport.max_attempts = setup.max_attempts;
  remote.transport.initial_backoff = Milliseconds{5};
  remote.transport.max_backoff = Milliseconds{20};
  // These tests count requests exactly; hedging (on by default, test_hedge.cpp) would add one to a range that a
  // loaded machine (TSan) leaves silent past the deadline.
  remote.hedge.mode = Hedging::off;
  return remote;
}

// A tier of the fake's dialect on `bucket` (which need not exist), made with `env` (see point_at()).
inline Result<std::shared_ptr<Tier>> tier_on(FakeCloud& cloud, const std::string& bucket, const TierSetup& setup,
                                             const credtest::FakeEnvironment& env) {
  switch (cloud.dialect()) {
    case Dialect::s3: {
      S3TierOptions options;
      options.bucket = bucket;
      options.region = k_s3_region;
      options.endpoint_url = cloud.url();
      options.addressing_style = AddressingStyle::path;
      options.remote = remote_options(setup);
      return s3::make_s3_tier_with_env(std::move(options), env.env());
    }
    case Dialect::gcs: {
      GcsTierOptions options;
      options.bucket = bucket;
      options.remote = remote_options(setup);
      return gcs::make_gcs_tier_with_env(std::move(options), env.env());
    }
    case Dialect::azure: {
      AzureBlobTierOptions options;
      options.container_url = cloud.container_url(bucket);
      options.remote = remote_options(setup);
      return azure::make_azure_blob_tier_with_env(std::move(options), env.env());
    }
  }
  return Error{ErrorCode::internal, "unknown dialect"};
}

inline std::shared_ptr<Tier> make_tier_on(FakeCloud& cloud, const std::string& bucket, const TierSetup& setup,
                                          const credtest::FakeEnvironment& env) {
  auto tier = tier_on(cloud, bucket, setup, env);
  if (!tier) throw std::runtime_error(tier.error().message);
  return *tier;
}

}  // namespace datavo::fakecloud
