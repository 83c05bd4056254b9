#include "kube/preflight.h"

#include <gtest/gtest.h>

#include "kube/errors.h"
#include "kube/fake_client.h"

namespace nvl72::kube {
namespace {

TEST(PreflightTest, RejectedCredentialsOrPermissionsAreErrors) {
  FakeClient fake;
  fake.InjectError(Verb::kList, kNodes,
                   StatusFromHttp(401, R"({"kind":"Status","reason":"Unauthorized","code":401})"));
  Status s = CheckCredentials(&fake, kNodes);
  EXPECT_TRUE(IsUnauthorized(s)) << s;
  EXPECT_NE(s.ToString().find("Unauthorized"), std::string::npos) << s;

  fake.InjectError(Verb::kList, kNodes,
                   StatusFromHttp(403, R"({"kind":"Status","reason":"Forbidden","code":403})"));
  EXPECT_TRUE(IsForbidden(CheckCredentials(&fake, kNodes)));
}

TEST(PreflightTest, EverythingElseIsLeftToTheInformers) {
  FakeClient fake;
  EXPECT_TRUE(CheckCredentials(&fake, kNodes).ok());  // empty list
  fake.InjectError(Verb::kList, kNodes, Status(StatusCode::kUnavailable, "connection refused"));
  EXPECT_TRUE(CheckCredentials(&fake, kNodes).ok());
  fake.InjectError(Verb::kList, kNodes,
                   StatusFromHttp(404, R"({"kind":"Status","reason":"NotFound","code":404})"));
  EXPECT_TRUE(CheckCredentials(&fake, kNodes).ok());
  fake.InjectError(Verb::kList, kNodes, StatusFromHttp(500, ""));
  EXPECT_TRUE(CheckCredentials(&fake, kNodes).ok());
}

}  // namespace
}  // namespace nvl72::kube
