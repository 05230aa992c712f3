// The GCS backend of the remote-tier layer, over the JSON API: media downloads pinned to the generation
// (ifGenerationMatch), multipart uploads for small objects and resumable uploads in chunks of part_size for large
// ones (one chunk when part_size covers the object; resumed from the offset the server reports),
// ifGenerationMatch=0 as the conditional create, CRC-32C (and MD5 on multipart uploads) sent with every upload so
// that GCS refuses corrupt bytes, Application Default Credentials (gcs/google_credentials.hpp).
#include "datavo/gcs_tier.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tier/cloud/bearer_auth.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/checksums.hpp"
#include "tier/cloud/chunk_metadata.hpp"
#include "tier/gcs/gcs_tier.hpp"
#include "tier/gcs/google_credentials.hpp"
#include "util/base64.hpp"
#include "util/decimal.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/rfc3339.hpp"

namespace datavo {
namespace {

using cloud::BlobBackend;
using cloud::ByteRange;
using cloud::EntryMetadata;
using cloud::ListedObject;
using cloud::ObjectInfo;
using cloud::Overwrite;
using cloud::UploadedPart;

constexpr const char* k_default_endpoint = "https://storage.googleapis.com";
constexpr const char* k_gcs_meta_sha256 = "datavo-sha256";
constexpr const char* k_gcs_meta_size = "datavo-size";
constexpr const char* k_gcs_meta_chunks = "datavo-chunks";
// Resumable chunks must be multiples of this (GCS's rule), except the last.
constexpr std::uint64_t k_chunk_granularity = 256 * 1024;
constexpr const char* k_boundary = "datavo-multipart-boundary-7b0c4e";
// Above this an upload is resumable even when part_size would allow one multipart request: a failure then costs
// the bytes after the last offset the server persisted, not the whole object. Google's Python client draws the
// line at the same 8 MiB (_MAX_MULTIPART_SIZE); servers may also cap a request body that they buffer (the
// firebase-tools emulator refuses multipart bodies above 130 MiB).
constexpr Bytes k_multipart_limit = MiB(8);

// GCS writes decimal numbers in JSON as strings ("size": "123").
std::optional<std::uint64_t> json_number(const nlohmann::json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_string()) return util::parse_decimal(it->get<std::string>());
  return std::nullopt;
}

// The object resource JSON of GCS as the layer's ObjectInfo.
ObjectInfo info_of_resource(const nlohmann::json& resource) {
  ObjectInfo info;
  info.size = Bytes{json_number(resource, "size").value_or(0)};
  if (auto generation = json_number(resource, "generation")) info.version = std::to_string(*generation);
  if (auto metadata = resource.find("metadata"); metadata != resource.end() && metadata->is_object()) {
    if (auto sha = metadata->find(k_gcs_meta_sha256); sha != metadata->end() && sha->is_string()) {
      if (auto parsed = Sha256::parse(sha->get<std::string>())) info.sha256 = *parsed;
    }
    if (auto size = metadata->find(k_gcs_meta_size); size != metadata->end() && size->is_string()) {
      if (auto parsed = util::parse_decimal(size->get<std::string>())) info.recorded_size = Bytes{*parsed};
    }
    if (auto chunks = metadata->find(k_gcs_meta_chunks); chunks != metadata->end() && chunks->is_string())
      info.recorded_chunks = chunks->get<std::string>();
  }
  return info;
}

// Whether a 404 body says the bucket (not the object) is missing.
bool says_no_bucket(std::string_view body) { return body.find("bucket does not exist") != std::string_view::npos; }

// Counts what a sink receives and hashes it with MD5 and CRC-32C, so that a read of the whole object can be
// checked against md5Hash, or crc32c when there is none (composite objects), when the object carries no
// datavo-sha256 (an object another tool wrote).
class ChecksumSink final : public ByteSink {
 public:
  explicit ChecksumSink(ByteSink& inner) : inner_(inner), ctx_(EVP_MD_CTX_new()) { restart_hash(); }
  ~ChecksumSink() override { EVP_MD_CTX_free(ctx_); }
  ChecksumSink(const ChecksumSink&) = delete;
  ChecksumSink& operator=(const ChecksumSink&) = delete;
  Result<void> write(const void* data, std::size_t size) override {
    DATAVO_TRY(inner_.write(data, size));
    EVP_DigestUpdate(ctx_, data, size);
    crc_ = cloud::crc32c_extend(crc_, data, size);
    hashed_ += size;
    return {};
  }
  Bytes written() const override { return inner_.written(); }
  Result<void> restart() override {
    restart_hash();
    return inner_.restart();
  }
  // The bytes hashed since the last restart.
  std::uint64_t hashed() const { return hashed_; }
  // What GCS's object resource would say of the bytes hashed: md5Hash and crc32c, in base64. Call once.
  std::string md5_base64() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_, out, &size);
    return util::base64_encode(std::string_view(reinterpret_cast<const char*>(out), size));
  }
  std::string crc32c_base64() const { return cloud::crc32c_base64(crc_); }

 private:
  void restart_hash() {
    EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr);
    crc_ = 0;
    hashed_ = 0;
  }
  ByteSink& inner_;
  EVP_MD_CTX* ctx_;
  std::uint32_t crc_ = 0;
  std::uint64_t hashed_ = 0;
};

