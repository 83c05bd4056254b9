#include "kube/errors.h"

#include <gtest/gtest.h>

namespace nvl72::kube {
namespace {

std::string K8sStatus(int code, const std::string& reason, const std::string& message) {
  return nlohmann::json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                        {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

TEST(ErrorsTest, SuccessIsOk) {
  EXPECT_TRUE(StatusFromHttp(200, "").ok());
  EXPECT_TRUE(StatusFromHttp(201, "{}").ok());
}

TEST(ErrorsTest, MapsCodesAndKeepsHttpCodeAndReason) {
  struct Case {
    int http;
    std::string reason;
    StatusCode code;
    bool transient;
  } cases[] = {
      {400, "BadRequest", StatusCode::kInvalidArgument, false},
      {401, "Unauthorized", StatusCode::kUnauthenticated, false},
      {403, "Forbidden", StatusCode::kPermissionDenied, false},
      {404, "NotFound", StatusCode::kNotFound, false},
      {409, "Conflict", StatusCode::kConflict, false},
      {409, "AlreadyExists", StatusCode::kAlreadyExists, false},
      {410, "Expired", StatusCode::kGone, false},
      {410, "Gone", StatusCode::kGone, false},
      {422, "Invalid", StatusCode::kInvalidArgument, false},
      {429, "TooManyRequests", StatusCode::kResourceExhausted, true},
      {500, "InternalError", StatusCode::kUnavailable, true},
      {503, "ServiceUnavailable", StatusCode::kUnavailable, true},
      {504, "Timeout", StatusCode::kDeadlineExceeded, true},
  };
  for (const Case& c : cases) {
    Status s = StatusFromHttp(c.http, K8sStatus(c.http, c.reason, "the message"));
    EXPECT_EQ(s.code(), c.code) << c.http << " " << c.reason;
    EXPECT_EQ(HttpCode(s), c.http);
    EXPECT_EQ(Reason(s), c.reason);
    EXPECT_EQ(IsTransient(s), c.transient) << c.http;
    EXPECT_NE(s.message().find("the message"), std::string::npos);
  }
}

TEST(ErrorsTest, Predicates) {
  EXPECT_TRUE(IsConflict(StatusFromHttp(409, K8sStatus(409, "Conflict", ""))));
  EXPECT_TRUE(IsAlreadyExists(StatusFromHttp(409, K8sStatus(409, "AlreadyExists", ""))));
  EXPECT_TRUE(IsNotFound(StatusFromHttp(404, "")));
  EXPECT_TRUE(IsGone(StatusFromHttp(410, "")));
  EXPECT_TRUE(IsForbidden(StatusFromHttp(403, "")));
  EXPECT_TRUE(IsUnauthorized(StatusFromHttp(401, "")));
  EXPECT_TRUE(StatusFromHttp(503, "").IsRetryable());
  EXPECT_FALSE(StatusFromHttp(403, "").IsRetryable());
  EXPECT_FALSE(StatusFromHttp(401, "").IsRetryable());
}

TEST(ErrorsTest, NonStatusBodyIsQuotedAndTruncated) {
  Status s = StatusFromHttp(502, std::string(2000, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_LT(s.message().size(), 600u);
  EXPECT_EQ(HttpCode(s), 502);
  EXPECT_EQ(Reason(s), "");
}

TEST(ErrorsTest, TransportErrors) {
  EXPECT_EQ(TransportError("Could not establish connection").code(), StatusCode::kUnavailable);
  EXPECT_EQ(TransportError("Connection timeout").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(HttpCode(TransportError("x")), 0);
}

}  // namespace
}  // namespace nvl72::kube
