#include "origin/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "datavo/protocol.hpp"
#include "datavo/tar.hpp"
#include "protocol/json_fields.hpp"
#include "util/atomic_file.hpp"
#include "util/flock.hpp"
#include "util/temp_name.hpp"
#include "util/text.hpp"

namespace datavo::origin {

namespace {

// A secret shorter than this (hand-edited, truncated) is refused rather than used as a weak HMAC key.
constexpr std::size_t k_min_secret_chars = 32;

bool is_lower_hex(std::string_view text, std::size_t size) {
  if (text.size() != size) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Error integrity(std::string message) { return Error{ErrorCode::integrity, std::move(message)}; }

// Creates `path` with `content` unless it exists; then returns the file's content (the winner's, after a race).
Result<std::string> create_or_read(const std::string& path, const std::string& content, mode_t mode) {
  auto existing = util::read_file(path);
  if (existing) return std::move(existing).value();
  if (existing.error().code != ErrorCode::not_found) return existing.error();
  auto tmp = util::AtomicFile::create(util::temp_name_beside(path), mode);
  if (!tmp) return tmp.error();
  DATAVO_TRY(tmp->write(content));
  DATAVO_TRY(tmp->sync());
  auto committed = tmp->commit(path, util::AtomicFile::Replace::no);  // the first writer wins a race
  if (!committed) return committed.error();
  return util::read_file(path);
}

struct ObjectWriter {
  util::AtomicFile file;
  Sha256Hasher hasher;
  std::uint64_t size = 0;

  Result<void> write(const void* data, std::size_t n) {
    hasher.update(data, n);
    size += n;
    return util::write_all(file.fd(), data, n, file.path());
  }
};

Result<Store::PutResult> finish_object(const Store& store, ObjectWriter& writer) {
  ObjectRef ref{writer.hasher.finish().hex(), writer.size};
  std::string target = store.object_path(ref.sha256);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == ref.size) {
    return Store::PutResult{std::move(ref), false};
  }
  // Either missing or a damaged copy of the wrong size: the fresh bytes replace it.
  auto committed = writer.file.commit(target, util::AtomicFile::Replace::yes);
  if (!committed) return committed.error();
  return Store::PutResult{std::move(ref), true};
}

// A revision file (docs/protocol.md, "The store of the reference server"); every refusal is an integrity Error
// naming the file and the field. Every name, digest and count is validated, so nothing read from it can reach
// outside the store.
Result<void> read_revision_header(const protocol::JsonFields& in, Revision& rev) {
  auto format = in.unsigned_number("format");
  if (!format) return format.error();
  if (*format != 1) return in.refuse("format", "is " + std::to_string(*format) + ", an unsupported format");
  for (auto [field, out] : {std::pair{"dataset", &rev.dataset}, std::pair{"split", &rev.split}}) {
    auto name = in.string(field);
    if (!name) return name.error();
    if (auto valid = protocol::validate_name(field, *name); !valid)
      return in.refuse(field, "is invalid: " + valid.error().message);
    *out = std::move(*name);
  }
  auto ref = in.string("manifest_ref");
  if (!ref) return ref.error();
  rev.manifest_ref = std::move(*ref);
  auto number = in.unsigned_number("revision");
  if (!number) return number.error();
  rev.revision = *number;
  auto keys = in.array("keys");
  if (!keys) return keys.error();
  DATAVO_TRY(in.strings("keys", **keys, rev.keys));
  for (const auto& key : rev.keys) {
    if (auto valid = protocol::validate_name("key", key); !valid)
      return in.refuse("keys", "is invalid: " + valid.error().message);
  }
  if (rev.keys.empty() ||
      std::adjacent_find(rev.keys.begin(), rev.keys.end(), std::greater_equal<>()) != rev.keys.end())
    return in.refuse("keys", "is empty, unsorted or has duplicates");
  return ok();
}

Result<SampleRecord> read_sample(const protocol::JsonFields& in, std::size_t key_count) {
  SampleRecord sample;
  auto id = in.string("id");
  if (!id) return id.error();
  sample.id = std::move(*id);
  if (auto valid = protocol::validate_sample_id(sample.id); !valid)
    return in.refuse("id", "is invalid: " + valid.error().message);
  auto objects = in.array("objects");
  if (!objects) return objects.error();
  if ((*objects)->size() != key_count) return in.refuse("objects", "does not hold one object per key");
  for (std::size_t i = 0; i < key_count; ++i) {
    const nlohmann::json& object_json = (**objects)[i];
    const std::string where = "objects[" + std::to_string(i) + "]";
    if (!object_json.is_object()) return in.refuse(where, "is not an object");
    const protocol::JsonFields object = in.nested(object_json, where + ".");
    auto sha = object.string("sha256");
    if (!sha) return sha.error();
    if (!is_lower_hex(*sha, 64)) return object.refuse("sha256", "is not 64 lowercase hex characters");
    auto size = object.unsigned_number("size");
    if (!size) return size.error();
    sample.objects.push_back(ObjectRef{std::move(*sha), *size});
  }
  return sample;
}

Result<ShardRecord> read_shard(const protocol::JsonFields& in, std::size_t position, std::size_t key_count) {
  auto index = in.unsigned_number("index");
  if (!index) return index.error();
  if (*index != position) return in.refuse("index", "is " + std::to_string(*index) + ": indexes run 0, 1, 2, ...");
  auto samples = in.array("samples");
  if (!samples) return samples.error();
  ShardRecord shard;
  for (std::size_t i = 0; i < (*samples)->size(); ++i) {
    const nlohmann::json& sample_json = (**samples)[i];
    const std::string where = "samples[" + std::to_string(i) + "]";
    if (!sample_json.is_object()) return in.refuse(where, "is not an object");
    auto sample = read_sample(in.nested(sample_json, where + "."), key_count);
    if (!sample) return sample.error();
    shard.samples.push_back(std::move(*sample));
  }
  return shard;
}

Result<Revision> parse_revision(const std::string& file, const std::string& text) {
  const std::string context = file + ": ";
  auto doc = protocol::parse_object(text, ErrorCode::integrity, context);
  if (!doc) return doc.error();
  const protocol::JsonFields in(*doc, ErrorCode::integrity, context);
  Revision rev;
  DATAVO_TRY(read_revision_header(in, rev));
  auto shards = in.array("shards");
  if (!shards) return shards.error();
  for (std::size_t i = 0; i < (*shards)->size(); ++i) {
    const nlohmann::json& shard_json = (**shards)[i];
    const std::string where = "shards[" + std::to_string(i) + "]";
    if (!shard_json.is_object()) return in.refuse(where, "is not an object");
    auto shard = read_shard(in.nested(shard_json, where + "."), i, rev.keys.size());
    if (!shard) return shard.error();
    rev.shards.push_back(std::move(*shard));
  }
  return rev;
}

std::string revision_json(const Revision& rev) {
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t i = 0; i < rev.shards.size(); ++i) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& sample : rev.shards[i].samples) {
      nlohmann::json objects = nlohmann::json::array();
      for (const auto& object : sample.objects) objects.push_back({{"sha256", object.sha256}, {"size", object.size}});
      samples.push_back({{"id", sample.id}, {"objects", std::move(objects)}});
    }
    shards.push_back({{"index", i}, {"samples", std::move(samples)}});
  }
  nlohmann::json doc = {{"format", 1},
                        {"dataset", rev.dataset},
                        {"split", rev.split},
                        {"manifest_ref", rev.manifest_ref},
                        {"revision", rev.revision},
                        {"keys", rev.keys},
                        {"shards", std::move(shards)}};
  return doc.dump() + "\n";
}

}  // namespace

