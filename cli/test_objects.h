// Kubernetes objects for the kubectl-nvl72 tests: nodes of fake NVL72 racks, pods and NVL72Jobs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvl72::cli::testing {

using Json = nlohmann::json;

inline Json MakeNode(const std::string& name, const std::string& domain, bool ready = true,
                     int gpus = 4) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.clique", domain}}}}},
              {"spec", Json::object()},
              {"status",
               {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}, {"pods", "110"}}},
                {"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                {"conditions",
                 {{{"type", "Ready"},
                   {"status", ready ? "True" : "False"},
                   {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}}}};
}

inline Json MakePod(const std::string& ns, const std::string& name, const std::string& node,
                    int gpus, const std::string& phase = "Running") {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec",
               {{"nodeName", node},
                {"containers",
                 {{{"name", "main"},
                   {"image", "x"},
                   {"resources", {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
              {"status", {{"phase", phase}}}};
}

// A rank pod of a job (labels nvl72.dev/job and nvl72.dev/rank).
inline Json MakeRankPod(const std::string& ns, const std::string& job, int rank,
                        const std::string& node, int gpus = 4) {
  Json p = MakePod(ns, job + "-" + std::to_string(rank), node, gpus);
  p["metadata"]["labels"] = {{"nvl72.dev/job", job}, {"nvl72.dev/rank", std::to_string(rank)}};
  return p;
}

inline Json MakeJob(const std::string& ns, const std::string& name, int replicas,
                    int segment_size = 0) {
  Json topology = {{"mode", "Required"}};
  if (segment_size > 0) topology["segmentSize"] = segment_size;
  return Json{{"apiVersion", "nvl72.dev/v1alpha1"},
              {"kind", "NVL72Job"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec",
               {{"replicas", replicas},
                {"gpusPerReplica", 4},
                {"topology", topology},
                {"template", {{"spec", {{"containers", {{{"name", "main"}, {"image", "x"}}}}}}}}}}};
}

// Marks `job` admitted with ranks 0.. on `nodes`; `domains` one per segment.
inline void Admit(Json& job, const std::vector<std::string>& domains,
                  const std::vector<std::string>& nodes, const std::string& state = "Running") {
  Json ranks = Json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    ranks.push_back(
        {{"rank", static_cast<int>(i)},
         {"node", nodes[i]},
         {"pod", job["metadata"]["name"].get<std::string>() + "-" + std::to_string(i)}});
  }
  job["status"] = {{"state", state},
                   {"placement", {{"domains", domains}, {"ranks", ranks}}},
                   {"conditions",
                    {{{"type", "Admitted"},
                      {"status", "True"},
                      {"reason", "Placed"},
                      {"message", "best fit: domain with the least leftover capacity"},
                      {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
}

inline void Wait(Json& job, const std::string& message) {
  job["status"] = {{"state", "Waiting"},
                   {"conditions",
                    {{{"type", "Admitted"},
                      {"status", "False"},
                      {"reason", "NoCapacity"},
                      {"message", message},
                      {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
}

// Two domains "c0ffee.0" and "c0ffee.1" of 6 nodes (r<d>-n<i>) x 4 GPUs:
//   c0ffee.0: job default/train on n0..n2, a 2-GPU ordinary pod on n3, n4 and n5 empty.
//   c0ffee.1: n5 NotReady, the rest empty.
//   default/big (4 ranks) waits; team/small (2 ranks) has no status yet.
struct Fixture {
  std::vector<Json> nodes, pods, jobs;
  Fixture() {
    for (int d = 0; d < 2; ++d) {
      for (int i = 0; i < 6; ++i) {
        nodes.push_back(MakeNode("r" + std::to_string(d) + "-n" + std::to_string(i),
                                 "c0ffee." + std::to_string(d), !(d == 1 && i == 5)));
      }
    }
    Json train = MakeJob("default", "train", 3);
    Admit(train, {"c0ffee.0"}, {"r0-n0", "r0-n1", "r0-n2"});
    for (int r = 0; r < 3; ++r)
      pods.push_back(MakeRankPod("default", "train", r, "r0-n" + std::to_string(r)));
    pods.push_back(MakePod("default", "notebook", "r0-n3", 2));
    Json big = MakeJob("default", "big", 4);
    Wait(big, "needs 4 nodes with 4 free GPUs in one NVLink domain; largest free block is 3 nodes");
    jobs = {train, big, MakeJob("team", "small", 2)};
  }
};

}  // namespace nvl72::cli::testing
