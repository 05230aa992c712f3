// The S3 backend of the remote-tier layer: S3's REST requests (path-style or virtual-hosted), SigV4 through
// make_sigv4_auth, the AWS default credential chain (aws_credentials.hpp), and S3's error mapping. Everything else is
// the layer's (src/tier/cloud/blob_tier.cpp).
#include "datavo/s3_tier.hpp"

#include <algorithm>
#include <mutex>

#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/checksums.hpp"
#include "tier/cloud/header_backend.hpp"
#include "tier/cloud/xml.hpp"
#include "tier/s3/aws_config.hpp"
#include "tier/s3/aws_credentials.hpp"
#include "tier/s3/s3_tier.hpp"
#include "tier/s3/s3_type.hpp"
#include "tier/s3/sigv4.hpp"
#include "util/base64.hpp"
#include "util/decimal.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/rfc3339.hpp"
#include "util/text.hpp"

namespace datavo {
namespace {

using cloud::ByteRange;
using cloud::EntryMetadata;
using cloud::ListedObject;
using cloud::ObjectInfo;
using cloud::Overwrite;
using cloud::UploadedPart;

constexpr const char* k_default_region = "us-east-1";
constexpr const char* k_s3_meta_sha256 = "x-amz-meta-datavo-sha256";
constexpr const char* k_s3_meta_size = "x-amz-meta-datavo-size";
constexpr const char* k_s3_meta_chunks = "x-amz-meta-datavo-chunks";

std::string raw_digest(const Sha256& digest) {
  return std::string(reinterpret_cast<const char*>(digest.raw().data()), digest.raw().size());
}

std::string xml_escape(std::string_view text) {
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

class S3Backend final : public cloud::HeaderBackend {
 public:
  S3Backend(S3TierOptions options, cloud::CredentialEnv env)
      : HeaderBackend({"Range", k_s3_meta_sha256, k_s3_meta_size, k_s3_meta_chunks, "object"}),
        options_(std::move(options)),
        env_(std::move(env)),
        http_(std::make_shared<net::HttpClient>(options_.remote.transport, env_.clock)) {}

  std::string_view type() const override { return "s3"; }
  std::string_view conditional_create() const override { return "If-None-Match: *"; }
  std::string location() const override { return "s3://" + options_.bucket; }

  Result<std::string> credentials() override {
    DATAVO_TRY(resolve());
    auto credentials = provider_->get();
    if (!credentials) return std::move(credentials).error();
    return credentials->source + "; endpoint " + endpoint_ + ", region " + region_ +
           (path_style_ ? ", path-style" : ", virtual-hosted");
  }

  Result<InstallOutcome> put(const std::string& name, const net::RequestBody& body,
                             const std::optional<EntryMetadata>& metadata, Overwrite overwrite) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = url(name);
    request.body = body;
    request.headers.push_back({"Content-Type", "application/octet-stream"});
    if (overwrite == Overwrite::no) request.headers.push_back({"If-None-Match", "*"});
    if (metadata) {
      add_metadata(request.headers, *metadata);
      // S3 checks the bytes against this and refuses a corrupt upload; the signature covers them through it too.
      request.headers.push_back({"x-amz-checksum-sha256", util::base64_encode(raw_digest(metadata->sha256))});
      // Which algorithm that is, as the SDKs say it: S3 keeps the checksum either way (and `cache verify` reads it
      // back), S3-compatible servers such as moto keep it only with this header.
      request.headers.push_back({"x-amz-sdk-checksum-algorithm", "SHA256"});
      request.headers.push_back({"x-amz-content-sha256", metadata->sha256.hex()});
    }
    request.accepted_statuses = {409, 412};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 412 || response->status == 409) return InstallOutcome::already_present;
    return InstallOutcome::installed;
  }

