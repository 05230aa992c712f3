// The Azure Blob backend of the remote-tier layer: Get Blob with x-ms-range pinned by If-Match, Put Blob for small
// objects and Put Block + Put Block List for large ones, If-None-Match: * as the conditional create (409
// BlobAlreadyExists or 412), metadata in x-ms-meta-datavo_sha256 / datavo_size / datavo_chunks (Azure metadata names
// cannot hold '-'), and SAS, SharedKey or bearer tokens as azure/azure_auth.hpp picks them.
#include "tier/azure/azure_tier.hpp"

#include <mutex>

#include "datavo/azure_blob_tier.hpp"
#include "tier/azure/azure_auth.hpp"
#include "tier/cloud/blob_tier.hpp"
#include "tier/cloud/checksums.hpp"
#include "tier/cloud/header_backend.hpp"
#include "tier/cloud/xml.hpp"
#include "util/base64.hpp"
#include "util/decimal.hpp"
#include "util/fs.hpp"
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

// Put Block takes at most 4000 MiB (service version 2019-12-12 and later).
constexpr Bytes k_max_block_size{4000ull * 1024 * 1024};
constexpr const char* k_azure_meta_sha256 = "x-ms-meta-datavo_sha256";
constexpr const char* k_azure_meta_size = "x-ms-meta-datavo_size";
constexpr const char* k_azure_meta_chunks = "x-ms-meta-datavo_chunks";

// The x-ms-error-code of an Azure answer (also in the XML body's <Code>).
std::string error_code(const net::HttpResponse& response) {
  if (auto code = response.header("x-ms-error-code")) return std::string(*code);
  if (auto fields = cloud::xml_child_texts(response.body, "Error"); fields && fields->count("Code"))
    return fields->at("Code");
  return "";
}

class AzureBackend final : public cloud::HeaderBackend {
 public:
  AzureBackend(AzureBlobTierOptions options, cloud::CredentialEnv env)
      : HeaderBackend({"x-ms-range", k_azure_meta_sha256, k_azure_meta_size, k_azure_meta_chunks, "blob"}),
        options_(std::move(options)),
        env_(std::move(env)),
        http_(std::make_shared<net::HttpClient>(options_.remote.transport, env_.clock)) {
    // A SAS given inside the container URL (as the portal copies it) serves as the tier's sas_token.
    container_ = options_.container_url;
    if (const auto query = container_.find('?'); query != std::string::npos) {
      if (!options_.sas_token) options_.sas_token = container_.substr(query + 1);
      container_.resize(query);
    }
    while (container_.ends_with('/')) container_.pop_back();
  }

  std::string_view type() const override { return "azure_blob"; }
  std::string_view conditional_create() const override { return "If-None-Match: *"; }
  std::string location() const override { return container_; }

  Result<std::string> credentials() override {
    DATAVO_TRY(resolve());
    if (!tokens_) return description_;
    // As S3 and GCS do: the credentials step obtains one, so that `cache check` fails here when there is none,
    // not at the first request.
    auto token = tokens_->get();
    if (!token) return std::move(token).error();
    return description_ + ", from " + tokens_->describe();
  }

