#include "model/job_nodes.h"

#include <gtest/gtest.h>

#include "model/names.h"
#include "model/test_objects_for_test.h"

namespace nvl72::model {
namespace {

using testing::Node;

// Two racks of three kwok-like GB200 nodes (4 GPUs, 144 CPUs, 960Gi, 110 pods); rack b is dedicated
// to team-a and carries GKE's GPU taint.
std::vector<Json> Racks() {
  const Json dedicated = {
      {{"key", "dedicated"}, {"value", "team-a"}, {"effect", "NoSchedule"}},
      {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}};
  const Json none = Json::array();
  return {Node({.name = "a0", .domain = "a", .taints = none}),
          Node({.name = "a1", .domain = "a", .taints = none}),
          Node({.name = "a2", .domain = "a", .taints = none}),
          Node({.name = "b0", .domain = "b", .taints = dedicated}),
          Node({.name = "b1", .domain = "b", .taints = dedicated}),
          Node({.name = "b2", .domain = "b", .taints = dedicated})};
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

// NVIDIA's driver serves one ComputeDomain per node: a labelled node no gang holds (a user's own
// ComputeDomain, or one whose gang left) is off limits; a node a gang holds is judged by its
// reservation, not by its label (its own ranks, and defragmentation moving that gang).
TEST(EvaluateJobNodesTest, ALabelledNodeNoGangHoldsIsRuledOutOneAGangHoldsIsNot) {
  std::vector<Json> nodes = Racks();
  nodes[1]["metadata"]["labels"][std::string(kComputeDomainNodeLabel)] = "uid-of-a-users-domain";
  nodes[2]["metadata"]["labels"][std::string(kComputeDomainNodeLabel)] = "uid-of-j-seg-0";
  Json j = testing::Job({.ns = "ns", .name = "j", .replicas = 1});
  j["status"]["placement"] = {{"domains", {"a"}},
                              {"ranks", {{{"rank", 0}, {"node", "a2"}, {"pod", "j-0"}}}}};
  const ClusterState st = ClusterState::Build(nodes, {}, {j}, {});
  auto plain = RankPodConstraints(Spec(1, "{}"), "nvidia.com/gpu");
  ASSERT_TRUE(plain.ok());
  JobNodes n = EvaluateJobNodes(st, *plain);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a0", "a2"}));
  EXPECT_NE(n.Summary().find("1 by a ComputeDomain still on the node (node label "
                             "resource.nvidia.com/computeDomain) (e.g. a1)"),
            std::string::npos)
      << n.Summary();
  // j ends: its reservation goes, the label stays until the driver unprepares its claims.
  j["status"]["conditions"] = {{{"type", "Succeeded"}, {"status", "True"}}};
  const ClusterState after = ClusterState::Build(nodes, {}, {j}, {});
  EXPECT_EQ(Allowed(after, EvaluateJobNodes(after, *plain)), (std::vector<std::string>{"a0"}));
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

// `racks` racks of `per_rack` nodes named r<rack>-n<i>, clique "r<rack>".
std::vector<Json> RackNodes(int racks, int per_rack) {
  std::vector<Json> out;
  for (int r = 0; r < racks; ++r) {
    for (int i = 0; i < per_rack; ++i) {
      out.push_back(Node({.name = "r" + std::to_string(r) + "-n" + std::to_string(i),
                          .domain = "r" + std::to_string(r),
                          .taints = Json::array()}));
    }
  }
  return out;
}

bool HasToleration(const PodConstraints& pod, const std::string& key, const std::string& op,
                   const std::string& effect) {
  for (const Toleration& t : pod.tolerations) {
    if (t.key == key && t.op == op && t.value.empty() && t.effect == effect) return true;
  }
  return false;
}

TEST(RankPodConstraintsTest, TheRankTolerationsComeOnTopOfTheTemplatesOwn) {
  auto pod = RankPodConstraints(
      Spec(2, R"({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a",
                                   "effect": "NoSchedule"}],
                  "containers": [{"name": "c", "resources": {
                      "requests": {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "8"},
                      "limits": {"nvidia.com/gpu": "4"}}}]})"),
      "example.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  // The template's toleration stays; the GPU resource's NoSchedule taint and both node lifecycle
  // NoExecute taints are tolerated on top (docs/operator.md).
  ASSERT_EQ(pod->tolerations.size(), 4u);
  EXPECT_EQ(pod->tolerations[0].key, "dedicated");
  EXPECT_EQ(pod->tolerations[0].value, "team-a");
  EXPECT_TRUE(HasToleration(*pod, "example.com/gpu", "Exists", "NoSchedule"));
  EXPECT_TRUE(HasToleration(*pod, "node.kubernetes.io/not-ready", "Exists", "NoExecute"));
  EXPECT_TRUE(HasToleration(*pod, "node.kubernetes.io/unreachable", "Exists", "NoExecute"));
  EXPECT_FALSE(HasToleration(*pod, "nvidia.com/gpu", "Exists", "NoSchedule"));
  // The named GPU resource is the placement core's; any other resource is kube-scheduler's (a
  // limit without a request counts as the request).
  EXPECT_EQ(pod->requests, (ResourceList{{"cpu", 500},
                                         {"memory", int64_t{1024} * 1024 * 1024 * 1000},
                                         {"nvidia.com/gpu", 4000}}));
}

TEST(RankPodConstraintsTest, AJobWithoutATemplateSpecStillGetsTheRankTolerations) {
  JobSpec s;
  s.replicas = 1;
  auto pod = RankPodConstraints(s, "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_TRUE(pod->requests.empty());
  EXPECT_TRUE(HasToleration(*pod, "nvidia.com/gpu", "Exists", "NoSchedule"));
  EXPECT_TRUE(HasToleration(*pod, "node.kubernetes.io/not-ready", "Exists", "NoExecute"));
  EXPECT_TRUE(HasToleration(*pod, "node.kubernetes.io/unreachable", "Exists", "NoExecute"));
}

TEST(EvaluateJobNodesTest, TheGpuTaintAndTheLifecycleTaintsNeverKeepARankOff) {
  // GKE taints every GPU node nvidia.com/gpu=present:NoSchedule; a node whose Ready condition went
  // bad carries a lifecycle NoExecute taint (its readiness is the core's to judge, not the
  // verdict's).
  const Json gpu = {{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}};
  const Json lifecycle = {{{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}},
                          {{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoExecute"}}};
  // The GPU toleration is for NoSchedule only: the same key with NoExecute evicts.
  const Json gpu_no_execute = {
      {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoExecute"}}};
  const Json prefer = {{{"key", "dedicated"}, {"value", "x"}, {"effect", "PreferNoSchedule"}}};
  const ClusterState st =
      ClusterState::Build({Node({.name = "g0", .domain = "g", .taints = gpu}),
                           Node({.name = "g1", .domain = "g", .taints = gpu}),
                           Node({.name = "g2", .domain = "g", .taints = lifecycle}),
                           Node({.name = "g3", .domain = "g", .taints = gpu_no_execute}),
                           Node({.name = "g4", .domain = "g", .taints = prefer})},
                          {}, {}, {});
  for (const char* pod_spec :
       {"{}", R"({"tolerations": [{"key": "other", "operator": "Exists"}]})"}) {
    auto pod = RankPodConstraints(Spec(4, pod_spec), "nvidia.com/gpu");
    ASSERT_TRUE(pod.ok()) << pod.status();
    const JobNodes n = EvaluateJobNodes(st, *pod);
    EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"g0", "g1", "g2", "g4"})) << pod_spec;
    EXPECT_EQ(n.total, 5);
    EXPECT_EQ(n.allowed_count, 4);
    EXPECT_EQ(n.Summary(),
              "the rank pod's constraints rule out 1 of 5 nodes: 1 by taint "
              "nvidia.com/gpu=present:NoExecute (not tolerated)")
        << pod_spec;
  }
}

TEST(EvaluateJobNodesTest, ANodeSelectorRulesOutEveryOtherNode) {
  const ClusterState st = ClusterState::Build(Racks(), {}, {}, {});
  auto pod = RankPodConstraints(
      Spec(1,
           R"({"nodeSelector": {"kubernetes.io/hostname": "a2", "nvidia.com/gpu.clique": "a"}})"),
      "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  const JobNodes n = EvaluateJobNodes(st, *pod);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a2"}));
  EXPECT_EQ(n.allowed_count, 1);
  EXPECT_EQ(n.total, 6);
  // b0..b2 carry a taint this pod does not tolerate: TaintToleration reports before NodeAffinity.
  const std::string summary = n.Summary();
  EXPECT_EQ(summary.rfind("the rank pod's constraints rule out 5 of 6 nodes: ", 0), 0u) << summary;
  EXPECT_NE(summary.find("2 by nodeSelector kubernetes.io/hostname=a2"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("3 by taint dedicated=team-a:NoSchedule (not tolerated)"),
            std::string::npos)
      << summary;
  ASSERT_EQ(n.excluded.size(), 2u);
}

TEST(EvaluateJobNodesTest, OnlyBoundPodsTakeCpuAndPodSlotsFromANode) {
  Json hog = {
      {"metadata", {{"name", "hog"}, {"namespace", "x"}}},
      {"spec",
       {{"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "140"}}}}}}}}}},
      {"status", {{"phase", "Running"}}}};
  auto cpu8 = RankPodConstraints(
      Spec(1, R"({"containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]})"),
      "nvidia.com/gpu");
  ASSERT_TRUE(cpu8.ok()) << cpu8.status();

  Json bound = hog;
  bound["spec"]["nodeName"] = "a1";
  Json nominated = hog;  // kube-scheduler's preemption nominated it; it is not on the node yet
  nominated["metadata"]["name"] = "nominated";
  nominated["status"]["nominatedNodeName"] = "a0";
  Json finished = hog;  // a terminated pod takes nothing
  finished["metadata"]["name"] = "finished";
  finished["spec"]["nodeName"] = "a2";
  finished["status"]["phase"] = "Succeeded";
  const ClusterState st = ClusterState::Build(Racks(), {bound, nominated, finished}, {}, {});
  JobNodes n = EvaluateJobNodes(st, *cpu8);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"a0", "a2"}));
  ASSERT_EQ(n.excluded.size(), 2u);
  EXPECT_EQ(n.excluded[0].cause, "resources");
  EXPECT_EQ(n.excluded[0].nodes, 1);
  EXPECT_EQ(n.excluded[0].example, "cpu: requests 8, 4 of 144 free");

  // One pod slot: a node whose `pods` allocatable is used up refuses one more pod.
  std::vector<Json> nodes = Racks();
  nodes[0]["status"]["allocatable"]["pods"] = "1";  // a0
  Json small = hog;
  small["metadata"]["name"] = "small";
  small["spec"]["nodeName"] = "a0";
  small["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1";
  const ClusterState full = ClusterState::Build(nodes, {small}, {}, {});
  n = EvaluateJobNodes(full, *cpu8);
  EXPECT_EQ(Allowed(full, n), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_NE(n.Summary().find("1 by resources (e.g. too many pods"), std::string::npos)
      << n.Summary();
}

TEST(JudgeJobTest, RefusedNodesCountOnlyAtTheGenerationTheyWereSeenAt) {
  const ClusterState st = ClusterState::Build(Racks(), {}, {}, {});
  const JobSpec spec = Spec(2, R"({"containers": [{"name": "c"}]})");
  Json job = {
      {"metadata", {{"name", "j"}, {"namespace", "x"}, {"generation", 4}}},
      {"status",
       {{"refusedNodes", {"a1", "no-such-node"}}, {"replans", 1}, {"replanGeneration", 4}}}};
  JobVerdict v = JudgeJob(st, job, spec, "x/j", 7, "nvidia.com/gpu");
  EXPECT_TRUE(v.error.empty()) << v.error;
  EXPECT_EQ(Allowed(st, v.nodes), (std::vector<std::string>{"a0", "a2"}));
  EXPECT_EQ(v.request.allowed_nodes, v.nodes.allowed);
  EXPECT_EQ(v.request.key, "x/j");
  EXPECT_EQ(v.request.priority, 7);
  EXPECT_EQ(v.request.replicas, 2);
  const std::string summary = v.nodes.Summary();
  EXPECT_EQ(summary.rfind("the rank pod's constraints rule out 4 of 6 nodes: ", 0), 0u) << summary;
  EXPECT_NE(summary.find("3 by taint dedicated=team-a:NoSchedule (not tolerated)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("1 by "), std::string::npos) << summary;

  // The spec changed since (a new generation): the refusals are forgotten.
  job["metadata"]["generation"] = 5;
  EXPECT_TRUE(RefusedNodes(job).empty());
  v = JudgeJob(st, job, spec, "x/j", 7, "nvidia.com/gpu");
  EXPECT_EQ(Allowed(st, v.nodes), (std::vector<std::string>{"a0", "a1", "a2"}));
  // No replanGeneration at all: none either.
  job["metadata"]["generation"] = 4;
  job["status"].erase("replanGeneration");
  EXPECT_TRUE(RefusedNodes(job).empty());
}

TEST(JudgeJobTest, ATemplateThatDoesNotParseIsAnErrorAndNoMask) {
  const ClusterState st = ClusterState::Build(Racks(), {}, {}, {});
  const JobSpec spec = Spec(2, R"({"tolerations": [{"key": "k", "operator": "Sometimes"}]})");
  const JobVerdict v = JudgeJob(st, Json::object(), spec, "x/j", 0, "nvidia.com/gpu");
  EXPECT_EQ(v.error.rfind("spec.template.spec", 0), 0u) << v.error;
  EXPECT_TRUE(v.request.allowed_nodes.empty());
  EXPECT_EQ(v.request.replicas, 2);
}

TEST(WaitingReasonTest, AJobTheClusterCanNeverHoldSaysSoFirst) {
  // 5 racks of 18 nodes hold 5 segments of 16; the job needs 100.
  const ClusterState st = ClusterState::Build(RackNodes(5, 18), {}, {}, {});
  auto policy = placement::MakePolicy("nvl72", {});
  JobSpec spec = Spec(1600, R"({"nodeSelector": {"kubernetes.io/hostname": "r0-n0"}})");
  spec.segment_size = 16;
  auto pod = RankPodConstraints(spec, "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  // Even with constraints that rule out nodes, "never" comes first: no change of the pod helps.
  for (const JobNodes& n : {EvaluateJobNodes(st, *pod), JobNodes{}}) {
    const placement::GangRequest r = JobGangRequest(spec, "x/huge", 0, n);
    const placement::GangDecision d = policy->PlaceGang(st.snapshot(), r);
    ASSERT_FALSE(d.placed);
    EXPECT_EQ(WaitingReason(st.snapshot(), r, n, d),
              "needs 100 segments of 16 nodes with 4 GPUs, each in one NVLink domain; the "
              "cluster's domains hold 5: can never fit");
  }
}

TEST(WaitingReasonTest, TooFewNodesWhereThePodCanRunInEveryDomainLeadsTheReason) {
  // Rack r1 is dedicated to team-a; the job may only use r1-n3 and the nodes of r0.
  std::vector<Json> nodes = RackNodes(2, 4);
  const Json dedicated = {{{"key", "dedicated"}, {"value", "team-a"}, {"effect", "NoSchedule"}}};
  for (int i = 4; i < 8; ++i) nodes[static_cast<size_t>(i)]["spec"]["taints"] = dedicated;
  const ClusterState st = ClusterState::Build(nodes, {}, {}, {});
  auto policy = placement::MakePolicy("nvl72", {0});

  // Required: 2 nodes of r0 match the selector, 4 are needed in one domain.
  JobSpec spec =
      Spec(4, R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
      {"nodeSelectorTerms": [{"matchExpressions": [
          {"key": "kubernetes.io/hostname", "operator": "In", "values": ["r0-n0", "r0-n1"]}]}]}}}})");
  auto pod = RankPodConstraints(spec, "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  JobNodes n = EvaluateJobNodes(st, *pod);
  EXPECT_EQ(Allowed(st, n), (std::vector<std::string>{"r0-n0", "r0-n1"}));
  placement::GangRequest r = JobGangRequest(spec, "x/j", 0, n);
  std::string why = WaitingReason(st.snapshot(), r, n, policy->PlaceGang(st.snapshot(), r));
  EXPECT_EQ(why.rfind("needs 4 nodes in one NVLink domain where the rank pod can run; the most in "
                      "one domain is 2 (r0): ",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find(n.Summary()), std::string::npos) << why;
  EXPECT_NE(why.find("2 by required node affinity"), std::string::npos) << why;
  EXPECT_NE(why.find("4 by taint dedicated=team-a:NoSchedule (not tolerated)"), std::string::npos)
      << why;

  // Unconstrained: the count is of the whole cluster.
  spec.mode = placement::TopologyMode::kUnconstrained;
  r = JobGangRequest(spec, "x/j", 0, n);
  why = WaitingReason(st.snapshot(), r, n, policy->PlaceGang(st.snapshot(), r));
  EXPECT_EQ(why.rfind("needs 4 nodes where the rank pod can run", 0), 0u) << why;
  EXPECT_NE(why.find(n.Summary()), std::string::npos) << why;
}

TEST(WaitingReasonTest, EnoughNodesWhereThePodCanRunGiveTheCoresReasonThenTheSummary) {
  const ClusterState st = ClusterState::Build(RackNodes(2, 4), {}, {}, {});
  auto policy = placement::MakePolicy("nvl72", {0});
  placement::Snapshot busy = st.snapshot();
  for (auto& node : busy.nodes) node.gpu_used = 4;  // every GPU taken: the core's reason

  // No constraint rules anything out: the core's reason alone.
  const JobSpec plain = Spec(2, "{}");
  auto pod = RankPodConstraints(plain, "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  JobNodes n = EvaluateJobNodes(st, *pod);
  EXPECT_EQ(n.Summary(), "");
  placement::GangRequest r = JobGangRequest(plain, "x/j", 0, n);
  placement::GangDecision d = policy->PlaceGang(busy, r);
  ASSERT_FALSE(d.placed);
  ASSERT_FALSE(d.reason.empty());
  EXPECT_EQ(WaitingReason(busy, r, n, d), d.reason);

  // A selector that leaves rack r1 whole: enough nodes, so the core's reason, then the summary.
  const JobSpec r1 = Spec(2, R"({"nodeSelector": {"nvidia.com/gpu.clique": "r1"}})");
  pod = RankPodConstraints(r1, "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status();
  n = EvaluateJobNodes(st, *pod);
  r = JobGangRequest(r1, "x/j", 0, n);
  d = policy->PlaceGang(busy, r);
  ASSERT_FALSE(d.placed);
  EXPECT_EQ(WaitingReason(busy, r, n, d),
            d.reason +
                "; the rank pod's constraints rule out 4 of 8 nodes: 4 by nodeSelector "
                "nvidia.com/gpu.clique=r1");
}

}  // namespace
}  // namespace nvl72::model
