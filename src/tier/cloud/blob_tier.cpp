#include "tier/cloud/blob_tier.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tier/cloud/chunk_metadata.hpp"
#include "tier/cloud/hedge.hpp"
#include "util/cancel.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo::cloud {
namespace {

// S3 allows at most this many parts; a larger object gets larger parts.
constexpr std::uint64_t k_max_parts = 10'000;
constexpr const char* k_entry_suffix = ".tar";
constexpr const char* k_leases_dir = ".leases/";
constexpr const char* k_check_dir = ".datavo-check/";

// Writes what it receives at `base` onwards of a positional sink: one range of a parallel download.
class OffsetSink final : public ByteSink {
 public:
  OffsetSink(PositionalSink& target, std::uint64_t base) : target_(target), base_(base) {}
  Result<void> write(const void* data, std::size_t size) override {
    DATAVO_TRY(target_.write_at(base_ + written_.count(), data, size));
    written_ += Bytes{size};
    return {};
  }
  Bytes written() const override { return written_; }
  Result<void> restart() override {
    written_ = Bytes{0};  // the retry overwrites the same bytes
    return {};
  }

 private:
  PositionalSink& target_;
  const std::uint64_t base_;
  Bytes written_;
};

// Counts the bytes of a range read into a sink that only appends, so that the caller can check the length.
class CountingSink final : public ByteSink {
 public:
  explicit CountingSink(ByteSink& inner) : inner_(inner), start_(inner.written()) {}
  Result<void> write(const void* data, std::size_t size) override { return inner_.write(data, size); }
  Bytes written() const override { return inner_.written() - start_; }
  Result<void> restart() override {
    return Error{ErrorCode::internal, "a ranged read into an appending sink cannot restart on its own"};
  }

 private:
  ByteSink& inner_;
  const Bytes start_;
};

// Hashes what it receives, whole and (given a chunk size) chunk by chunk, and keeps nothing: `cache verify --full`
// reads an object through it.
class HashingSink final : public ByteSink {
 public:
  explicit HashingSink(std::optional<Bytes> chunk_size) : chunk_size_(chunk_size) { restart_chunks(); }
  Result<void> write(const void* data, std::size_t size) override {
    hasher_.update(data, size);
    if (chunks_) chunks_->update(data, size);
    written_ += Bytes{size};
    return {};
  }
  Bytes written() const override { return written_; }
  Result<void> restart() override {
    hasher_ = Sha256Hasher();
    restart_chunks();
    written_ = Bytes{0};
    return {};
  }
  Sha256 digest() { return hasher_.finish(); }
  // The chunk digests of the bytes; nullopt without a chunk size.
  std::optional<ChunkDigests> chunks() { return chunks_ ? std::optional{chunks_->finish()} : std::nullopt; }

 private:
  void restart_chunks() {
    if (chunk_size_) chunks_.emplace(*chunk_size_);
  }
  const std::optional<Bytes> chunk_size_;
  Sha256Hasher hasher_;
  std::optional<ChunkHasher> chunks_;
  Bytes written_;
};

std::string describe_remote(const std::string& name, std::string_view type) {
  return "tier '" + name + "' (" + std::string(type) + ")";
}

// The probe object of one `cache check`: removed on every way out of BlobTier::check(), also after a cancellation
// (in a CleanupScope, within its budget), so that an interrupted check leaves nothing in the bucket. A probe that
// a killed check left behind is swept by `cache gc` (sweep_leftovers).
class ProbeObject {
 public:
  ProbeObject(BlobBackend& backend, std::string object) : backend_(backend), object_(std::move(object)) {}
  ~ProbeObject() {
    if (!removed_) (void)remove();
  }
  ProbeObject(const ProbeObject&) = delete;
  ProbeObject& operator=(const ProbeObject&) = delete;

  Result<bool> remove() {
    removed_ = true;
    util::CleanupScope cleanup;
    return backend_.remove(object_);
  }

 private:
  BlobBackend& backend_;
  const std::string object_;
  bool removed_ = false;
};

class BlobTier;

// A held lease: renewed by its own thread until destroyed, then deleted.
class HeldLease final : public Lease {
 public:
  HeldLease(std::shared_ptr<BlobBackend> backend, std::string object, std::chrono::seconds duration,
            std::string tier_name)
      : backend_(std::move(backend)),
        object_(std::move(object)),
        duration_(duration),
        tier_name_(std::move(tier_name)),
        renewer_([this] { renew_until_released(); }) {}

