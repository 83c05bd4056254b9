#include "model/cluster_state.h"

#include <gtest/gtest.h>

#include "model/test_objects_for_test.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace nvl72::model {
namespace {

using testing::Job;
using testing::Node;
using testing::Place;
using testing::Pod;

// Two racks of three nodes:
//   rack-a: a0 a1 a2
//   rack-b: b0 b1 b2
std::vector<Json> TwoRacks() {
  std::vector<Json> nodes;
  for (const std::string name : {"b1", "a0", "a2", "a1", "b0", "b2"}) {
    nodes.push_back(Node({.name = name, .domain = "rack-" + name.substr(0, 1)}));
  }
  return nodes;
}

// GPU counts the API server would never send but a hand-made object might: out of int's range
// (as a number, a float or with a suffix) counts as 0, never as a wrapped or undefined value.
TEST(ClusterStateTest, OutOfRangeGpuCountsAreZero) {
  std::vector<Json> nodes;
  const std::vector<Json> counts = {Json(4.0), Json(1e30), Json(4294967300), Json("3000000k"),
                                    Json(-1e300)};
  for (size_t i = 0; i < counts.size(); ++i) {
    Json n = Node({.name = "n" + std::to_string(i), .domain = "rack-a"});
    n["status"]["allocatable"]["nvidia.com/gpu"] = counts[i];
    nodes.push_back(n);
  }
  auto st = ClusterState::Build(nodes, {}, {}, {});
  const auto& snap = st.snapshot();
  EXPECT_EQ(snap.nodes[st.FindNode("n0")].gpu_capacity, 4);
  for (const char* name : {"n1", "n2", "n3", "n4"}) {
    const auto id = st.FindNode(name);
    if (id == placement::kNoNode) continue;  // a node without GPUs may be left out
    EXPECT_EQ(snap.nodes[id].gpu_capacity, 0) << name;
  }
}

// GPUs that went unhealthy (issue 27 case 4): the device plugin drops them from allocatable and
// keeps them in capacity; a node with fewer GPUs than its rack's whole nodes is degraded either
// way. A degraded node is never an empty whole node: no spare, no free block.
TEST(ClusterStateTest, NodesThatLostGpusAreDegradedAndNeverSpares) {
  std::vector<Json> nodes = TwoRacks();
  for (Json& n : nodes) {
    const std::string name = n["metadata"]["name"];
    if (name == "a2") {
      n["status"]["capacity"]["nvidia.com/gpu"] = "4";
      n["status"]["allocatable"]["nvidia.com/gpu"] = "3";
    }
    if (name == "b2") n["status"]["allocatable"]["nvidia.com/gpu"] = "2";  // no capacity given
  }
  auto st = ClusterState::Build(nodes, {}, {}, {});
  const auto& snap = st.snapshot();
  for (const char* name : {"a0", "a1", "b0", "b1"}) {
    EXPECT_FALSE(snap.nodes[st.FindNode(name)].degraded) << name;
  }
  for (const char* name : {"a2", "b2"}) {
    const auto& n = snap.nodes[st.FindNode(name)];
    EXPECT_TRUE(n.degraded) << name;
    EXPECT_FALSE(n.Empty()) << name;
    EXPECT_GT(n.FreeGpus(), 0) << name << " still takes smaller pods";
  }
  const std::vector<bool> spare = placement::DesignatedSpares(snap, 1);
  EXPECT_TRUE(spare[st.FindNode("a1")]);
  EXPECT_TRUE(spare[st.FindNode("b1")]);
  EXPECT_FALSE(spare[st.FindNode("a2")]);
  EXPECT_FALSE(spare[st.FindNode("b2")]);
  const placement::ClusterStats stats = placement::ComputeStats(snap, 1, {});
  for (const auto& d : stats.domains) {
    EXPECT_EQ(d.empty_nodes, 2);
    EXPECT_EQ(d.gpus_spare, 4) << "one whole spare, not the degraded node's GPUs";
    EXPECT_EQ(d.largest_gang_nodes, 1);
  }
}

// Every node of rack-a lost a GPU: no fuller node in the domain to compare with, so only the
// device plugin's capacity (kept) against allocatable (dropped) says they are degraded.
TEST(ClusterStateTest, AllocatableBelowCapacityIsDegradedEvenWhenTheWholeDomainLostGpus) {
  std::vector<Json> nodes = TwoRacks();
  for (Json& n : nodes) {
    if (n["metadata"]["name"].get<std::string>()[0] != 'a') continue;
    n["status"]["capacity"]["nvidia.com/gpu"] = "4";
    n["status"]["allocatable"]["nvidia.com/gpu"] = "3";
  }
  auto st = ClusterState::Build(nodes, {}, {}, {});
  const auto& snap = st.snapshot();
  for (const char* name : {"a0", "a1", "a2"}) {
    EXPECT_TRUE(snap.nodes[st.FindNode(name)].degraded) << name;
    EXPECT_FALSE(snap.nodes[st.FindNode(name)].Empty()) << name;
  }
  for (const char* name : {"b0", "b1", "b2"}) {
    EXPECT_FALSE(snap.nodes[st.FindNode(name)].degraded) << name;
  }
}

TEST(ClusterStateTest, DomainsAndNodesOrderedByName) {
  auto st = ClusterState::Build(TwoRacks(), {}, {}, {});
  const auto& snap = st.snapshot();
  ASSERT_EQ(snap.domains.size(), 2u);
  EXPECT_EQ(snap.domains[0].name, "rack-a");
  EXPECT_EQ(snap.domains[1].name, "rack-b");
  ASSERT_EQ(snap.domains[0].nodes.size(), 3u);
  EXPECT_EQ(st.NodeName(snap.domains[0].nodes[0]), "a0");
  EXPECT_EQ(st.NodeName(snap.domains[1].nodes[2]), "b2");
  EXPECT_EQ(st.FindNode("b1"), snap.domains[1].nodes[1]);
  EXPECT_EQ(st.FindNode("zz"), placement::kNoNode);
  EXPECT_EQ(st.FindDomain("rack-b"), 1);
  EXPECT_EQ(snap.nodes[st.FindNode("a0")].gpu_capacity, 4);
  EXPECT_TRUE(snap.nodes[st.FindNode("a0")].Schedulable());
}

TEST(ClusterStateTest, FallbackLabelAndUnlabelledNodes) {
  std::vector<Json> nodes = {Node({.name = "x"}), Node({.name = "y"}),
                             Node({.name = "cp", .gpus = 0})};
  nodes[0]["metadata"]["labels"]["rack"] = "r1";
  ClusterOptions opts;
  opts.domain_label_fallback = "rack";
  auto st = ClusterState::Build(nodes, {}, {}, opts);
  ASSERT_EQ(st.snapshot().domains.size(), 2u);  // "node/y" and "r1"; cp (no GPUs) left out
  EXPECT_NE(st.FindDomain("r1"), placement::kNoDomain);
  EXPECT_NE(st.FindDomain("node/y"), placement::kNoDomain);
  EXPECT_EQ(st.FindNode("cp"), placement::kNoNode);
}

TEST(ClusterStateTest, HealthFromConditionsTaintsAndCordon) {
  auto nodes = TwoRacks();
  nodes[1]["status"]["conditions"][0]["status"] = "False";  // a0 not ready
  nodes[2]["spec"]["unschedulable"] = true;                 // a2 cordoned
  nodes[3]["spec"]["taints"] = {
      {{"key", "example.com/fabric-down"}, {"effect", "NoExecute"}}};  // a1
  nodes[4]["spec"]["taints"] = {
      {{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}};                     // b0 tolerated
  nodes[5]["spec"]["taints"] = {{{"key", "x"}, {"effect", "PreferNoSchedule"}}};  // b2 ignored
  auto st = ClusterState::Build(nodes, {}, {}, {});
  const auto& n = st.snapshot().nodes;
  EXPECT_FALSE(n[st.FindNode("a0")].ready);
  EXPECT_TRUE(n[st.FindNode("a2")].cordoned);
  EXPECT_TRUE(n[st.FindNode("a1")].tainted);
  EXPECT_TRUE(st.Health(st.FindNode("a1")).no_execute_taint);
  EXPECT_TRUE(n[st.FindNode("b0")].Schedulable());
  EXPECT_TRUE(n[st.FindNode("b2")].Schedulable());
}

// The node lifecycle NoExecute taints keep a node from new work, but they are no failure of their
// own for a rank (its pod tolerates them; the Ready condition and the job's grace decide).
TEST(ClusterStateTest, NodeLifecycleTaintsBlockNewWorkButAreToleratedByRanks) {
  auto nodes = TwoRacks();
  nodes[3]["spec"]["taints"] = {
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}}};
  nodes[4]["spec"]["taints"] = {{{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoExecute"}}};
  auto st = ClusterState::Build(nodes, {}, {}, {});
  for (const char* name : {"a1", "b0"}) {
    EXPECT_FALSE(st.snapshot().nodes[st.FindNode(name)].Schedulable()) << name;
    EXPECT_FALSE(st.Health(st.FindNode(name)).no_execute_taint) << name;
  }
  EXPECT_TRUE(RankToleratesNoExecute("node.kubernetes.io/unreachable"));
  EXPECT_FALSE(RankToleratesNoExecute("node.kubernetes.io/out-of-service"));
}

TEST(ClusterStateTest, NotReadyWithinGraceCountsReady) {
  auto nodes = TwoRacks();
  nodes[1]["status"]["conditions"][0] = {
      {"type", "Ready"}, {"status", "Unknown"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}};
  ClusterOptions opts;
  opts.not_ready_grace = std::chrono::seconds(60);
  std::tm tm{};
  tm.tm_year = 126;
  tm.tm_mday = 1;
  tm.tm_sec = 30;
  opts.now = std::chrono::system_clock::from_time_t(timegm(&tm));
  auto st = ClusterState::Build(nodes, {}, {}, opts);
  EXPECT_TRUE(st.snapshot().nodes[st.FindNode("a0")].ready);
  EXPECT_FALSE(st.Health(st.FindNode("a0")).ready_condition);
  opts.now += std::chrono::seconds(31);
  st = ClusterState::Build(nodes, {}, {}, opts);
  EXPECT_FALSE(st.snapshot().nodes[st.FindNode("a0")].ready);
}

TEST(ClusterStateTest, PodsUseGpusUnlessTerminated) {
  std::vector<Json> pods = {Pod({.ns = "ns", .name = "p1", .node = "a0", .gpus = 2}),
                            Pod({.ns = "ns", .name = "p2", .node = "a0", .gpus = 1}),
                            Pod({.ns = "ns", .name = "done", .node = "a1", .gpus = 4}),
                            Pod({.ns = "ns", .name = "nominated", .gpus = 3})};
  pods[2]["status"]["phase"] = "Succeeded";
  pods[3]["status"]["nominatedNodeName"] = "b0";
  auto st = ClusterState::Build(TwoRacks(), pods, {}, {});
  const auto& n = st.snapshot().nodes;
  EXPECT_EQ(n[st.FindNode("a0")].gpu_used, 3);
  EXPECT_EQ(n[st.FindNode("a1")].gpu_used, 0);
  EXPECT_EQ(n[st.FindNode("b0")].gpu_used, 3);
  EXPECT_FALSE(n[st.FindNode("a0")].gang_reserved);
}

TEST(ClusterStateTest, PodGpuRequestRules) {
  Json pod = Json::parse(R"({"spec": {
    "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}},
                   {"resources": {"limits": {"nvidia.com/gpu": 2}}},
                   {"resources": {}}],
    "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})");
  EXPECT_EQ(PodGpuRequest(pod), 3);
  pod["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4";
  EXPECT_EQ(PodGpuRequest(pod), 4);
  EXPECT_EQ(PodGpuRequest(Json::object()), 0);
}

TEST(ClusterStateTest, ReservationsHoldGpusWithoutDoubleCounting) {
  Json job = Job({.ns = "ns", .name = "j", .replicas = 2});
  Place(job, {"d"}, {"a0", "a1"});
  // rank 0 pod bound on its planned node; rank 1 pod not created yet.
  Json rank0 = Pod({.ns = "ns", .name = "j-0", .node = "a0", .gpus = 4, .job = "j", .rank = 0});
  auto st = ClusterState::Build(TwoRacks(), {rank0}, {job}, {});
  const auto& n = st.snapshot().nodes;
  EXPECT_EQ(n[st.FindNode("a0")].gpu_used, 4);
  EXPECT_EQ(n[st.FindNode("a1")].gpu_used, 4);
  EXPECT_TRUE(n[st.FindNode("a0")].gang_reserved);
  EXPECT_TRUE(n[st.FindNode("a1")].gang_reserved);
  EXPECT_FALSE(n[st.FindNode("a2")].gang_reserved);
  EXPECT_EQ(st.JobsOnNode(st.FindNode("a1")), std::vector<std::string>{"ns/j"});
  ASSERT_NE(st.FindReservation("ns/j"), nullptr);
  EXPECT_EQ(st.FindReservation("ns/j")->rank_nodes.size(), 2u);
}

TEST(ClusterStateTest, RankPodBoundElsewhereCountsTwice) {
  Json job = Job({.ns = "ns", .name = "j", .gpus_per_replica = 2});
  Place(job, {"d"}, {"a0"});
  Json rank0 = Pod({.ns = "ns", .name = "j-0", .node = "b0", .gpus = 2, .job = "j", .rank = 0});
  auto st = ClusterState::Build(TwoRacks(), {rank0}, {job}, {});
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("a0")].gpu_used, 2);
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("b0")].gpu_used, 2);
}

