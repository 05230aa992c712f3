#include "origin/responses.hpp"

#include "datavo/protocol.hpp"
#include "util/log.hpp"

namespace datavo::origin {

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, ErrorBody{protocol::error_code_for_status(status), message}.to_json(), status);
}

void send_refusal(httplib::Response& res, const Refusal& refusal) { send_error(res, refusal.status, refusal.message); }

void send_json(httplib::Response& res, std::string json_body, int status) {
  res.status = status;
  res.set_content(std::move(json_body), "application/json");
}

Refusal store_failure(const Error& error) {
  LOG_ERROR("origin: " << error.message);
  return Refusal{500, "the store failed: " + std::string(to_string(error.code))};
}

}  // namespace datavo::origin
