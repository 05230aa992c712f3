#include "origin/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "datavo/tar.hpp"
#include "util/atomic_file.hpp"
#include "util/temp_name.hpp"

namespace datavo::origin {

namespace {

// Objects and tars are copied in pieces of this size, so memory stays bounded whatever the payload size.
constexpr std::size_t k_copy_chunk = std::size_t{1} << 20;
constexpr std::size_t k_max_name = 128;
constexpr std::size_t k_max_sample_id = 512;
// A secret shorter than this (hand-edited, truncated) is refused rather than used as a weak HMAC key.
constexpr std::size_t k_min_secret_chars = 32;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; }

bool is_lower_hex(std::string_view text, std::size_t size) {
  if (text.size() != size) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Error invalid(std::string message) { return Error{ErrorCode::invalid_argument, std::move(message)}; }
Error integrity(std::string message) { return Error{ErrorCode::integrity, std::move(message)}; }

std::string trim_right(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
    text.pop_back();
  }
  return text;
}

std::string temp_name(const std::string& dir, std::string_view stem) {
  return dir + "/.tmp." + std::string(stem) + "." + std::to_string(::getpid()) + "." + util::random_hex(6);
}

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

// Typed reads from a parsed revision file: every failure is an integrity Error naming the file and field.
class JsonReader {
 public:
  explicit JsonReader(std::string file) : file_(std::move(file)) {}
  Error bad(std::string_view field, std::string_view what) const {
    return integrity(file_ + ": field \"" + std::string(field) + "\": " + std::string(what));
  }
  Result<std::string> string(const nlohmann::json& object, const char* field) const {
    auto it = object.find(field);
    if (it == object.end() || !it->is_string()) return bad(field, "missing or not a string");
    return it->get<std::string>();
  }
  Result<std::uint64_t> number(const nlohmann::json& object, const char* field) const {
    auto it = object.find(field);
    if (it == object.end() || !it->is_number_unsigned()) return bad(field, "missing or not a non-negative integer");
    return it->get<std::uint64_t>();
  }
  Result<const nlohmann::json*> array(const nlohmann::json& object, const char* field) const {
    auto it = object.find(field);
    if (it == object.end() || !it->is_array()) return bad(field, "missing or not an array");
    return &*it;
  }

