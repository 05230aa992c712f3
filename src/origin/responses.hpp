// The error and JSON answers of the origin server (docs/protocol.md, "Errors"), and Refusal: an error answer
// decided away from the response it goes into (a lookup, a background build).
//
// Thread safety: reentrant functions over the caller's Response.
#pragma once

#include <string>

#include "datavo/result.hpp"
#include "origin/httplib_config.hpp"

namespace datavo::origin {

// The status and message of an error answer.
struct Refusal {
  int status = 500;
  std::string message;
};

// `res` becomes the error answer: `status` with the protocol's error body (ErrorBody) naming `message`.
void send_error(httplib::Response& res, int status, const std::string& message);
void send_refusal(httplib::Response& res, const Refusal& refusal);
// `res` becomes `status` with `json_body` as an application/json body.
void send_json(httplib::Response& res, std::string json_body, int status = 200);
// The refusal for a store Error: only a corrupt store or an I/O fault gets here, so it is a 500 that names the
// error's code and no path; the Error itself is logged.
Refusal store_failure(const Error& error);

}  // namespace datavo::origin
