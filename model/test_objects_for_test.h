// Kubernetes objects for the unit tests of every layer: GPU nodes, pods and NVL72Jobs shaped like
// the API server returns them. The one place that writes such objects from scratch; each layer's
// fixtures (operator/test_fixtures_for_test.h, scheduler-plugin/fixtures_for_test.h,
// cli/test_objects.h) build on it. Test-only, header-only.
//
// Options with defaults, set by name:
//   Node({.name = "a0", .domain = "rack-a", .ready = "False", .ready_since =
//   "2026-01-01T00:00:00Z"}) Pod({.ns = "ml", .name = "moe-3", .node = "a0", .gpus = 4, .job =
//   "moe", .rank = 3}) Job({.ns = "ml", .name = "moe", .replicas = 16})
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvl72::model::testing {

using Json = nlohmann::json;

// A node. The defaults make a kwok-like GB200 node: 4 GPUs, 144 CPUs, 960Gi, 110 pods, Ready.
struct NodeOptions {
  std::string name = {};                  // also the value of label kubernetes.io/hostname
  std::string domain = {};                // label nvidia.com/gpu.clique; "" = no label
  int gpus = 4;                           // allocatable nvidia.com/gpu
  std::string cpu = "144";                // allocatable (and capacity) cpu; "" = none
  std::string memory = "960Gi";           // allocatable (and capacity) memory; "" = none
  std::string pods = "110";               // allocatable pods; "" = none
  std::optional<int> capacity_gpus = {};  // status.capacity with these GPUs; unset = no capacity
  std::string ready = "True";             // status of the Ready condition
  std::string ready_since = {};           // its lastTransitionTime; "" = none
  Json taints = nullptr;                  // spec.taints; null = none
  bool unschedulable = false;             // spec.unschedulable: true (cordoned)
};

inline Json Node(const NodeOptions& o) {
  Json labels = {{"kubernetes.io/hostname", o.name}};
  if (!o.domain.empty()) labels["nvidia.com/gpu.clique"] = o.domain;
  Json spec = Json::object();
  if (!o.taints.is_null()) spec["taints"] = o.taints;
  if (o.unschedulable) spec["unschedulable"] = true;
  auto resources = [&](int gpus) {
    Json r = {{"nvidia.com/gpu", std::to_string(gpus)}};
    if (!o.cpu.empty()) r["cpu"] = o.cpu;
    if (!o.memory.empty()) r["memory"] = o.memory;
    return r;
  };
  Json allocatable = resources(o.gpus);
  if (!o.pods.empty()) allocatable["pods"] = o.pods;
  Json ready = {{"type", "Ready"}, {"status", o.ready}};
  if (!o.ready_since.empty()) ready["lastTransitionTime"] = o.ready_since;
  Json status = {{"allocatable", allocatable}, {"conditions", Json::array({ready})}};
  if (o.capacity_gpus.has_value()) status["capacity"] = resources(*o.capacity_gpus);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", o.name}, {"labels", labels}}},
          {"spec", spec},
          {"status", status}};
}

// A pod of one container "main" (image busybox).
struct PodOptions {
  std::string ns = {};  // metadata.namespace; "" = none
  std::string name = {};
  std::string node = {};          // spec.nodeName; "" = unbound (no nodeName)
  int gpus = 0;                   // the container's requests of nvidia.com/gpu; 0 = none
  std::string cpu = {};           // the container's requests of cpu; "" = none
  std::string phase = "Running";  // status.phase; "" = no status
  std::string job = {};           // a rank of this job: labels nvl72.dev/job and nvl72.dev/rank
  int rank = 0;
  std::string planned = {};  // annotation nvl72.dev/node (the rank's planned node); "" = none
};

inline Json Pod(const PodOptions& o) {
  Json meta = {{"name", o.name}};
  if (!o.ns.empty()) meta["namespace"] = o.ns;
  if (!o.job.empty()) {
    meta["labels"] = {{"nvl72.dev/job", o.job}, {"nvl72.dev/rank", std::to_string(o.rank)}};
  }
  if (!o.planned.empty()) meta["annotations"] = {{"nvl72.dev/node", o.planned}};
  Json requests = Json::object();
  if (!o.cpu.empty()) requests["cpu"] = o.cpu;
  if (o.gpus > 0) requests["nvidia.com/gpu"] = std::to_string(o.gpus);
  Json container = {{"name", "main"}, {"image", "busybox"}};
  if (!requests.empty()) container["resources"] = {{"requests", requests}};
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", meta},
            {"spec", {{"containers", Json::array({container})}}}};
  if (!o.node.empty()) p["spec"]["nodeName"] = o.node;
  if (!o.phase.empty()) p["status"] = {{"phase", o.phase}};
  return p;
}

// The pod template of a job: one container "main" (image busybox), no requests.
inline Json DefaultPodTemplate() {
  return {{"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
}

// An NVL72Job without status.
struct JobOptions {
  std::string ns = {};
  std::string name = {};
  int replicas = 1;
  int gpus_per_replica = 4;
  std::string mode = "Required";             // spec.topology.mode; "" = none
  std::optional<int> segment_size = {};      // spec.topology.segmentSize; unset = none
  Json recovery = nullptr;                   // spec.recovery; null = none
  Json pod_template = DefaultPodTemplate();  // spec.template
};

inline Json Job(const JobOptions& o) {
  Json spec = {{"replicas", o.replicas},
               {"gpusPerReplica", o.gpus_per_replica},
               {"template", o.pod_template}};
  if (!o.mode.empty()) spec["topology"]["mode"] = o.mode;
  if (o.segment_size.has_value()) spec["topology"]["segmentSize"] = *o.segment_size;
  if (!o.recovery.is_null()) spec["recovery"] = o.recovery;
  return {{"apiVersion", "nvl72.dev/v1alpha1"},
          {"kind", "NVL72Job"},
          {"metadata", {{"name", o.name}, {"namespace", o.ns}}},
          {"spec", spec}};
}

// Sets the job's status.placement: `domains`, and rank i on nodes[i] in pod "<job>-<i>".
inline void Place(Json& job, const std::vector<std::string>& domains,
                  const std::vector<std::string>& nodes) {
  const std::string name = job["metadata"]["name"];
  Json ranks = Json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    ranks.push_back({{"rank", static_cast<int>(i)},
                     {"node", nodes[i]},
                     {"pod", name + "-" + std::to_string(i)}});
  }
  job["status"]["placement"] = {{"domains", domains}, {"ranks", ranks}};
}

}  // namespace nvl72::model::testing
