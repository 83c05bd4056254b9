#include "kube/errors.h"

#include <cstdlib>

namespace nvl72::kube {
namespace {

constexpr size_t kMaxQuotedBody = 512;

StatusCode CodeFor(int http_code, const std::string& reason) {
  if (reason == "AlreadyExists") return StatusCode::kAlreadyExists;
  if (reason == "Expired" || reason == "Gone") return StatusCode::kGone;
  if (reason == "Timeout" || reason == "ServerTimeout") return StatusCode::kDeadlineExceeded;
  switch (http_code) {
    case 400:
    case 405:
    case 406:
    case 413:
    case 415:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kConflict;
    case 410:
      return StatusCode::kGone;
    case 429:
      return StatusCode::kResourceExhausted;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_code >= 500) return StatusCode::kUnavailable;
  if (http_code >= 400) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;  // 1xx/3xx: not something the API server sends us
}

std::string Prefix(int http_code, const std::string& reason) {
  std::string p = "[http=" + std::to_string(http_code);
  if (!reason.empty()) p += " reason=" + reason;
  return p + "] ";
}

}  // namespace

Status StatusFromHttp(int http_code, std::string_view body) {
  if (http_code >= 200 && http_code < 300) return Status::Ok();
  std::string reason, message;
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    if (parsed.contains("reason") && parsed["reason"].is_string()) reason = parsed["reason"];
    if (parsed.contains("message") && parsed["message"].is_string()) message = parsed["message"];
  } else {
    message = std::string(body.substr(0, kMaxQuotedBody));
    if (body.size() > kMaxQuotedBody) message += "...";
    if (message.empty()) message = "(empty body)";
  }
  return Status(CodeFor(http_code, reason), Prefix(http_code, reason) + message);
}

Status StatusFromApiStatus(const nlohmann::json& status_obj) {
  int code = 500;
  std::string reason, message;
  if (status_obj.is_object()) {
    if (status_obj.contains("code") && status_obj["code"].is_number_integer()) {
      code = status_obj["code"].get<int>();
    }
    if (status_obj.contains("reason") && status_obj["reason"].is_string())
      reason = status_obj["reason"];
    if (status_obj.contains("message") && status_obj["message"].is_string()) {
      message = status_obj["message"];
    }
  } else {
    message = "malformed Status object: " + status_obj.dump().substr(0, kMaxQuotedBody);
  }
  return Status(CodeFor(code, reason), Prefix(code, reason) + message);
}

Status TransportError(std::string_view what) {
  std::string m(what);
  bool timeout = m.find("imeout") != std::string::npos;
  return Status(timeout ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
                "transport: " + m);
}

int HttpCode(const Status& s) {
  const std::string& m = s.message();
  if (m.rfind("[http=", 0) != 0) return 0;
  return std::atoi(m.c_str() + 6);
}

std::string Reason(const Status& s) {
  const std::string& m = s.message();
  if (m.rfind("[http=", 0) != 0) return "";
  size_t close = m.find(']');
  size_t r = m.find(" reason=");
  if (r == std::string::npos || close == std::string::npos || r > close) return "";
  return m.substr(r + 8, close - r - 8);
}

}  // namespace nvl72::kube
