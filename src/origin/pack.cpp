// pack_dataset(): reads a source (sample files or WebDataset tars), adds its new samples to a dataset as new
// shards and publishes the next revision.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <variant>

#include "datavo/origin.hpp"
#include "datavo/protocol.hpp"
#include "datavo/tar.hpp"
#include "origin/store.hpp"
#include "util/cancel.hpp"
#include "util/compression.hpp"
#include "util/fs.hpp"
#include "util/temp_name.hpp"
#include "util/text.hpp"

namespace datavo {

namespace {

using origin::Revision;
using origin::Store;

// A whole file mapped read-only, for the tar reader (which works on an in-memory archive).
class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path) {
    util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Error::from_errno(errno, "cannot open " + path);
    return map(fd.get(), path);
  }
  // Maps the file open as `fd`; the mapping outlives the descriptor.
  static Result<MappedFile> map(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Error::from_errno(errno, "cannot stat " + path);
    MappedFile file;
    file.size_ = static_cast<std::size_t>(st.st_size);
    if (file.size_ > 0) {
      void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) return Error::from_errno(errno, "cannot map " + path);
      file.data_ = data;
    }
    return file;
  }
  MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), data_ ? size_ : 0}; }

 private:
  MappedFile() = default;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// A member payload of the source: a file of a sample directory, or a span of a mapped tar.
using Payload = std::variant<std::string, std::span<const std::byte>>;

struct SourceSample {
  std::string id;
  std::string origin;                      // the file or tar it comes from, for messages
  std::map<std::string, Payload> members;  // by key; std::map keeps them sorted bytewise
};

struct Source {
  std::vector<MappedFile> mappings;   // keeps tar payload spans valid
  std::vector<SourceSample> samples;  // source order
  TarSkips skipped;                   // members of the tars that are in no sample
};

// What read_tars needs besides the tar paths.
struct TarSettings {
  std::string scratch_dir;  // where compressed tars are decompressed (the store directory)
  EndMarker end_marker = EndMarker::required;
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return "[" + out + "]";
}

// The protocol's name checks quote the whole name in their message, and a name from a tar can be any length: quote it
// cut to a bounded length instead.
Error with_name_cut(Error error, std::string_view name) {
  const std::string whole = protocol::quote(name);
  const std::size_t at = error.message.find(whole);
  if (at != std::string::npos) error.message.replace(at, whole.size(), "\"" + util::printable(name) + "\"");
  return error;
}

Result<void> check_member_name(const std::string& origin, std::string_view id, std::string_view key) {
  auto id_ok = protocol::validate_sample_id(id);
  if (!id_ok) return Error::invalid_argument(origin + ": " + with_name_cut(id_ok.error(), id).message);
  auto key_ok = protocol::validate_name("key", key);
  if (!key_ok) return Error::invalid_argument(origin + ": " + with_name_cut(key_ok.error(), key).message);
  return ok();
}

