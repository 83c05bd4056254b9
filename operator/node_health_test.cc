#include "operator/node_health.h"

#include <gtest/gtest.h>

#include "model/test_objects_for_test.h"

namespace nvl72::op {
namespace {

using Json = nlohmann::json;

using model::testing::Node;

std::chrono::system_clock::time_point At(int sec) {
  std::tm tm{};
  tm.tm_year = 126;
  tm.tm_mday = 1;
  tm.tm_sec = sec;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

TEST(NodeHealthTest, EachCause) {
  std::vector<Json> nodes = {
      Node({.name = "ok", .domain = "r"}),
      Node(
          {.name = "blip", .domain = "r", .ready = "False", .ready_since = "2026-01-01T00:00:00Z"}),
      Node({.name = "tainted",
            .domain = "r",
            .taints = {{{"key", "example.com/fabric-down"}, {"effect", "NoExecute"}}}}),
      Node({.name = "small", .domain = "r", .gpus = 2}),
      Node({.name = "cordoned", .domain = "r", .unschedulable = true})};
  auto st = model::ClusterState::Build(nodes, {}, {}, {});
  const auto grace = std::chrono::seconds(60);
  EXPECT_EQ(CheckNode(st, "ok", 4, grace, At(10)), NodeFailure::kNone);
  EXPECT_EQ(CheckNode(st, "blip", 4, grace, At(30)), NodeFailure::kNone);
  EXPECT_EQ(CheckNode(st, "blip", 4, grace, At(61)), NodeFailure::kNotReady);
  EXPECT_EQ(CheckNode(st, "tainted", 4, grace, At(0)), NodeFailure::kNoExecuteTaint);
  EXPECT_EQ(CheckNode(st, "small", 4, grace, At(0)), NodeFailure::kGpusLost);
  EXPECT_EQ(CheckNode(st, "small", 2, grace, At(0)), NodeFailure::kNone);
  EXPECT_EQ(CheckNode(st, "gone", 4, grace, At(0)), NodeFailure::kNodeGone);
  EXPECT_EQ(CheckNode(st, "cordoned", 4, grace, At(0)), NodeFailure::kNone);

  model::JobPlacement p;
  p.ranks = {{0, "ok", "j-0"}, {1, "gone", "j-1"}, {2, "blip", "j-2"}, {3, "tainted", "j-3"}};
  auto failed = FailedRanks(st, p, 4, grace, At(30));
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].rank, 1);
  EXPECT_EQ(NodeFailureName(failed[0].cause), "NodeGone");
  EXPECT_EQ(failed[1].rank, 3);
}

// kube-controller-manager puts unreachable (or not-ready) NoExecute on a node at the moment it sets
// Ready Unknown (False). Rank pods tolerate those taints, so the job's grace on the Ready condition
// decides, not the taint.
TEST(NodeHealthTest, NodeLifecycleTaintsWaitForTheGrace) {
  std::vector<Json> nodes = {Node({.name = "unreachable",
                                   .domain = "r",
                                   .ready = "Unknown",
                                   .ready_since = "2026-01-01T00:00:00Z"}),
                             Node({.name = "not-ready",
                                   .domain = "r",
                                   .ready = "False",
                                   .ready_since = "2026-01-01T00:00:00Z"})};
  nodes[0]["spec"]["taints"] = {
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoSchedule"}},
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}}};
  nodes[1]["spec"]["taints"] = {{{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoExecute"}}};
  auto st = model::ClusterState::Build(nodes, {}, {}, {});
  const auto grace = std::chrono::seconds(60);
  for (const char* n : {"unreachable", "not-ready"}) {
    EXPECT_EQ(CheckNode(st, n, 4, grace, At(59)), NodeFailure::kNone) << n;
    EXPECT_EQ(CheckNode(st, n, 4, grace, At(60)), NodeFailure::kNotReady) << n;
  }
}

TEST(NodeHealthTest, PodFailedByNodeTellsNodeCausesFromTheApplicationsOwn) {
  auto pod = [](const std::string& phase, const std::string& reason, const std::string& cond) {
    Json p = {{"status", {{"phase", phase}}}};
    if (!reason.empty()) p["status"]["reason"] = reason;
    if (!cond.empty()) {
      p["status"]["conditions"] = {
          {{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", cond}}};
    }
    return p;
  };
  struct Case {
    Json pod;
    bool by_node;
  };
  const std::vector<Case> cases = {
      {pod("Failed", "NodeLost", ""), true},
      {pod("Failed", "Evicted", ""), true},
      {pod("Failed", "NodeShutdown", ""), true},
      {pod("Failed", "Terminated", ""), true},
      {pod("Failed", "OutOfnvidia.com/gpu", ""), true},
      {pod("Failed", "UnexpectedAdmissionError", ""), true},
      {pod("Failed", "", "DeletionByTaintManager"), true},
      {pod("Failed", "", "TerminationByKubelet"), true},
      {pod("Failed", "", "DeletionByPodGC"), true},
      {pod("Failed", "", ""), false},  // container exited non-zero
      {pod("Failed", "Error", ""), false},
      {pod("Failed", "", "PreemptionByScheduler"), false},  // not the node
      {pod("Running", "NodeLost", ""), false},              // not failed (yet)
      {pod("Succeeded", "", "TerminationByKubelet"), false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(!PodFailedByNode(c.pod).empty(), c.by_node) << c.pod.dump();
  }
  EXPECT_EQ(PodFailedByNode(pod("Failed", "", "DeletionByTaintManager")),
            "DisruptionTarget/DeletionByTaintManager");
}

}  // namespace
}  // namespace nvl72::op
