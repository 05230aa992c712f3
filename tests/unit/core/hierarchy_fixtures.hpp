// Test support for the hierarchy's tests (test_hierarchy.cpp, test_walk.cpp): tiers, a hierarchy over them, a
// counting remote tier, a local tier whose disk is full, log capture and a breaker clock the test moves.
// Header-only test support.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/breaker.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/memory_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "util/log.hpp"

namespace datavo::shardtest {

inline std::shared_ptr<Tier> memory_tier(std::string name = "remote",
                                         std::optional<ErrorCode> fail_with = std::nullopt) {
  MemoryTierOptions options;
  options.name = std::move(name);
  options.fail_with = fail_with;
  return make_memory_tier(options);
}

inline std::shared_ptr<FolderTier> folder(const TempDir& dir, const std::string& name,
                                          std::optional<Bytes> max_bytes = std::nullopt,
                                          Access access = Access::read_write) {
  auto options = folder_options(dir.sub(name), name);
  options.max_bytes = max_bytes;
  options.access = access;
  return make_folder(options);
}

inline std::shared_ptr<ShardCacheHierarchy> hierarchy(std::vector<std::shared_ptr<Tier>> tiers) {
  auto made = ShardCacheHierarchy::create(std::move(tiers));
  if (!made) throw std::runtime_error("ShardCacheHierarchy::create failed: " + made.error().message);
  return *made;
}

inline bool holds(Tier& tier, const ShardKey& key) {
  auto found = tier.contains(key);
  return found && *found;
}

inline bool staging_is_empty(const Tier& tier) { return list_dir(tier.location() + "/.staging").empty(); }

// Puts `bytes` into `tier` under `key` as if an earlier run had cached them.
inline void seed_tier(Tier& tier, const TempDir& dir, const ShardKey& key, const std::string& bytes) {
  const std::string source_path = dir.sub("seed-" + key.hash.hex().substr(0, 12) + "-" + tier.name());
  ShardHandle source = handle_on_new_file(source_path, bytes);
  auto installed = tier.install_copy(key, source, sha256_of(bytes));
  if (!installed) throw std::runtime_error("seeding failed: " + installed.error().message);
  ::unlink(source_path.c_str());
}

// A remote tier double that counts lookups (read_into calls) and downloads (the ones that hit), and makes each
// lookup take `delay`.
class CountingRemote final : public Tier {
 public:
  CountingRemote(std::shared_ptr<Tier> inner, std::chrono::milliseconds delay)
      : inner_(std::move(inner)), delay_(delay) {}
  const std::string& name() const override { return inner_->name(); }
  std::string_view type() const override { return inner_->type(); }
  std::optional<Bytes> max_bytes() const override { return inner_->max_bytes(); }
  bool supports_direct_read() const override { return false; }
  bool read_only() const override { return false; }
  std::string location() const override { return inner_->location(); }
  Result<bool> contains(const ShardKey& key) override { return inner_->contains(key); }
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    lookups_.fetch_add(1);
    std::this_thread::sleep_for(delay_);
    auto read = inner_->read_into(key, sink);
    if (read && *read) downloads_.fetch_add(1);
    return read;
  }
  CheckReport check() override { return inner_->check(); }
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    return inner_->install_copy(key, source, digest);
  }
  Result<bool> remove(const ShardKey& key) override { return inner_->remove(key); }
  Result<TierUsage> usage() override { return inner_->usage(); }
  Result<std::vector<EntryInfo>> list() override { return inner_->list(); }
  int downloads() const { return downloads_.load(); }  // lookups that were hits, so that the object moved
  int lookups() const { return lookups_.load(); }      // every read_into: a remote lookup is one request

 private:
  std::shared_ptr<Tier> inner_;
  std::chrono::milliseconds delay_;
  std::atomic<int> downloads_{0};
  std::atomic<int> lookups_{0};
};

// Makes `tier`'s <instance> directory a regular file: lookups miss (ENOTDIR) and staging works, but every commit
// into that instance fails.
inline void break_instance_dir(const FolderTier& tier, const std::string& instance = "local") {
  std::filesystem::create_directories(tier.location());
  write_file(tier.location() + "/" + instance, "not a directory");
}

// What `body` logged at WARNING and above.
template <typename F>
std::string warnings_of(F body) {
  const log::Level saved = log::level();
  log::set_level(log::Level::warning);
  testing::internal::CaptureStderr();
  body();
  std::string logged = testing::internal::GetCapturedStderr();
  log::set_level(saved);
  return logged;
}

inline int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The lines of `text` that contain `needle`.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.find(needle) != std::string::npos) out.push_back(line);
    start = end + 1;
  }
  return out;
}

