// parse_config(), expand_path(), load_config_file() and resolve_config() (src/config/config.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "datavo/azure_blob_tier.hpp"
#include "datavo/config.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/gcs_tier.hpp"
#include "datavo/s3_tier.hpp"
#include "datavo/tier_registry.hpp"

namespace datavo {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A fresh directory per test case, removed with everything in it.
class ConfigTempDir {
 public:
  ConfigTempDir() {
    const char* base = ::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/datavo-config-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~ConfigTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ConfigTempDir(const ConfigTempDir&) = delete;
  ConfigTempDir& operator=(const ConfigTempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `text` to `relative` (creating parent directories); returns the absolute path.
  std::string write(const std::string& relative, const std::string& text) const {
    std::filesystem::path target = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(target.parent_path());
    std::ofstream(target) << text;
    return target.string();
  }

 private:
  std::string path_;
};

// An environment that sees `vars` only and whose system path is inside `dir`: never the real /etc or $HOME.
ConfigEnvironment fake_env(const std::string& dir, std::map<std::string, std::string> vars = {}) {
  ConfigEnvironment env;
  env.getenv = [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  env.system_path = dir + "/etc/datavo/shards.yaml";
  return env;
}

std::string fixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "fixtures" / "config" / name)
      .lexically_normal()
      .string();
}

constexpr const char* k_file = "/etc/datavo/shards.yaml";

class ConfigParse : public ::testing::Test {
 protected:
  Result<CacheConfig> parse(const std::string& yaml) { return parse_config(yaml, k_file, env_); }
  // Parses `yaml`, which must fail with a config error; returns the message.
  std::string error_of(const std::string& yaml) {
    auto result = parse(yaml);
    EXPECT_FALSE(result) << "parsed unexpectedly:\n" << yaml;
    if (result) return "";
    EXPECT_EQ(result.error().code, ErrorCode::config);
    return result.error().message;
  }

  ConfigTempDir dir_;
  ConfigEnvironment env_ = fake_env(dir_.path(), {{"HOME", "/home/ada"}, {"DATAVO_TEST_ROOT", "/srv/cache"}});
};

const FolderTierOptions& folder(const TierConfig& tier) {
  return std::any_cast<const FolderTierOptions&>(tier.backend);
}
const S3TierOptions& s3_of(const TierConfig& tier) { return std::any_cast<const S3TierOptions&>(tier.backend); }
const GcsTierOptions& gcs_of(const TierConfig& tier) { return std::any_cast<const GcsTierOptions&>(tier.backend); }
const AzureBlobTierOptions& azure_of(const TierConfig& tier) {
  return std::any_cast<const AzureBlobTierOptions&>(tier.backend);
}

// --- Valid configurations ---

TEST_F(ConfigParse, SpecSchemaExampleParses) {
  auto config = load_config_file(fixture("spec_full_schema.yaml"), env_);
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->tiers.size(), 5u);
  const auto& tiers = config->tiers;

  EXPECT_EQ(tiers[0].name, "scratch");
  EXPECT_EQ(tiers[0].type, "folder");
  EXPECT_EQ(folder(tiers[0]).path, "/scratch/datavo/shards");
  EXPECT_EQ(tiers[0].max_bytes, TiB(1));
  EXPECT_EQ(tiers[0].line, 3);

  EXPECT_EQ(tiers[1].name, "home");
  EXPECT_EQ(tiers[1].type, "folder");
  EXPECT_EQ(folder(tiers[1]).path, "/home/ada/.cache/altavo/datavo/shards");
  EXPECT_EQ(tiers[1].max_bytes, GiB(50));

  EXPECT_EQ(tiers[2].type, "azure_blob");
  const auto& azure = azure_of(tiers[2]);
  EXPECT_EQ(azure.container_url, "https://datavoeastus.blob.core.windows.net/shards");
  EXPECT_FALSE(azure.sas_token);
  EXPECT_FALSE(azure.remote.prefix);
  EXPECT_FALSE(tiers[2].max_bytes);

  EXPECT_EQ(tiers[3].type, "s3");
  const auto& s3 = s3_of(tiers[3]);
  EXPECT_EQ(s3.bucket, "datavo-cache-us-east-1");
  EXPECT_EQ(s3.region, "us-east-1");
  EXPECT_FALSE(s3.remote.prefix);

  EXPECT_EQ(tiers[4].type, "gcs");
  const auto& gcs = gcs_of(tiers[4]);
  EXPECT_EQ(gcs.bucket, "datavo-cache-us-central1");
  EXPECT_FALSE(gcs.project);

  EXPECT_TRUE(config->warnings.empty());
  EXPECT_EQ(config->path, fixture("spec_full_schema.yaml"));
}

TEST_F(ConfigParse, SpecDeploymentExamplesParse) {
  for (const char* name :
       {"spec_workstation.yaml", "spec_azure.yaml", "spec_aws.yaml", "spec_gcp.yaml", "guide_minimal.yaml"}) {
    auto config = load_config_file(fixture(name), env_);
    ASSERT_TRUE(config) << name << ": " << config.error().message;
    EXPECT_FALSE(config->tiers.empty());
    EXPECT_EQ(config->tiers[0].type, "folder") << name;
    EXPECT_EQ(config->tiers[0].max_bytes, GiB(200)) << name;
  }
  auto workstation = load_config_file(fixture("spec_workstation.yaml"), env_);
  ASSERT_TRUE(workstation);
  ASSERT_EQ(workstation->tiers.size(), 2u);
  EXPECT_EQ(workstation->tiers[1].name, "scratch");
  EXPECT_EQ(workstation->tiers[1].max_bytes, TiB(5));
}

TEST_F(ConfigParse, DocsExtensionsExampleParses) {
  auto env = fake_env(dir_.path(), {{"HOME", "/home/ada"}, {"TEAM_SCRATCH", "/shared"}});
  auto config = load_config_file(fixture("datavo_extensions.yaml"), env);
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->tiers.size(), 2u);
  EXPECT_EQ(folder(config->tiers[0]).path, "/home/ada/.cache/altavo/datavo/shards");
  EXPECT_EQ(config->tiers[0].max_bytes, GiB(100));
  EXPECT_EQ(folder(config->tiers[0]).max_age, Seconds{14 * 86400});
  EXPECT_EQ(folder(config->tiers[1]).path, "/shared/datavo/shards");
  EXPECT_EQ(config->tiers[1].access, Access::read_only);
}