// --- Store ------------------------------------------------------------------------------------------------------

Result<Store> Store::open(const std::string& root, Create create) {
  if (root.empty()) return Error::invalid_argument("the store path is empty");
  if (create == Create::yes) {
    DATAVO_TRY(util::make_dirs(root, 0755));
  } else {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0) return Error::from_errno(errno, "cannot open store " + root);
    if (!S_ISDIR(st.st_mode)) return Error{ErrorCode::not_found, "store " + root + " is not a directory"};
  }
  Store store;
  store.root_ = root;
  while (store.root_.size() > 1 && store.root_.back() == '/') store.root_.pop_back();
  for (const char* dir : {"/objects", "/datasets", "/tars"}) DATAVO_TRY(util::make_dirs(store.root_ + dir, 0755));

  std::string instance_path = store.root_ + "/instance.json";
  nlohmann::json fresh = {{"instance_id", util::random_hex(16)}};
  auto instance_text = create_or_read(instance_path, fresh.dump() + "\n", 0644);
  if (!instance_text) return instance_text.error();
  auto instance = nlohmann::json::parse(*instance_text, nullptr, false);
  if (instance.is_discarded() || !instance.is_object() || !instance.contains("instance_id") ||
      !instance["instance_id"].is_string() || instance["instance_id"].get<std::string>().empty()) {
    return integrity(instance_path + ": expected {\"instance_id\": \"...\"}");
  }
  store.instance_id_ = instance["instance_id"].get<std::string>();

  std::string secret_path = store.root_ + "/secret";
  auto secret = create_or_read(secret_path, util::random_hex(32), 0600);
  if (!secret) return secret.error();
  store.secret_ = std::string(util::trim_right(*secret));
  if (store.secret_.size() < k_min_secret_chars) {
    return integrity(secret_path + ": the secret is shorter than 32 characters");
  }
  return store;
}