  Result<InstallOutcome> put(const std::string& name, const net::RequestBody& body,
                             const std::optional<EntryMetadata>& metadata, Overwrite overwrite) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = blob_url(name);
    request.body = body;
    request.headers.push_back({"x-ms-blob-type", "BlockBlob"});
    request.headers.push_back({"Content-Type", "application/octet-stream"});
    if (overwrite == Overwrite::no) request.headers.push_back({"If-None-Match", "*"});
    if (metadata) {
      add_metadata(request.headers, *metadata);
      // One read of a blob of at most part_size: cheap enough for Azure to check the bytes it stores.
      if (const auto* file = std::get_if<net::FileBody>(&body)) {
        auto md5 = cloud::md5_of_range(file->fd, file->offset, file->size.count());
        if (!md5) return std::move(md5).error();
        request.headers.push_back({"Content-MD5", util::base64_encode(*md5)});
      }
    }
    return install(request, name);
  }

  Result<std::string> start_upload(const std::string&, const EntryMetadata&) override {
    // Blocks need no session: the id is the block-id prefix of this upload, so that two uploads of one blob
    // never mix their blocks.
    return util::random_hex(8);
  }

  Result<UploadedPart> upload_part(const std::string& name, const std::string& upload_id, int number,
                                   const net::FileBody& part) override {
    const std::string block_id = this->block_id(upload_id, number);
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = blob_url(name, "comp=block&blockid=" + util::percent_encode(block_id));
    request.body = part;
    request.headers.push_back({"Content-Type", "application/octet-stream"});
    request.idempotent = true;
    auto response = perform(request);
    if (!response) return std::move(response).error();
    return UploadedPart{number, block_id, "", std::nullopt};
  }

  Result<InstallOutcome> finish_upload(const std::string& name, const std::string&,
                                       const std::vector<UploadedPart>& parts, const EntryMetadata& metadata) override {
    std::string body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
    for (const auto& part : parts) body += "<Latest>" + part.etag + "</Latest>";
    body += "</BlockList>";
    net::HttpRequest request;
    request.method = net::HttpMethod::put;
    request.url = blob_url(name, "comp=blocklist");
    request.headers.push_back({"Content-Type", "application/xml"});
    request.headers.push_back({"x-ms-blob-content-type", "application/octet-stream"});
    request.headers.push_back({"If-None-Match", "*"});
    add_metadata(request.headers, metadata);
    request.body = std::move(body);
    return install(request, name);
  }

  Result<void> abort_upload(const std::string&, const std::string&) override {
    // Uncommitted blocks cost nothing once abandoned: Azure discards them after a week, and no Put Block List
    // will ever name them.
    return {};
  }

  Result<bool> remove(const std::string& name) override {
    net::HttpRequest request;
    request.method = net::HttpMethod::delete_;
    request.url = blob_url(name);
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 404) {
      DATAVO_TRY(container_exists(*response));
      return false;
    }
    return true;
  }

  Result<std::vector<ListedObject>> list(const std::string& prefix) override {
    auto page_url = [&](const std::string& marker) {
      std::string query = "restype=container&comp=list&prefix=" + util::percent_encode(prefix);
      if (!marker.empty()) query += "&marker=" + util::percent_encode(marker);
      return container_ + "?" + query;
    };
    return list_pages(page_url, [&](const std::string& body, std::vector<ListedObject>& out) -> Result<std::string> {
      auto page = azure::parse_blob_list(body, container_);
      if (!page) return std::move(page).error();
      for (auto& blob : page->blobs) out.push_back(std::move(blob));
      return page->next_marker;
    });
  }

 private:
  Result<void> resolve() {
    std::call_once(resolved_, [this] {
      azure::AzureAuthConfig config{container_, options_.sas_token.value_or(""),
                                    options_.managed_identity_client_id.value_or("")};
      auto auth = azure::make_azure_auth(config, env_, http_);
      if (!auth) {
        resolve_error_ = std::move(auth).error();
        return;
      }
      auth_ = auth->auth;
      tokens_ = auth->tokens;
      description_ = auth->description;
    });
    if (resolve_error_) return *resolve_error_;
    return {};
  }

  Result<net::HttpResponse> perform(net::HttpRequest& request) override {
    DATAVO_TRY(resolve());
    request.auth = auth_.get();
    request.describe_error_body = &azure::describe_azure_error;
    return http_->perform(request);
  }

  std::string blob_url(const std::string& name, const std::string& query = "") const {
    std::string url = container_ + "/" + util::percent_encode(name, util::Slash::keep);
    return query.empty() ? url : url + "?" + query;
  }

  // Block ids of one blob must all have the same length: "<upload prefix>-<6-digit part number>", base64.
  static std::string block_id(const std::string& upload_id, int number) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%06d", number);
    return util::base64_encode(upload_id + "-" + digits);
  }

  std::string object_url(const std::string& name) override { return blob_url(name); }

  Result<void> container_exists(const net::HttpResponse& response) const override {
    if (error_code(response) == "ContainerNotFound") {
      return Error{ErrorCode::not_found, "the container " + container_ + " does not exist"};
    }
    return {};
  }

  // The one write that makes a blob (Put Blob, or Put Block List), conditional on If-None-Match: a 412 or a 409
  // BlobAlreadyExists means the blob was there already.
  Result<InstallOutcome> install(net::HttpRequest& request, const std::string& name) {
    request.idempotent = true;
    request.accepted_statuses = {409, 412};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 412) return InstallOutcome::already_present;
    if (response->status == 409) return already_exists(*response, name);
    return InstallOutcome::installed;
  }

  static Result<InstallOutcome> already_exists(const net::HttpResponse& response, const std::string& name) {
    const std::string code = error_code(response);
    if (code == "BlobAlreadyExists" || code.empty()) return InstallOutcome::already_present;
    return Error{ErrorCode::remote, "writing " + name + ": HTTP 409 " + code};
  }

  AzureBlobTierOptions options_;
  const cloud::CredentialEnv env_;
  const std::shared_ptr<net::HttpClient> http_;
  std::string container_;
  std::once_flag resolved_;
  std::optional<Error> resolve_error_;
  std::shared_ptr<net::RequestAuth> auth_;
  std::shared_ptr<cloud::TokenProvider> tokens_;  // the bearer mode's, else nullptr
  std::string description_;
};

}  // namespace