// Lists the regular files under `root` (relative paths, '/'-separated, sorted), skipping hidden entries.
Result<std::vector<std::string>> list_files(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  if (ec) return Error::from_errno(ec.value(), "cannot list " + root);
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Error::from_errno(ec.value(), "cannot list " + root);
    const fs::path& path = it->path();
    if (path.filename().string().starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) files.push_back(path.lexically_relative(root).generic_string());
    if (ec) return Error::from_errno(ec.value(), "cannot read " + path.string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<void> read_sample_files(const std::string& root, const std::vector<std::string>& files, Source& source) {
  std::map<std::string, SourceSample> by_id;  // sorted by id, bytewise
  for (const auto& rel : files) {
    std::string path = root + "/" + rel;
    auto name = split_sample_name(rel);
    if (!name) return Error::invalid_argument(path + ": not named <sample_id>.<key>");
    DATAVO_TRY(check_member_name(path, name->id, name->key));
    auto& sample = by_id[std::string(name->id)];
    if (sample.id.empty()) {
      sample.id = std::string(name->id);
      sample.origin = path;
    }
    sample.members.emplace(std::string(name->key), path);
  }
  for (auto& [id, sample] : by_id) source.samples.push_back(std::move(sample));
  return ok();
}

// Tar shards by file name: plain, and compressed in the formats util::sniff_compression() knows, so that a compressed
// shard is read or refused as a tar, never packed as a sample whose key is "tar.gz".
bool is_tar_name(std::string_view name) {
  static constexpr std::string_view k_suffixes[] = {".tar",  ".tar.gz",  ".tgz", ".tar.zst", ".tar.zstd", ".tzst",
                                                    ".tbz2", ".tar.bz2", ".tbz", ".tar.xz",  ".txz"};
  return std::any_of(std::begin(k_suffixes), std::end(k_suffixes),
                     [name](std::string_view suffix) { return name.ends_with(suffix); });
}

// A source tar that cannot be read is bad input to pack, not a failure of its work: invalid_argument, with the
// reader's message (it names the tar, the member and the byte offset).
Error refused_tar(Error error, TarFault fault) {
  if (error.code == ErrorCode::integrity || error.code == ErrorCode::unsupported) {
    error.code = ErrorCode::invalid_argument;
  }
  if (fault == TarFault::missing_end_marker) {
    error.message += "; if the tar is complete, pack it with --allow-missing-end-marker";
  }
  return error;
}

// An unnamed file in `dir`. O_TMPFILE leaves nothing behind, even after a crash; where the filesystem lacks it, a
// file made under the temporary-name scheme is unlinked at once.
Result<util::UniqueFd> scratch_file(const std::string& dir) {
  util::UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd.valid()) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    return Error::from_errno(errno, "cannot create a scratch file in " + dir);
  }
  const std::string path = util::temp_name_beside(dir + "/decompressed.tar");
  fd = util::UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Error::from_errno(errno, "cannot create " + path);
  ::unlink(path.c_str());
  return fd;
}

// The tar at `path`, mapped: as it is, or, when the reader says it is gzip or zstd data, decompressed into a scratch
// file. The reader decides rather than the file name or the first bytes alone: a tar may name its first member
// "BZh9...". `label` becomes the name the reader gives the tar in messages.
Result<MappedFile> map_tar(const std::string& path, const TarSettings& settings, std::string& label) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  label = path;
  TarReader probe(mapped->bytes(), path);
  if (probe.next() || probe.fault() != TarFault::compressed) return mapped;

  const util::Compression compression = util::sniff_compression(mapped->bytes());
  const std::string format(util::compression_name(compression));
  if (!util::can_decompress(compression)) {
    return Error::invalid_argument(
        path + ": at byte offset 0: " + format +
        "-compressed data; pack reads tars that are uncompressed, gzip- or zstd-compressed: decompress it "
        "first (" +
        format + " -d)");
  }
  auto scratch = scratch_file(settings.scratch_dir);
  if (!scratch) return scratch.error();
  const std::string what = "the " + format + " decompression of " + path;
  auto unpacked = util::decompress(mapped->bytes(), compression, path, [&](std::span<const char> chunk) {
    return util::write_all(scratch->get(), chunk.data(), chunk.size(), what);
  });
  if (!unpacked) return refused_tar(std::move(unpacked).error(), TarFault::none);
  label = path + " (" + format + "-decompressed)";
  return MappedFile::map(scratch->get(), label);
}

// Where the samples of the tars read so far are: which tar each id came from, and its index in the source.
struct SampleIndex {
  std::map<std::string, std::string> tar_of;  // sample id -> the tar it came from
  std::map<std::string, std::size_t> in_tar;  // sample id -> its index in Source::samples, for the current tar
};

Result<void> add_tar_member(const std::string& path, const TarMember& member, const SampleName& name,
                            SampleIndex& index, Source& source) {
  DATAVO_TRY(check_member_name(path, name.id, name.key));
  const std::string id(name.id);
  auto [it, fresh] = index.in_tar.emplace(id, source.samples.size());
  if (fresh) {
    if (auto [other, inserted] = index.tar_of.emplace(id, path); !inserted) {
      return Error::invalid_argument(path + ": sample \"" + id + "\" appears in two tars (also in " + other->second +
                                     "); a sample's members must all be in one tar");
    }
    source.samples.push_back(SourceSample{id, path + ": sample \"" + id + "\"", {}});
  }
  SourceSample& sample = source.samples[it->second];
  if (!sample.members.emplace(std::string(name.key), member.data).second) {
    return Error::invalid_argument(path + ": sample \"" + id + "\" has the key \"" + std::string(name.key) +
                                   "\" twice (member \"" + util::printable(member.name) + "\")");
  }
  return ok();
}