std::string Store::dataset_dir(std::string_view dataset, std::string_view split) const {
  return root_ + "/datasets/" + std::string(dataset) + "/" + std::string(split);
}

std::string Store::object_path(std::string_view sha256) const { return objects_dir() + "/" + std::string(sha256); }

std::string Store::tar_path(const ContentHash& hash) const { return tars_dir() + "/" + hash.hex() + ".tar"; }

bool Store::has_dataset(std::string_view dataset) const {
  struct stat st {};
  return ::stat((root_ + "/datasets/" + std::string(dataset)).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<std::optional<std::uint64_t>> Store::latest_revision(std::string_view dataset, std::string_view split) const {
  std::string path = dataset_dir(dataset, split) + "/LATEST";
  auto text = util::read_file(path);
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return std::optional<std::uint64_t>{};
    return text.error();
  }
  auto value = protocol::parse_number(util::trim_right(*text), 1);
  if (!value) return integrity(path + ": not a positive decimal revision");
  return std::optional<std::uint64_t>{*value};
}

Result<std::optional<Revision>> Store::load_revision(std::string_view dataset, std::string_view split,
                                                     std::uint64_t revision) const {
  std::string path = dataset_dir(dataset, split) + "/revisions/" + std::to_string(revision) + ".json";
  auto text = util::read_file(path);
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return std::optional<Revision>{};
    return text.error();
  }
  auto parsed = parse_revision(path, *text);
  if (!parsed) return parsed.error();
  if (parsed->dataset != dataset || parsed->split != split || parsed->revision != revision) {
    return integrity(path + ": names another dataset or revision");
  }
  return std::optional<Revision>{std::move(parsed).value()};
}

