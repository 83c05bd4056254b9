// Kubernetes object fixtures for the extender's tests and benchmarks: nodes of NVL72 racks, pods
// and NVL72Jobs as the API server would send them. Tests and benchmarks only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvl72::extender::testing {

using Json = nlohmann::json;

inline Json MakeNode(const std::string& name, const std::string& clique, int gpus = 4) {
  Json n = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
      {"spec", Json::object()},
      {"status",
       {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "72"}}},
        {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "72"}, {"pods", "110"}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!clique.empty()) n["metadata"]["labels"]["nvidia.com/gpu.clique"] = clique;
  return n;
}

// A pod requesting `gpus` GPUs, bound to `node` if non-empty. `job` non-empty makes it a gang rank
// (labels nvl72.dev/job and nvl72.dev/rank, annotation nvl72.dev/node = planned if non-empty).
inline Json MakePod(const std::string& ns, const std::string& name, int gpus,
                    const std::string& node = "", const std::string& job = "", int rank = 0,
                    const std::string& planned = "") {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + ns + "-" + name}}},
            {"spec",
             {{"schedulerName", "nvl72-scheduler"},
              {"containers",
               {{{"name", "main"},
                 {"image", "busybox"},
                 {"resources",
                  {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}},
                   {"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}}}}},
            {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (gpus > 0) {
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  }
  if (!node.empty()) p["spec"]["nodeName"] = node;
  if (!job.empty()) {
    p["metadata"]["labels"] = {{"nvl72.dev/job", job}, {"nvl72.dev/rank", std::to_string(rank)}};
    if (!planned.empty()) p["metadata"]["annotations"] = {{"nvl72.dev/node", planned}};
  }
  return p;
}

// An admitted NVL72Job whose status.placement puts rank i on nodes[i].
inline Json MakeJob(const std::string& ns, const std::string& name, int gpus_per_replica,
                    const std::vector<std::string>& nodes, const std::string& domain = "d") {
  Json ranks = Json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    ranks.push_back({{"rank", i}, {"node", nodes[i]}, {"pod", name + "-" + std::to_string(i)}});
  }
  return {{"apiVersion", "nvl72.dev/v1alpha1"},
          {"kind", "NVL72Job"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-job-" + name}}},
          {"spec",
           {{"replicas", nodes.size()},
            {"gpusPerReplica", gpus_per_replica},
            {"topology", {{"mode", "Required"}}},
            {"template", Json::object()}}},
          {"status", {{"placement", {{"domains", {domain}}, {"ranks", ranks}}}}}};
}

// `racks` racks of `nodes_per_rack` nodes named "r<rack>-n<i>" (zero-padded), clique "rack-<rack>".
inline std::vector<Json> MakeRacks(int racks, int nodes_per_rack, int gpus = 4) {
  std::vector<Json> out;
  out.reserve(static_cast<size_t>(racks * nodes_per_rack));
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