  ~HeldLease() override {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    wake_.notify_all();
    renewer_.join();
    // Also after a cancellation: a lease left behind would make every other VM wait for its expiry.
    util::CleanupScope cleanup;
    if (auto removed = backend_->remove(object_); !removed) {
      LOG_WARNING("tier '" << tier_name_ << "': cannot release lease " << object_ << ": " << removed.error().message
                           << "; it expires on its own");
    }
  }

  static std::string body(std::chrono::seconds duration) {
    const auto expires = std::chrono::system_clock::now() + duration;
    return util::host_name() + " " + std::to_string(::getpid()) + " " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count()) + "\n";
  }

 private:
  void renew_until_released() {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, duration_ / 3, [this] { return released_; })) {
      lock.unlock();
      auto renewed = backend_->put(object_, std::string(body(duration_)), std::nullopt, Overwrite::yes);
      if (!renewed) {
        LOG_WARNING("tier '" << tier_name_ << "': cannot renew lease " << object_ << ": " << renewed.error().message);
      }
      lock.lock();
    }
  }

  std::shared_ptr<BlobBackend> backend_;
  const std::string object_;
  const std::chrono::seconds duration_;
  const std::string tier_name_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool released_ = false;
  std::thread renewer_;
};

class BlobTier final : public Tier, public RemoteCoordination, public ObjectVerifier, public LeftoverSweeper {
 public:
  BlobTier(CloudTierOptions options, std::unique_ptr<BlobBackend> backend)
      : options_(std::move(options)),
        backend_(std::move(backend)),
        prefix_(object_prefix(options_)),
        hedged_(options_.hedge, backend_, counters()) {}

  const std::string& name() const override { return options_.name; }
  std::string_view type() const override { return backend_->type(); }
  std::optional<Bytes> max_bytes() const override { return options_.max_bytes; }
  bool supports_direct_read() const override { return false; }
  bool read_only() const override { return options_.access == Access::read_only; }
  std::string location() const override {
    return backend_->location() + (options_.prefix ? "/" + *options_.prefix : std::string());
  }
  UploadMode upload_mode() const override { return options_.upload; }
  RemoteCoordination* coordination() override { return options_.single_flight && !read_only() ? this : nullptr; }
  TierReach reach() const override { return TierReach::shared; }
  std::optional<Seconds> max_age() const override { return options_.max_age; }
  ObjectVerifier* verifier() override { return this; }
  LeftoverSweeper* sweeper() override { return read_only() ? nullptr : this; }

