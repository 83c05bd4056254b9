#include "model/slim.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "model/cluster_state.h"

namespace nvl72::model {
namespace {

using Json = nlohmann::json;

// A pod shaped like the API server returns it: managedFields, image, command, env, volumes,
// containerStatuses, podIPs... plus everything placement reads.
Json FullPod(const std::string& name, const std::string& node, int gpus, const std::string& phase) {
  Json p = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"namespace": "team", "uid": "u-1", "resourceVersion": "42",
      "creationTimestamp": "2026-12-02T10:00:00Z",
      "labels": {"nvl72.dev/job": "moe", "nvl72.dev/rank": "3"},
      "annotations": {"nvl72.dev/node": "a0",
                      "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}"},
      "ownerReferences": [{"apiVersion": "nvl72.dev/v1alpha1", "kind": "NVL72Job", "name": "moe",
                           "uid": "j-1", "controller": true}],
      "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
    "spec": {"schedulerName": "nvl72-scheduler", "priority": 100, "terminationGracePeriodSeconds": 30,
      "restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
      "overhead": {"cpu": "250m"}, "schedulingGroup": {"podGroupName": "moe-seg-0"},
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
      "volumes": [{"name": "kube-api-access", "projected": {"sources": []}}],
      "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always",
                          "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
      "containers": [{"name": "trainer", "image": "busybox:1.36", "command": ["sleep", "3600"],
                      "env": [{"name": "NVL72_RANK", "value": "3"}],
                      "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run"}],
                      "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "4"}}}]},
    "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                               "reason": "DeletionByTaintManager"},
                              {"type": "PodScheduled", "status": "True"},
                              {"type": "Ready", "status": "False"}],
      "reason": "NodeLost", "message": "node gone", "nominatedNodeName": "a1",
      "startTime": "2026-12-02T10:00:01Z", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
      "podIPs": [{"ip": "10.1.0.1"}], "qosClass": "Burstable",
      "containerStatuses": [{"name": "trainer", "ready": true, "image": "busybox:1.36"}]}
  })");
  p["metadata"]["name"] = name;
  p["spec"]["nodeName"] = node;
  p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  p["status"]["phase"] = phase;
  return p;
}