TEST_F(ConfigParse, EveryFieldOfEveryType) {
  auto config = load_config_file(fixture("every_field.yaml"), env_);
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->tiers.size(), 5u);
  const auto& tiers = config->tiers;

  EXPECT_EQ(folder(tiers[0]).path, "/srv/cache/local");
  EXPECT_EQ(tiers[0].max_bytes, GiB(10));
  EXPECT_EQ(folder(tiers[0]).max_age, Seconds{30 * 86400});
  EXPECT_EQ(tiers[0].access, Access::read_write);

  EXPECT_EQ(folder(tiers[1]).path, "/srv/cache/shared");
  EXPECT_FALSE(tiers[1].max_bytes) << "max_bytes: 0 means unbounded";
  EXPECT_FALSE(folder(tiers[1]).max_age);
  EXPECT_EQ(tiers[1].access, Access::read_only);

  const auto& s3 = s3_of(tiers[2]);
  EXPECT_EQ(s3.remote.prefix, "team-a/shards");
  EXPECT_EQ(tiers[2].max_bytes, TiB(5));
  EXPECT_EQ(tiers[2].access, Access::read_only);

  const auto& gcs = gcs_of(tiers[3]);
  EXPECT_EQ(gcs.project, "datavo-prod");
  EXPECT_EQ(gcs.remote.prefix, "team-a");

  const auto& azure = azure_of(tiers[4]);
  EXPECT_EQ(azure.sas_token, "sv=2022-11-02&ss=b&sig=abc");
  EXPECT_EQ(azure.remote.prefix, "team-a");
  EXPECT_EQ(azure.managed_identity_client_id, "00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(tiers[4].name, "https://datavoeastus.blob.core.windows.net/shards") << "default name drops the query";

  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], HasSubstr("every_field.yaml:2: root: ignored"));
}