  Result<std::string> start_upload(const std::string& name, const EntryMetadata& metadata) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = url(name, {{"uploads", ""}});
    request.headers.push_back({"Content-Type", "application/octet-stream"});
    request.headers.push_back({"x-amz-checksum-algorithm", "SHA256"});
    add_metadata(request.headers, metadata);
    auto response = perform(request);
    if (!response) return std::move(response).error();
    auto fields = cloud::xml_child_texts(response->body, "InitiateMultipartUploadResult");
    if (!fields || !fields->count("UploadId") || fields->at("UploadId").empty()) {
      return Error{ErrorCode::remote, "CreateMultipartUpload of " + name + " answered without an UploadId"};
    }
    return fields->at("UploadId");
  }

  Result<UploadedPart> upload_part(const std::string& name, const std::string& upload_id, int number,
                                   const net::FileBody& part) override {
    // S3 checks the part against its SHA-256, which the signature covers too; only S3 needs it, so it is hashed
    // here and not by the layer for every service.
    auto part_sha256 = cloud::sha256_of_range(part.fd, part.offset, part.size.count());
    if (!part_sha256) return std::move(part_sha256).error();
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = url(name, {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}});
    request.body = part;
    const std::string checksum = util::base64_encode(raw_digest(*part_sha256));
    request.headers.push_back({"x-amz-checksum-sha256", checksum});
    request.headers.push_back({"x-amz-content-sha256", part_sha256->hex()});
    auto response = perform(request);
    if (!response) return std::move(response).error();
    auto etag = response->header("ETag");
    if (!etag) return Error{ErrorCode::remote, "UploadPart " + std::to_string(number) + " of " + name + ": no ETag"};
    return UploadedPart{number, std::string(*etag), checksum};
  }

  Result<InstallOutcome> finish_upload(const std::string& name, const std::string& upload_id,
                                       const std::vector<UploadedPart>& parts, const EntryMetadata&) override {
    std::string body = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    for (const auto& part : parts) {
      body += "<Part><PartNumber>" + std::to_string(part.number) + "</PartNumber><ETag>" + xml_escape(part.etag) +
              "</ETag><ChecksumSHA256>" + part.checksum + "</ChecksumSHA256></Part>";
    }
    body += "</CompleteMultipartUpload>";
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = url(name, {{"uploadId", upload_id}});
    request.headers.push_back({"Content-Type", "application/xml"});
    request.headers.push_back({"If-None-Match", "*"});
    request.body = std::move(body);
    // Completing the same upload twice is harmless: the retry of a lost answer finds it done (or gets 404).
    request.idempotent = true;
    request.accepted_statuses = {409, 412};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 412 || response->status == 409) return InstallOutcome::already_present;
    // S3 may answer 200 and put the error in the body, after having streamed whitespace while it worked.
    if (auto error = s3::s3_error_code(response->body)) {
      if (*error == "PreconditionFailed" || *error == "ConditionalRequestConflict")
        return InstallOutcome::already_present;
      return Error{ErrorCode::remote, "CompleteMultipartUpload of " + name + " failed: " + *error};
    }
    return InstallOutcome::installed;
  }

  Result<void> abort_upload(const std::string& name, const std::string& upload_id) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::delete_;
    request.url = url(name, {{"uploadId", upload_id}});
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    return {};
  }

  Result<bool> remove(const std::string& name) override {
    // S3 answers 204 whether or not there was an object: ask first, so that `cache rm` can tell.
    auto existing = head(name);
    if (!existing) return std::move(existing).error();
    if (!*existing) return false;
    net::HttpRequest request;
    request.method = net::HttpMethod::delete_;
    request.url = url(name);
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    return response->status != 404;
  }

  Result<std::vector<ListedObject>> list(const std::string& prefix) override {
    auto page_url = [&](const std::string& token) {
      std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"}, {"prefix", prefix}};
      if (!token.empty()) query.emplace_back("continuation-token", token);
      return bucket_url(query);
    };
    return list_pages(page_url, [&](const std::string& body, std::vector<ListedObject>& out) -> Result<std::string> {
      auto records = cloud::xml_records(body, "Contents");
      auto top = cloud::xml_child_texts(body, "ListBucketResult");
      if (!records || !top) return Error{ErrorCode::remote, "ListObjectsV2 of " + location() + ": malformed XML"};
      for (auto& record : *records) {
        ListedObject object;
        object.name = record["Key"];
        object.size = Bytes{util::parse_decimal(record["Size"]).value_or(0)};
        object.last_modified =
            util::parse_rfc3339(record["LastModified"]).value_or(std::chrono::system_clock::time_point{});
        out.push_back(std::move(object));
      }
      if ((*top)["IsTruncated"] != "true") return std::string();
      std::string token = (*top)["NextContinuationToken"];
      if (token.empty()) return Error{ErrorCode::remote, "ListObjectsV2 of " + location() + ": truncated, no token"};
      return token;
    });
  }

 private:
  // Region, endpoint, addressing and credentials, resolved at first use: constructing does no I/O.
  Result<void> resolve() {
    std::call_once(resolved_once_, [this] {
      auto region = s3::resolve_region(options_.region, env_, options_.profile);
      if (!region) {
        resolve_error_ = std::move(region).error();
        return;
      }
      region_ = region->value_or(k_default_region);
      auto endpoint = s3::resolve_endpoint(options_.endpoint_url, env_);
      const bool custom = endpoint.has_value();
      // Its path encoded here, once: canonical_uri() signs each request's path encoded, so it must be sent so.
      endpoint_ = custom ? s3::encode_endpoint_path(*endpoint) : "https://s3." + region_ + ".amazonaws.com";
      while (endpoint_.ends_with('/')) endpoint_.pop_back();
      switch (options_.addressing_style) {
        case AddressingStyle::path: path_style_ = true; break;
        case AddressingStyle::virtual_hosted: path_style_ = false; break;
        case AddressingStyle::automatic:
          // As boto3: a custom endpoint is path-style; AWS is virtual-hosted unless the bucket name cannot be a
          // DNS label under TLS (it has dots).
          path_style_ = custom || options_.bucket.find('.') != std::string::npos;
          break;
      }
      provider_ = s3::make_default_credential_chain(env_, {options_.profile});
      auth_ = s3::make_sigv4_auth(provider_, region_, "s3", env_.clock);
      LOG_DEBUG("tier '" << options_.remote.name << "': " << endpoint_ << ", region " << region_
                         << (path_style_ ? ", path-style" : ", virtual-hosted"));
    });
    if (resolve_error_) return *resolve_error_;
    return {};
  }

  Result<net::HttpResponse> perform(net::HttpRequest& request) override {
    DATAVO_TRY(resolve());
    request.auth = auth_.get();
    request.describe_error_body = &s3::describe_s3_error;
    return http_->perform(request);
  }

  std::string base_for_bucket() const {
    if (path_style_) return endpoint_ + "/" + options_.bucket;
    const auto scheme_end = endpoint_.find("://");
    return endpoint_.substr(0, scheme_end + 3) + options_.bucket + "." + endpoint_.substr(scheme_end + 3);
  }

  std::string url(const std::string& name, const std::vector<std::pair<std::string, std::string>>& query = {}) {
    (void)resolve();
    std::string out = base_for_bucket() + "/" + util::percent_encode(name, util::Slash::keep);
    if (!query.empty()) out += "?" + s3::encode_query(query);
    return out;
  }

  std::string bucket_url(const std::vector<std::pair<std::string, std::string>>& query) {
    (void)resolve();
    // Path-style "/bucket?list-type=2", as boto3 sends it: s3rver refuses the signature of "/bucket/?..."
    // (it canonicalises the path without the slash). Virtual-hosted, the path is "/".
    return base_for_bucket() + (path_style_ ? "?" : "/?") + s3::encode_query(query);
  }

  std::string object_url(const std::string& name) override { return url(name); }

  void add_head_headers(net::HttpHeaders& headers) const override {
    headers.push_back({"x-amz-checksum-mode", "ENABLED"});
  }

  // A whole-object SHA-256 only: a multipart upload's is a checksum of the parts' checksums ("<base64>-<parts>",
  // x-amz-checksum-type COMPOSITE), which no recorded SHA-256 can be compared with.
  void read_service_checksum(const net::HttpResponse& response, ObjectInfo& info) const override {
    auto checksum = response.header("x-amz-checksum-sha256");
    if (!checksum || checksum->find('-') != std::string_view::npos) return;
    if (auto type = response.header("x-amz-checksum-type"); type && *type == "COMPOSITE") return;
    auto raw = util::base64_decode(*checksum);
    if (!raw || raw->size() != Sha256::Raw{}.size()) return;
    Sha256::Raw digest{};
    std::copy(raw->begin(), raw->end(), reinterpret_cast<char*>(digest.data()));
    info.service_sha256 = Sha256(digest);
  }

  // A 404 with NoSuchBucket is a missing bucket (an error that degrades the tier), not a missing object.
  Result<void> container_exists(const net::HttpResponse& response) const override {
    if (auto code = s3::s3_error_code(response.body); code && *code == "NoSuchBucket") {
      return Error{ErrorCode::not_found, "the bucket " + options_.bucket + " does not exist at " + endpoint_};
    }
    return {};
  }

  const S3TierOptions options_;
  const cloud::CredentialEnv env_;
  const std::shared_ptr<net::HttpClient> http_;
  std::once_flag resolved_once_;
  std::optional<Error> resolve_error_;
  std::string region_;
  std::string endpoint_;
  bool path_style_ = true;
  std::shared_ptr<s3::AwsCredentialProvider> provider_;
  std::shared_ptr<net::RequestAuth> auth_;
};

}  // namespace

