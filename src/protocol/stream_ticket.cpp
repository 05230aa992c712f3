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
  return StreamTicket{std::move(*hash), Bytes{*size}, *sha, std::move(*url), *expires_at};
}

std::string StreamTicket::to_json() const {
  const nlohmann::json body = {{"content_hash", content_hash.hex()},
                               {"size", size.count()},
                               {"sha256", sha256.hex()},
                               {"url", url},
                               {"expires_at", expires_at}};
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