Result<void> Store::publish_revision(const Revision& revision) const {
  std::string dir = dataset_dir(revision.dataset, revision.split);
  DATAVO_TRY(util::make_dirs(dir + "/revisions", 0755));
  // Objects are written without an fsync each; one syncfs makes them durable before anything refers to them.
  {
    util::UniqueFd objects(::open(objects_dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!objects.valid() || ::syncfs(objects.get()) != 0) return Error::from_errno(errno, "cannot sync " + root_);
  }
  DATAVO_TRY(util::write_file_atomic(dir + "/revisions/" + std::to_string(revision.revision) + ".json",
                                     revision_json(revision), 0644));
  return util::write_file_atomic(dir + "/LATEST", std::to_string(revision.revision) + "\n", 0644);
}

Result<util::UniqueFd> Store::lock_dataset(std::string_view dataset, std::string_view split) const {
  std::string dir = dataset_dir(dataset, split);
  DATAVO_TRY(util::make_dirs(dir, 0755));
  std::string path = dir + "/.pack.lock";
  util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return Error::from_errno(errno, "cannot open " + path);
  DATAVO_TRY(util::flock_exclusive(fd.get(), path));
  return fd;
}

Result<Store::PutResult> Store::put_object(std::span<const std::byte> data) const {
  auto file = util::AtomicFile::create(util::temp_name_beside(objects_dir() + "/object"), 0644);
  if (!file) return file.error();
  ObjectWriter writer{std::move(file).value(), Sha256Hasher{}, 0};
  DATAVO_TRY(writer.write(data.data(), data.size()));
  return finish_object(*this, writer);
}

Result<Store::PutResult> Store::put_object_file(const std::string& path) const {
  util::UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return Error::from_errno(errno, "cannot open " + path);
  auto file = util::AtomicFile::create(util::temp_name_beside(objects_dir() + "/object"), 0644);
  if (!file) return file.error();
  ObjectWriter writer{std::move(file).value(), Sha256Hasher{}, 0};
  DATAVO_TRY(util::read_chunks(in.get(), 0, std::nullopt, path,
                               [&](std::span<const char> chunk) { return writer.write(chunk.data(), chunk.size()); }));
  return finish_object(*this, writer);
}

namespace {

// The .chunks file of a key-group tar: "chunk_size <N>\n", then the canonical list.
std::string chunks_path(const Store& store, const ContentHash& hash) {
  return store.tars_dir() + "/" + hash.hex() + ".chunks";
}

std::string chunks_file_text(const ChunkDigests& chunks) {
  return "chunk_size " + std::to_string(chunks.chunk_size.count()) + "\n" + chunks.canonical();
}

// The chunk digests of a tar of `size` bytes in chunks of `chunk_size`, or nullopt when the file is missing,
// damaged, or of another chunk size (the tar is then materialised again).
Result<std::optional<ChunkDigests>> read_chunks_file(const std::string& path, Bytes size, Bytes chunk_size) {
  auto text = util::read_file(path);
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return std::optional<ChunkDigests>{};
    return text.error();
  }
  const std::string header = "chunk_size " + std::to_string(chunk_size.count()) + "\n";
  if (!std::string_view(*text).starts_with(header)) return std::optional<ChunkDigests>{};
  auto chunks = ChunkDigests::parse_canonical(chunk_size, std::string_view(*text).substr(header.size()),
                                              ErrorCode::integrity, path);
  if (!chunks || !chunks->check_covers(size, ErrorCode::integrity, path)) return std::optional<ChunkDigests>{};
  return std::optional<ChunkDigests>{std::move(*chunks)};
}

}  // namespace

Result<std::optional<KeyGroupTar>> Store::find_key_group(const ContentHash& hash, Bytes chunk_size) const {
  std::string path = tar_path(hash);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<KeyGroupTar>{};
    return Error::from_errno(errno, "cannot stat " + path);
  }
  auto text = util::read_file(tars_dir() + "/" + hash.hex() + ".sha256");
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return std::optional<KeyGroupTar>{};
    return text.error();
  }
  auto sha = Sha256::parse(util::trim_right(*text));
  if (!sha) return std::optional<KeyGroupTar>{};  // a damaged record: materialise again
  const Bytes size{static_cast<std::uint64_t>(st.st_size)};
  auto chunks = read_chunks_file(chunks_path(*this, hash), size, chunk_size);
  if (!chunks) return chunks.error();
  if (!*chunks) return std::optional<KeyGroupTar>{};
  return std::optional<KeyGroupTar>{KeyGroupTar{path, size, *sha, std::move(**chunks)}};
}

