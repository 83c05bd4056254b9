// Mapping of API server responses to nvl72::Status, and predicates over the result.
//
// An error Status made here carries the HTTP code and the Kubernetes Status reason in a fixed
// message prefix, "[http=409 reason=Conflict] <Status.message>", so callers can recover both with
// HttpCode() and Reason() without a richer Status type.
//
//   HTTP / condition                       StatusCode            retry?
//   connection refused/reset, TLS failure  kUnavailable          yes, with backoff
//   timeout                                kDeadlineExceeded     yes
//   500, 502, 503                          kUnavailable          yes
//   504, reason Timeout/ServerTimeout      kDeadlineExceeded     yes
//   429 TooManyRequests                    kResourceExhausted    yes (also: eviction blocked by
//   PDB) 409 reason AlreadyExists               kAlreadyExists        no 409 other (stale
//   resourceVersion)      kConflict             re-read, then retry 410 Gone / reason Expired kGone
//   relist 401                                    kUnauthenticated      no 403 kPermissionDenied no
//   404                                    kNotFound             no
//   400, 405, 406, 413, 415, 422           kInvalidArgument      no
//   malformed JSON from the server         kInternal             no
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nvl72::kube {

// Builds a Status from an HTTP response. `body` is normally a metav1.Status JSON; anything else is
// quoted (truncated) in the message. Returns OK for 2xx.
Status StatusFromHttp(int http_code, std::string_view body);
// Same, from a decoded metav1.Status object (e.g. the object of a watch ERROR event).
Status StatusFromApiStatus(const nlohmann::json& status_obj);
// A transport failure (no HTTP response): kUnavailable, or kDeadlineExceeded for timeouts.
Status TransportError(std::string_view what);

// The HTTP code recorded by StatusFromHttp, or 0 if none.
int HttpCode(const Status& s);
// The metav1.Status reason recorded by StatusFromHttp ("Conflict", "NotFound", "Expired"...), or
// "".
std::string Reason(const Status& s);

inline bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
inline bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }
inline bool IsConflict(const Status& s) { return s.code() == StatusCode::kConflict; }
// 410 Gone or reason Expired: the resourceVersion is too old, relist.
inline bool IsGone(const Status& s) { return s.code() == StatusCode::kGone; }
inline bool IsForbidden(const Status& s) { return s.code() == StatusCode::kPermissionDenied; }
inline bool IsUnauthorized(const Status& s) { return s.code() == StatusCode::kUnauthenticated; }
inline bool IsInvalid(const Status& s) { return s.code() == StatusCode::kInvalidArgument; }
// Transient: the same call may succeed later without any change by the caller (connection errors,
// timeouts, 5xx, 429). Conflict and Gone are NOT transient: they need a re-read / relist first.
inline bool IsTransient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kResourceExhausted;
}

}  // namespace nvl72::kube