std::string s3::describe_s3_error(long, std::string_view body) {
  auto fields = cloud::xml_child_texts(body, "Error");
  if (!fields) return "";
  const std::string code = (*fields)["Code"];
  const std::string message(util::trim((*fields)["Message"]));
  if (code.empty()) return "";
  const std::string said = "S3 " + code + (message.empty() ? "" : ": " + message);
  if (code == "NoSuchBucket")
    return "the bucket does not exist (" + said + "); check the tier's bucket and endpoint_url";
  if (code == "SignatureDoesNotMatch") {
    return "the server computed another signature (" + said +
           "); check the secret access key of the credentials in use and that endpoint_url is the server's URL";
  }
  if (code == "InvalidAccessKeyId") {
    return "the server does not know the access key id (" + said +
           "); check the credentials in use (AWS_ACCESS_KEY_ID, the profile) and that endpoint_url is the right server";
  }
  if (code == "ExpiredToken") {
    return "the session token has expired (" + said +
           "); renew the temporary credentials (aws sso login, a new AWS_SESSION_TOKEN)";
  }
  if (code == "AccessDenied") {
    return "access denied (" + said +
           "); the credentials in use need s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the bucket";
  }
  return said;
}

Result<std::shared_ptr<Tier>> make_s3_tier(S3TierOptions options) {
  return s3::make_s3_tier_with_env(std::move(options), cloud::CredentialEnv::from_process());
}

Result<std::shared_ptr<Tier>> s3::make_s3_tier_with_env(S3TierOptions options, cloud::CredentialEnv env) {
  DATAVO_TRY(cloud::validate_cloud_options(options.remote));
  if (auto problem = s3::bucket_name_problem(options.bucket); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "invalid S3 bucket name \"" + options.bucket + "\": " + problem};
  }
  if (options.remote.name.empty()) options.remote.name = options.bucket;
  CloudTierOptions remote = options.remote;
  return cloud::make_blob_tier(std::move(remote), std::make_unique<S3Backend>(std::move(options), std::move(env)));
}

}  // namespace datavo