 private:
  std::string file_;
};

Result<Revision> parse_revision(const std::string& file, const std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return integrity(file + ": not a JSON object");
  JsonReader in(file);
  Revision rev;
  auto format = in.number(doc, "format");
  if (!format) return format.error();
  if (*format != 1) return in.bad("format", "unsupported format " + std::to_string(*format));
  auto dataset = in.string(doc, "dataset");
  if (!dataset) return dataset.error();
  auto split = in.string(doc, "split");
  if (!split) return split.error();
  auto ref = in.string(doc, "manifest_ref");
  if (!ref) return ref.error();
  auto number = in.number(doc, "revision");
  if (!number) return number.error();
  rev.dataset = *dataset;
  rev.split = *split;
  rev.manifest_ref = *ref;
  rev.revision = *number;
  if (!validate_name("dataset", rev.dataset) || !validate_name("split", rev.split)) {
    return in.bad("dataset", "invalid dataset or split name");
  }
  auto keys = in.array(doc, "keys");
  if (!keys) return keys.error();
  for (const auto& key : **keys) {
    if (!key.is_string() || !validate_name("key", key.get<std::string>())) return in.bad("keys", "invalid key");
    rev.keys.push_back(key.get<std::string>());
  }
  if (rev.keys.empty() || !std::is_sorted(rev.keys.begin(), rev.keys.end()) ||
      std::adjacent_find(rev.keys.begin(), rev.keys.end()) != rev.keys.end()) {
    return in.bad("keys", "empty, unsorted or with duplicates");
  }
  auto shards = in.array(doc, "shards");
  if (!shards) return shards.error();
  for (const auto& shard_json : **shards) {
    if (!shard_json.is_object()) return in.bad("shards", "not an object");
    auto index = in.number(shard_json, "index");
    if (!index) return index.error();
    if (*index != rev.shards.size()) return in.bad("shards", "indexes are not 0, 1, 2, ...");
    auto samples = in.array(shard_json, "samples");
    if (!samples) return samples.error();
    ShardRecord shard;
    for (const auto& sample_json : **samples) {
      if (!sample_json.is_object()) return in.bad("samples", "not an object");
      SampleRecord sample;
      auto id = in.string(sample_json, "id");
      if (!id) return id.error();
      sample.id = *id;
      if (!validate_sample_id(sample.id)) return in.bad("id", "invalid sample id " + escape_for_message(sample.id));
      auto objects = in.array(sample_json, "objects");
      if (!objects) return objects.error();
      if ((*objects)->size() != rev.keys.size()) return in.bad("objects", "not one per key in sample " + sample.id);
      for (const auto& object_json : **objects) {
        if (!object_json.is_object()) return in.bad("objects", "not an object");
        auto sha = in.string(object_json, "sha256");
        if (!sha) return sha.error();
        if (!is_lower_hex(*sha, 64)) return in.bad("sha256", "not 64 lowercase hex characters");
        auto size = in.number(object_json, "size");
        if (!size) return size.error();
        sample.objects.push_back(ObjectRef{*sha, *size});
      }
      shard.samples.push_back(std::move(sample));
    }
    rev.shards.push_back(std::move(shard));
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

// --- names ------------------------------------------------------------------------------------------------------

std::string escape_for_message(std::string_view name) {
  std::string out;
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '"' || c == '\\') {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", byte);
      out += buffer;
    } else {
      out += c;
    }
  }
  return "\"" + out + "\"";
}

Result<void> validate_name(std::string_view what, std::string_view name) {
  auto refuse = [&](const char* why) {
    return invalid("invalid " + std::string(what) + " name " + escape_for_message(name) + ": " + why);
  };
  if (name.empty()) return refuse("empty");
  if (name.size() > k_max_name) return refuse("longer than 128 bytes");
  if (!is_alnum(name.front())) return refuse("must start with a letter or a digit");
  if (!std::all_of(name.begin(), name.end(), is_name_char)) return refuse("only A-Z a-z 0-9 . _ - are allowed");
  if (name.find("..") != std::string_view::npos) return refuse("\"..\" is not allowed");
  return ok();
}

Result<void> validate_sample_id(std::string_view id) {
  auto refuse = [&](const char* why) { return invalid("invalid sample id " + escape_for_message(id) + ": " + why); };
  if (id.empty()) return refuse("empty");
  if (id.size() > k_max_sample_id) return refuse("longer than 512 bytes");
  std::size_t begin = 0;
  for (;;) {
    std::size_t end = id.find('/', begin);
    std::string_view part = id.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    if (part.empty()) return refuse("empty path component (a leading, trailing or double '/')");
    if (part.size() > k_max_name) return refuse("a path component is longer than 128 bytes");
    if (!is_alnum(part.front()) && part.front() != '_' && part.front() != '-') {
      return refuse("a path component must start with a letter, a digit, '_' or '-'");
    }
    if (!std::all_of(part.begin(), part.end(), is_name_char)) return refuse("only A-Z a-z 0-9 . _ - and / are allowed");
    if (end == std::string_view::npos) {
      if (part.find('.') != std::string_view::npos) return refuse("the last component cannot hold a '.'");
      return ok();
    }
    begin = end + 1;
  }
}

Result<std::pair<std::string, std::string>> parse_dataset_name(std::string_view name) {
  auto slash = name.find('/');
  if (slash == std::string_view::npos) {
    return invalid("invalid dataset " + escape_for_message(name) + ": expected <dataset>/<split>");
  }
  std::string dataset(name.substr(0, slash));
  std::string split(name.substr(slash + 1));
  DATAVO_TRY(validate_name("dataset", dataset));
  DATAVO_TRY(validate_name("split", split));
  return std::make_pair(std::move(dataset), std::move(split));
}

std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t min) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  if (text.size() > 1 && text.front() == '0') return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value < min) return std::nullopt;
  return value;
}

