#include "model/job_nodes.h"

#include <gtest/gtest.h>

namespace nvl72::model {
namespace {

// A kwok-like GB200 node: 144 CPUs, 960Gi, 110 pods, 4 GPUs.
Json Node(const std::string& name, const std::string& clique, Json taints = Json::array()) {
  return {{"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.clique", clique}}}}},
          {"spec", {{"taints", std::move(taints)}}},
          {"status",
           {{"allocatable",
             {{"cpu", "144"}, {"memory", "960Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// Two racks of three nodes; rack b is dedicated to team-a and carries GKE's GPU taint.
std::vector<Json> Racks() {
  const Json dedicated = {
      {{"key", "dedicated"}, {"value", "team-a"}, {"effect", "NoSchedule"}},
      {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}};
  return {Node("a0", "a"),
          Node("a1", "a"),
          Node("a2", "a"),
          Node("b0", "b", dedicated),
          Node("b1", "b", dedicated),
          Node("b2", "b", dedicated)};
}

JobSpec Spec(int replicas, const std::string& pod_spec_json) {
  JobSpec s;
  s.replicas = replicas;
  s.pod_template = {{"spec", Json::parse(pod_spec_json)}};
  return s;
}

std::vector<std::string> Allowed(const ClusterState& st, const JobNodes& n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n.allowed.size(); ++i) {
    if (n.allowed[i]) out.push_back(st.NodeName(static_cast<placement::NodeId>(i)));
  }
  return out;
}

TEST(RankPodConstraintsTest, AddsTheRankTolerationsAndLeavesTheGpuToTheCore) {
  auto pod = RankPodConstraints(
      Spec(
          1,
          R"({"containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "4"}}}]})"),
      "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->requests, (ResourceList{{"cpu", 2000}}));
  ASSERT_EQ(pod->tolerations.size(), 3u);
  EXPECT_EQ(pod->tolerations[0].key, "nvidia.com/gpu");
  EXPECT_EQ(pod->tolerations[0].effect, "NoSchedule");
  auto bad = RankPodConstraints(
      Spec(1, R"({"tolerations": [{"key": "k", "operator": "Sometimes"}]})"), "nvidia.com/gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("spec.template.spec", 0), 0u) << bad.status();
}

TEST(EvaluateJobNodesTest, TaintsOfTheRackAndTheJobsToleration) {
  const ClusterState st = ClusterState::Build(Racks(), {}, {}, {});
  auto plain = RankPodConstraints(Spec(2, R"({"containers": [{"name": "c"}]})"), "nvidia.com/gpu");
  JobNodes n = EvaluateJobNodes(st, *plain);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a0", "a1", "a2"}));
  EXPECT_EQ(n.Summary(),
            "the rank pod's constraints rule out 3 of 6 nodes: 3 by taint "
            "dedicated=team-a:NoSchedule (not tolerated)");
  // Tolerating dedicated=team-a is enough: the GPU taint is tolerated by every rank pod.
  auto team_a = RankPodConstraints(
      Spec(2, R"({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a",
                                   "effect": "NoSchedule"}]})"),
      "nvidia.com/gpu");
  n = EvaluateJobNodes(st, *team_a);
  EXPECT_EQ(n.allowed_count, 6);
  EXPECT_EQ(n.Summary(), "");
}

TEST(EvaluateJobNodesTest, SelectorResourcesAndRefusedNodes) {
  // A non-GPU pod takes 140 of a0's 144 CPUs.
  const std::vector<Json> pods = {
      {{"metadata", {{"name", "hog"}, {"namespace", "x"}}},
       {"spec",
        {{"nodeName", "a0"},
         {"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "140"}}}}}}}}}},
       {"status", {{"phase", "Running"}}}}};
  const ClusterState st = ClusterState::Build(Racks(), pods, {}, {});
  auto cpu8 = RankPodConstraints(
      Spec(1, R"({"containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]})"),
      "nvidia.com/gpu");
  JobNodes n = EvaluateJobNodes(st, *cpu8);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_NE(n.Summary().find("1 by resources (e.g. cpu: requests 8, 4 of 144 free)"),
            std::string::npos)
      << n.Summary();

  auto sel = RankPodConstraints(Spec(1, R"({"nodeSelector": {"kubernetes.io/hostname": "a2"}})"),
                                "nvidia.com/gpu");
  EXPECT_EQ(Allowed(st, EvaluateJobNodes(st, *sel)), (std::vector<std::string>{"a2"}));

  auto plain = RankPodConstraints(Spec(1, "{}"), "nvidia.com/gpu");
  n = EvaluateJobNodes(st, *plain, {"a1"});
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a0", "a2"}));
  EXPECT_NE(n.Summary().find("1 by kube-scheduler's earlier refusal"), std::string::npos)
      << n.Summary();
}

TEST(WaitingReasonTest, NeverFitsThenConstraintsThenTheCoresReason) {
  const ClusterState st = ClusterState::Build(Racks(), {}, {}, {});
  auto policy = placement::MakePolicy("nvl72", {0});
  // 4 ranks in one domain of 3 nodes: never.
  auto plain = RankPodConstraints(Spec(4, "{}"), "nvidia.com/gpu");
  JobNodes n = EvaluateJobNodes(st, *plain);
  placement::GangRequest r = JobGangRequest(Spec(4, "{}"), "x/j", 0, n);
  EXPECT_NE(
      WaitingReason(st.snapshot(), r, n, policy->PlaceGang(st.snapshot(), r)).find("can never fit"),
      std::string::npos);
  // 3 ranks: rack a is the only one the pod may use, and it has 3 nodes; with one of them refused
  // by kube-scheduler the constraints say why.
  n = EvaluateJobNodes(st, *plain, {"a1"});
  r = JobGangRequest(Spec(3, "{}"), "x/j", 0, n);
  const std::string why = WaitingReason(st.snapshot(), r, n, policy->PlaceGang(st.snapshot(), r));
  EXPECT_EQ(
      why.rfind("needs 3 nodes in one NVLink domain where the rank pod can run; the most in one "
                "domain is 2 (a): the rank pod's constraints rule out 4 of 6 nodes",
                0),
      0u)
      << why;
  // Enough allowed nodes, but busy: the core's reason, then the summary.
  ClusterState busy = ClusterState::Build(Racks(), {}, {}, {});
  n = EvaluateJobNodes(busy, *plain);
  r = JobGangRequest(Spec(3, "{}"), "x/j", 0, n);
  placement::Snapshot snap = busy.snapshot();
  snap.nodes[0].gpu_used = 4;
  const std::string busy_why = WaitingReason(snap, r, n, policy->PlaceGang(snap, r));
  EXPECT_EQ(busy_why.rfind("needs 3 nodes with 4 free GPUs in one NVLink domain", 0), 0u)
      << busy_why;
  EXPECT_NE(busy_why.find("; the rank pod's constraints rule out 3 of 6 nodes"), std::string::npos)
      << busy_why;
}

}  // namespace
}  // namespace nvl72::model