TEST(ClusterStateTest, FinishedJobsHoldNothing) {
  Json job = Job({.ns = "ns", .name = "j"});
  Place(job, {"d"}, {"a0"});
  job["status"]["conditions"] = {{{"type", "Failed"}, {"status", "True"}}};
  auto st = ClusterState::Build(TwoRacks(), {}, {job}, {});
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("a0")].gpu_used, 0);
  EXPECT_TRUE(st.reservations().empty());
}

TEST(ClusterStateTest, ReserveAndRelease) {
  auto st = ClusterState::Build(TwoRacks(), {}, {}, {});
  JobPlacement p;
  p.ranks = {{0, "b0", "k-0"}, {1, "b1", "k-1"}};
  st.Reserve("ns/k", 4, p);
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("b0")].FreeGpus(), 0);
  EXPECT_TRUE(st.snapshot().nodes[st.FindNode("b1")].gang_reserved);
  st.Reserve("ns/k", 4, p);  // idempotent
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("b0")].gpu_used, 4);
  st.Release("ns/k");
  EXPECT_EQ(st.snapshot().nodes[st.FindNode("b0")].gpu_used, 0);
  EXPECT_FALSE(st.snapshot().nodes[st.FindNode("b1")].gang_reserved);
  st.Release("ns/k");  // no-op
}

