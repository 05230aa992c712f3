#include <cstdio>
#include <stdexcept>

#include "support/fake_cloud/store_state.hpp"
#include "tier/cloud/checksums.hpp"
#include "util/base64.hpp"
#include "util/text.hpp"

namespace datavo::fakecloud {

const char* to_string(Dialect dialect) {
  switch (dialect) {
    case Dialect::s3: return "s3";
    case Dialect::gcs: return "gcs";
    case Dialect::azure: return "azure";
  }
  return "?";
}

// --- SeenRequest -------------------------------------------------------------------------------------------------

std::string SeenRequest::param(const std::string& name) const { return has(name) ? query.at(name) : std::string(); }

std::string SeenRequest::header(const std::string& name) const {
  auto it = headers.find(util::to_lower(name));
  return it == headers.end() ? std::string() : it->second;
}

long long SeenRequest::chunk_start() const {
  const std::string range = header("Content-Range");
  if (method != "PUT" || range.rfind("bytes ", 0) != 0 || range.find('*') != std::string::npos) return -1;
  return std::stoll(range.substr(6));
}

// --- StoreState --------------------------------------------------------------------------------------------------

StoreState::StoreState(Dialect d) : dialect(d) {
  s3_keys[k_s3_key_id] = k_s3_secret;
  metadata_in_reads = d != Dialect::gcs;
}

ObjectPtr StoreState::find(const std::string& bucket, const std::string& name) const {
  auto b = buckets.find(bucket);
  if (b == buckets.end()) return nullptr;
  auto o = b->second.find(name);
  return o == b->second.end() ? nullptr : o->second;
}

bool StoreState::refuses_create(const std::string& bucket, const std::string& name, bool if_absent) const {
  return if_absent && !ignore_preconditions && find(bucket, name) != nullptr;
}

ObjectPtr StoreState::store(const std::string& bucket, const std::string& name, StoredObject object) {
  object.generation = next_generation++;
  object.last_modified = std::chrono::system_clock::now();
  if (object.etag.empty()) {
    switch (dialect) {
      case Dialect::s3: object.etag = "\"" + md5_hex(object.bytes) + "\""; break;
      case Dialect::azure: object.etag = "\"0x8DC" + std::to_string(object.generation) + "\""; break;
      case Dialect::gcs: object.etag = "CN" + std::to_string(object.generation) + "="; break;
    }
  }
  auto stored = std::make_shared<const StoredObject>(std::move(object));
  buckets[bucket][name] = stored;
  return stored;
}

void StoreState::maybe_corrupt(std::string& bytes) {
  if (corrupt_next_upload && !bytes.empty()) bytes[bytes.size() / 2] ^= 0x20;
  corrupt_next_upload = false;
}

bool StoreState::count_part_and_refuse() {
  ++parts_seen;
  return refuse_parts_from > 0 && parts_seen >= refuse_parts_from;
}

const InjectedFault* StoreState::fault_for(const SeenRequest& request) {
  for (auto& armed : faults) {
    if (!armed.fault.op.empty() && armed.fault.op != request.op) continue;
    const int n = ++armed.matched - armed.fault.after;
    if (n >= 1 && (armed.fault.count < 0 || n <= armed.fault.count)) return &armed.fault;
  }
  return nullptr;
}

std::string StoreState::issue_token(const std::string& prefix) {
  const std::string token = prefix + std::to_string(++tokens_issued);
  valid_tokens.insert(token);
  return token;
}

// --- ObjectStore -------------------------------------------------------------------------------------------------

ObjectStore::ObjectStore(Dialect dialect) : dialect_(dialect), state_(std::make_unique<StoreState>(dialect)) {}
ObjectStore::~ObjectStore() = default;

void ObjectStore::add_bucket(const std::string& bucket) { lock()->buckets[bucket]; }

void ObjectStore::put_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                             std::map<std::string, std::string> metadata, std::string md5) {
  StoredObject object = object_of(bytes, std::move(metadata));
  if (!md5.empty()) object.md5_base64 = std::move(md5);
  lock()->store(bucket, name, std::move(object));
}

