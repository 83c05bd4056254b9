#include "cli/app.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/test_objects.h"
#include "kube/fake_client.h"

namespace nvl72::cli {
namespace {

const kube::ResourceRef kJobs =
    kube::ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs", "NVL72Job", true);

class AppTest : public ::testing::Test {
 protected:
  AppTest() {
    testing::Fixture f;
    for (const auto& n : f.nodes) fake_.Seed(kube::kNodes, n);
    for (const auto& p : f.pods) fake_.Seed(kube::kPods, p);
    for (const auto& j : f.jobs) fake_.Seed(kJobs, j);
  }

  int Run(std::vector<std::string> args, std::string default_ns = "") {
    out_.str("");
    err_.str("");
    last_options_ = {};
    Connector connect = [&](const Options& o) -> StatusOr<Connection> {
      last_options_ = o;
      Connection c;
      c.client = &fake_;
      c.default_namespace = default_ns;
      return c;
    };
    return cli::Run(args, connect, out_, err_);
  }

  kube::FakeClient fake_;
  std::ostringstream out_, err_;
  Options last_options_;
};

TEST_F(AppTest, Racks) {
  EXPECT_EQ(Run({"racks"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("0       ###+ss  6/6"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("1       ...ssX  5/6"), std::string::npos) << out_.str();
}

TEST_F(AppTest, FlagsReachTheViewsAndTheConnector) {
  EXPECT_EQ(Run({"racks", "--spares-per-domain=0", "--kubeconfig", "/k", "--context=c"}), 0);
  EXPECT_NE(out_.str().find("###+.."), std::string::npos) << out_.str();
  EXPECT_EQ(last_options_.kubeconfig, "/k");
  EXPECT_EQ(last_options_.context, "c");
}

TEST_F(AppTest, JobsUseTheContextNamespaceUnlessToldOtherwise) {
  EXPECT_EQ(Run({"jobs"}, "team"), 0);
  EXPECT_NE(out_.str().find("small  Pending"), std::string::npos) << out_.str();
  EXPECT_EQ(out_.str().find("train"), std::string::npos) << out_.str();
  EXPECT_EQ(Run({"jobs", "-n", "default"}, "team"), 0);
  EXPECT_NE(out_.str().find("train  Running"), std::string::npos) << out_.str();
  EXPECT_EQ(Run({"jobs", "-A"}), 0);
  EXPECT_NE(out_.str().find("NAMESPACE"), std::string::npos) << out_.str();
}

TEST_F(AppTest, Explain) {
  EXPECT_EQ(Run({"explain", "big"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("Why it waits: needs 4 nodes"), std::string::npos) << out_.str();
  EXPECT_EQ(Run({"explain", "--namespace=team", "small"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("team/small"), std::string::npos) << out_.str();
  EXPECT_EQ(Run({"explain", "nope"}), 1);
  EXPECT_EQ(err_.str(), "error: NVL72Job default/nope not found\n");
}

TEST_F(AppTest, ApiErrorsAreReported) {
  fake_.InjectError(kube::Verb::kList, kube::kNodes, UnavailableError("connection refused"));
  EXPECT_EQ(Run({"racks"}), 1);
  EXPECT_NE(err_.str().find("listing nodes: connection refused"), std::string::npos) << err_.str();
}

TEST_F(AppTest, UsageErrorsExit2) {
  EXPECT_EQ(Run({"bogus"}), 2);
  EXPECT_NE(err_.str().find("unknown command 'bogus'"), std::string::npos);
  EXPECT_EQ(Run({"explain"}), 2);
  EXPECT_EQ(Run({"racks", "--spares-per-domain", "-1"}), 2);
  EXPECT_EQ(Run({"racks", "--spare-reserve", "firm"}), 2);
  EXPECT_EQ(Run({"racks", "--frobnicate"}), 2);
  EXPECT_EQ(Run({"jobs", "-n"}), 2);
}

TEST_F(AppTest, HelpAndVersionNeedNoCluster) {
  Connector never = [](const Options&) -> StatusOr<Connection> {
    return FailedPreconditionError("must not connect");
  };
  std::ostringstream out, err;
  EXPECT_EQ(cli::Run(std::vector<std::string>{}, never, out, err), 0);
  EXPECT_NE(out.str().find("kubectl nvl72 racks"), std::string::npos);
  out.str("");
  EXPECT_EQ(cli::Run(std::vector<std::string>{"--version"}, never, out, err), 0);
  EXPECT_EQ(out.str().rfind("kubectl-nvl72 ", 0), 0u) << out.str();
}

}  // namespace
}  // namespace nvl72::cli