// The samples of WebDataset tars. Members are grouped into samples by id within each tar wherever they are: bsdtar
// and an unsorted GNU tar (`tar cf x.tar .`) write a.wav b.wav a.txt b.txt, which is one sample a and one b, not
// four. Samples keep the order of their first member. An id in two tars, or a key twice in one sample, is refused.
Result<void> read_tars(const std::vector<std::string>& tars, const TarSettings& settings, Source& source) {
  SampleIndex index;
  for (const auto& path : tars) {
    if (util::must_stop()) return util::stopped_error("pack: reading " + path);
    std::string label;
    auto mapped = map_tar(path, settings, label);
    if (!mapped) return mapped.error();
    source.mappings.push_back(std::move(mapped).value());
    index.in_tar.clear();
    TarReader reader(source.mappings.back().bytes(), label, {settings.end_marker});
    for (;;) {
      auto member = reader.next();
      if (!member) return refused_tar(std::move(member).error(), reader.fault());
      if (!*member) break;
      const auto name = split_sample_name((*member)->name);
      if (!name) {
        ++source.skipped.unnamed;  // no key (README, a dot-file): skipped, as WebDataset does
        continue;
      }
      DATAVO_TRY(add_tar_member(path, **member, *name, index, source));
    }
    source.skipped += reader.skipped();
  }
  return ok();
}

// SRC is a tar shard, a directory of tar shards, or a directory of <sample_id>.<key> files.
Result<Source> read_source(const std::string& src, const TarSettings& settings) {
  Source source;
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) return Error::from_errno(errno, "cannot read source " + src);
  if (S_ISREG(st.st_mode)) {
    if (!is_tar_name(src)) {
      return Error::invalid_argument(src +
                                     ": a source file must be a tar shard (.tar, .tar.gz, .tgz, .tar.zst or .tzst)");
    }
    DATAVO_TRY(read_tars({src}, settings, source));
    return source;
  }
  if (!S_ISDIR(st.st_mode)) return Error::invalid_argument(src + ": neither a directory nor a tar shard");
  auto files = list_files(src);
  if (!files) return files.error();
  std::vector<std::string> tars;
  const std::string* other = nullptr;
  for (const auto& rel : *files) {
    if (is_tar_name(rel))
      tars.push_back(src + "/" + rel);
    else if (!other)
      other = &rel;
  }
  if (!tars.empty() && other) {
    return Error::invalid_argument(src + ": holds both tar shards (" + tars.front() + ") and other files (" + src +
                                   "/" + *other + "); give a directory of one kind");
  }
  if (!tars.empty())
    DATAVO_TRY(read_tars(tars, settings, source));
  else
    DATAVO_TRY(read_sample_files(src, *files, source));
  return source;
}

std::vector<std::string> keys_of(const SourceSample& sample) {
  std::vector<std::string> keys;
  for (const auto& [key, payload] : sample.members) keys.push_back(key);
  return keys;
}

// The dataset's latest revision, or nullopt when it has none yet.
Result<std::optional<Revision>> load_latest(const Store& store, const std::string& dataset, const std::string& split) {
  auto latest = store.latest_revision(dataset, split);
  if (!latest) return latest.error();
  if (!*latest) return std::optional<Revision>{};
  auto loaded = store.load_revision(dataset, split, **latest);
  if (!loaded) return loaded.error();
  if (!*loaded) {
    return Error{ErrorCode::integrity, store.dataset_dir(dataset, split) + ": LATEST names revision " +
                                           std::to_string(**latest) + ", which does not exist"};
  }
  return std::move(*loaded);
}

// The source's samples that `current` does not hold yet, in source order.
std::vector<const SourceSample*> fresh_samples(const Source& source, const std::optional<Revision>& current) {
  std::set<std::string> existing;
  if (current) {
    for (const auto& shard : current->shards) {
      for (const auto& sample : shard.samples) existing.insert(sample.id);
    }
  }
  std::vector<const SourceSample*> fresh;
  for (const auto& sample : source.samples) {
    if (!existing.contains(sample.id)) fresh.push_back(&sample);
  }
  return fresh;
}

