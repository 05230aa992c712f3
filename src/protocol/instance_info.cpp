// The identity of an origin (docs/protocol.md, "GET /v1/instance").
#include "datavo/protocol.hpp"
#include "protocol/json_fields.hpp"

namespace datavo {
namespace {

constexpr std::string_view k_instance_context = "malformed instance answer: ";

}  // namespace

Result<InstanceInfo> InstanceInfo::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::remote, k_instance_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields fields(*json, ErrorCode::remote, std::string(k_instance_context));
  InstanceInfo info;
  auto id = fields.non_empty_string("instance_id");
  if (!id) return std::move(id).error();
  info.instance_id = std::move(*id);
  if (fields.has("protocol_version")) {
    auto version = fields.unsigned_number("protocol_version");
    if (!version) return std::move(version).error();
    info.protocol_version = *version;
  }
  if (fields.has("server")) {
    auto server = fields.string("server");
    if (!server) return std::move(server).error();
    info.server = std::move(*server);
  }
  return info;
}

std::string InstanceInfo::to_json() const {
  const nlohmann::json body = {
      {"instance_id", instance_id}, {"protocol_version", protocol_version}, {"server", server}};
  return protocol::dump(body);
}

}  // namespace datavo