TEST_F(ConfigParse, TypeDefaultsToFolder) {
  auto config = parse("tiers:\n  - path: /data/cache\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->tiers[0].type, "folder");
  EXPECT_EQ(config->tiers[0].access, Access::read_write);
  EXPECT_EQ(config->path, k_file);
}

TEST_F(ConfigParse, DefaultNamesComeFromPathBucketAndContainerUrl) {
  auto config = parse(
      "tiers:\n"
      "  - path: ~/cache\n"
      "  - type: s3\n"
      "    bucket: my-s3-bucket\n"
      "  - type: gcs\n"
      "    bucket: my_gcs_bucket\n"
      "  - type: azure_blob\n"
      "    container_url: http://127.0.0.1:10000/devstoreaccount1/shards?sig=s3cret#frag\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->tiers[0].name, "/home/ada/cache");
  EXPECT_EQ(config->tiers[1].name, "my-s3-bucket");
  EXPECT_EQ(config->tiers[2].name, "my_gcs_bucket");
  EXPECT_EQ(config->tiers[3].name, "http://127.0.0.1:10000/devstoreaccount1/shards");
}

TEST_F(ConfigParse, MaxBytesTakesIntegersStringsAndZero) {
  auto config = parse(
      "tiers:\n"
      "  - {name: a, path: /a, max_bytes: 1048576}\n"
      "  - {name: b, path: /b, max_bytes: \"2 MiB\"}\n"
      "  - {name: c, path: /c, max_bytes: 0}\n"
      "  - {name: d, path: /d, max_bytes: 0GB}\n"
      "  - {name: e, path: /e}\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->tiers[0].max_bytes, MiB(1));
  EXPECT_EQ(config->tiers[1].max_bytes, MiB(2));
  EXPECT_EQ(config->tiers[2].max_bytes, std::nullopt);
  EXPECT_EQ(config->tiers[3].max_bytes, std::nullopt);
  EXPECT_EQ(config->tiers[4].max_bytes, std::nullopt);
}

TEST_F(ConfigParse, MaxAgeOnAFolderTier) {
  for (auto [text, seconds] :
       {std::pair{"45s", 45}, {"90m", 5400}, {"12h", 43200}, {"30d", 2592000}, {"2w", 1209600}}) {
    auto config = parse(std::string("tiers:\n  - path: /a\n    max_age: ") + text + "\n");
    ASSERT_TRUE(config) << text << ": " << config.error().message;
    EXPECT_EQ(folder(config->tiers[0]).max_age, Seconds{seconds}) << text;
  }
}

TEST_F(ConfigParse, ReadOnlyTakesTrueOrFalse) {
  auto config = parse("tiers:\n  - {name: a, path: /a, read_only: true}\n  - {name: b, path: /b, read_only: false}\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->tiers[0].access, Access::read_only);
  EXPECT_EQ(config->tiers[1].access, Access::read_write);
}

TEST_F(ConfigParse, DurabilityIsFsyncByDefaultOrNone) {
  auto config = parse(
      "tiers:\n  - {name: a, path: /a, durability: none}\n  - {name: b, path: /b, durability: fsync}\n"
      "  - {name: c, path: /c}\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(config->tiers[0].backend).durability, Durability::no_sync);
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(config->tiers[1].backend).durability,
            Durability::fsync_before_commit);
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(config->tiers[2].backend).durability,
            Durability::fsync_before_commit);
}

TEST_F(ConfigParse, VerifyIsSizeByDefaultOrFullOrSampledEveryN) {
  auto config = parse(
      "tiers:\n  - {name: a, path: /a}\n  - {name: b, path: /b, verify: full}\n"
      "  - {name: c, path: /c, verify: sampled, verify_sample_every: 50}\n  - {name: d, path: /d, verify: sampled}\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(folder(config->tiers[0]).verify, VerifyOnHit::size);
  EXPECT_EQ(folder(config->tiers[1]).verify, VerifyOnHit::full);
  EXPECT_EQ(folder(config->tiers[2]).verify, VerifyOnHit::sampled);
  EXPECT_EQ(folder(config->tiers[2]).verify_sample_every, 50u);
  EXPECT_EQ(folder(config->tiers[3]).verify_sample_every, 100u);
  EXPECT_THAT(
      error_of("tiers:\n  - path: /a\n    verify: sometimes\n"),
      HasSubstr(":3: tiers[0].verify: unknown verify \"sometimes\" (expected size (the default), full, sampled)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    verify: sampled\n    verify_sample_every: 0\n"),
              HasSubstr(":4: tiers[0].verify_sample_every: expected a whole number from 1"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    verify_sample_every: 10\n"),
              HasSubstr(":3: tiers[0].verify_sample_every: applies to verify: sampled only"));
}

TEST_F(ConfigParse, CloudTiersTakeTheRemoteFields) {
  auto config = parse(
      "tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    part_size: 32MiB\n    concurrency: 4\n"
      "    upload: sync\n    single_flight: false\n    lease_duration: 2m\n    endpoint_url: http://127.0.0.1:9000/\n"
      "    addressing_style: virtual\n");
  ASSERT_TRUE(config) << config.error().message;
  const auto& s3 = s3_of(config->tiers[1]);
  EXPECT_EQ(s3.remote.part_size, MiB(32));
  EXPECT_EQ(s3.remote.concurrency, 4u);
  EXPECT_EQ(s3.remote.upload, UploadMode::sync);
  EXPECT_FALSE(s3.remote.single_flight);
  EXPECT_EQ(s3.remote.lease_duration, Seconds{120});
  EXPECT_EQ(s3.endpoint_url, "http://127.0.0.1:9000");
  EXPECT_EQ(s3.addressing_style, AddressingStyle::virtual_hosted);
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    part_size: 1MiB\n"),
              HasSubstr(":5: tiers[1].part_size: must be from 5 MiB to 5 GiB"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: gcs\n    bucket: abc\n    concurrency: 0\n"),
              HasSubstr(":5: tiers[1].concurrency: expected a whole number from 1 to 64"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    upload: later\n"),
              HasSubstr(":5: tiers[1].upload: unknown upload \"later\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    endpoint_url: ftp://x\n"),
              HasSubstr(":5: tiers[1].endpoint_url: invalid endpoint_url"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.b/c\n"
                       "    lease_duration: 1s\n"),
              HasSubstr(":5: tiers[1].lease_duration: must be at least 3s"));
}

TEST_F(ConfigParse, HedgedReadsAreOnByDefaultWithP95AndFivePercentAndOffPerTier) {
  auto config = parse(
      "tiers:\n  - path: /a\n  - {type: s3, bucket: bkt-1, hedge: true}\n"
      "  - {type: gcs, bucket: bkt-2, hedge: false}\n"
      "  - {type: s3, bucket: bkt-3, hedge_after: 250ms, hedge_max_fraction: 2.5%}\n"
      "  - {type: azure_blob, container_url: 'https://a.b/c', hedge_after: p99}\n"
      "  - {type: s3, bucket: bkt-4, hedge_after: 2s}\n  - {type: s3, bucket: bkt-5}\n");
  ASSERT_TRUE(config) << config.error().message;
  const HedgePolicy& plain = s3_of(config->tiers[1]).remote.hedge;
  EXPECT_EQ(plain.mode, Hedging::on);
  EXPECT_FALSE(plain.after);
  EXPECT_EQ(plain.percentile, 95);
  EXPECT_DOUBLE_EQ(plain.max_fraction, 0.05);
  EXPECT_EQ(gcs_of(config->tiers[2]).remote.hedge.mode, Hedging::off);
  EXPECT_EQ(azure_of(config->tiers[4]).remote.hedge.percentile, 99);
  const auto& fixed = s3_of(config->tiers[3]).remote.hedge;
  EXPECT_EQ(fixed.after, Milliseconds{250});
  EXPECT_DOUBLE_EQ(fixed.max_fraction, 0.025);
  EXPECT_EQ(s3_of(config->tiers[5]).remote.hedge.after, Milliseconds{2000});
  const HedgePolicy& unset = s3_of(config->tiers[6]).remote.hedge;
  EXPECT_EQ(unset.mode, Hedging::on) << "on unless hedge: false";
  EXPECT_FALSE(unset.after);
  EXPECT_EQ(unset.percentile, 95);
  EXPECT_DOUBLE_EQ(unset.max_fraction, 0.05);
  EXPECT_EQ(s3_of(config->tiers[3]).remote.hedge.mode, Hedging::on);
  EXPECT_EQ(azure_of(config->tiers[4]).remote.hedge.mode, Hedging::on);
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    hedge_after: p10\n"),
              HasSubstr(":5: tiers[1].hedge_after: expected p50 to p99"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    hedge_after: 0ms\n"),
              HasSubstr(":5: tiers[1].hedge_after: expected p50 to p99"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    hedge_max_fraction: 0%\n"),
              HasSubstr(":5: tiers[1].hedge_max_fraction: expected a percentage more than 0%"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    hedge_max_fraction: 0.05\n"),
              HasSubstr(":5: tiers[1].hedge_max_fraction: expected a percentage"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    hedge: sometimes\n"),
              HasSubstr(":5: tiers[1].hedge:"));
}

TEST_F(ConfigParse, PartSizeOutOfRangeNamesTheLimitsOfItsOwnService) {
  auto error_for = [this](const std::string& tier, const std::string& part_size) {
    return error_of("tiers:\n  - path: /a\n  - " + tier + "\n    part_size: " + part_size + "\n");
  };
  EXPECT_EQ(error_for("type: s3\n    bucket: abc", "6GiB"),
            "/etc/datavo/shards.yaml:5: tiers[1].part_size: must be from 5 MiB to 5 GiB (S3's multipart part limits)");
  const std::string gcs = error_for("type: gcs\n    bucket: abc", "6GiB");
  EXPECT_EQ(gcs,
            "/etc/datavo/shards.yaml:5: tiers[1].part_size: must be from 5 MiB to 5 GiB and a multiple of 256 KiB (GCS "
            "takes resumable-upload chunks in multiples of 256 KiB; 5 MiB to 5 GiB are the cloud tiers' bounds)");
  EXPECT_THAT(gcs, Not(HasSubstr("S3")));
  // A chunk size GCS refuses is now a config error naming the line, not a failure when the tier is made.
  EXPECT_THAT(error_for("type: gcs\n    bucket: abc", "5000000"),
              HasSubstr(":5: tiers[1].part_size: must be from 5 MiB to 5 GiB and a multiple of 256 KiB"));
  EXPECT_TRUE(parse("tiers:\n  - path: /a\n  - type: gcs\n    bucket: abc\n    part_size: 5376KiB\n"));
  const std::string azure = error_for("type: azure_blob\n    container_url: https://a.b/c", "4001MiB");
  EXPECT_EQ(azure,
            "/etc/datavo/shards.yaml:5: tiers[1].part_size: must be from 5 MiB to 4000 MiB (Azure's largest block is "
            "4000 MiB; 5 MiB is the cloud tiers' smallest part)");
  EXPECT_TRUE(
      parse("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.b/c\n"
            "    part_size: 4000MiB\n"));
}

TEST_F(ConfigParse, EndpointUrlWithWhitespaceOrControlCharactersIsRefusedNamingTheLine) {
  auto error_for = [this](const std::string& type, const std::string& url) {
    return error_of("tiers:\n  - path: /a\n  - type: " + type + "\n    bucket: abc\n    endpoint_url: \"" + url +
                    "\"\n");
  };
  for (const std::string type : {"s3", "gcs"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(error_for(type, "http://127.0.0.1:9000/my path"),
              "/etc/datavo/shards.yaml:5: tiers[1].endpoint_url: invalid endpoint_url \"http://127.0.0.1:9000/my "
              "path\": must not contain whitespace or control characters (byte offset 24; percent-encode a space as "
              "%20)");
    EXPECT_THAT(error_for(type, "http://my host:9000"), HasSubstr(":5: tiers[1].endpoint_url: "));
    EXPECT_THAT(error_for(type, "http://my host:9000"), HasSubstr("(byte offset 9;"));
    EXPECT_THAT(error_for(type, "http://host/a\\tb"), HasSubstr(":5: tiers[1].endpoint_url: "));
    EXPECT_THAT(error_for(type, "http://host/a\\tb"), HasSubstr("control characters"));
  }
  // Azure's container_url refuses the same (its own check, with the query redacted).
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: \"https://a.b/c d\"\n"),
              HasSubstr(":4: tiers[1].container_url: invalid container_url \"https://a.b/c d\": must not contain "
                        "spaces or control characters"));
}

TEST_F(ConfigParse, BadDurabilityIsAnErrorNamingTheLine) {
  EXPECT_EQ(error_of("tiers:\n  - path: /a\n    durability: fast\n"),
            "/etc/datavo/shards.yaml:3: tiers[0].durability: unknown durability \"fast\" (expected fsync (the "
            "default), none)");
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    durability: [none]\n"), HasSubstr(":3: tiers[0].durability:"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    durability: none\n"),
              HasSubstr(":5: tiers[1].durability: unknown key for an s3 tier (durability belongs to folder tiers)"));
}

TEST_F(ConfigParse, TierLineIsOneBased) {
  auto config = parse("# comment\n\ntiers:\n  - name: a\n    path: /a\n\n  - name: b\n    path: /b\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->tiers[0].line, 4);
  EXPECT_EQ(config->tiers[1].line, 7);
}

TEST_F(ConfigParse, LegacyRootIsIgnoredWithAWarning) {
  auto config = parse("root: /old/cache\ntiers:\n  - path: /a\n");
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], StartsWith("/etc/datavo/shards.yaml:1: root: ignored"));
  EXPECT_EQ(config->tiers.size(), 1u);
}

// --- Errors: each names the file, the line and the field ---

TEST_F(ConfigParse, InvalidSizeMessageHasTheDocumentedFormat) {
  std::string yaml =
      "tiers:\n"
      "  - name: local\n"
      "    path: /var/cache/datavo/shards\n"
      "    max_bytes: 200GB\n"
      "  - name: scratch\n"
      "    path: /scratch/datavo/shards\n"
      "    max_bytes: 12XB\n";
  EXPECT_EQ(error_of(yaml),
            "/etc/datavo/shards.yaml:7: tiers[1].max_bytes: invalid size \"12XB\" (expected an integer or <n><unit> "
            "with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

TEST_F(ConfigParse, NegativeSizeIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: -5GB\n"),
              HasSubstr("shards.yaml:3: tiers[0].max_bytes: invalid size \"-5GB\" (must not be negative)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: -1\n"), HasSubstr(":3: tiers[0].max_bytes:"));
}

TEST_F(ConfigParse, GarbledSizeIsAnError) {
  for (const char* size : {"lots", "1.5TB", "1e12", "5 G B", "true", "\"\""}) {
    EXPECT_THAT(error_of(std::string("tiers:\n  - path: /a\n    max_bytes: ") + size + "\n"),
                HasSubstr("shards.yaml:3: tiers[0].max_bytes: invalid size"))
        << size;
  }
}

TEST_F(ConfigParse, OverflowingSizeIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: 99999999999TB\n"),
              HasSubstr(":3: tiers[0].max_bytes: invalid size \"99999999999TB\" (too large)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: 123456789012345678901234567890\n"),
              HasSubstr("(too large)"));
}

TEST_F(ConfigParse, WrongValueTypesAreErrors) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: [1, 2]\n"),
              HasSubstr(":3: tiers[0].max_bytes: expected a size such as 50GB, got a list"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes:\n"),
              HasSubstr(":3: tiers[0].max_bytes: expected a size such as 50GB, got null"));
  EXPECT_THAT(error_of("tiers:\n  - path: [/a, /b]\n"), HasSubstr(":2: tiers[0].path: expected a string, got a list"));
  EXPECT_THAT(error_of("tiers:\n  - path:\n      dir: /a\n"),
              HasSubstr(":2: tiers[0].path: expected a string, got a mapping"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    name: {a: 1}\n"),
              HasSubstr(":3: tiers[0].name: expected a string, got a mapping"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    type: [folder]\n"),
              HasSubstr(":3: tiers[0].type: expected a string, got a list"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_age: {d: 1}\n"),
              HasSubstr(":3: tiers[0].max_age: expected a duration such as 30d, got a mapping"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    name: \"\"\n"), HasSubstr(":3: tiers[0].name: must not be empty"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    name:\n"),
              HasSubstr(":3: tiers[0].name: expected a string, got null"));
}

TEST_F(ConfigParse, StringWithEdgeWhitespaceIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: \"/a \"\n"),
              HasSubstr(":2: tiers[0].path: must not start or end with whitespace"));
  EXPECT_THAT(error_of("tiers:\n  - path: \"/a\n"),
              HasSubstr(":2: tiers[0].path: must not start or end with whitespace"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    name: \" x\"\n"),
              HasSubstr(":3: tiers[0].name: must not start or end with whitespace"));
}

TEST_F(ConfigParse, StringForReadOnlyIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    read_only: \"true\"\n"),
              HasSubstr(":3: tiers[0].read_only: expected true or false, got the string \"true\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    read_only: maybe\n"),
              HasSubstr(":3: tiers[0].read_only: expected true or false, got \"maybe\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    read_only: 1\n"), HasSubstr(":3: tiers[0].read_only:"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    read_only: [true]\n"),
              HasSubstr(":3: tiers[0].read_only: expected true or false, got a list"));
}

TEST_F(ConfigParse, TierThatIsNotAMappingIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - /data/cache\n"),
              HasSubstr(":2: tiers[0]: expected a mapping of tier fields, got a scalar"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - [x]\n"),
              HasSubstr(":3: tiers[1]: expected a mapping of tier fields, got a list"));
}

TEST_F(ConfigParse, UnknownTopLevelKeyIsAnError) {
  EXPECT_EQ(error_of("tiers:\n  - path: /a\ntier:\n  - path: /b\n"),
            "/etc/datavo/shards.yaml:3: tier: unknown key (the top level takes tiers, and the legacy root)");
}

TEST_F(ConfigParse, UnknownTierKeyIsAnErrorPerType) {
  EXPECT_EQ(error_of("tiers:\n  - path: /a\n    bucket: my-bucket\n"),
            "/etc/datavo/shards.yaml:3: tiers[0].bucket: unknown key for a folder tier (bucket belongs to s3 and gcs "
            "tiers); a folder tier takes type, name, max_bytes, read_only, path, durability, max_age, lru_resolution, "
            "verify, "
            "verify_sample_every");
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_size: 5GB\n"),
              HasSubstr(":3: tiers[0].max_size: unknown key for a folder tier;"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    path: /b\n"),
              HasSubstr(":5: tiers[1].path: unknown key for an s3 tier (path belongs to folder tiers)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: gcs\n    bucket: my-bucket\n    region: us-east-1\n"),
              HasSubstr(":5: tiers[1].region: unknown key for a gcs tier (region belongs to s3 tiers)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    project: p\n"),
              HasSubstr(":5: tiers[1].project: unknown key for an s3 tier"));
  EXPECT_THAT(
      error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.blob/c\n    bucket: b\n"),
      HasSubstr(":5: tiers[1].bucket: unknown key for an azure_blob tier"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    sas_token: x\n"),
              HasSubstr(":3: tiers[0].sas_token: unknown key for a folder tier (sas_token belongs to azure_blob"));
}

TEST_F(ConfigParse, DuplicateKeyIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_bytes: 1GB\n    max_bytes: 2GB\n"),
              HasSubstr(":4: tiers[0].max_bytes: duplicate key (first given on line 3)"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\ntiers:\n  - path: /b\n"),
              HasSubstr(":3: tiers: duplicate key (first given on line 1)"));
}

TEST_F(ConfigParse, EmptyTierListIsAnError) {
  EXPECT_EQ(error_of("tiers: []\n"),
            "/etc/datavo/shards.yaml:1: tiers: empty list; at least one folder tier is required");
}

TEST_F(ConfigParse, MissingTiersIsAnError) {
  EXPECT_EQ(error_of("root: /x\n"),
            "/etc/datavo/shards.yaml:1: tiers: missing; a configuration needs a non-empty list of tiers");
  EXPECT_THAT(error_of("tiers:\n"), HasSubstr(":1: tiers: expected a non-empty list of tiers, got null"));
  EXPECT_THAT(error_of("tiers:\n  path: /a\n"),
              HasSubstr(":1: tiers: expected a non-empty list of tiers, got a mapping"));
}

TEST_F(ConfigParse, NoFolderTierIsAnError) {
  EXPECT_THAT(error_of("# cloud only\ntiers:\n  - type: s3\n    bucket: my-bucket\n"),
              HasSubstr("shards.yaml:2: tiers: no folder tier; at least one is required"));
}

TEST_F(ConfigParse, UnknownTypeIsAnError) {
  EXPECT_EQ(
      error_of("tiers:\n  - path: /a\n  - type: ftp\n    host: x\n"),
      "/etc/datavo/shards.yaml:3: tiers[1].type: unknown tier type \"ftp\" (expected folder, s3, gcs, azure_blob)");
  EXPECT_THAT(error_of("tiers:\n  - type: Folder\n    path: /a\n"), HasSubstr(":2: tiers[0].type: unknown tier type"));
}

TEST_F(ConfigParse, DuplicateNamesAreAnError) {
  EXPECT_EQ(error_of("tiers:\n  - name: fast\n    path: /a\n  - name: fast\n    path: /b\n"),
            "/etc/datavo/shards.yaml:4: tiers[1].name: duplicate tier name \"fast\", also used by tiers[0] on line 2; "
            "give each tier a distinct name");
}

TEST_F(ConfigParse, DuplicateNamesAreCheckedAfterDefaultsAreApplied) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - path: /a\n"),
              HasSubstr(":3: tiers[1].name: duplicate tier name \"/a\" (the default name, from the tier's location), "
                        "also used by tiers[0] on line 2"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - name: b\n    path: /b\n  - type: s3\n    bucket: bbb\n"
                       "  - type: gcs\n    bucket: bbb\n"),
              HasSubstr(":7: tiers[3].name: duplicate tier name \"bbb\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - name: /a\n    path: /b\n"),
              HasSubstr(":3: tiers[1].name: duplicate tier name \"/a\", also used by tiers[0]"));
}

TEST_F(ConfigParse, MissingRequiredFieldsAreErrors) {
  EXPECT_EQ(error_of("tiers:\n  - name: a\n    max_bytes: 1GB\n"),
            "/etc/datavo/shards.yaml:2: tiers[0].path: missing; a folder tier needs a path");
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    region: us-east-1\n"),
              HasSubstr(":3: tiers[1].bucket: missing; an s3 tier needs a bucket"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: gcs\n"),
              HasSubstr(":3: tiers[1].bucket: missing; a gcs tier needs a bucket"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    prefix: x\n"),
              HasSubstr(":3: tiers[1].container_url: missing; an azure_blob tier needs a container_url"));
}

TEST_F(ConfigParse, MaxAgeOnACloudTierIsWhatGcExpiresItsObjectsBy) {
  for (const std::string tier : {"  - type: s3\n    bucket: my-bucket\n", "  - type: gcs\n    bucket: my-bucket\n",
                                 "  - type: azure_blob\n    container_url: https://a.b/c\n"}) {
    auto config = parse("tiers:\n  - path: /a\n" + tier + "    max_age: 30d\n");
    ASSERT_TRUE(config) << config.error().message;
    auto built = make_tier(config->tiers[1]);
    ASSERT_TRUE(built) << built.error().message;
    EXPECT_EQ((*built)->max_age(), std::optional<Seconds>(Seconds{30 * 24 * 3600})) << tier;
  }
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: gcs\n    bucket: my-bucket\n    max_age: 0s\n"),
              HasSubstr(":5: tiers[1].max_age: must be positive; omit max_age for no age limit"));
}

TEST_F(ConfigParse, BadMaxAgeIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_age: 30\n"),
              HasSubstr(":3: tiers[0].max_age: invalid duration \"30\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_age: 1 month\n"),
              HasSubstr(":3: tiers[0].max_age: invalid duration \"1 month\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n    max_age: 0d\n"),
              HasSubstr(":3: tiers[0].max_age: must be positive; omit max_age for no age limit"));
}

TEST_F(ConfigParse, YamlSyntaxErrorNamesFileAndLine) {
  std::string message = error_of("tiers:\n  - path: /a\n    max_bytes: [1GB\n  - path: /b\n");
  EXPECT_THAT(message, StartsWith("/etc/datavo/shards.yaml:"));
  EXPECT_THAT(message, HasSubstr("YAML syntax error"));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n   bad indent: x\n"), HasSubstr("shards.yaml:3: YAML syntax error: "));
  EXPECT_THAT(error_of("tiers:\n\t- path: /a\n"), HasSubstr("shards.yaml:2: YAML syntax error"));
  EXPECT_THAT(error_of("tiers: [\n"), HasSubstr("shards.yaml:2: YAML syntax error"));
}

TEST_F(ConfigParse, EmptyFileIsAnError) {
  EXPECT_EQ(error_of(""), "/etc/datavo/shards.yaml:1: empty configuration (expected a mapping with a tiers list)");
  EXPECT_THAT(error_of("# nothing but a comment\n\n"), HasSubstr(":1: empty configuration"));
  EXPECT_THAT(error_of("---\n"), HasSubstr(":1: empty configuration"));
}

TEST_F(ConfigParse, NonMappingTopLevelIsAnError) {
  EXPECT_EQ(error_of("- path: /a\n"),
            "/etc/datavo/shards.yaml:1: expected a mapping with a tiers list at the top level, got a list");
  EXPECT_THAT(error_of("just words\n"),
              HasSubstr(":1: expected a mapping with a tiers list at the top level, got a scalar"));
}

TEST_F(ConfigParse, SecondDocumentIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n---\ntiers:\n  - path: /b\n"),
              HasSubstr(":4: a second YAML document; a configuration file holds exactly one"));
}

TEST_F(ConfigParse, NonScalarKeyIsAnError) {
  EXPECT_THAT(error_of("? [a, b]\n: 1\ntiers:\n  - path: /a\n"), HasSubstr("keys must be plain names, got a list"));
}

TEST_F(ConfigParse, PathIsExpanded) {
  auto config = parse(
      "tiers:\n  - {name: a, path: ~/cache}\n  - {name: b, path: $DATAVO_TEST_ROOT/b}\n"
      "  - {name: c, path: \"${DATAVO_TEST_ROOT}x/c\"}\n");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(folder(config->tiers[0]).path, "/home/ada/cache");
  EXPECT_EQ(folder(config->tiers[1]).path, "/srv/cache/b");
  EXPECT_EQ(folder(config->tiers[2]).path, "/srv/cachex/c");
}

TEST_F(ConfigParse, UnsetVariableInPathIsAnErrorNamingIt) {
  EXPECT_THAT(error_of("tiers:\n  - path: /data/$NOT_SET_ANYWHERE/cache\n"),
              HasSubstr(":2: tiers[0].path: \"/data/$NOT_SET_ANYWHERE/cache\": environment variable NOT_SET_ANYWHERE "
                        "is not set"));
  EXPECT_THAT(error_of("tiers:\n  - path: ${SCRATCH}/cache\n"),
              HasSubstr(":2: tiers[0].path: \"${SCRATCH}/cache\": environment variable SCRATCH is not set"));
}

TEST_F(ConfigParse, RelativePathIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: cache/shards\n"),
              HasSubstr(":2: tiers[0].path: \"cache/shards\" is not an absolute path"));
}

TEST_F(ConfigParse, BadBucketNamesAreErrors) {
  auto s3 = [this](const std::string& bucket) {
    return error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: \"" + bucket + "\"\n");
  };
  EXPECT_THAT(s3("ab"), HasSubstr(":4: tiers[1].bucket: invalid S3 bucket name \"ab\": must be 3 to 63 characters"));
  EXPECT_THAT(s3(std::string(64, 'a')), HasSubstr("must be 3 to 63 characters"));
  EXPECT_THAT(s3("My_Bucket"), HasSubstr("may contain only a-z, 0-9, '.' and '-'"));
  EXPECT_THAT(s3("-bucket"), HasSubstr("must start and end with a letter or digit"));
  EXPECT_THAT(s3("my..bucket"), HasSubstr("must not contain"));
  EXPECT_THAT(s3("192.168.5.4"), HasSubstr("must not look like an IP address"));
  auto gcs = [this](const std::string& bucket) {
    return error_of("tiers:\n  - path: /a\n  - type: gcs\n    bucket: \"" + bucket + "\"\n");
  };
  EXPECT_THAT(gcs("UPPER"), HasSubstr(":4: tiers[1].bucket: invalid GCS bucket name \"UPPER\""));
  EXPECT_THAT(gcs("google-bucket"), HasSubstr("must not start with \"goog\""));
  EXPECT_THAT(gcs(std::string(64, 'a')), HasSubstr("each dot-separated part must be at most 63 characters"));
  EXPECT_THAT(gcs("bucket_"), HasSubstr("must start and end with a letter or digit"));
}