  Result<bool> contains(const ShardKey& key) override {
    auto info = backend_->head(entry_object_name(options_, key));
    if (!info) return std::move(info).error();
    return info->has_value();
  }

  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    return read_entry(entry_object_name(options_, key), sink);
  }

  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
    const std::string object = entry_object_name(options_, key);
    // The chunk digests cost one more pass over a local file (page-cached, just written): read at the speed of
    // SHA-256, a fraction of the upload's time. They let a streamed read check this object without the origin.
    auto chunks = object_chunk_digests(source);
    if (!chunks) return std::move(chunks).error();
    const EntryMetadata metadata{digest, source.size(), std::move(*chunks)};
    if (source.size() <= backend_->one_request_limit(options_.part_size)) {
      return backend_->put(object, net::FileBody{source.fd(), source.size(), 0}, metadata, Overwrite::no);
    }
    return multipart_upload(object, source, metadata);
  }

  Result<std::optional<RecordedDigests>> recorded_digests(const ShardKey& key) override {
    const std::string object = entry_object_name(options_, key);
    auto info = backend_->head(object);
    if (!info) return std::move(info).error();
    if (!*info || !(*info)->sha256 || !(*info)->recorded_chunks) return std::optional<RecordedDigests>{};
    const ObjectInfo& described = **info;
    const Bytes size = described.recorded_size.value_or(described.size);
    auto chunks = decode_chunk_metadata(*described.recorded_chunks, size);
    if (!chunks || size != described.size) {
      LOG_INFO(describe_remote(name(), type())
               << ": " << object << ": its chunk digests are not used: "
               << (chunks ? "datavo-size is not the object's size" : chunks.error().message));
      return std::optional<RecordedDigests>{};
    }
    return std::optional<RecordedDigests>{RecordedDigests{size, *described.sha256, std::move(*chunks)}};
  }

  Result<bool> remove(const ShardKey& key) override {
    if (read_only()) return Error{ErrorCode::permission_denied, "tier '" + name() + "' is read-only"};
    return backend_->remove(entry_object_name(options_, key));
  }

  Result<TierUsage> usage() override {
    auto entries = list();
    if (!entries) return std::move(entries).error();
    TierUsage usage;
    for (const auto& entry : *entries) usage.used += entry.size;
    usage.entries = entries->size();
    return usage;
  }

  Result<std::vector<EntryInfo>> list() override {
    auto listed = backend_->list(prefix_);
    if (!listed) return std::move(listed).error();
    std::vector<EntryInfo> out;
    for (const auto& object : *listed) {
      if (auto entry = entry_info(object)) out.push_back(std::move(*entry));
    }
    std::sort(out.begin(), out.end(),
              [](const EntryInfo& a, const EntryInfo& b) { return a.last_access > b.last_access; });
    return out;
  }

  CheckReport check() override;

  Result<ObjectVerifyReport> verify_objects(VerifyDepth depth, Repair repair) override;

  Result<LeftoverReport> sweep_leftovers(DryRun dry_run) override;

  Result<LeaseAttempt> try_lease(const ShardKey& key) override {
    const std::string object = lease_object_name(options_, key);
    for (int round = 1;; ++round) {
      if (util::cancel_requested()) return util::cancelled_error("lease " + object);
      // Once sent, the create completes even if a cancellation comes meanwhile: a lease created without our knowing
      // could not be released, and other VMs would wait for its expiry.
      auto created = [&] {
        util::CleanupScope cleanup;
        return backend_->put(object, std::string(HeldLease::body(options_.lease_duration)), std::nullopt,
                             Overwrite::no);
      }();
      if (!created) return std::move(created).error();
      if (*created == InstallOutcome::installed) {
        LeaseAttempt attempt;
        attempt.held = std::make_unique<HeldLease>(backend_, object, options_.lease_duration, name());
        return attempt;
      }
      // Someone holds it: who, and until when?
      StringBody holder;
      auto read = backend_->get(object, std::nullopt, nullptr, holder);
      if (!read) return std::move(read).error();
      if (!*read) {
        if (round < 3) continue;  // released in between: try again
        // Other VMs keep taking and releasing it (each releases at once when it finds the object already
        // uploaded): the tier works, the lease is busy. Not ours; the caller polls for the object and asks again.
        LeaseAttempt busy;
        busy.holder = "other VMs (taken and released " + std::to_string(round) + " times in a row)";
        busy.expires = std::chrono::system_clock::now();
        return busy;
      }
      LeaseAttempt attempt = parse_lease(holder.text);
      if (attempt.expires > std::chrono::system_clock::now() || round >= 2) return attempt;
      // Expired: its holder died or hung. Remove it and create it again; of several VMs doing so, one wins.
      LOG_INFO(describe_remote(name(), type())
               << ": taking over the expired lease " << object << " of " << attempt.holder);
      auto removed = backend_->remove(object);
      if (!removed) return std::move(removed).error();
    }
  }

  Result<std::optional<LeaseAttempt>> lease_holder(const ShardKey& key) override {
    StringBody holder;
    auto read = backend_->get(lease_object_name(options_, key), std::nullopt, nullptr, holder);
    if (!read) return std::move(read).error();
    if (!*read) return std::optional<LeaseAttempt>{};
    return std::optional<LeaseAttempt>{parse_lease(holder.text)};
  }

  // HeldLease renews every third of the duration.
  Milliseconds renewal_period() const override {
    return std::chrono::duration_cast<Milliseconds>(options_.lease_duration) / 3;
  }

 private:
  // The key of an entry object: <instance>/<hash>.tar under the prefix. nullopt for anything else (leases,
  // probes, other tools' objects), which is not ours.
  std::optional<ShardKey> entry_key(std::string_view name) const {
    std::string_view rest(name);
    rest.remove_prefix(std::min(rest.size(), prefix_.size()));
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || !rest.ends_with(k_entry_suffix)) return std::nullopt;
    auto instance = Instance::parse(rest.substr(0, slash));
    auto hash = ContentHash::parse(rest.substr(slash + 1, rest.size() - slash - 1 - 4));
    if (!instance || !hash) return std::nullopt;
    return ShardKey{*instance, *hash};
  }

  // The entry a listed object is, nullopt when it is none (entry_key).
  std::optional<EntryInfo> entry_info(const ListedObject& object) const {
    auto key = entry_key(object.name);
    if (!key) return std::nullopt;
    return EntryInfo{key->instance.name(), key->hash, object.size, object.last_modified};
  }

  enum class Leftover { lease, probe };
  // What `name` is among the objects a killed process can leave: a lease (<instance>/.leases/<hash> under the
  // prefix) or a check's probe (.datavo-check/...); nullopt for entries and other tools' objects.
  std::optional<Leftover> leftover_kind(std::string_view name) const {
    std::string_view rest(name);
    if (!rest.starts_with(prefix_)) return std::nullopt;
    rest.remove_prefix(prefix_.size());
    if (rest.starts_with(k_check_dir)) return Leftover::probe;
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || !rest.substr(slash + 1).starts_with(k_leases_dir)) return std::nullopt;
    const std::string_view hash = rest.substr(slash + 1 + std::string_view(k_leases_dir).size());
    if (!Instance::parse(rest.substr(0, slash)) || !ContentHash::parse(hash)) return std::nullopt;
    return Leftover::lease;
  }
  // Whether the listed `object` is a leftover to sweep at `now`; an Error when its lease cannot be read.
  Result<bool> is_stale(const ListedObject& object, Leftover kind, std::chrono::system_clock::time_point now);

  // One object's judgement for verify_objects(); nullopt when the object is gone.
  Result<std::optional<ObjectJudgement>> verify_object(const std::string& object, VerifyDepth depth);
  // Records a bad object in `report`, deleting it with Repair::yes from a writable tier.
  void record_bad(ObjectVerifyReport& report, const std::string& object, std::string why, Repair repair);

  // The lookup of read_into() by object name: a conflict (the object changed while it was read) reads it again once.
  Result<std::optional<Expectation>> read_entry(const std::string& object, ByteSink& sink) {
    for (int round = 1;; ++round) {
      // written() counts positional bytes only once their prefix is complete: a conflict found before that (in
      // the first range) left bytes that the next round's ranges must not overlap.
      if (round > 1) DATAVO_TRY(sink.restart());
      auto read = read_object(object, sink);
      if (read || read.error().code != ErrorCode::conflict || round == 2) return read;
      LOG_INFO(describe_remote(name(), type()) << ": " << object << " changed while it was read; reading it again");
    }
  }

  // Collects a small object's bytes (a lease, a probe).
  struct StringBody final : public ByteSink {
    Result<void> write(const void* data, std::size_t size) override {
      if (text.size() + size > 4096) return Error{ErrorCode::remote, "a lease or probe object is too large"};
      text.append(static_cast<const char*>(data), size);
      return {};
    }
    Bytes written() const override { return Bytes{text.size()}; }
    Result<void> restart() override {
      text.clear();
      return {};
    }
    std::string text;
  };

  static LeaseAttempt parse_lease(const std::string& text) {
    LeaseAttempt attempt;
    const auto last_space = text.find_last_of(' ');
    attempt.holder = text.substr(0, last_space);
    long long expires = last_space == std::string::npos ? 0 : std::atoll(text.c_str() + last_space + 1);
    attempt.expires = std::chrono::system_clock::time_point(std::chrono::seconds(expires));
    return attempt;
  }

  Result<std::optional<Expectation>> read_object(const std::string& object, ByteSink& sink) {
    if (sink.written().count() > 0) DATAVO_TRY(sink.restart());
    const std::uint64_t part = options_.part_size.count();
    PositionalSink* positional = options_.concurrency > 1 ? sink.positional() : nullptr;
    std::optional<OffsetSink> first_offset;
    if (positional) first_offset.emplace(*positional, 0);
    ByteSink& first_sink = positional ? static_cast<ByteSink&>(*first_offset) : sink;

    auto first = hedged_.get(object, ByteRange{0, part}, nullptr, first_sink);
    if (!first) return std::move(first).error();
    if (!*first) return std::optional<Expectation>{};
    const ObjectInfo info = **first;
    const std::uint64_t size = info.size.count();
    const std::uint64_t got = first_sink.written().count();
    if (got > size || (got < size && got < part)) {
      return Error{ErrorCode::remote,
                   object + ": the first read returned " + std::to_string(got) + " bytes of " + std::to_string(size)};
    }
    if (positional) DATAVO_TRY(positional->prefix_complete(Bytes{got}));
    if (got < size) {
      if (positional) {
        DATAVO_TRY(read_rest_in_parallel(object, info, got, *positional));
      } else {
        CountingSink rest(sink);
        auto read = backend_->get(object, ByteRange{got, size - got}, &info.version, rest);
        if (!read) return std::move(read).error();
        if (!*read) return Error{ErrorCode::conflict, object + " vanished while it was read"};
        if (rest.written().count() != size - got) {
          return Error{ErrorCode::remote, object + ": short read after byte " + std::to_string(got)};
        }
      }
    }
    if (sink.written().count() != size) {
      return Error{ErrorCode::remote, object + ": read " + std::to_string(sink.written().count()) + " of " +
                                          std::to_string(size) + " bytes"};
    }
    Expectation expectation;
    expectation.size = info.recorded_size.value_or(info.size);
    expectation.sha256 = info.sha256;
    return std::optional<Expectation>{expectation};
  }

  // Reads [from, size) as ranges of part_size on up to `concurrency` threads, each range pinned to the version.
  Result<void> read_rest_in_parallel(const std::string& object, const ObjectInfo& info, std::uint64_t from,
                                     PositionalSink& sink) {
    const std::uint64_t part = options_.part_size.count();
    const std::uint64_t size = info.size.count();
    const std::size_t ranges = std::size_t((size - from + part - 1) / part);
    std::vector<char> done(ranges, 0);
    std::size_t prefix_ranges = 0;  // ranges [0, prefix_ranges) are complete
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::optional<Error> first_error;

    auto worker = [&] {
      for (std::size_t i = next++; i < ranges && !failed; i = next++) {
        const std::uint64_t offset = from + i * part;
        const std::uint64_t length = std::min(part, size - offset);
        OffsetSink range_sink(sink, offset);
        auto read = hedged_.get(object, ByteRange{offset, length}, &info.version, range_sink);
        std::optional<Error> error;
        if (!read) {
          error = std::move(read).error();
        } else if (!*read) {
          error = Error{ErrorCode::conflict, object + " vanished while it was read"};
        } else if (range_sink.written().count() != length) {
          error = Error{ErrorCode::remote, object + ": range at byte " + std::to_string(offset) + " returned " +
                                               std::to_string(range_sink.written().count()) + " of " +
                                               std::to_string(length) + " bytes"};
        }
        std::lock_guard lock(mu);
        if (error) {
          if (!first_error) first_error = std::move(error);
          failed = true;
          return;
        }
        done[i] = 1;
        // Hand the contiguous prefix on, so that hashing trails the download instead of following it.
        const std::size_t before = prefix_ranges;
        while (prefix_ranges < ranges && done[prefix_ranges]) ++prefix_ranges;
        if (prefix_ranges != before) {
          const std::uint64_t end = std::min(size, from + prefix_ranges * part);
          if (auto advanced = sink.prefix_complete(Bytes{end}); !advanced) {
            first_error = std::move(advanced).error();
            failed = true;
            return;
          }
        }
      }
    };
    const std::size_t threads = std::min<std::size_t>(options_.concurrency, ranges);
    std::vector<std::thread> pool;
    pool.reserve(threads > 0 ? threads - 1 : 0);
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& thread : pool) thread.join();
    if (first_error) return std::move(*first_error);
    return {};
  }

  Result<InstallOutcome> multipart_upload(const std::string& object, const ShardHandle& source,
                                          const EntryMetadata& metadata) {
    const std::uint64_t size = source.size().count();
    std::uint64_t part = options_.part_size.count();
    if ((size + part - 1) / part > k_max_parts) part = (size + k_max_parts - 1) / k_max_parts;
    const int parts = int((size + part - 1) / part);

    if (util::cancel_requested()) return util::cancelled_error("upload of " + object);
    // Once sent, a start completes even if a cancellation comes meanwhile: an upload the server opened without our
    // knowing its id could never be aborted.
    auto upload_id = [&] {
      util::CleanupScope cleanup;
      return backend_->start_upload(object, metadata);
    }();
    if (!upload_id) return std::move(upload_id).error();
    // Whatever happens below, an unfinished upload is aborted: its parts would otherwise stay billed.
    struct AbortUnlessFinished {
      BlobBackend& backend;
      const std::string& object;
      const std::string& id;
      bool finished = false;
      ~AbortUnlessFinished() {
        if (finished) return;
        util::CleanupScope cleanup;  // also (above all) when a cancellation stopped the upload
        if (auto aborted = backend.abort_upload(object, id); !aborted) {
          LOG_WARNING("cannot abort the upload of " << object << ": " << aborted.error().message);
        }
      }
    } guard{*backend_, object, *upload_id};

    std::vector<UploadedPart> uploaded(static_cast<std::size_t>(parts));
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::optional<Error> first_error;
    auto worker = [&] {
      for (int i = next++; i < parts && !failed; i = next++) {
        const std::uint64_t offset = std::uint64_t(i) * part;
        const std::uint64_t length = std::min(part, size - offset);
        Result<UploadedPart> sent =
            backend_->upload_part(object, *upload_id, i + 1, net::FileBody{source.fd(), Bytes{length}, offset});
        if (!sent) {
          std::lock_guard lock(mu);
          if (!first_error) first_error = std::move(sent).error();
          failed = true;
          return;
        }
        uploaded[std::size_t(i)] = std::move(*sent);
      }
    };
    const int threads = backend_->parallel_parts() ? std::min<int>(int(options_.concurrency), parts) : 1;
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& thread : pool) thread.join();
    if (first_error) return std::move(*first_error);

    auto finished = backend_->finish_upload(object, *upload_id, uploaded, metadata);
    if (!finished) return std::move(finished).error();
    // A conditional completion that lost (already_present) leaves the upload open on some services: abort it.
    guard.finished = *finished == InstallOutcome::installed;
    return *finished;
  }

  const CloudTierOptions options_;
  const std::shared_ptr<BlobBackend> backend_;
  const std::string prefix_;
  // The ranged GETs of entries (the first part, and each part of a parallel read) go through it.
  HedgedReader hedged_;
};

