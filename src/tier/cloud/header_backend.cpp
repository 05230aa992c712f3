#include "tier/cloud/header_backend.hpp"

#include "tier/cloud/chunk_metadata.hpp"
#include "util/decimal.hpp"

namespace datavo::cloud {

Result<std::optional<ObjectInfo>> HeaderBackend::get(const std::string& name, std::optional<ByteRange> range,
                                                     const std::string* pin, ByteSink& sink) {
  net::HttpRequest request;
  request.url = object_url(name);
  if (range) {
    request.headers.push_back({dialect_.range_header, "bytes=" + std::to_string(range->first) + "-" +
                                                          std::to_string(range->first + range->length - 1)});
  }
  if (pin) request.headers.push_back({"If-Match", *pin});
  request.sink = &sink;
  request.accepted_statuses = {404, 412, 416};
  auto response = perform(request);
  if (!response) return std::move(response).error();
  if (response->status == 404) {
    DATAVO_TRY(container_exists(*response));
    return std::optional<ObjectInfo>{};
  }
  if (response->status == 412) return Error{ErrorCode::conflict, name + " changed (HTTP 412 to If-Match)"};
  if (response->status == 416) {
    // A range of an empty object: S3 and Azure answer InvalidRange. Ask for the whole (empty) object.
    if (range && range->first == 0) return get(name, std::nullopt, pin, sink);
    return Error{ErrorCode::remote, name + ": HTTP 416 to a range inside the " + dialect_.noun};
  }
  return std::optional<ObjectInfo>{info_of(*response)};
}

Result<std::optional<ObjectInfo>> HeaderBackend::head(const std::string& name) {
  net::HttpRequest request;
  request.method = net::HttpMethod::head;
  request.url = object_url(name);
  add_head_headers(request.headers);
  request.accepted_statuses = {404};
  auto response = perform(request);
  if (!response) return std::move(response).error();
  if (response->status == 404) return std::optional<ObjectInfo>{};
  return std::optional<ObjectInfo>{info_of(*response)};
}

Result<std::vector<ListedObject>> HeaderBackend::list_pages(
    const std::function<std::string(const std::string& token)>& page_url, const PageReader& read_page) {
  std::vector<ListedObject> out;
  std::string token;
  for (;;) {
    net::HttpRequest request;
    request.url = page_url(token);
    request.accepted_statuses = {404};
    auto response = perform(request);
    if (!response) return std::move(response).error();
    if (response->status == 404) {
      DATAVO_TRY(container_exists(*response));
      return out;
    }
    auto next = read_page(response->body, out);
    if (!next) return std::move(next).error();
    if (next->empty()) return out;
    token = std::move(*next);
  }
}

ObjectInfo HeaderBackend::info_of(const net::HttpResponse& response) const {
  ObjectInfo info;
  info.size = Bytes{response.entity_size.value_or(response.body_bytes.count())};
  if (auto etag = response.header("ETag")) info.version = std::string(*etag);
  if (auto sha = response.header(dialect_.meta_sha256)) {
    if (auto parsed = Sha256::parse(*sha)) info.sha256 = *parsed;
  }
  if (auto size = response.header(dialect_.meta_size)) {
    if (auto parsed = util::parse_decimal(*size)) info.recorded_size = Bytes{*parsed};
  }
  if (auto chunks = response.header(dialect_.meta_chunks)) info.recorded_chunks = std::string(*chunks);
  read_service_checksum(response, info);
  return info;
}

void HeaderBackend::add_metadata(net::HttpHeaders& headers, const EntryMetadata& metadata) const {
  headers.push_back({dialect_.meta_sha256, metadata.sha256.hex()});
  headers.push_back({dialect_.meta_size, std::to_string(metadata.size.count())});
  if (metadata.chunks) headers.push_back({dialect_.meta_chunks, encode_chunk_metadata(*metadata.chunks)});
}

}  // namespace datavo::cloud
