#include "datavo/memory_tier.hpp"

#include <unistd.h>

#include <map>
#include <mutex>

#include "util/fs.hpp"

namespace datavo {
namespace {

class MemoryTier final : public Tier {
 public:
  explicit MemoryTier(MemoryTierOptions options) : options_(std::move(options)) {}

  const std::string& name() const override { return options_.name; }
  std::string_view type() const override { return "memory"; }
  std::optional<Bytes> max_bytes() const override { return options_.max_bytes; }
  bool supports_direct_read() const override { return false; }
  bool read_only() const override { return false; }
  std::string location() const override { return "memory://" + options_.name; }
  std::optional<Seconds> max_age() const override { return options_.max_age; }

  Result<bool> contains(const ShardKey& key) override {
    DATAVO_TRY(check_up());
    std::lock_guard lock(mu_);
    return entries_.count(map_key(key)) > 0;
  }

  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    DATAVO_TRY(check_up());
    Entry entry;
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(map_key(key));
      if (it == entries_.end()) return std::optional<Expectation>{};
      entry = it->second;
    }
    if (sink.written().count() > 0) DATAVO_TRY(sink.restart());
    DATAVO_TRY(sink.write(entry.bytes.data(), entry.bytes.size()));
    // What was recorded at install, as a cloud tier returns its object metadata: the caller checks the bytes.
    return std::optional<Expectation>{Expectation{Bytes{entry.bytes.size()}, entry.digest}};
  }

  CheckReport check() override {
    CheckReport report;
    auto up = check_up();
    report.steps.push_back(CheckStep{"memory", bool(up), up ? "in this process" : up.error().message});
    report.readable = report.writable = bool(up);
    return report;
  }

  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    DATAVO_TRY(check_up());
    {
      std::lock_guard lock(mu_);
      if (entries_.count(map_key(key))) return InstallOutcome::already_present;
    }
    std::string bytes(source.size().count(), '\0');
    DATAVO_TRY(util::pread_all(source.fd(), bytes.data(), bytes.size(), 0, source.path()));
    std::lock_guard lock(mu_);
    entries_.emplace(map_key(key), Entry{std::move(bytes), digest, options_.clock()});
    return InstallOutcome::installed;
  }

  Result<bool> remove(const ShardKey& key) override {
    DATAVO_TRY(check_up());
    std::lock_guard lock(mu_);
    return entries_.erase(map_key(key)) > 0;
  }

  Result<TierUsage> usage() override {
    DATAVO_TRY(check_up());
    std::lock_guard lock(mu_);
    TierUsage u;
    for (const auto& [k, v] : entries_) u.used += Bytes{v.bytes.size()};
    u.entries = entries_.size();
    return u;
  }

  Result<std::vector<EntryInfo>> list() override {
    DATAVO_TRY(check_up());
    std::lock_guard lock(mu_);
    std::vector<EntryInfo> out;
    for (const auto& [k, v] : entries_) {
      auto slash = k.find('/');
      out.push_back(EntryInfo{k.substr(0, slash), ContentHash::parse(k.substr(slash + 1)).value(),
                              Bytes{v.bytes.size()}, v.modified});
    }
    return out;
  }

 private:
  static std::string map_key(const ShardKey& key) { return key.instance.name() + "/" + key.hash.hex(); }
  Result<void> check_up() const {
    if (options_.fail_with) {
      return Error{*options_.fail_with, "memory tier '" + options_.name + "' is configured to fail"};
    }
    return {};
  }

  struct Entry {
    std::string bytes;
    Sha256 digest;  // as install_copy was given it
    std::chrono::system_clock::time_point modified;
  };
  MemoryTierOptions options_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace

std::shared_ptr<Tier> make_memory_tier(MemoryTierOptions options) {
  return std::make_shared<MemoryTier>(std::move(options));
}

}  // namespace datavo