class GcsBackend final : public BlobBackend {
 public:
  GcsBackend(GcsTierOptions options, cloud::CredentialEnv env)
      : options_(std::move(options)),
        env_(std::move(env)),
        http_(std::make_shared<net::HttpClient>(options_.remote.transport, env_.clock)) {}

  std::string_view type() const override { return "gcs"; }
  std::string_view conditional_create() const override { return "ifGenerationMatch=0"; }
  std::string location() const override { return "gs://" + options_.bucket; }

  Result<std::string> credentials() override {
    DATAVO_TRY(resolve());
    if (!provider_)
      return "none (" + std::string(emulator_ ? "STORAGE_EMULATOR_HOST" : "anonymous") + "); endpoint " + endpoint_;
    auto token = provider_->get();
    if (!token) return std::move(token).error();
    return provider_->describe() + "; endpoint " + endpoint_;
  }

  Result<std::optional<ObjectInfo>> get(const std::string& name, std::optional<ByteRange> range, const std::string* pin,
                                        ByteSink& sink) override {
    // An object without our metadata is checked against GCS's own md5Hash when one response brings all of it: a
    // read from its first byte is hashed on the way (the layer's lookup asks for the first part_size bytes, which
    // is the whole object unless it is larger).
    std::optional<ChecksumSink> hashed;
    if (!range || range->first == 0) hashed.emplace(sink);
    net::HttpRequest request;
    request.url = object_url(name, {{"alt", "media"}}, pin);
    if (range) {
      request.headers.push_back(
          {"Range", "bytes=" + std::to_string(range->first) + "-" + std::to_string(range->first + range->length - 1)});
    }
    request.sink = hashed ? static_cast<ByteSink*>(&*hashed) : &sink;
    request.accepted_statuses = {404, 412, 416};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 404) {
      if (says_no_bucket(response->body)) return no_bucket();
      return std::optional<ObjectInfo>{};
    }
    if (response->status == 412)
      return Error{ErrorCode::conflict, name + " changed (its generation is not " + *pin + ")"};
    if (response->status == 416) {
      if (range && range->first == 0) return get(name, std::nullopt, pin, sink);
      return Error{ErrorCode::remote, name + ": HTTP 416 to a range inside the object"};
    }
    ObjectInfo info;
    info.size = Bytes{response->entity_size.value_or(response->body_bytes.count())};
    if (auto generation = response->header("x-goog-generation")) info.version = std::string(*generation);
    // A server that ignores ifGenerationMatch (the firebase-tools emulator does, on media downloads) serves the
    // range of whatever generation it holds now: the generation it names must be the pinned one, or the ranges of
    // two generations would be read as one object.
    if (pin && !pin->empty() && !info.version.empty() && info.version != *pin)
      return Error{ErrorCode::conflict, name + " changed (generation " + info.version + ", not " + *pin + ")"};
    if (auto sha = response->header(std::string("x-goog-meta-") + k_gcs_meta_sha256)) {
      if (auto parsed = Sha256::parse(*sha)) info.sha256 = *parsed;
    }
    if (auto size = response->header(std::string("x-goog-meta-") + k_gcs_meta_size)) {
      if (auto parsed = util::parse_decimal(*size)) info.recorded_size = Bytes{*parsed};
    }
    if (auto chunks = response->header(std::string("x-goog-meta-") + k_gcs_meta_chunks))
      info.recorded_chunks = std::string(*chunks);
    // Media responses do not always carry custom metadata (the emulator's do not): the object resource does. A
    // pinned read is a later range of a read whose first answer brought the metadata already.
    if (!info.sha256 && !pin) {
      auto resource = object_resource(name);
      if (!resource) return std::move(resource).error();
      if (!*resource) return Error{ErrorCode::conflict, name + " vanished while it was read"};
      const ObjectInfo& described = (*resource)->info;
      if (!info.version.empty() && described.version != info.version)
        return Error{ErrorCode::conflict, name + " changed while it was read"};
      info.sha256 = described.sha256;
      info.recorded_size = described.recorded_size;
      info.recorded_chunks = described.recorded_chunks;
      if (info.version.empty()) info.version = described.version;
      const bool whole = hashed && hashed->hashed() == info.size.count();
      if (whole && !info.sha256) {
        // No SHA-256 to check the bytes against: GCS's own MD5 of the whole object is the next best, then its
        // CRC-32C (a composite object has no MD5).
        const Resource& stored = **resource;
        if (!stored.md5_base64.empty() && hashed->md5_base64() != stored.md5_base64)
          return Error{ErrorCode::integrity, name + ": the bytes read do not match the object's md5Hash"};
        if (stored.md5_base64.empty() && !stored.crc32c_base64.empty() &&
            hashed->crc32c_base64() != stored.crc32c_base64)
          return Error{ErrorCode::integrity, name + ": the bytes read do not match the object's crc32c"};
      }
    }
    return std::optional<ObjectInfo>{info};
  }

  Result<std::optional<ObjectInfo>> head(const std::string& name) override {
    auto resource = object_resource(name);
    if (!resource) return std::move(resource).error();
    if (!*resource) return std::optional<ObjectInfo>{};
    return std::optional<ObjectInfo>{(*resource)->info};
  }

  Result<InstallOutcome> put(const std::string& name, const net::RequestBody& body,
                             const std::optional<EntryMetadata>& metadata, Overwrite overwrite) override {
    // uploadType=multipart: the object resource (with our metadata and the MD5 and CRC-32C that GCS checks) and
    // the bytes in one multipart/related request. Each part needs a Content-Type (the emulator refuses parts
    // without).
    nlohmann::json resource = {{"name", name}};
    std::string md5;
    std::uint32_t crc = 0;
    if (const auto* file = std::get_if<net::FileBody>(&body)) {
      auto sums = cloud::md5_and_crc32c_of_range(file->fd, file->offset, file->size.count());
      if (!sums) return std::move(sums).error();
      md5 = std::move(sums->md5);
      crc = sums->crc32c;
    } else if (const auto* text = std::get_if<std::string>(&body)) {
      md5 = cloud::md5_of(*text);
      crc = cloud::crc32c_extend(0, text->data(), text->size());
    }
    resource["md5Hash"] = util::base64_encode(md5);
    resource["crc32c"] = cloud::crc32c_base64(crc);
    if (metadata) resource["metadata"] = metadata_json(*metadata);
    const std::string head = std::string("--") + k_boundary +
                             "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" + resource.dump() + "\r\n--" +
                             k_boundary + "\r\nContent-Type: application/octet-stream\r\n\r\n";
    const std::string tail = std::string("\r\n--") + k_boundary + "--\r\n";
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = upload_url("multipart", overwrite);
    request.headers.push_back({"Content-Type", std::string("multipart/related; boundary=") + k_boundary});
    if (const auto* file = std::get_if<net::FileBody>(&body)) {
      net::FileBody framed = *file;
      framed.head = head;
      framed.tail = tail;
      request.body = std::move(framed);
    } else if (const auto* text = std::get_if<std::string>(&body)) {
      request.body = head + *text + tail;
    } else {
      request.body = head + tail;
    }
    request.idempotent = true;  // a conditional create: repeating it cannot create twice
    request.accepted_statuses = {412};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 412) return InstallOutcome::already_present;
    return InstallOutcome::installed;
  }

  Result<std::string> start_upload(const std::string& name, const EntryMetadata& metadata) override {
    nlohmann::json resource = {{"name", name}, {"metadata", metadata_json(metadata)}};
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = upload_url("resumable", Overwrite::no);
    request.headers.push_back({"Content-Type", "application/json; charset=UTF-8"});
    request.headers.push_back({"X-Upload-Content-Type", "application/octet-stream"});
    request.headers.push_back({"X-Upload-Content-Length", std::to_string(metadata.size.count())});
    request.body = resource.dump();
    request.accepted_statuses = {412};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 412) return std::string(k_already_present);
    auto session = response->header("Location");
    if (!session || session->empty())
      return Error{ErrorCode::remote, "the resumable upload of " + name + " has no session URI"};
    // The layer hands the id back with every part: the session URI and the object's size, which each chunk's
    // Content-Range needs.
    return std::to_string(metadata.size.count()) + " " + std::string(*session);
  }

  Result<UploadedPart> upload_part(const std::string& name, const std::string& upload_id, int number,
                                   const net::FileBody& part) override {
    if (upload_id == k_already_present) return UploadedPart{number, "", "", InstallOutcome::already_present};
    const auto space = upload_id.find(' ');
    const std::uint64_t total = util::parse_decimal(std::string_view(upload_id).substr(0, space)).value_or(0);
    const std::string session = upload_id.substr(space + 1);
    const std::uint64_t end = part.offset + part.size.count();
    if (end != total && part.size.count() % k_chunk_granularity != 0) {
      return Error{ErrorCode::invalid_argument, "resumable chunks must be multiples of 256 KiB"};
    }
    // The request that completes the object says its CRC-32C (X-Goog-Hash, as Google's clients send it), which GCS
    // checks before it finalises: bytes damaged on the way are refused, not stored.
    std::string whole_crc32c;
    if (end == total) {
      auto crc = cloud::crc32c_of_range(part.fd, 0, total);
      if (!crc) return std::move(crc).error();
      whole_crc32c = "crc32c=" + cloud::crc32c_base64(*crc);
    }
    std::uint64_t sent = part.offset;
    // Until the server holds every byte of this chunk: a chunk it persisted only in part is continued from the
    // offset it reports, never from the start of the object.
    for (int round = 0; round < 8; ++round) {
      net::HttpRequest request;
      request.method = net::HttpMethod::put;
      request.url = session;
      net::FileBody rest{part.fd, Bytes{end - sent}, sent, {}, {}};
      request.body = rest;
      request.headers.push_back({"Content-Range", "bytes " + std::to_string(sent) + "-" + std::to_string(end - 1) +
                                                      "/" + std::to_string(total)});
      if (!whole_crc32c.empty()) request.headers.push_back({"X-Goog-Hash", whole_crc32c});
      request.idempotent = true;  // the Content-Range makes a repeat land where it belongs
      request.accepted_statuses = {412};
      auto response = perform(request);
      if (!response) {
        // A refusal (403, a bad request, a cancelled run) stays a refusal; asking the session how far it got and
        // sending the rest again is for failures in transit.
        const ErrorCode code = response.error().code;
        if (code != ErrorCode::remote && code != ErrorCode::timeout && code != ErrorCode::io)
          return std::move(response).error();
        // Ask the session how far it got, and go on from there.
        auto persisted = persisted_bytes(session, total);
        if (!persisted) return std::move(response).error();
        if (*persisted >= end) return UploadedPart{number, "", "", std::nullopt};
        if (*persisted < part.offset) return std::move(response).error();  // lost an earlier chunk: start over
        sent = *persisted;
        continue;
      }
      if (response->status == 412) return UploadedPart{number, "", "", InstallOutcome::already_present};
      if (response->status == 200 || response->status == 201) {
        return UploadedPart{number, "", "",
                            end == total ? std::optional<InstallOutcome>(InstallOutcome::installed) : std::nullopt};
      }
      if (response->status != 308) {
        return Error{ErrorCode::remote,
                     "resumable chunk of " + name + ": unexpected HTTP " + std::to_string(response->status)};
      }
      const std::uint64_t persisted = persisted_from(*response);
      if (persisted >= end) return UploadedPart{number, "", "", std::nullopt};
      if (persisted < part.offset) return Error{ErrorCode::remote, "the resumable upload of " + name + " lost bytes"};
      sent = persisted;
    }
    return Error{ErrorCode::remote, "the resumable upload of " + name + " makes no progress"};
  }

  Result<InstallOutcome> finish_upload(const std::string& name, const std::string& upload_id,
                                       const std::vector<UploadedPart>& parts, const EntryMetadata&) override {
    if (upload_id == k_already_present) return InstallOutcome::already_present;
    if (parts.empty() || !parts.back().completed) {
      return Error{ErrorCode::remote, "the resumable upload of " + name + " did not complete"};
    }
    return *parts.back().completed;
  }

  Result<void> abort_upload(const std::string&, const std::string& upload_id) override {
    if (upload_id == k_already_present) return {};
    net::HttpRequest request;
    request.method = net::HttpMethod::delete_;
    request.url = upload_id.substr(upload_id.find(' ') + 1);
    request.accepted_statuses = {404, 410, 499};  // 499: cancelled, as GCS answers a DELETE of a session
    auto response = perform(request);
    if (!response) return std::move(response).error();
    return {};
  }

  bool parallel_parts() const override { return false; }

  Bytes one_request_limit(Bytes part_size) const override { return std::min(part_size, k_multipart_limit); }

  Result<bool> remove(const std::string& name) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::delete_;
    request.url = object_url(name, {});
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 404 && says_no_bucket(response->body)) return no_bucket();
    return response->status != 404;
  }

  Result<std::vector<ListedObject>> list(const std::string& prefix) override {
    std::vector<ListedObject> out;
    std::optional<std::string> token;
    for (;;) {
      std::vector<std::pair<std::string, std::string>> query = {{"prefix", prefix}};
      if (token) query.emplace_back("pageToken", *token);
      net::HttpRequest request;
      request.url = endpoint() + "/storage/v1/b/" + util::percent_encode(options_.bucket) + "/o?" + query_string(query);
      request.accepted_statuses = {404};
      auto response = perform(request);
      if (!response) return std::move(response).error();
      if (response->status == 404) {
        if (says_no_bucket(response->body)) return no_bucket();
        return out;
      }
      auto page = gcs::parse_object_list(response->body, location());
      if (!page) return std::move(page).error();
      for (auto& object : page->objects) out.push_back(std::move(object));
      if (!page->next_page_token) return out;
      token = std::move(page->next_page_token);
    }
  }

 private:
  static constexpr const char* k_already_present = "already-present";

  struct Resource {
    ObjectInfo info;
    std::string md5_base64;     // GCS's md5Hash, empty when the object has none (composite objects)
    std::string crc32c_base64;  // GCS's crc32c (every object on GCS has one), empty when the server gave none
  };
  // GET of the object resource (its metadata, not its bytes); nullopt when there is no such object.
  Result<std::optional<Resource>> object_resource(const std::string& name) {
    net::HttpRequest request;
    request.url = object_url(name, {});
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 404) {
      if (says_no_bucket(response->body)) return no_bucket();
      return std::optional<Resource>{};
    }
    auto json = nlohmann::json::parse(response->body, nullptr, false);
    if (!json.is_object()) return Error{ErrorCode::remote, name + ": the object resource is not JSON"};
    Resource resource{info_of_resource(json), {}, {}};
    if (auto md5 = json.find("md5Hash"); md5 != json.end() && md5->is_string())
      resource.md5_base64 = md5->get<std::string>();
    if (auto crc = json.find("crc32c"); crc != json.end() && crc->is_string())
      resource.crc32c_base64 = crc->get<std::string>();
    return std::optional<Resource>{std::move(resource)};
  }

  Result<void> resolve() {
    std::call_once(resolved_, [this] {
      auto emulator_host = env_.get("STORAGE_EMULATOR_HOST");
      if (options_.endpoint_url) {
        endpoint_ = *options_.endpoint_url;
      } else if (emulator_host) {
        endpoint_ = emulator_host->find("://") == std::string::npos ? "http://" + *emulator_host : *emulator_host;
        emulator_ = true;
      } else {
        endpoint_ = k_default_endpoint;
      }
      while (endpoint_.ends_with('/')) endpoint_.pop_back();
      auto provider = gcs::make_gcs_token_provider(gcs::GcsCredentialOptions{emulator_}, env_, http_);
      if (!provider) {
        resolve_error_ = std::move(provider).error();
        return;
      }
      provider_ = std::move(*provider);
      if (provider_) auth_ = cloud::make_bearer_auth(provider_);
    });
    if (resolve_error_) return *resolve_error_;
    return {};
  }

  const std::string& endpoint() {
    (void)resolve();
    return endpoint_;
  }

  Result<net::HttpResponse> perform(net::HttpRequest& request) {
    DATAVO_TRY(resolve());
    request.auth = auth_.get();
    request.describe_error_body = &gcs::describe_gcs_error;
    return http_->perform(request);
  }

  std::string query_string(std::vector<std::pair<std::string, std::string>> query) const {
    if (options_.project) query.emplace_back("userProject", *options_.project);
    std::string out;
    for (const auto& [key, value] : query) {
      if (!out.empty()) out += '&';
      out += util::percent_encode(key) + "=" + util::percent_encode(value);
    }
    return out;
  }

  std::string object_url(const std::string& name, std::vector<std::pair<std::string, std::string>> query,
                         const std::string* generation = nullptr) {
    if (generation && !generation->empty()) query.emplace_back("ifGenerationMatch", *generation);
    std::string url =
        endpoint() + "/storage/v1/b/" + util::percent_encode(options_.bucket) + "/o/" + util::percent_encode(name);
    const std::string q = query_string(std::move(query));
    return q.empty() ? url : url + "?" + q;
  }

  std::string upload_url(const char* upload_type, Overwrite overwrite) {
    std::vector<std::pair<std::string, std::string>> query = {{"uploadType", upload_type}};
    // The conditional create: 412 when any generation of the object exists.
    if (overwrite == Overwrite::no) query.emplace_back("ifGenerationMatch", "0");
    return endpoint() + "/upload/storage/v1/b/" + util::percent_encode(options_.bucket) + "/o?" + query_string(query);
  }

  static nlohmann::json metadata_json(const EntryMetadata& metadata) {
    nlohmann::json out = {{k_gcs_meta_sha256, metadata.sha256.hex()},
                          {k_gcs_meta_size, std::to_string(metadata.size.count())}};
    if (metadata.chunks) out[k_gcs_meta_chunks] = cloud::encode_chunk_metadata(*metadata.chunks);
    return out;
  }

  // The bytes a 308's "Range: bytes=0-N" says the server holds (0 without the header).
  static std::uint64_t persisted_from(const net::HttpResponse& response) {
    auto range = response.header("Range");
    if (!range) return 0;
    const auto dash = range->find('-');
    if (dash == std::string_view::npos) return 0;
    auto last = util::parse_decimal(range->substr(dash + 1));
    return last ? *last + 1 : 0;
  }

  // Asks a resumable session how many bytes it holds ("Content-Range: bytes */<total>").
  Result<std::uint64_t> persisted_bytes(const std::string& session, std::uint64_t total) {
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = session;
    request.body = std::string();
    request.headers.push_back({"Content-Range", "bytes */" + std::to_string(total)});
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 200 || response->status == 201) return total;
    return persisted_from(*response);
  }

  Error no_bucket() const {
    return Error{ErrorCode::not_found, "the bucket " + options_.bucket + " does not exist at " + endpoint_};
  }

  const GcsTierOptions options_;
  const cloud::CredentialEnv env_;
  const std::shared_ptr<net::HttpClient> http_;
  std::once_flag resolved_;
  std::optional<Error> resolve_error_;
  std::string endpoint_;
  bool emulator_ = false;
  std::shared_ptr<cloud::TokenProvider> provider_;
  std::shared_ptr<net::RequestAuth> auth_;
};

}  // namespace