TEST(ClusterStateTest, PlannedNode) {
  Json job = Job({.ns = "ns", .name = "j", .replicas = 2});
  Place(job, {"d"}, {"a0", "a2"});
  auto st = ClusterState::Build(TwoRacks(), {}, {job}, {});
  Json pod = {{"metadata",
               {{"name", "j-1"},
                {"namespace", "ns"},
                {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", "1"}}}}}};
  EXPECT_EQ(st.PlannedNode(pod), "a2");
  pod["metadata"]["annotations"]["nvl72.dev/node"] = "b2";
  EXPECT_EQ(st.PlannedNode(pod), "b2");
  Json plain = {{"metadata", {{"name", "x"}, {"namespace", "ns"}}}};
  EXPECT_EQ(st.PlannedNode(plain), std::nullopt);
  Json other_ns = pod;
  other_ns["metadata"].erase("annotations");
  other_ns["metadata"]["namespace"] = "other";
  EXPECT_EQ(st.PlannedNode(other_ns), std::nullopt);
}

TEST(ClusterStateTest, AdmitsThroughPolicy) {
  // Glue check: a snapshot built here is usable by the placement core.
  std::vector<Json> nodes;
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 18; ++i) {
      nodes.push_back(
          Node({.name = "r" + std::to_string(r) + "-n" + (i < 10 ? "0" : "") + std::to_string(i),
                .domain = "rack-" + std::to_string(r)}));
    }
  }
  Json busy = Job({.ns = "ns", .name = "busy", .replicas = 6});
  Place(busy, {"d"}, {"r0-n00", "r0-n01", "r0-n02", "r0-n03", "r0-n04", "r0-n05"});
  auto st = ClusterState::Build(nodes, {}, {busy}, {});
  auto policy = placement::MakePolicy("nvl72");
  placement::GangRequest req;
  req.key = "ns/big";
  req.replicas = 16;
  auto d = policy->PlaceGang(st.snapshot(), req);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.placement.DomainsSpanned(st.snapshot()), 1);
  EXPECT_EQ(st.snapshot().nodes[d.placement.rank_nodes[0]].domain, st.FindDomain("rack-1"));
}

}  // namespace
}  // namespace nvl72::model
