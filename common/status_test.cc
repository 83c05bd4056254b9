#include "common/status.h"

#include <gtest/gtest.h>

namespace nvl72 {
namespace {

TEST(StatusTest, RetryableCodesAreTheTransientOnes) {
  EXPECT_TRUE(Status(StatusCode::kUnavailable, "x").IsRetryable());
  EXPECT_TRUE(Status(StatusCode::kConflict, "x").IsRetryable());
  EXPECT_TRUE(Status(StatusCode::kGone, "x").IsRetryable());
  EXPECT_FALSE(Status(StatusCode::kInvalidArgument, "x").IsRetryable());
  EXPECT_FALSE(Status(StatusCode::kPermissionDenied, "x").IsRetryable());
  EXPECT_FALSE(Status().IsRetryable());
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(Status().ToString(), "OK");
  EXPECT_EQ(NotFoundError("pod a").ToString(), "NOT_FOUND: pod a");
}

Status Fails() { return UnavailableError("down"); }
Status Propagates() {
  NVL72_RETURN_IF_ERROR(Fails());
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  EXPECT_EQ(Propagates().code(), StatusCode::kUnavailable);
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  StatusOr<int> e = NotFoundError("nope");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace nvl72