Json FullNode(const std::string& name, const std::string& clique, bool ready, bool cordoned) {
  Json n = Json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"uid": "n-1", "resourceVersion": "7",
      "labels": {"kubernetes.io/hostname": "x", "type": "kwok"},
      "annotations": {"kwok.x-k8s.io/node": "fake"},
      "managedFields": [{"manager": "kwok", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
    "spec": {"podCIDR": "10.0.1.0/24", "providerID": "kwok://x",
      "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
    "status": {"capacity": {"cpu": "72", "nvidia.com/gpu": "4"},
      "allocatable": {"cpu": "72", "nvidia.com/gpu": "4", "pods": "110"},
      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
      "images": [{"names": ["registry/big-image:1"], "sizeBytes": 123456789}],
      "nodeInfo": {"kubeletVersion": "v1.34.4", "osImage": "kwok"}}
  })");
  n["metadata"]["name"] = name;
  n["metadata"]["labels"]["nvidia.com/gpu.clique"] = clique;
  n["spec"]["unschedulable"] = cordoned;
  n["status"]["conditions"] = {{{"type", "Ready"},
                                {"status", ready ? "True" : "False"},
                                {"lastTransitionTime", "2026-12-02T09:00:00Z"}}};
  return n;
}

ClusterOptions Options() {
  ClusterOptions o;
  o.domain_label_fallback = "example.com/rack";
  return o;
}

TEST(SlimTest, PodKeepsWhatPlacementReadsAndDropsTheRest) {
  const Json full = FullPod("moe-3", "a0", 4, "Failed");
  Json slim = full;
  SlimPod(slim, Options());
  EXPECT_EQ(slim["metadata"], Json::parse(R"({"name": "moe-3", "namespace": "team", "uid": "u-1",
      "resourceVersion": "42", "labels": {"nvl72.dev/job": "moe", "nvl72.dev/rank": "3"},
      "annotations": {"nvl72.dev/node": "a0"},
      "ownerReferences": [{"uid": "j-1", "controller": true}]})"));
  // Requests of every resource and the overhead stay: a node's use counts them all. The PodGroup
  // stays: new rank pods join a group only when their peers are in it.
  EXPECT_EQ(slim["spec"], Json::parse(R"({"nodeName": "a0", "schedulerName": "nvl72-scheduler",
      "priority": 100, "terminationGracePeriodSeconds": 30, "overhead": {"cpu": "250m"},
      "schedulingGroup": {"podGroupName": "moe-seg-0"},
      "initContainers": [{"name": "init", "restartPolicy": "Always",
                          "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
      "containers": [{"name": "trainer", "resources": {"requests": {"cpu": "1"},
                                                       "limits": {"nvidia.com/gpu": "4"}}}]})"));
  // PodScheduled stays (the safety net reads it); other conditions go.
  EXPECT_EQ(slim["status"], Json::parse(R"({"phase": "Failed", "reason": "NodeLost",
      "nominatedNodeName": "a1", "conditions": [{"type": "DisruptionTarget", "status": "True",
                                                 "reason": "DeletionByTaintManager"},
                                                {"type": "PodScheduled", "status": "True"}]})"));
  EXPECT_FALSE(slim.contains("kind"));
}

TEST(SlimTest, NodeKeepsWhatPlacementReadsAndDropsTheRest) {
  const Json full = FullNode("a0", "rack-a", true, true);
  Json slim = full;
  SlimNode(slim, Options());
  // Every label stays (a job's nodeSelector may name any), and all of allocatable.
  EXPECT_EQ(slim["metadata"], Json::parse(R"({"name": "a0", "uid": "n-1", "resourceVersion": "7",
      "labels": {"nvidia.com/gpu.clique": "rack-a", "kubernetes.io/hostname": "x",
                 "type": "kwok"}})"));
  EXPECT_EQ(slim["spec"], Json({{"taints", full["spec"]["taints"]}, {"unschedulable", true}}));
  EXPECT_EQ(slim["status"], Json({{"allocatable", full["status"]["allocatable"]},
                                  {"conditions", full["status"]["conditions"]}}));
  // Other conditions go.
  Json fb = FullNode("b0", "rack-b", false, false);
  fb["metadata"]["labels"].erase("nvidia.com/gpu.clique");
  fb["metadata"]["labels"]["example.com/rack"] = "r7";
  fb["status"]["conditions"].push_back({{"type", "MemoryPressure"}, {"status", "False"}});
  SlimNode(fb, Options());
  EXPECT_EQ(fb["metadata"]["labels"]["example.com/rack"], "r7");
  ASSERT_EQ(fb["status"]["conditions"].size(), 1u);
  EXPECT_EQ(fb["status"]["conditions"][0]["type"], "Ready");
}

TEST(SlimTest, MalformedObjectsAreLeftAlone) {
  for (const Json& j : {Json(), Json(3), Json::array(), Json{{"spec", 1}, {"status", "x"}}}) {
    Json p = j, n = j;
    SlimPod(p, Options());
    SlimNode(n, Options());
    EXPECT_EQ(p, j);
    EXPECT_EQ(n, j);
  }
}

// The snapshot built from slimmed objects equals the one from full objects: nothing placement
// reads was dropped.
TEST(SlimTest, ClusterStateIsTheSameOnSlimmedObjects) {
  std::vector<Json> nodes = {
      FullNode("a0", "rack-a", true, false), FullNode("a1", "rack-a", false, false),
      FullNode("b0", "rack-b", true, true), FullNode("b1", "rack-b", true, false)};
  nodes[3]["metadata"]["labels"].erase("nvidia.com/gpu.clique");
  nodes[3]["metadata"]["labels"]["example.com/rack"] = "rack-b";
  std::vector<Json> pods = {FullPod("p0", "a0", 4, "Running"), FullPod("p1", "b1", 2, "Pending"),
                            FullPod("p2", "b1", 1, "Succeeded"), FullPod("p3", "", 4, "Pending")};
  pods[1]["metadata"]["labels"] = {{"app", "x"}};  // not a gang rank
  std::vector<Json> jobs = {Json::parse(R"({"metadata": {"name": "moe", "namespace": "team"},
      "spec": {"replicas": 1, "gpusPerReplica": 4, "template": {}},
      "status": {"placement": {"domains": ["rack-a"],
                               "ranks": [{"rank": 3, "node": "a0", "pod": "moe-3"}]}}})")};
  std::vector<Json> slim_nodes = nodes, slim_pods = pods;
  for (Json& n : slim_nodes) SlimNode(n, Options());
  for (Json& p : slim_pods) SlimPod(p, Options());
  ClusterOptions opts = Options();
  opts.now = std::chrono::system_clock::now();
  ClusterState a = ClusterState::Build(nodes, pods, jobs, opts);
  ClusterState b = ClusterState::Build(slim_nodes, slim_pods, jobs, opts);
  ASSERT_EQ(a.snapshot().nodes.size(), 4u);
  ASSERT_EQ(b.snapshot().nodes.size(), 4u);
  int exercised = 0;
  for (size_t i = 0; i < 4; ++i) {
    const auto& x = a.snapshot().nodes[i];
    const auto& y = b.snapshot().nodes[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.domain, y.domain);
    EXPECT_EQ(x.gpu_capacity, y.gpu_capacity);
    EXPECT_EQ(x.gpu_used, y.gpu_used) << x.name;
    EXPECT_EQ(x.ready, y.ready);
    EXPECT_EQ(x.cordoned, y.cordoned);
    EXPECT_EQ(x.tainted, y.tainted);
    EXPECT_EQ(x.gang_reserved, y.gang_reserved);
    EXPECT_EQ(x.gpu_reclaimable, y.gpu_reclaimable);
    EXPECT_EQ(a.Health(static_cast<placement::NodeId>(i)).not_ready_since,
              b.Health(static_cast<placement::NodeId>(i)).not_ready_since);
    exercised += x.gpu_used > 0 || !x.ready || x.cordoned;
  }
  EXPECT_GE(exercised, 3) << "the fixture exercises usage, readiness and cordon";
  EXPECT_EQ(a.snapshot().domains.size(), b.snapshot().domains.size());
  for (const Json& p : pods) EXPECT_EQ(a.PlannedNode(p), b.PlannedNode(p));
  for (const Json& p : slim_pods) EXPECT_EQ(a.PlannedNode(p), b.PlannedNode(p));
}

}  // namespace
}  // namespace nvl72::model