Result<ObjectVerifyReport> BlobTier::verify_objects(VerifyDepth depth, Repair repair) {
  auto listed = backend_->list(prefix_);
  if (!listed) return std::move(listed).error();
  ObjectVerifyReport report;
  report.depth = depth;
  for (const auto& object : *listed) {
    if (!entry_key(object.name)) continue;
    if (util::must_stop()) return util::stopped_error("verify of " + describe_remote(name(), type()));
    auto judged = verify_object(object.name, depth);
    if (!judged) return std::move(judged).error();
    if (!*judged) continue;  // removed since the listing (gc, another VM's repair)
    ++report.objects;
    switch ((*judged)->verdict) {
      case ObjectVerdict::verified_by_service: ++report.verified_by_service; break;
      case ObjectVerdict::verified_by_download: ++report.verified_by_download; break;
      case ObjectVerdict::metadata_only: ++report.metadata_only; break;
      case ObjectVerdict::bad: record_bad(report, object.name, std::move((*judged)->why), repair); break;
    }
  }
  return report;
}

Result<std::optional<ObjectJudgement>> BlobTier::verify_object(const std::string& object, VerifyDepth depth) {
  auto info = backend_->head(object);
  if (!info) return std::move(info).error();
  if (!*info) return std::optional<ObjectJudgement>{};
  ObjectJudgement judged = judge_object(**info);
  if (judged.verdict == ObjectVerdict::bad || depth == VerifyDepth::metadata) return std::optional{judged};
  // judge_object found datavo-chunks, when there is one, to decode for the object's size.
  std::optional<ChunkDigests> recorded_chunks;
  if ((*info)->recorded_chunks) {
    if (auto decoded = decode_chunk_metadata(*(*info)->recorded_chunks, (*info)->size)) recorded_chunks = *decoded;
  }
  // Through the read path, as a lookup reads it (ranged GETs pinned to one version), into hashes only.
  HashingSink sink(recorded_chunks ? std::optional{recorded_chunks->chunk_size} : std::nullopt);
  auto read = read_entry(object, sink);
  if (!read) return std::move(read).error();
  if (!*read) return std::optional<ObjectJudgement>{};
  judged = judge_download(**read, sink.written(), sink.digest());
  if (judged.verdict == ObjectVerdict::bad || !recorded_chunks) return std::optional{judged};
  return std::optional{judge_chunks(*recorded_chunks, *sink.chunks())};
}