TEST_F(ConfigParse, PrefixesAreNormalisedAndBadOnesAreErrors) {
  auto with_prefix = [this](const std::string& prefix) {
    return error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    prefix: \"" + prefix + "\"\n");
  };
  for (const char* spelling : {"/team-a", "team-a/", "/team-a/", "team-a"}) {
    auto config = parse(std::string("tiers:\n  - path: /a\n  - type: s3\n    bucket: my-bucket\n    prefix: \"") +
                        spelling + "\"\n");
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(s3_of(config->tiers[1]).remote.prefix, "team-a") << spelling;
  }
  auto only_slashes = parse("tiers:\n  - path: /a\n  - type: gcs\n    bucket: abc\n    prefix: \"/\"\n");
  ASSERT_TRUE(only_slashes) << only_slashes.error().message;
  EXPECT_FALSE(gcs_of(only_slashes->tiers[1]).remote.prefix);
  EXPECT_THAT(with_prefix("team/../b"), HasSubstr(":5: tiers[1].prefix: invalid prefix \"team/../b\": must not "
                                                  "contain \"..\""));
  EXPECT_THAT(with_prefix("team//b"), HasSubstr("must not contain \"//\""));
  EXPECT_THAT(with_prefix(""), HasSubstr(":5: tiers[1].prefix: must not be empty"));
  EXPECT_THAT(with_prefix("a\\tb"), HasSubstr("must not contain control characters"));
  EXPECT_THAT(
      error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.b/c\n    prefix: x//y\n"),
      HasSubstr(":5: tiers[1].prefix: invalid prefix"));
}