// --- Store ------------------------------------------------------------------------------------------------------

Result<Store> Store::open(const std::string& root, Create create) {
  if (root.empty()) return invalid("the store path is empty");
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
  store.secret_ = trim_right(std::move(secret).value());
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
  auto value = parse_decimal(trim_right(std::move(text).value()), 1);
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
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Error::from_errno(errno, "cannot lock " + path);
  }
  return fd;
}

Result<Store::PutResult> Store::put_object(std::span<const std::byte> data) const {
  auto file = util::AtomicFile::create(temp_name(objects_dir(), "object"), 0644);
  if (!file) return file.error();
  ObjectWriter writer{std::move(file).value(), Sha256Hasher{}, 0};
  DATAVO_TRY(writer.write(data.data(), data.size()));
  return finish_object(*this, writer);
}

Result<Store::PutResult> Store::put_object_file(const std::string& path) const {
  util::UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return Error::from_errno(errno, "cannot open " + path);
  auto file = util::AtomicFile::create(temp_name(objects_dir(), "object"), 0644);
  if (!file) return file.error();
  ObjectWriter writer{std::move(file).value(), Sha256Hasher{}, 0};
  std::vector<char> buffer(k_copy_chunk);
  for (;;) {
    ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "cannot read " + path);
    }
    if (n == 0) break;
    DATAVO_TRY(writer.write(buffer.data(), static_cast<std::size_t>(n)));
  }
  return finish_object(*this, writer);
}

Result<std::optional<KeyGroupTar>> Store::find_key_group(const ContentHash& hash) const {
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
  auto sha = Sha256::parse(trim_right(std::move(text).value()));
  if (!sha) return std::optional<KeyGroupTar>{};  // a damaged record: materialise again
  return std::optional<KeyGroupTar>{KeyGroupTar{path, Bytes{static_cast<std::uint64_t>(st.st_size)}, *sha}};
}

Result<KeyGroupTar> Store::materialise_key_group(const Revision& revision, std::uint64_t shard_index,
                                                 std::span<const std::string> keys, const ContentHash& hash) const {
  if (shard_index >= revision.shards.size()) return invalid("shard index out of range");
  std::vector<std::size_t> columns;
  for (const auto& key : keys) {
    auto it = std::lower_bound(revision.keys.begin(), revision.keys.end(), key);
    if (it == revision.keys.end() || *it != key) return invalid("unknown key " + escape_for_message(key));
    columns.push_back(static_cast<std::size_t>(it - revision.keys.begin()));
  }

  auto file = util::AtomicFile::create(temp_name(tars_dir(), hash.hex()), 0644);
  if (!file) return file.error();
  Sha256Hasher hasher;
  const int out = file->fd();
  const std::string& out_path = file->path();
  TarWriter writer([&](std::span<const std::byte> bytes) -> Result<void> {
    hasher.update(bytes.data(), bytes.size());
    return util::write_all(out, bytes.data(), bytes.size(), out_path);
  });
  std::vector<std::byte> buffer(k_copy_chunk);
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
      for (std::uint64_t done = 0; done < object.size;) {
        auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), object.size - done));
        DATAVO_TRY(util::pread_all(in.get(), buffer.data(), n, static_cast<off_t>(done), object_file));
        DATAVO_TRY(writer.write(std::span<const std::byte>(buffer.data(), n)));
        done += n;
      }
    }
  }
  DATAVO_TRY(writer.finish());
  DATAVO_TRY(file->sync());
  Sha256 sha = hasher.finish();
  // The digest goes in first: a present .tar always has its .sha256 beside it.
  DATAVO_TRY(util::write_file_atomic(tars_dir() + "/" + hash.hex() + ".sha256", sha.hex() + "\n", 0644));
  std::string target = tar_path(hash);
  auto committed = file->commit(target, util::AtomicFile::Replace::yes);
  if (!committed) return committed.error();
  return KeyGroupTar{target, writer.bytes_written(), sha};
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