void ObjectStore::put_composite_object(const std::string& bucket, const std::string& name, const std::string& bytes,
                                       std::string crc32c) {
  StoredObject object = object_of(bytes, {});
  object.md5_base64.clear();
  object.crc32c_base64 = std::move(crc32c);
  lock()->store(bucket, name, std::move(object));
}

void ObjectStore::put_object_with_sha256(const std::string& bucket, const std::string& name, const std::string& bytes,
                                         std::map<std::string, std::string> metadata, std::string sha256) {
  StoredObject object = object_of(bytes, std::move(metadata));
  object.client_checksums["sha256"] = std::move(sha256);
  lock()->store(bucket, name, std::move(object));
}

void ObjectStore::backdate(const std::string& bucket, const std::string& name, std::chrono::seconds age) {
  auto state = lock();
  ObjectPtr found = state->find(bucket, name);
  if (!found) throw std::logic_error("backdate: no object " + name);
  StoredObject older = *found;
  older.last_modified = std::chrono::system_clock::now() - age;
  state->buckets[bucket][name] = std::make_shared<const StoredObject>(std::move(older));
}

std::optional<StoredObject> ObjectStore::object(const std::string& bucket, const std::string& name) {
  auto state = lock();
  ObjectPtr found = state->find(bucket, name);
  if (!found) return std::nullopt;
  return *found;
}

std::size_t ObjectStore::object_count(const std::string& bucket) {
  auto state = lock();
  auto b = state->buckets.find(bucket);
  return b == state->buckets.end() ? 0 : b->second.size();
}

int ObjectStore::open_uploads() {
  auto state = lock();
  int open = 0;
  for (const auto& [id, upload] : state->uploads) open += upload.status == Upload::Status::open ? 1 : 0;
  return open;
}

int ObjectStore::blobs_with_uncommitted_blocks() {
  auto state = lock();
  int blobs = 0;
  for (const auto& [blob, blocks] : state->blocks) blobs += blocks.empty() ? 0 : 1;
  return blobs;
}

std::vector<SeenRequest> ObjectStore::requests() { return lock()->seen; }
void ObjectStore::clear_requests() { lock()->seen.clear(); }

void ObjectStore::add_s3_key(const std::string& key_id, const std::string& secret) { lock()->s3_keys[key_id] = secret; }
void ObjectStore::expire_session_token(const std::string& token) { lock()->expired_session_tokens.insert(token); }
void ObjectStore::set_azure_account_key(const std::string& key_base64) {
  auto decoded = util::base64_decode(key_base64);
  if (!decoded) throw std::invalid_argument("the Azure account key is not base64");
  lock()->azure_key = *decoded;
}
void ObjectStore::require_token(bool on) { lock()->require_token = on; }
void ObjectStore::revoke_tokens() { lock()->valid_tokens.clear(); }
void ObjectStore::set_token_lifetime(std::chrono::seconds lifetime) { lock()->token_lifetime = lifetime; }
int ObjectStore::tokens_issued() { return lock()->tokens_issued; }

void ObjectStore::set_ignore_preconditions(bool on) { lock()->ignore_preconditions = on; }
void ObjectStore::set_page_size(std::size_t size) { lock()->page_size = size; }
void ObjectStore::set_metadata_in_reads(bool on) { lock()->metadata_in_reads = on; }
void ObjectStore::persist_half_of_chunk(int n, PartFailure failure) {
  auto state = lock();
  state->half_chunk = n;
  state->half_chunk_failure = failure;
}
void ObjectStore::corrupt_next_upload() { lock()->corrupt_next_upload = true; }
void ObjectStore::refuse_parts_from(int n) { lock()->refuse_parts_from = n; }
void ObjectStore::complete_with_error_in_body(const std::string& code) { lock()->complete_error_code = code; }
void ObjectStore::inject(InjectedFault fault) { lock()->faults.push_back(ArmedFault{std::move(fault), 0}); }
void ObjectStore::on_request(std::function<void(const SeenRequest&)> hook) { lock()->hook = std::move(hook); }
std::function<void(const SeenRequest&)> ObjectStore::hook() { return lock()->hook; }