std::string gcs::describe_gcs_error(long status, std::string_view body) {
  const auto document = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object() || !document.contains("error") || !document["error"].is_object()) return "";
  const auto& error = document["error"];
  std::string message;
  if (error.contains("message") && error["message"].is_string()) message = error["message"].get<std::string>();
  const long code = error.contains("code") && error["code"].is_number_integer() ? error["code"].get<long>() : status;
  if (message.empty()) return "";
  const std::string said = "GCS " + std::to_string(code) + ": " + message;
  std::string lower = message;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (code == 404 && lower.find("bucket") != std::string::npos) {
    return "the bucket does not exist (" + said + "); check the tier's bucket and endpoint_url";
  }
  if (code == 401) {
    return "the service refused the credentials (" + said +
           "); check GOOGLE_APPLICATION_CREDENTIALS, or run gcloud auth application-default login";
  }
  if (code == 403) {
    return "access denied (" + said +
           "); the account in use needs roles/storage.objectAdmin (or storage.objects.* permissions) on the bucket";
  }
  return said;
}

Result<gcs::ObjectListPage> gcs::parse_object_list(const std::string& body, const std::string& location) {
  auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object()) return Error{ErrorCode::remote, "listing of " + location + ": not JSON"};
  ObjectListPage page;
  if (auto items = json.find("items"); items != json.end() && items->is_array()) {
    for (const auto& item : *items) {
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) continue;
      const std::string name = item["name"].get<std::string>();
      const auto size = json_number(item, "size");
      const auto updated = item.contains("updated") && item["updated"].is_string()
                               ? util::parse_rfc3339(item["updated"].get<std::string>())
                               : std::nullopt;
      if (!size || !updated) {
        return Error{ErrorCode::remote, "listing of " + location + ": object '" + name + "' has no readable " +
                                            (size ? "updated time" : "size")};
      }
      page.objects.push_back(ListedObject{name, Bytes{*size}, *updated});
    }
  }
  auto next = json.find("nextPageToken");
  if (next != json.end() && next->is_string() && !next->get<std::string>().empty())
    page.next_page_token = next->get<std::string>();
  return page;
}

Result<std::shared_ptr<Tier>> make_gcs_tier(GcsTierOptions options) {
  return gcs::make_gcs_tier_with_env(std::move(options), cloud::CredentialEnv::from_process());
}

Result<std::shared_ptr<Tier>> gcs::make_gcs_tier_with_env(GcsTierOptions options, cloud::CredentialEnv env) {
  DATAVO_TRY(cloud::validate_cloud_options(options.remote));
  if (options.bucket.empty()) return Error{ErrorCode::invalid_argument, "a GCS tier needs a bucket"};
  if (options.remote.part_size.count() % k_chunk_granularity != 0) {
    return Error{
        ErrorCode::invalid_argument,
        "tier '" + options.remote.name + "': part_size must be a multiple of 256 KiB for GCS resumable uploads"};
  }
  if (options.remote.name.empty()) options.remote.name = options.bucket;
  CloudTierOptions remote = options.remote;
  return cloud::make_blob_tier(std::move(remote), std::make_unique<GcsBackend>(std::move(options), std::move(env)));
}

}  // namespace datavo