// The hierarchy's breakers on a clock the test moves (core::breaker_clock), restored afterwards.
class MovableBreakerClock {
 public:
  MovableBreakerClock() : saved_(core::breaker_clock()) {
    core::breaker_clock() = [this] { return now_.load(); };
  }
  ~MovableBreakerClock() { core::breaker_clock() = saved_; }
  void advance(std::chrono::seconds by) { now_ = now_.load() + by; }

 private:
  std::function<core::Breaker::Clock::time_point()> saved_;
  std::atomic<core::Breaker::Clock::time_point> now_{core::Breaker::Clock::now()};
};

// A staging transaction on a full disk: writes beyond `room` bytes fail with ENOSPC, as a full filesystem's do.
class FullDiskTransaction final : public ShardTransaction {
 public:
  FullDiskTransaction(std::unique_ptr<ShardTransaction> inner, Bytes room) : inner_(std::move(inner)), room_(room) {}
  Result<void> write(const void* data, std::size_t size) override {
    if (inner_->written() + Bytes{size} > room_) return full();
    return inner_->write(data, size);
  }
  Bytes written() const override { return inner_->written(); }
  Result<void> restart() override { return inner_->restart(); }
  PositionalSink* positional() override { return this; }
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t size) override {
    if (Bytes{offset + size} > room_) return full();
    return inner_->positional()->write_at(offset, data, size);
  }
  Result<void> prefix_complete(Bytes size) override { return inner_->positional()->prefix_complete(size); }
  Bytes resumed_from() const override { return inner_->resumed_from(); }
  Result<Sha256> digest() override { return inner_->digest(); }
  Result<ShardHandle> open_staged() override { return inner_->open_staged(); }
  Result<ShardHandle> commit() override { return inner_->commit(); }

 private:
  static Error full() { return Error::from_errno(ENOSPC, "cannot write the staging file"); }
  std::unique_ptr<ShardTransaction> inner_;
  Bytes room_;
};

// A folder tier on a disk with `room` bytes free: statvfs would say so (begin() refuses a larger expected size at
// once, as FolderTier::begin does), and writes beyond it fail with ENOSPC. Everything else is the folder tier's.
class FullDiskTier final : public LocalTier {
 public:
  FullDiskTier(std::shared_ptr<FolderTier> inner, Bytes room) : inner_(std::move(inner)), room_(room) {}
  FolderTier& inner() { return *inner_; }

  const std::string& name() const override { return inner_->name(); }
  std::string_view type() const override { return inner_->type(); }
  std::optional<Bytes> max_bytes() const override { return inner_->max_bytes(); }
  bool read_only() const override { return inner_->read_only(); }
  std::string location() const override { return inner_->location(); }
  Result<bool> contains(const ShardKey& key) override { return inner_->contains(key); }
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    return inner_->read_into(key, sink);
  }
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    if (source.size() > room_) return full();
    return inner_->install_copy(key, source, digest);
  }
  Result<bool> remove(const ShardKey& key) override { return inner_->remove(key); }
  Result<TierUsage> usage() override { return inner_->usage(); }
  Result<std::vector<EntryInfo>> list() override { return inner_->list(); }
  CheckReport check() override { return inner_->check(); }

  Result<std::optional<ShardHandle>> open(const ShardKey& key, Touch touch = Touch::yes) override {
    return inner_->open(key, touch);
  }
  Result<Sha256> digest_of(const ShardKey& key, const ShardHandle& entry) override {
    return inner_->digest_of(key, entry);
  }
  Result<std::unique_ptr<ShardLock>> lock_shard(const ShardKey& key) override { return inner_->lock_shard(key); }
  Result<std::unique_ptr<ShardTransaction>> begin(const ShardKey& key, std::optional<Bytes> size = std::nullopt,
                                                  Resume resume = Resume::no) override {
    if (size && *size > room_) {
      return Error{ErrorCode::no_space, "its filesystem has no room for " + std::to_string(size->count()) + " bytes"};
    }
    auto staged = inner_->begin(key, size, resume);
    if (!staged) return std::move(staged).error();
    return std::unique_ptr<ShardTransaction>(std::make_unique<FullDiskTransaction>(std::move(*staged), room_));
  }
  Result<TierStats> cumulative_stats() override { return inner_->cumulative_stats(); }
  Result<void> flush_stats(LockWait wait = LockWait::block) override { return inner_->flush_stats(wait); }

 private:
  static Error full() { return Error::from_errno(ENOSPC, "cannot copy into the tier"); }
  std::shared_ptr<FolderTier> inner_;
  Bytes room_;
};

}  // namespace datavo::shardtest
