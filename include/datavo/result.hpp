// Typed errors and Result<T>: the error layer of the public API.
//
// Library functions never let an exception escape for an expected failure (I/O, a remote that is down, bad
// input). They return Result<T>, which holds either a value or an Error. A *miss* is never an Error: lookups
// return Result<std::optional<...>>.
//
// Thread safety: values only; no shared state.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace datavo {

// The closed set of failure kinds. Callers branch on these, never on message text.
enum class ErrorCode {
  invalid_argument,   // bad input from the caller (a malformed hash, a bad flag value)
  config,             // a configuration file is malformed or inconsistent
  io,                 // an I/O error not covered below
  permission_denied,  // EACCES / EPERM / EROFS
  no_space,           // ENOSPC / EDQUOT
  not_found,          // a named thing that must exist does not (not a cache miss)
  capacity,           // no tier can hold the shard
  integrity,          // bytes do not match the expected size or SHA-256
  remote,             // a remote tier or origin failed (5xx, reset, protocol violation)
  timeout,            // a deadline passed
  conflict,           // a conditional request was refused: the object changed, or already exists (412, 409)
  unsupported,        // the operation is not supported by this tier or platform
  internal,           // a broken invariant; a bug in Datavo
  cancelled,          // stopped on request (SIGINT or SIGTERM in the CLI); nothing half-done is left behind
};

// A stable lowercase name for `code`, used in logs and JSON output.
const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;  // human-readable; names the file, field or offset concerned
  int sys_errno = 0;    // the errno behind the failure, 0 when there is none

  // Builds an Error from `err` (an errno value), mapping it to an ErrorCode the way LevelDB's PosixError does.
  static Error from_errno(int err, std::string context);
  // The caller's input is wrong (a name, an option, a member of an archive): ErrorCode::invalid_argument.
  static Error invalid_argument(std::string message) { return Error{ErrorCode::invalid_argument, std::move(message)}; }
};

// Whether `error` says that a server could not be reached at all: ErrorCode::remote with sys_errno ECONNREFUSED,
// EHOSTUNREACH (also a host name that does not resolve) or ENETUNREACH, as the HTTP client reports them. Such a
// request never reached the server, so repeating it changes nothing there.
bool is_unreachable(const Error& error);

// The code every front end reports for `error` (the CLI's JSON "code", the Python SDK's exception .code), so that
// one failure has one name: to_string(error.code), except "not_found" for bad input that names something absent
// (invalid_argument with sys_errno ENOENT: an unknown dataset, split, revision or key, include/datavo/dataset.hpp),
// which stays bad input (the CLI's exit 2) while its name says what is wrong.
const char* reported_code(const Error& error);

// Either a T or an Error. Deliberately small: has_value(), value(), error(), operator bool/*/->.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // REQUIRES: has_value().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !has_value().
  const Error& error() const& { return std::get<1>(state_); }
  Error&& error() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

inline Result<void> ok() { return {}; }

}  // namespace datavo

// Propagates an error from an expression returning Result<...>.
#define DATAVO_TRY(expr)                                        \
  do {                                                          \
    auto&& datavo_try_result_ = (expr);                         \
    if (!datavo_try_result_) return datavo_try_result_.error(); \
  } while (false)