std::string azure::describe_azure_error(long, std::string_view body) {
  auto fields = cloud::xml_child_texts(body, "Error");
  if (!fields) return "";
  const std::string code = (*fields)["Code"];
  // Azure's message goes on with "RequestId:..." and "Time:..." lines: its first line says it.
  std::string message = (*fields)["Message"];
  message = std::string(util::trim(message.substr(0, message.find('\n'))));
  if (code.empty()) return "";
  const std::string said = "Azure " + code + (message.empty() ? "" : ": " + message);
  if (code == "ContainerNotFound") {
    return "the container does not exist (" + said + "); check container_url, or create the container";
  }
  if (code == "AuthenticationFailed") {
    return "the service refused the request's authentication (" + said +
           "); check the account key or the SAS token (and its expiry), and the machine's clock";
  }
  if (code == "AuthorizationPermissionMismatch" || code == "AuthorizationFailure") {
    return "access denied (" + said +
           "); the identity in use needs the Storage Blob Data Contributor role (or a SAS with read, write, delete "
           "and list) on the container";
  }
  return said;
}

Result<azure::BlobListPage> azure::parse_blob_list(const std::string& body, const std::string& container) {
  // Each <Blob> holds its <Name> and one <Properties>: the two lists are in step.
  auto blobs = cloud::xml_records(body, "Blob");
  auto properties = cloud::xml_records(body, "Properties");
  auto top = cloud::xml_child_texts(body, "EnumerationResults");
  if (!blobs || !properties || !top || blobs->size() != properties->size())
    return Error{ErrorCode::remote, "List Blobs of " + container + ": malformed XML"};
  BlobListPage page;
  for (std::size_t i = 0; i < blobs->size(); ++i) {
    const std::string& name = (*blobs)[i]["Name"];
    auto size = util::parse_decimal((*properties)[i]["Content-Length"]);
    auto modified = util::parse_http_date((*properties)[i]["Last-Modified"]);
    if (!size || !modified) {
      return Error{ErrorCode::remote, "List Blobs of " + container + ": blob '" + name + "' has no readable " +
                                          (size ? "Last-Modified" : "Content-Length")};
    }
    page.blobs.push_back(ListedObject{name, Bytes{*size}, *modified});
  }
  page.next_marker = (*top)["NextMarker"];
  return page;
}

Result<std::shared_ptr<Tier>> make_azure_blob_tier(AzureBlobTierOptions options) {
  return azure::make_azure_blob_tier_with_env(std::move(options), cloud::CredentialEnv::from_process());
}

Result<std::shared_ptr<Tier>> azure::make_azure_blob_tier_with_env(AzureBlobTierOptions options,
                                                                   cloud::CredentialEnv env) {
  DATAVO_TRY(cloud::validate_cloud_options(options.remote));
  if (options.container_url.empty())
    return Error{ErrorCode::invalid_argument, "an Azure Blob tier needs a container_url"};
  if (options.remote.part_size > k_max_block_size) {
    return Error{ErrorCode::invalid_argument, "tier '" + options.remote.name +
                                                  "': part_size must be at most 4000MiB for Azure Blob (its largest "
                                                  "block)"};
  }
  if (options.remote.name.empty())
    options.remote.name = options.container_url.substr(0, options.container_url.find('?'));
  CloudTierOptions remote = options.remote;
  return cloud::make_blob_tier(std::move(remote), std::make_unique<AzureBackend>(std::move(options), std::move(env)));
}

}  // namespace datavo
