// A scripted remote tier for the tests of the hierarchy's remote path (uploads, breaker, leases): the memory
// tier underneath, with switches that make lookups or uploads fail, a gate that holds uploads until the test
// opens it, a configurable upload mode, and optional cross-VM coordination whose answers the test scripts.
// Header-only test support. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "datavo/cloud_tier.hpp"
#include "datavo/memory_tier.hpp"
#include "datavo/tier.hpp"

namespace datavo::shardtest {

// A gate threads wait at until it opens (open by default).
class Gate {
 public:
  void close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

// A lease that says when it was released (destroyed).
class FlagLease final : public Lease {
 public:
  explicit FlagLease(std::shared_ptr<std::atomic<bool>> released) : released_(std::move(released)) {}
  ~FlagLease() override { released_->store(true); }

 private:
  std::shared_ptr<std::atomic<bool>> released_;
};

class ScriptedRemote final : public Tier, public RemoteCoordination {
 public:
  explicit ScriptedRemote(std::string name = "remote") : name_(std::move(name)) {
    MemoryTierOptions options;
    options.name = name_;
    inner_ = make_memory_tier(options);
  }

  // --- switches ---
  std::atomic<bool> fail_lookups{false};
  std::atomic<ErrorCode> lookup_failure{ErrorCode::remote};  // the code of a failed lookup
  std::atomic<bool> fail_uploads{false};
  std::atomic<bool> uploads_already_present{false};  // install_copy answers already_present, storing nothing
  UploadMode mode = UploadMode::background;
  Gate upload_gate;
  // When set, coordination() offers leases and try_lease() answers with this.
  std::function<Result<LeaseAttempt>(const ShardKey&)> lease;
  // When set, lease_holder() answers with this; otherwise with the last holder try_lease() named, until the object
  // is in the tier (its holder releases the lease after its upload).
  std::function<Result<std::optional<LeaseAttempt>>(const ShardKey&)> holder;
  Milliseconds renewal{20'000};  // renewal_period()

  // --- what happened ---
  std::atomic<int> lookups{0};          // read_into calls
  std::atomic<int> uploads_started{0};  // install_copy calls
  std::atomic<int> uploads_done{0};     // install_copy calls that returned
  std::atomic<int> lease_attempts{0};
  std::atomic<int> lease_polls{0};  // lease_holder calls

  Tier& inner() { return *inner_; }

  const std::string& name() const override { return name_; }
  std::string_view type() const override { return "scripted"; }
  std::optional<Bytes> max_bytes() const override { return std::nullopt; }
  bool supports_direct_read() const override { return false; }
  bool read_only() const override { return false; }
  std::string location() const override { return "scripted://" + name_; }
  UploadMode upload_mode() const override { return mode; }
  RemoteCoordination* coordination() override { return lease ? this : nullptr; }
  TierReach reach() const override { return TierReach::shared; }

  Result<bool> contains(const ShardKey& key) override {
    if (fail_lookups) return Error{lookup_failure.load(), name_ + " is down"};
    return inner_->contains(key);
  }
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    lookups.fetch_add(1);
    if (fail_lookups) return Error{lookup_failure.load(), name_ + " is down"};
    return inner_->read_into(key, sink);
  }
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    uploads_started.fetch_add(1);
    upload_gate.pass();
    Result<InstallOutcome> out = InstallOutcome::already_present;
    if (fail_uploads) {
      out = Error{ErrorCode::remote, name_ + " refused the upload"};
    } else if (!uploads_already_present) {
      out = inner_->install_copy(key, source, digest);
    }
    uploads_done.fetch_add(1);
    return out;
  }
  Result<bool> remove(const ShardKey& key) override { return inner_->remove(key); }
  Result<TierUsage> usage() override { return inner_->usage(); }
  Result<std::vector<EntryInfo>> list() override { return inner_->list(); }
  CheckReport check() override { return inner_->check(); }

  Result<LeaseAttempt> try_lease(const ShardKey& key) override {
    lease_attempts.fetch_add(1);
    auto attempt = lease(key);
    if (attempt && !attempt->held) {
      std::lock_guard lock(mu_);
      last_holder_ = attempt->holder;
      last_expires_ = attempt->expires;
    }
    return attempt;
  }
  Result<std::optional<LeaseAttempt>> lease_holder(const ShardKey& key) override {
    lease_polls.fetch_add(1);
    if (holder) return holder(key);
    auto present = inner_->contains(key);
    if (!present) return std::move(present).error();
    std::lock_guard lock(mu_);
    if (*present || last_holder_.empty()) return std::optional<LeaseAttempt>{};
    LeaseAttempt seen;
    seen.holder = last_holder_;
    seen.expires = last_expires_;
    return std::optional<LeaseAttempt>{std::move(seen)};
  }
  Milliseconds renewal_period() const override { return renewal; }

 private:
  std::mutex mu_;
  std::string last_holder_;                             // guarded by mu_
  std::chrono::system_clock::time_point last_expires_;  // guarded by mu_
  std::string name_;
  std::shared_ptr<Tier> inner_;
};

}  // namespace datavo::shardtest
