// The error body of every error answer (docs/protocol.md, "Errors").
#include "datavo/protocol.hpp"
#include "protocol/json_fields.hpp"

namespace datavo {
namespace {

constexpr std::string_view k_error_body_context = "malformed error body: ";

}  // namespace

const char* protocol::error_code_for_status(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 410: return "expired";
    case 413: return "payload_too_large";
    case 416: return "range_not_satisfiable";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal" : "error";
  }
}

Result<ErrorBody> ErrorBody::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::remote, k_error_body_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields top(*json, ErrorCode::remote, std::string(k_error_body_context));
  auto error = top.object("error");
  if (!error) return std::move(error).error();
  const protocol::JsonFields fields = top.nested(**error, "error.");
  auto code = fields.string("code");
  if (!code) return std::move(code).error();
  auto message = fields.string("message");
  if (!message) return std::move(message).error();
  return ErrorBody{std::move(*code), std::move(*message)};
}

std::string ErrorBody::to_json() const {
  const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
  return protocol::dump(body);
}

}  // namespace datavo
