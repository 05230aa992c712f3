// Stream tickets (docs/protocol.md, "POST /v1/stream-tickets"): the request, the ticket and the 202 "preparing"
// answer.
#include <algorithm>

#include "datavo/protocol.hpp"
#include "protocol/json_fields.hpp"

namespace datavo {
namespace {

constexpr std::string_view k_request_context = "malformed ticket request: ";
constexpr std::string_view k_ticket_context = "malformed ticket: ";
constexpr std::string_view k_preparing_context = "malformed preparing answer: ";

Result<void> read_request_keys(const protocol::JsonFields& fields, std::vector<std::string>& keys) {
  auto array = fields.array("keys");
  if (!array) return std::move(array).error();
  if ((*array)->empty()) return fields.refuse("keys", "is empty");
  DATAVO_TRY(fields.strings("keys", **array, keys));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (auto valid = protocol::validate_name("key", keys[i]); !valid)
      return fields.refuse("keys[" + std::to_string(i) + "]", "is invalid: " + valid.error().message);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return ok();
}

// A content hash in `field`, refused naming that field.
Result<ContentHash> read_content_hash(const protocol::JsonFields& fields, const char* field) {
  auto text = fields.string(field);
  if (!text) return std::move(text).error();
  auto hash = ContentHash::parse(*text);
  if (!hash) return fields.refuse(field, "is invalid: " + hash.error().message);
  return std::move(*hash);
}

// The chunk fields of a ticket (all three or none), checked against each other and the ticket's size.
Result<std::optional<ChunkDigests>> read_chunks(const protocol::JsonFields& fields, Bytes size) {
  const bool any = fields.has("chunk_size") || fields.has("chunks") || fields.has("chunks_sha256");
  if (!any) return std::optional<ChunkDigests>{};
  auto chunk_size = fields.positive_number("chunk_size");
  if (!chunk_size) return std::move(chunk_size).error();
  auto array = fields.array("chunks");
  if (!array) return std::move(array).error();
  auto binding_text = fields.string("chunks_sha256");
  if (!binding_text) return std::move(binding_text).error();
  auto binding = Sha256::parse(*binding_text);
  if (!binding) return fields.refuse("chunks_sha256", "is invalid: " + binding.error().message);
  std::vector<std::string> texts;
  DATAVO_TRY(fields.strings("chunks", **array, texts));
  ChunkDigests chunks{Bytes{*chunk_size}, {}};
  chunks.digests.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto digest = Sha256::parse(texts[i]);
    if (!digest) return fields.refuse("chunks[" + std::to_string(i) + "]", "is invalid: " + digest.error().message);
    chunks.digests.push_back(*digest);
  }
  if (auto covers = chunks.check_covers(size, ErrorCode::remote, "size"); !covers)
    return fields.refuse("chunks", "does not fit the ticket: " + covers.error().message);
  if (chunks.binding() != *binding)
    return fields.refuse("chunks_sha256", "is not the SHA-256 of the canonical list of \"chunks\" (" +
                                              chunks.binding().hex() + "): refusing the list");
  return std::optional<ChunkDigests>{std::move(chunks)};
}

}  // namespace

Result<TicketRequest> TicketRequest::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::invalid_argument, k_request_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields fields(*json, ErrorCode::invalid_argument, std::string(k_request_context));
  TicketRequest request;
  for (auto [field, out] : {std::pair{"dataset", &request.name.dataset}, std::pair{"split", &request.name.split}}) {
    auto text = fields.string(field);
    if (!text) return std::move(text).error();
    if (auto valid = protocol::validate_name(field, *text); !valid)
      return fields.refuse(field, "is invalid: " + valid.error().message);
    *out = std::move(*text);
  }
  auto revision = fields.positive_number("revision");
  if (!revision) return std::move(revision).error();
  request.revision = *revision;
  auto shard = fields.unsigned_number("shard_index");
  if (!shard) return std::move(shard).error();
  request.shard_index = *shard;
  DATAVO_TRY(read_request_keys(fields, request.keys));
  return request;
}

std::string TicketRequest::to_json() const {
  const nlohmann::json body = {{"dataset", name.dataset},
                               {"split", name.split},
                               {"revision", revision},
                               {"shard_index", shard_index},
                               {"keys", keys}};
  return protocol::dump(body);
}

Result<StreamTicket> StreamTicket::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::remote, k_ticket_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields fields(*json, ErrorCode::remote, std::string(k_ticket_context));
  auto hash = read_content_hash(fields, "content_hash");
  if (!hash) return std::move(hash).error();
  auto size = fields.unsigned_number("size");
  if (!size) return std::move(size).error();
  auto sha_text = fields.string("sha256");
  if (!sha_text) return std::move(sha_text).error();
  auto sha = Sha256::parse(*sha_text);
  if (!sha) return fields.refuse("sha256", "is invalid: " + sha.error().message);
  auto url = fields.non_empty_string("url");
  if (!url) return std::move(url).error();
  auto expires_at = fields.integer("expires_at");
  if (!expires_at) return std::move(expires_at).error();
  auto chunks = read_chunks(fields, Bytes{*size});
  if (!chunks) return std::move(chunks).error();
  return StreamTicket{std::move(*hash), Bytes{*size}, *sha, std::move(*url), *expires_at, std::move(*chunks)};
}

std::string StreamTicket::to_json() const {
  nlohmann::json body = {{"content_hash", content_hash.hex()},
                         {"size", size.count()},
                         {"sha256", sha256.hex()},
                         {"url", url},
                         {"expires_at", expires_at}};
  if (chunks) {
    nlohmann::json list = nlohmann::json::array();
    for (const Sha256& digest : chunks->digests) list.push_back(digest.hex());
    body["chunk_size"] = chunks->chunk_size.count();
    body["chunks"] = std::move(list);
    body["chunks_sha256"] = chunks->binding().hex();
  }
  return protocol::dump(body);
}

Result<TicketPreparing> TicketPreparing::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::remote, k_preparing_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields fields(*json, ErrorCode::remote, std::string(k_preparing_context));
  auto status = fields.string("status");
  if (!status) return std::move(status).error();
  if (*status != "preparing") return fields.refuse("status", "is " + protocol::quote(*status) + ", not \"preparing\"");
  auto hash = read_content_hash(fields, "content_hash");
  if (!hash) return std::move(hash).error();
  return TicketPreparing{std::move(*hash)};
}

std::string TicketPreparing::to_json() const {
  const nlohmann::json body = {{"status", "preparing"}, {"content_hash", content_hash.hex()}};
  return protocol::dump(body);
}

}  // namespace datavo