TEST_F(ConfigParse, BadRegionAndProjectAreErrors) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: s3\n    bucket: abc\n    region: US East\n"),
              HasSubstr(":5: tiers[1].region: invalid region \"US East\""));
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: gcs\n    bucket: abc\n    project: My Project\n"),
              HasSubstr(":5: tiers[1].project: invalid project id \"My Project\""));
}

TEST_F(ConfigParse, BadContainerUrlIsAnErrorWithoutLeakingTheQuery) {
  auto with_url = [this](const std::string& url) {
    return error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: \"" + url + "\"\n");
  };
  EXPECT_THAT(
      with_url("datavoeastus.blob.core.windows.net/shards"),
      HasSubstr(":4: tiers[1].container_url: invalid container_url \"datavoeastus.blob.core.windows.net/shards\": "
                "expected an http:// or https:// URL"));
  EXPECT_THAT(with_url("ftp://host/shards"), HasSubstr("expected an http:// or https:// URL"));
  EXPECT_THAT(with_url("https://"), HasSubstr("has no host"));
  EXPECT_THAT(with_url("https://datavoeastus.blob.core.windows.net/"), HasSubstr("names no container"));
  EXPECT_THAT(with_url("https://host/a b"), HasSubstr("must not contain spaces"));
  std::string leaked = with_url("ftp://host/shards?sig=TOPSECRET");
  EXPECT_THAT(leaked, Not(HasSubstr("TOPSECRET")));
}

