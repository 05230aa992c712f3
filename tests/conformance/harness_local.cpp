// The in-process harnesses of the conformance suite: the folder tier (a fresh directory per case) and the memory
// tier (the remote-tier double). Both store "mismatching" bytes through install_copy with a digest that is not
// theirs, which both record as given (as a cloud tier records its object metadata).
#include <cstdlib>
#include <string>

#include "conformance/tier_conformance.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/memory_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo::conformance {
namespace {

using namespace shardtest;

void install_claiming(Tier& tier, const TempDir& dir, const ShardKey& key, const std::string& bytes,
                      const Sha256& digest) {
  static int counter = 0;
  const std::string path = dir.sub("source-" + std::to_string(++counter));
  ShardHandle source = handle_on_new_file(path, bytes);
  auto installed = tier.install_copy(key, source, digest);
  if (!installed) throw std::runtime_error("install_copy failed: " + installed.error().message);
}

class FolderHarness final : public TierHarness {
 public:
  std::shared_ptr<Tier> make(const TierSetup&) override {
    root_ = dir_.sub("tier-" + std::to_string(++tiers_));
    return make_folder(root_, "folder-under-test");
  }
  std::shared_ptr<Tier> another_view(const TierSetup&) override { return make_folder(root_, "another-view"); }
  bool remote() const override { return false; }

  void store_mismatching(Tier& tier, const ShardKey& key, const std::string& bytes, const Sha256& claimed) override {
    install_claiming(tier, dir_, key, bytes, claimed);
  }
  void replace(Tier& tier, const ShardKey& key, const std::string& bytes) override {
    (void)tier.remove(key);
    install_claiming(tier, dir_, key, bytes, sha256_of(bytes));
  }
  std::optional<Expectation> recorded(Tier& tier, const ShardKey& key) override {
    auto record = tier.as_folder()->record_of(key);
    if (!record || !*record) return std::nullopt;
    return Expectation{(*record)->size, (*record)->sha256};
  }

 private:
  TempDir dir_;
  std::string root_;
  int tiers_ = 0;
};

class MemoryHarness final : public TierHarness {
 public:
  std::shared_ptr<Tier> make(const TierSetup&) override {
    MemoryTierOptions options;
    options.name = "memory-under-test";
    tier_ = make_memory_tier(options);
    return tier_;
  }
  // One process's memory: the other view is the same object.
  std::shared_ptr<Tier> another_view(const TierSetup&) override { return tier_; }
  bool remote() const override { return true; }

  void store_mismatching(Tier& tier, const ShardKey& key, const std::string& bytes, const Sha256& claimed) override {
    install_claiming(tier, dir_, key, bytes, claimed);
  }
  void replace(Tier& tier, const ShardKey& key, const std::string& bytes) override {
    (void)tier.remove(key);
    install_claiming(tier, dir_, key, bytes, sha256_of(bytes));
  }
  std::optional<Expectation> recorded(Tier&, const ShardKey&) override { return std::nullopt; }

 private:
  TempDir dir_;
  std::shared_ptr<Tier> tier_;
};

}  // namespace

TierKind folder_kind() {
  return {"folder", [] { return std::unique_ptr<TierHarness>(new FolderHarness); }};
}
TierKind memory_kind() {
  return {"memory", [] { return std::unique_ptr<TierHarness>(new MemoryHarness); }};
}

bool emulators_required() {
  const char* value = std::getenv("DATAVO_REQUIRE_EMULATORS");
  return value && std::string(value) == "1";
}

}  // namespace datavo::conformance