// Every sample has every key: a manifest lists one key set, and a key group must exist in every sample.
Result<void> check_keys(const std::vector<const SourceSample*>& fresh, const std::vector<std::string>& keys) {
  for (const SourceSample* sample : fresh) {
    auto sample_keys = keys_of(*sample);
    if (sample_keys != keys) {
      return Error::invalid_argument(sample->origin + ": has keys " + join(sample_keys) +
                                     " but the dataset's keys are " + join(keys) +
                                     "; every sample needs exactly these keys");
    }
  }
  return ok();
}

// The revision after `current`, or the first one of a new dataset.
Revision next_revision(std::optional<Revision> current, const std::string& dataset, const std::string& split,
                       const std::vector<std::string>& keys) {
  Revision next;
  if (current) {
    next = std::move(*current);
  } else {
    next.dataset = dataset;
    next.split = split;
    next.keys = keys;
    // A fresh lineage per dataset creation, so that a store rebuilt from scratch never reuses the content hashes
    // of different bytes (clients cache by content hash).
    next.manifest_ref = dataset + "/" + split + "@m" + util::random_hex(6);
  }
  ++next.revision;
  return next;
}

// Stores the objects of `fresh` and appends them to `next` in new shards of at most `per_shard` samples.
Result<void> add_samples(const Store& store, const std::vector<const SourceSample*>& fresh, std::size_t per_shard,
                         Revision& next, PackReport& report) {
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    if (util::must_stop()) return util::stopped_error("pack: storing sample " + fresh[i]->id);
    if (i % per_shard == 0) {
      next.shards.emplace_back();
      ++report.shards_added;
    }
    const SourceSample& sample = *fresh[i];
    origin::SampleRecord record{sample.id, {}};
    for (const auto& [key, payload] : sample.members) {
      auto put = std::holds_alternative<std::string>(payload)
                     ? store.put_object_file(std::get<std::string>(payload))
                     : store.put_object(std::get<std::span<const std::byte>>(payload));
      if (!put) return put.error();
      if (put->added) report.bytes_added += Bytes{put->ref.size};
      record.objects.push_back(std::move(put->ref));
    }
    next.shards.back().samples.push_back(std::move(record));
    ++report.samples_added;
  }
  return ok();
}

}  // namespace

Result<PackReport> pack_dataset(const PackOptions& options) {
  if (options.samples_per_shard == 0) return Error::invalid_argument("--samples-per-shard must be at least 1");
  auto names = DatasetName::parse(options.dataset);
  if (!names) return names.error();
  const auto& [dataset, split] = *names;

  auto store = Store::open(options.store, Store::Create::yes);
  if (!store) return store.error();
  auto lock = store->lock_dataset(dataset, split);
  if (!lock) return lock.error();
  auto current = load_latest(*store, dataset, split);
  if (!current) return current.error();

  auto source = read_source(options.source, TarSettings{options.store, options.end_marker});
  if (!source) return source.error();
  if (source->samples.empty()) {
    const std::string skipped = describe_skips(source->skipped);
    return Error::invalid_argument(
        options.source + ": holds no samples" +
        (skipped.empty() ? "" : " (its tars hold only members that make none: " + skipped + ")"));
  }

  PackReport report;
  report.skipped = source->skipped;
  report.revision = *current ? (*current)->revision : 0;
  report.total_shards = *current ? (*current)->shards.size() : 0;
  const std::vector<const SourceSample*> fresh = fresh_samples(*source, *current);
  if (fresh.empty()) return report;

  const std::vector<std::string> keys = *current ? (*current)->keys : keys_of(*fresh.front());
  DATAVO_TRY(check_keys(fresh, keys));
  Revision next = next_revision(std::move(*current), dataset, split, keys);
  DATAVO_TRY(add_samples(*store, fresh, options.samples_per_shard, next, report));
  DATAVO_TRY(store->publish_revision(next));
  report.revision = next.revision;
  report.total_shards = next.shards.size();
  return report;
}

}  // namespace datavo