TEST_F(ConfigParse, SasTokenIsNeverEchoed) {
  std::string message = error_of(
      "tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.b/c\n    sas_token: "
      "\"sig=TOP\x01SECRET\"\n");
  EXPECT_THAT(message, HasSubstr(":5: tiers[1].sas_token: must not contain control characters"));
  EXPECT_THAT(message, Not(HasSubstr("SECRET")));
}

TEST_F(ConfigParse, BadManagedIdentityClientIdIsAnError) {
  EXPECT_THAT(error_of("tiers:\n  - path: /a\n  - type: azure_blob\n    container_url: https://a.b/c\n"
                       "    managed_identity_client_id: \"a b\"\n"),
              HasSubstr(":5: tiers[1].managed_identity_client_id: must not contain spaces"));
}

TEST_F(ConfigParse, ErrorsUseTheGivenFileName) {
  auto result = parse_config("tiers: []\n", "relative/shards.yaml", env_);
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, StartsWith("relative/shards.yaml:1: tiers: "));
}

TEST_F(ConfigParse, HostileInputNeverCrashes) {
  std::string deep(5000, '[');
  for (const std::string& yaml :
       {deep, std::string("tiers: *undefined\n"), std::string("tiers: !!binary x\n"),
        std::string("\xff\xfe\x00garbage", 10), std::string("tiers:\n  - &a path: /a\n  - *a\n"),
        std::string("tiers:\n  - <<: {path: /a}\n")}) {
    auto result = parse(yaml);
    EXPECT_FALSE(result) << yaml.substr(0, 40);
    if (!result) {
      EXPECT_EQ(result.error().code, ErrorCode::config);
      EXPECT_THAT(result.error().message, StartsWith(k_file));
    }
  }
}

// --- expand_path ---

TEST(ConfigExpandPath, ExpandsTildeAndVariables) {
  ConfigTempDir dir;
  auto env = fake_env(dir.path(), {{"HOME", "/home/ada"}, {"A", "alpha"}, {"B_2", "beta"}, {"EMPTY", ""}});
  EXPECT_EQ(expand_path("~", env).value(), "/home/ada");
  EXPECT_EQ(expand_path("~/x", env).value(), "/home/ada/x");
  EXPECT_EQ(expand_path("/d/$A/$B_2", env).value(), "/d/alpha/beta");
  EXPECT_EQ(expand_path("/d/${A}x", env).value(), "/d/alphax");
  EXPECT_EQ(expand_path("/d/$EMPTY/x", env).value(), "/d//x");
  EXPECT_EQ(expand_path("/d/a~b", env).value(), "/d/a~b") << "only a leading ~ expands";
  EXPECT_EQ(expand_path("/cost$/x$", env).value(), "/cost$/x$") << "a $ that starts no name stays";
  EXPECT_EQ(expand_path("/plain/path", env).value(), "/plain/path");
}