void BlobTier::record_bad(ObjectVerifyReport& report, const std::string& object, std::string why, Repair repair) {
  ++report.bad;
  BadObject bad{object, std::move(why), false};
  if (repair == Repair::yes && !read_only()) {
    auto removed = backend_->remove(object);
    if (removed) {
      bad.removed = true;
      ++report.removed;
    } else {
      LOG_WARNING(describe_remote(name(), type())
                  << ": cannot delete the bad object " << object << ": " << removed.error().message);
      bad.why += "; not deleted: " + removed.error().message;
    }
  }
  report.bad_objects.push_back(std::move(bad));
}

Result<bool> BlobTier::is_stale(const ListedObject& object, Leftover kind, std::chrono::system_clock::time_point now) {
  if (kind == Leftover::probe) return now - object.last_modified >= k_stale_probe_age;
  // A live holder rewrites its lease every third of lease_duration: one not written for a whole one has lapsed.
  if (now - object.last_modified < options_.lease_duration) return false;
  StringBody holder;
  auto read = backend_->get(object.name, std::nullopt, nullptr, holder);
  if (!read) return std::move(read).error();
  if (!*read) return false;  // released meanwhile
  // A lease_duration past its expiry, so that no skew of the holder's clock under that makes a live lease stale.
  return now - parse_lease(holder.text).expires >= options_.lease_duration;
}

