#include "datavo/result.hpp"

#include <errno.h>

#include <cstring>

namespace datavo {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::config: return "config";
    case ErrorCode::io: return "io";
    case ErrorCode::permission_denied: return "permission_denied";
    case ErrorCode::no_space: return "no_space";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::capacity: return "capacity";
    case ErrorCode::integrity: return "integrity";
    case ErrorCode::remote: return "remote";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::conflict: return "conflict";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::internal: return "internal";
    case ErrorCode::cancelled: return "cancelled";
  }
  return "internal";
}

Error Error::from_errno(int err, std::string context) {
  ErrorCode code = ErrorCode::io;
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS: code = ErrorCode::permission_denied; break;
    case ENOSPC:
    case EDQUOT: code = ErrorCode::no_space; break;
    case ENOENT: code = ErrorCode::not_found; break;
    case ENOSYS:
    case ENOTSUP: code = ErrorCode::unsupported; break;
    case ETIMEDOUT: code = ErrorCode::timeout; break;
    default: break;
  }
  context += ": ";
  context += std::strerror(err);
  return Error{code, std::move(context), err};
}

bool is_unreachable(const Error& error) {
  return error.code == ErrorCode::remote &&
         (error.sys_errno == ECONNREFUSED || error.sys_errno == EHOSTUNREACH || error.sys_errno == ENETUNREACH);
}

const char* reported_code(const Error& error) {
  if (error.code == ErrorCode::invalid_argument && error.sys_errno == ENOENT) return to_string(ErrorCode::not_found);
  return to_string(error.code);
}

}  // namespace datavo
