// HeaderBackend: the reads that S3 and Azure Blob answer alike, written once for both backends. One object per
// URL; a ranged GET carries its range in a header (S3 "Range", Azure "x-ms-range") and its pin in If-Match (the
// ETag); a HEAD describes the object; Datavo's metadata (datavo-sha256, datavo-size, datavo-chunks) travels in
// headers of the service's own metadata prefix. The statuses mean the same on both: 404 a miss (or, when the answer
// says so, a missing bucket or container), 412 an object that changed (ErrorCode::conflict), 416 a range of an empty
// object (read whole instead).
//
// A subclass (s3/s3_tier.cpp, azure/azure_tier.cpp) builds URLs, authenticates and sends requests, and says when
// a 404 names the container; its other BlobBackend methods are its own. Thread safety as BlobBackend's.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tier/cloud/blob_backend.hpp"

namespace datavo::cloud {

// What differs between the services in these reads: names only.
struct HeaderDialect {
  std::string range_header;  // "Range" (S3) or "x-ms-range" (Azure)
  std::string meta_sha256;   // the response / request header of datavo-sha256, e.g. "x-amz-meta-datavo-sha256"
  std::string meta_size;     // the same for datavo-size
  std::string meta_chunks;   // the same for datavo-chunks
  std::string noun;          // "object" or "blob", in error messages
};

class HeaderBackend : public BlobBackend {
 public:
  Result<std::optional<ObjectInfo>> get(const std::string& name, std::optional<ByteRange> range, const std::string* pin,
                                        ByteSink& sink) override;
  Result<std::optional<ObjectInfo>> head(const std::string& name) override;

 protected:
  explicit HeaderBackend(HeaderDialect dialect) : dialect_(std::move(dialect)) {}

  // The URL of object `name`.
  virtual std::string object_url(const std::string& name) = 0;
  // Sends `request` with the backend's credentials (it sets request.auth).
  virtual Result<net::HttpResponse> perform(net::HttpRequest& request) = 0;
  // A 404 answer that names the bucket or container as missing: an ErrorCode::not_found Error; else success.
  virtual Result<void> container_exists(const net::HttpResponse& response) const = 0;

  // The next page's token from one page of a listing (empty after the last page), its objects appended to `out`.
  using PageReader = std::function<Result<std::string>(const std::string& body, std::vector<ListedObject>& out)>;
  // Every object of a paginated XML listing: GETs page_url(token), the empty token for the first page, until
  // read_page says there is no next page. A 404 is an empty listing unless container_exists() says otherwise.
  Result<std::vector<ListedObject>> list_pages(const std::function<std::string(const std::string& token)>& page_url,
                                               const PageReader& read_page);

  // The object as an answer to a GET or HEAD describes it (size, ETag, Datavo's metadata when present, then
  // read_service_checksum).
  ObjectInfo info_of(const net::HttpResponse& response) const;
  // Headers that a HEAD carries besides the URL's (S3: x-amz-checksum-mode: ENABLED). Default: none.
  virtual void add_head_headers(net::HttpHeaders& /*headers*/) const {}
  // Sets info.service_sha256 from an answer when the service keeps a whole-object SHA-256 (S3). Default: none.
  virtual void read_service_checksum(const net::HttpResponse& /*response*/, ObjectInfo& /*info*/) const {}
  // Datavo's metadata of an entry, as request headers.
  void add_metadata(net::HttpHeaders& headers, const EntryMetadata& metadata) const;

 private:
  const HeaderDialect dialect_;
};

}  // namespace datavo::cloud