Result<LeftoverReport> BlobTier::sweep_leftovers(DryRun dry_run) {
  const std::string what = "the sweep of " + describe_remote(name(), type());
  auto listed = backend_->list(prefix_);
  if (!listed) return std::move(listed).error();
  LeftoverReport report;
  const auto now = std::chrono::system_clock::now();
  for (const auto& object : *listed) {
    if (auto entry = entry_info(object)) {
      report.entries.push_back(std::move(*entry));
      continue;
    }
    const auto kind = leftover_kind(object.name);
    if (!kind) continue;
    if (util::must_stop()) return util::stopped_error(what);
    auto stale = is_stale(object, *kind, now);
    if (!stale) {
      report.failures.push_back(
          Error{stale.error().code, "cannot read the lease " + object.name + ": " + stale.error().message});
      continue;
    }
    if (!*stale) continue;
    ++(*kind == Leftover::lease ? report.expired_leases : report.stale_probes);
    if (dry_run == DryRun::yes) continue;
    auto removed = backend_->remove(object.name);
    if (!removed) {
      report.failures.push_back(
          Error{removed.error().code, "cannot delete " + object.name + ": " + removed.error().message});
    } else if (*removed) {
      ++report.removed;
    }
  }
  return report;
}

CheckReport BlobTier::check() {
  CheckReport report;
  auto step = [&report](std::string name, bool ok, std::string detail) {
    report.steps.push_back(CheckStep{std::move(name), ok, std::move(detail)});
    return ok;
  };
  auto credentials = backend_->credentials();
  if (!step("credentials", bool(credentials), credentials ? *credentials : credentials.error().message)) return report;
  const std::string object =
      prefix_ + k_check_dir + util::host_name() + "." + std::to_string(::getpid()) + "." + util::random_hex(6);
  const std::string payload = "datavo cache check " + object + "\n";

  if (read_only()) {
    // A read-only tier is only read: a lookup of an absent object must be a clean miss.
    StringBody body;
    auto got = backend_->get(object, std::nullopt, nullptr, body);
    report.readable =
        step("get", got && !*got, got ? "a missing object is a miss (404), as it should be" : got.error().message);
    return report;
  }
  // From the put on, the probe may exist (also when the put failed or was cut short: a server may store it and
  // still say no), so it is removed on every way out. No step begins after a cancellation.
  ProbeObject probe(*backend_, object);
  auto put = backend_->put(object, std::string(payload), std::nullopt, Overwrite::no);
  if (!step("put", put && *put == InstallOutcome::installed,
            put ? (*put == InstallOutcome::installed ? "stored a probe object" : "the probe object already existed")
                : put.error().message) ||
      util::must_stop()) {
    return report;
  }
  StringBody body;
  auto got = backend_->get(object, std::nullopt, nullptr, body);
  report.readable = step("get", got && *got && body.text == payload,
                         !got                   ? got.error().message
                         : !*got                ? "the probe object just stored is not there"
                         : body.text == payload ? "read the probe back"
                                                : "the probe came back with other bytes");
  if (util::must_stop()) return report;
  auto again = backend_->put(object, std::string("second writer\n"), std::nullopt, Overwrite::no);
  if (!again) {
    step("conditional put", false, again.error().message);
  } else if (*again == InstallOutcome::already_present) {
    step("conditional put", true, "a second create of the same object was refused (412/409), as it must be");
  } else if (options_.single_flight) {
    step("conditional put", false,
         "the server accepted a second create of the same object: it ignores conditional writes (" +
             std::string(backend_->conditional_create()) +
             "), which single_flight: true needs (set single_flight: false, or use a server that honours them)");
  } else {
    step("conditional put", true, "ignored by the server (it overwrote the object)");
    report.warnings.push_back(
        "the server ignores conditional writes; with single_flight: false that costs at most "
        "one redundant upload per VM");
  }
  if (util::must_stop()) return report;
  auto removed = probe.remove();
  const bool deleted = step("delete", removed && *removed,
                            removed ? (*removed ? "removed the probe object" : "the probe object was already gone")
                                    : removed.error().message);
  report.writable = deleted && std::all_of(report.steps.begin(), report.steps.end(),
                                           [](const CheckStep& s) { return s.ok || s.name == "get"; });
  return report;
}

}  // namespace