TEST(ConfigExpandPath, UnsetVariableIsAnErrorNamingIt) {
  ConfigTempDir dir;
  auto env = fake_env(dir.path());
  auto result = expand_path("/d/$MISSING_VAR/x", env);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
  EXPECT_THAT(result.error().message, HasSubstr("environment variable MISSING_VAR is not set"));
  EXPECT_THAT(expand_path("${OTHER}", env).error().message, HasSubstr("environment variable OTHER is not set"));
  EXPECT_THAT(expand_path("~/x", env).error().message, HasSubstr("HOME is not set"));
}

TEST(ConfigExpandPath, MalformedReferencesAreErrors) {
  ConfigTempDir dir;
  auto env = fake_env(dir.path(), {{"HOME", "/home/ada"}});
  EXPECT_THAT(expand_path("/d/${HOME", env).error().message, HasSubstr("unterminated ${"));
  EXPECT_THAT(expand_path("/d/${}", env).error().message, HasSubstr("invalid variable name"));
  EXPECT_THAT(expand_path("/d/${1X}", env).error().message, HasSubstr("invalid variable name \"1X\""));
  EXPECT_THAT(expand_path("~bob/x", env).error().message, HasSubstr("~user is not supported"));
}

// --- load_config_file ---

TEST(ConfigLoad, ReadsAFile) {
  ConfigTempDir dir;
  auto env = fake_env(dir.path());
  std::string path = dir.write("shards.yaml", "tiers:\n  - path: /a\n");
  auto config = load_config_file(path, env);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->path, path);
  EXPECT_EQ(config->tiers.size(), 1u);
}

TEST(ConfigLoad, ErrorsNameTheFileAndLine) {
  ConfigTempDir dir;
  auto env = fake_env(dir.path());
  std::string path = dir.write("shards.yaml", "tiers:\n  - path: /a\n    max_bytes: lots\n");
  auto config = load_config_file(path, env);
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, StartsWith(path + ":3: tiers[0].max_bytes: invalid size \"lots\""));
}

TEST(ConfigLoad, EmptyFileIsAnError) {
  ConfigTempDir dir;
  std::string path = dir.write("shards.yaml", "");
  auto config = load_config_file(path, fake_env(dir.path()));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message, path + ":1: empty configuration (expected a mapping with a tiers list)");
}

TEST(ConfigLoad, DirectoryIsAnErrorNamingIt) {
  ConfigTempDir dir;
  auto config = load_config_file(dir.path(), fake_env(dir.path()));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, ErrorCode::config);
  EXPECT_EQ(config.error().message, dir.path() + ": cannot read configuration file: Is a directory");
}

TEST(ConfigLoad, NonexistentFileIsAnErrorNamingIt) {
  ConfigTempDir dir;
  std::string path = dir.path() + "/nope.yaml";
  auto config = load_config_file(path, fake_env(dir.path()));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, ErrorCode::config);
  EXPECT_EQ(config.error().message, path + ": cannot read configuration file: No such file or directory");
}

// Runs `body` in a child process whose effective capabilities lack the two that bypass file permissions
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that root meets permission bits as every other user does (for
// another user the drop changes nothing); returns what `body` returned, or why it could not run.
std::string without_permission_bypass(const std::function<std::string()>& body) {
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = {};
    std::string result;
    if (::syscall(SYS_capget, &header, caps) != 0) {
      result = std::string("capget: ") + std::strerror(errno);
    } else {
      for (unsigned cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) caps[cap / 32].effective &= ~(1u << (cap % 32));
      result = ::syscall(SYS_capset, &header, caps) == 0 ? body() : std::string("capset: ") + std::strerror(errno);
    }
    [[maybe_unused]] auto written = ::write(out[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) > 0;) result.append(buffer, std::size_t(n));
  ::close(out[0]);
  if (child < 0 || ::waitpid(child, nullptr, 0) != child) return "fork failed";
  return result;
}

TEST(ConfigLoad, UnreadableFileIsAnErrorNamingIt) {
  ConfigTempDir dir;
  std::string path = dir.write("shards.yaml", "tiers:\n  - path: /a\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  // Root would read the mode 000 file: the load runs without the capabilities that let it.
  std::string message = without_permission_bypass([&] {
    auto config = load_config_file(path, fake_env(dir.path()));
    return config ? std::string("the file was read") : config.error().message;
  });
  EXPECT_EQ(message, path + ": cannot read configuration file: Permission denied");
}

TEST(ConfigLoad, HugeFileIsRefused) {
  ConfigTempDir dir;
  std::string path = dir.write("shards.yaml", "# " + std::string(std::size_t{2} << 20, 'x') + "\n");
  auto config = load_config_file(path, fake_env(dir.path()));
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, HasSubstr("larger than 1 MiB"));
}

// --- resolve_config ---

class ConfigResolve : public ::testing::Test {
 protected:
  std::string home() const { return dir_.path() + "/home"; }
  std::string system_file() const { return dir_.path() + "/etc/datavo/shards.yaml"; }
  std::string user_file() const { return home() + "/.config/datavo/shards.yaml"; }
  ConfigEnvironment env(std::map<std::string, std::string> vars = {}) const {
    vars.emplace("HOME", home());
    return fake_env(dir_.path(), std::move(vars));
  }
  std::string write(const std::string& relative, const std::string& tier_path) const {
    return dir_.write(relative, "tiers:\n  - path: " + tier_path + "\n");
  }

  ConfigTempDir dir_;
};

TEST_F(ConfigResolve, ExplicitArgumentBeatsEnvironmentAndFiles) {
  std::string argument = write("arg.yaml", "/from/argument");
  std::string from_env = write("env.yaml", "/from/env");
  write("etc/datavo/shards.yaml", "/from/system");
  auto config = resolve_config(argument, env({{"DATAVO_SHARD_CACHE_CONFIG", from_env}}));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::argument);
  EXPECT_EQ(config->path, argument);
  EXPECT_EQ(folder(config->tiers[0]).path, "/from/argument");
  EXPECT_TRUE(config->skipped.empty());
}

TEST_F(ConfigResolve, EnvironmentVariableIsAnExplicitPath) {
  std::string from_env = write("env.yaml", "/from/env");
  write("etc/datavo/shards.yaml", "/from/system");
  auto config = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_CONFIG", from_env}}));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::environment);
  EXPECT_EQ(config->path, from_env);
  EXPECT_EQ(folder(config->tiers[0]).path, "/from/env");
}

TEST_F(ConfigResolve, EmptyEnvironmentVariableIsUnset) {
  auto config = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_CONFIG", ""}}));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::builtin_default);
}

