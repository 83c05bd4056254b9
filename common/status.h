// Status and StatusOr<T>: how every fallible call in this project reports failure.
//
// No exceptions cross a module boundary. A Status tells the caller whether retrying may help:
// IsRetryable() is true for kUnavailable, kDeadlineExceeded, kResourceExhausted, kConflict and
// kGone (re-read / relist, then retry); kInvalidArgument, kFailedPrecondition, kNotFound,
// kAlreadyExists, kPermissionDenied and kUnauthenticated do not go away by retrying the same call.
// Thread-safety: values; no shared state.
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace nvl72 {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kConflict,  // optimistic-concurrency failure (HTTP 409): re-read and retry
  kGone,      // resourceVersion too old (HTTP 410): relist
  kFailedPrecondition,
  kPermissionDenied,   // HTTP 403
  kUnauthenticated,    // HTTP 401
  kResourceExhausted,  // HTTP 429, limits
  kDeadlineExceeded,   // timeouts
  kUnavailable,        // connection refused/reset, HTTP 5xx
  kInternal,           // bugs, malformed data from a peer
  kCancelled,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsRetryable() const;
  std::string ToString() const;  // "CODE: message" or "OK"

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

std::ostream& operator<<(std::ostream& os, const Status& s);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr needs a value or an error");
    if (status_.ok()) status_ = InternalError("StatusOr built from OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace nvl72

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define NVL72_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::nvl72::Status nvl72_status_ = (expr);        \
    if (!nvl72_status_.ok()) return nvl72_status_; \
  } while (0)