Result<KeyGroupTar> Store::materialise_key_group(const Revision& revision, std::uint64_t shard_index,
                                                 std::span<const std::string> keys, const ContentHash& hash,
                                                 Bytes chunk_size) const {
  if (shard_index >= revision.shards.size()) return Error::invalid_argument("shard index out of range");
  std::vector<std::size_t> columns;
  for (const auto& key : keys) {
    auto it = std::lower_bound(revision.keys.begin(), revision.keys.end(), key);
    if (it == revision.keys.end() || *it != key) return Error::invalid_argument("unknown key " + protocol::quote(key));
    columns.push_back(static_cast<std::size_t>(it - revision.keys.begin()));
  }

  auto file = util::AtomicFile::create(util::temp_name_beside(tar_path(hash)), 0644);
  if (!file) return file.error();
  Sha256Hasher hasher;
  ChunkHasher chunk_hasher(chunk_size);
  const int out = file->fd();
  const std::string& out_path = file->path();
  TarWriter writer([&](std::span<const std::byte> bytes) -> Result<void> {
    hasher.update(bytes.data(), bytes.size());
    chunk_hasher.update(bytes.data(), bytes.size());
    return util::write_all(out, bytes.data(), bytes.size(), out_path);
  });
  for (const auto& sample : revision.shards[shard_index].samples) {
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const ObjectRef& object = sample.objects[columns[k]];
      std::string object_file = object_path(object.sha256);
      util::UniqueFd in(::open(object_file.c_str(), O_RDONLY | O_CLOEXEC));
      if (!in.valid()) {
        if (errno == ENOENT) return integrity("object " + object_file + " of sample " + sample.id + " is missing");
        return Error::from_errno(errno, "cannot open " + object_file);
      }
      struct stat st {};
      if (::fstat(in.get(), &st) != 0) return Error::from_errno(errno, "cannot stat " + object_file);
      if (static_cast<std::uint64_t>(st.st_size) != object.size) {
        return integrity("object " + object_file + " has " + std::to_string(st.st_size) + " bytes, expected " +
                         std::to_string(object.size));
      }
      DATAVO_TRY(writer.begin_member(sample.id + "." + keys[k], Bytes{object.size}));
      DATAVO_TRY(util::read_chunks(in.get(), 0, object.size, object_file,
                                   [&](std::span<const char> chunk) { return writer.write(std::as_bytes(chunk)); }));
    }
  }
  DATAVO_TRY(writer.finish());
  DATAVO_TRY(file->sync());
  Sha256 sha = hasher.finish();
  ChunkDigests chunks = chunk_hasher.finish();
  // The digests go in first: a present .tar always has its .chunks and .sha256 beside it.
  DATAVO_TRY(util::write_file_atomic(chunks_path(*this, hash), chunks_file_text(chunks), 0644));
  DATAVO_TRY(util::write_file_atomic(tars_dir() + "/" + hash.hex() + ".sha256", sha.hex() + "\n", 0644));
  std::string target = tar_path(hash);
  auto committed = file->commit(target, util::AtomicFile::Replace::yes);
  if (!committed) return committed.error();
  return KeyGroupTar{target, writer.bytes_written(), sha, std::move(chunks)};
}

void Store::sweep_temporaries(Seconds age) const {
  auto cutoff = std::chrono::system_clock::now() - age;
  for (const std::string& dir : {objects_dir(), tars_dir()}) {
    DIR* handle = ::opendir(dir.c_str());
    if (!handle) continue;
    while (dirent* entry = ::readdir(handle)) {
      std::string_view name = entry->d_name;
      if (name.find(".tmp.") == std::string_view::npos) continue;
      std::string path = dir + "/" + std::string(name);
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (std::chrono::system_clock::from_time_t(st.st_mtime) < cutoff) ::unlink(path.c_str());
    }
    ::closedir(handle);
  }
}

}  // namespace datavo::origin