TEST_F(ConfigResolve, MissingExplicitPathIsAnErrorNotSkipped) {
  write("etc/datavo/shards.yaml", "/from/system");
  std::string missing = dir_.path() + "/missing.yaml";
  auto from_argument = resolve_config(missing, env());
  ASSERT_FALSE(from_argument);
  EXPECT_EQ(from_argument.error().code, ErrorCode::config);
  EXPECT_EQ(from_argument.error().message,
            missing + ": configuration file does not exist (named by the explicit configuration path)");
  auto from_env = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_CONFIG", missing}}));
  ASSERT_FALSE(from_env);
  EXPECT_EQ(from_env.error().message,
            missing + ": configuration file does not exist (named by $DATAVO_SHARD_CACHE_CONFIG)");
}

TEST_F(ConfigResolve, BrokenExplicitFileIsAnError) {
  std::string bad = dir_.write("bad.yaml", "tiers:\n  - path: /a\n    colour: red\n");
  auto config = resolve_config(bad, env());
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, StartsWith(bad + ":3: tiers[0].colour: unknown key"));
}

TEST_F(ConfigResolve, SystemFileBeatsUserFile) {
  write("etc/datavo/shards.yaml", "/from/system");
  write("home/.config/datavo/shards.yaml", "/from/user");
  auto config = resolve_config(std::nullopt, env());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::system);
  EXPECT_EQ(config->path, system_file());
  EXPECT_EQ(folder(config->tiers[0]).path, "/from/system");
  EXPECT_TRUE(config->skipped.empty());
}

TEST_F(ConfigResolve, UserFileWhenThereIsNoSystemFile) {
  write("home/.config/datavo/shards.yaml", "/from/user");
  auto config = resolve_config(std::nullopt, env());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::user);
  EXPECT_EQ(config->path, user_file());
  ASSERT_EQ(config->skipped.size(), 1u);
  EXPECT_EQ(config->skipped[0].path, system_file());
  EXPECT_EQ(config->skipped[0].reason, "does not exist");
}

TEST_F(ConfigResolve, BuiltInDefaultWhenNoFileExists) {
  auto config = resolve_config(std::nullopt, env());
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->source, ConfigSource::builtin_default);
  EXPECT_EQ(config->path, "");
  ASSERT_EQ(config->tiers.size(), 1u);
  const TierConfig& tier = config->tiers[0];
  EXPECT_EQ(tier.name, "default");
  EXPECT_EQ(tier.type, "folder");
  EXPECT_EQ(folder(tier).path, home() + "/.cache/altavo/datavo/shards");
  EXPECT_EQ(tier.max_bytes, GiB(50));
  EXPECT_FALSE(folder(tier).max_age);
  EXPECT_EQ(tier.access, Access::read_write);
  EXPECT_EQ(tier.line, 0);
  ASSERT_EQ(config->skipped.size(), 2u);
  EXPECT_EQ(config->skipped[0].path, system_file());
  EXPECT_EQ(config->skipped[0].reason, "does not exist");
  EXPECT_EQ(config->skipped[1].path, user_file());
  EXPECT_EQ(config->skipped[1].reason, "does not exist");
}

TEST_F(ConfigResolve, BuiltInDefaultUsesDatavoShardCacheDir) {
  auto config = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_DIR", "/data/datavo-cache"}}));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(folder(config->tiers[0]).path, "/data/datavo-cache");
  EXPECT_EQ(config->tiers[0].max_bytes, GiB(50));
  auto tilde = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_DIR", "~/big"}}));
  ASSERT_TRUE(tilde) << tilde.error().message;
  EXPECT_EQ(folder(tilde->tiers[0]).path, home() + "/big");
}

TEST_F(ConfigResolve, RelativeDatavoShardCacheDirIsAnError) {
  auto config = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_DIR", "cache"}}));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, ErrorCode::config);
  EXPECT_THAT(config.error().message, HasSubstr("DATAVO_SHARD_CACHE_DIR=cache: expected an absolute path"));
}

TEST_F(ConfigResolve, DatavoShardCacheDirDoesNotOverrideAFile) {
  write("etc/datavo/shards.yaml", "/from/system");
  auto config = resolve_config(std::nullopt, env({{"DATAVO_SHARD_CACHE_DIR", "/data/datavo-cache"}}));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(folder(config->tiers[0]).path, "/from/system");
}

TEST_F(ConfigResolve, ExistingButBrokenCandidateIsAnErrorNotSkipped) {
  std::string system = dir_.write("etc/datavo/shards.yaml", "tiers:\n  - path: /a\n    max_bytes: 12XB\n");
  write("home/.config/datavo/shards.yaml", "/from/user");
  auto config = resolve_config(std::nullopt, env());
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message, StartsWith(system + ":3: tiers[0].max_bytes: invalid size \"12XB\""));
}

TEST_F(ConfigResolve, UnreadableCandidateIsAnErrorNotSkipped) {
  std::filesystem::create_directories(user_file());
  auto config = resolve_config(std::nullopt, env());
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message, user_file() + ": cannot read configuration file: Is a directory");
}

TEST_F(ConfigResolve, WithoutHomeTheUserFileIsSkipped) {
  auto config = resolve_config(std::nullopt, fake_env(dir_.path(), {{"DATAVO_SHARD_CACHE_DIR", "/data/c"}}));
  ASSERT_TRUE(config) << config.error().message;
  ASSERT_EQ(config->skipped.size(), 2u);
  EXPECT_EQ(config->skipped[1].path, "~/.config/datavo/shards.yaml");
  EXPECT_EQ(config->skipped[1].reason, "HOME is not set");
  EXPECT_EQ(folder(config->tiers[0]).path, "/data/c");
}

TEST_F(ConfigResolve, WithoutHomeOrCacheDirTheDefaultIsAnError) {
  auto config = resolve_config(std::nullopt, fake_env(dir_.path()));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, ErrorCode::config);
  EXPECT_THAT(config.error().message, HasSubstr("needs DATAVO_SHARD_CACHE_DIR or HOME"));
}

TEST(ConfigSourceName, EverySourceHasAStableName) {
  EXPECT_STREQ(to_string(ConfigSource::argument), "argument");
  EXPECT_STREQ(to_string(ConfigSource::environment), "environment");
  EXPECT_STREQ(to_string(ConfigSource::system), "system");
  EXPECT_STREQ(to_string(ConfigSource::user), "user");
  EXPECT_STREQ(to_string(ConfigSource::builtin_default), "builtin_default");
}

TEST(ConfigEnvironmentProcess, ReadsTheProcessEnvironment) {
  ASSERT_EQ(::setenv("DATAVO_CONFIG_TEST_VARIABLE", "set-by-test", 1), 0);
  auto env = ConfigEnvironment::process();
  EXPECT_EQ(env.getenv("DATAVO_CONFIG_TEST_VARIABLE"), "set-by-test");
  EXPECT_EQ(env.getenv("DATAVO_CONFIG_TEST_VARIABLE_UNSET"), std::nullopt);
  EXPECT_EQ(env.system_path, "/etc/datavo/shards.yaml");
  ConfigEnvironment without_getenv;
  EXPECT_EQ(expand_path("/x/$DATAVO_CONFIG_TEST_VARIABLE", without_getenv).value(), "/x/set-by-test")
      << "an empty getenv reads the process environment";
  ::unsetenv("DATAVO_CONFIG_TEST_VARIABLE");
}

}  // namespace
}  // namespace datavo