ObjectJudgement judge_object(const ObjectInfo& info) {
  if (!info.sha256) return {ObjectVerdict::bad, "no datavo-sha256 metadata (or not 64 hex digits)"};
  if (!info.recorded_size) return {ObjectVerdict::bad, "no datavo-size metadata (or not a decimal number)"};
  if (*info.recorded_size != info.size) {
    return {ObjectVerdict::bad, "size " + std::to_string(info.size.count()) + " but datavo-size " +
                                    std::to_string(info.recorded_size->count())};
  }
  if (info.recorded_chunks) {
    if (auto chunks = decode_chunk_metadata(*info.recorded_chunks, info.size); !chunks)
      return {ObjectVerdict::bad, chunks.error().message};
  }
  if (!info.service_sha256) return {ObjectVerdict::metadata_only, ""};
  if (*info.service_sha256 != *info.sha256) {
    return {ObjectVerdict::bad,
            "the service's SHA-256 " + info.service_sha256->hex() + " is not datavo-sha256 " + info.sha256->hex()};
  }
  return {ObjectVerdict::verified_by_service, ""};
}

ObjectJudgement judge_download(const Expectation& recorded, Bytes read, const Sha256& digest) {
  if (!recorded.sha256) return {ObjectVerdict::bad, "no datavo-sha256 metadata (or not 64 hex digits)"};
  if (recorded.size && *recorded.size != read) {
    return {ObjectVerdict::bad, "read " + std::to_string(read.count()) + " bytes but datavo-size " +
                                    std::to_string(recorded.size->count())};
  }
  if (digest != *recorded.sha256) {
    return {ObjectVerdict::bad, "the bytes hash to " + digest.hex() + ", not datavo-sha256 " + recorded.sha256->hex()};
  }
  return {ObjectVerdict::verified_by_download, ""};
}