// --- helpers -----------------------------------------------------------------------------------------------------

StoredObject object_of(std::string bytes, std::map<std::string, std::string> metadata) {
  StoredObject object;
  object.md5_base64 = md5_base64(bytes);
  object.crc32c_base64 = crc32c_base64_of(bytes);
  object.bytes = std::move(bytes);
  object.metadata = std::move(metadata);
  return object;
}

std::string md5_base64(const std::string& bytes) { return util::base64_encode(cloud::md5_of(bytes)); }

std::string crc32c_base64_of(const std::string& bytes) {
  return cloud::crc32c_base64(cloud::crc32c_extend(0, bytes.data(), bytes.size()));
}

std::string md5_hex(const std::string& bytes) {
  std::string out;
  char digits[3];
  for (unsigned char c : cloud::md5_of(bytes)) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    out += digits;
  }
  return out;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::map<std::string, std::string> metadata_headers(const httplib::Request& req, const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : req.headers) {
    const std::string lower = util::to_lower(name);
    if (lower.rfind(prefix, 0) == 0) out[lower.substr(prefix.size())] = value;
  }
  return out;
}

std::optional<ByteSpan> parse_range(const std::string& header, std::uint64_t size, bool& unsatisfiable) {
  unsatisfiable = false;
  if (header.rfind("bytes=", 0) != 0) return std::nullopt;
  const auto dash = header.find('-');
  ByteSpan span;
  span.first = std::stoull(header.substr(6, dash - 6));
  span.last = dash + 1 < header.size() ? std::stoull(header.substr(dash + 1)) : size - 1;
  if (span.first >= size) {
    unsatisfiable = true;
    return std::nullopt;
  }
  span.last = std::min(span.last, size - 1);
  return span;
}

bool serve_bytes(httplib::Response& res, const std::string& bytes, const std::string& range_header) {
  bool unsatisfiable = false;
  const auto span = parse_range(range_header, bytes.size(), unsatisfiable);
  if (unsatisfiable) {
    res.set_header("Content-Range", "bytes */" + std::to_string(bytes.size()));
    return false;
  }
  res.set_header("Accept-Ranges", "bytes");
  if (!span) {
    res.set_content(bytes, "application/octet-stream");
    return true;
  }
  res.status = 206;
  res.set_header("Content-Range", "bytes " + std::to_string(span->first) + "-" + std::to_string(span->last) + "/" +
                                      std::to_string(bytes.size()));
  res.set_content(bytes.substr(span->first, span->last - span->first + 1), "application/octet-stream");
  return true;
}

std::vector<std::string> split_path(const std::string& path, std::size_t parts) {
  std::vector<std::string> out;
  std::size_t at = path.empty() || path[0] != '/' ? 0 : 1;
  while (at <= path.size() && out.size() + 1 < parts) {
    const auto slash = path.find('/', at);
    if (slash == std::string::npos) break;
    out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  if (at < path.size()) out.push_back(path.substr(at));
  return out;
}

std::vector<std::pair<std::string, ObjectPtr>> list_page(const StoreState& state, const std::string& bucket,
                                                         const std::string& prefix, const std::string& after,
                                                         std::size_t limit, bool& more) {
  std::vector<std::pair<std::string, ObjectPtr>> page;
  more = false;
  auto b = state.buckets.find(bucket);
  if (b == state.buckets.end()) return page;
  for (const auto& [name, object] : b->second) {
    if (name.rfind(prefix, 0) != 0 || (!after.empty() && name <= after)) continue;
    if (page.size() == limit) {
      more = true;
      break;
    }
    page.emplace_back(name, object);
  }
  return page;
}

}  // namespace datavo::fakecloud
