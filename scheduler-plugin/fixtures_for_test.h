// Kubernetes object fixtures for the extender's tests and benchmarks: nodes of NVL72 racks, pods
// and NVL72Jobs as the API server would send them, built on model/test_objects_for_test.h. Tests
// and benchmarks only.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/test_objects_for_test.h"

namespace nvl72::extender::testing {

using Json = nlohmann::json;

// A node of `clique` ("" = no clique label) as kwok fakes one: `gpus` GPUs and 72 CPUs in capacity
// and allocatable, 110 pods, Ready.
inline Json MakeNode(const std::string& name, const std::string& clique, int gpus = 4) {
  return model::testing::Node({.name = name,
                               .domain = clique,
                               .gpus = gpus,
                               .cpu = "72",
                               .memory = "",
                               .capacity_gpus = gpus});
}

// A pod requesting `gpus` GPUs (and 1 CPU, 1Gi, limits equal to requests) of the nvl72 scheduler,
// bound and Running on `node` if non-empty, else Pending. `job` non-empty makes it a gang rank
// (labels nvl72.dev/job and nvl72.dev/rank, annotation nvl72.dev/node = planned if non-empty).
inline Json MakePod(const std::string& ns, const std::string& name, int gpus,
                    const std::string& node = "", const std::string& job = "", int rank = 0,
                    const std::string& planned = "") {
  Json p = model::testing::Pod({.ns = ns,
                                .name = name,
                                .node = node,
                                .gpus = gpus,
                                .cpu = "1",
                                .phase = node.empty() ? "Pending" : "Running",
                                .job = job,
                                .rank = rank,
                                .planned = job.empty() ? "" : planned});
  p["metadata"]["uid"] = "uid-" + ns + "-" + name;
  p["spec"]["schedulerName"] = "nvl72-scheduler";
  Json& resources = p["spec"]["containers"][0]["resources"];
  resources["requests"]["memory"] = "1Gi";
  resources["limits"] = resources["requests"];
  return p;
}

// An admitted NVL72Job (one replica per node, an empty template) whose status.placement puts rank i
// on nodes[i].
inline Json MakeJob(const std::string& ns, const std::string& name, int gpus_per_replica,
                    const std::vector<std::string>& nodes, const std::string& domain = "d") {
  Json j = model::testing::Job({.ns = ns,
                                .name = name,
                                .replicas = static_cast<int>(nodes.size()),
                                .gpus_per_replica = gpus_per_replica,
                                .pod_template = Json::object()});
  j["metadata"]["uid"] = "uid-job-" + name;
  model::testing::Place(j, {domain}, nodes);
  return j;
}

// `racks` racks of `nodes_per_rack` nodes named "r<rack>-n<i>" (zero-padded), clique "rack-<rack>".
inline std::vector<Json> MakeRacks(int racks, int nodes_per_rack, int gpus = 4) {
  std::vector<Json> out;
  out.reserve(static_cast<size_t>(racks) * static_cast<size_t>(nodes_per_rack));
  char buf[64];
  for (int r = 0; r < racks; ++r) {
    for (int i = 0; i < nodes_per_rack; ++i) {
      std::snprintf(buf, sizeof buf, "r%03d-n%02d", r, i);
      std::string clique = "rack-" + std::to_string(r);
      out.push_back(MakeNode(buf, clique, gpus));
    }
  }
  return out;
}

inline std::vector<const Json*> Ptrs(const std::vector<Json>& v) {
  std::vector<const Json*> out;
  out.reserve(v.size());
  for (const Json& j : v) out.push_back(&j);
  return out;
}

}  // namespace nvl72::extender::testing