ObjectJudgement judge_chunks(const ChunkDigests& recorded, const ChunkDigests& read) {
  for (std::size_t i = 0; i < std::min(recorded.digests.size(), read.digests.size()); ++i) {
    if (recorded.digests[i] != read.digests[i]) {
      return {ObjectVerdict::bad, "chunk " + std::to_string(i) + " (byte offset " +
                                      std::to_string(i * recorded.chunk_size.count()) +
                                      ") does not match its digest in datavo-chunks (the bytes match datavo-sha256)"};
    }
  }
  if (recorded.digests.size() != read.digests.size()) {
    return {ObjectVerdict::bad, std::to_string(read.digests.size()) + " chunks read, datavo-chunks gives " +
                                    std::to_string(recorded.digests.size())};
  }
  return {ObjectVerdict::verified_by_download, ""};
}

std::string object_prefix(const CloudTierOptions& options) { return options.prefix ? *options.prefix + "/" : ""; }

std::string entry_object_name(const CloudTierOptions& options, const ShardKey& key) {
  return object_prefix(options) + key.instance.name() + "/" + key.hash.hex() + k_entry_suffix;
}

std::string lease_object_name(const CloudTierOptions& options, const ShardKey& key) {
  return object_prefix(options) + key.instance.name() + "/" + k_leases_dir + key.hash.hex();
}

Result<void> validate_cloud_options(const CloudTierOptions& options) {
  if (options.part_size < k_min_part_size) {
    return Error{ErrorCode::invalid_argument, "tier '" + options.name + "': part_size must be at least 5 MiB"};
  }
  if (options.concurrency < 1 || options.concurrency > k_max_concurrency) {
    return Error{ErrorCode::invalid_argument,
                 "tier '" + options.name + "': concurrency must be from 1 to " + std::to_string(k_max_concurrency)};
  }
  if (options.lease_duration < Seconds{3}) {
    return Error{ErrorCode::invalid_argument, "tier '" + options.name + "': lease_duration must be at least 3 s"};
  }
  if (options.prefix &&
      (options.prefix->empty() || options.prefix->front() == '/' || options.prefix->back() == '/' ||
       options.prefix->find("..") != std::string::npos || options.prefix->find("//") != std::string::npos)) {
    return Error{ErrorCode::invalid_argument, "tier '" + options.name + "': invalid prefix \"" + *options.prefix +
                                                  "\" (no leading or trailing '/', no \"..\" or \"//\")"};
  }
  return {};
}

std::shared_ptr<Tier> make_blob_tier(CloudTierOptions options, std::unique_ptr<BlobBackend> backend) {
  return std::make_shared<BlobTier>(std::move(options), std::move(backend));
}

}  // namespace datavo::cloud
