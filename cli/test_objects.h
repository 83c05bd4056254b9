// Kubernetes objects for the kubectl-nvl72 tests: nodes of fake NVL72 racks, pods and NVL72Jobs,
// built on model/test_objects_for_test.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/test_objects_for_test.h"

namespace nvl72::cli::testing {

using Json = nlohmann::json;

// A node of `domain` with `gpus` GPUs (capacity and allocatable) and 110 pods, Ready (or not) since
// 2026-01-01.
inline Json MakeNode(const std::string& name, const std::string& domain, bool ready = true,
                     int gpus = 4) {
  return model::testing::Node({.name = name,
                               .domain = domain,
                               .gpus = gpus,
                               .cpu = "",
                               .memory = "",
                               .capacity_gpus = gpus,
                               .ready = ready ? "True" : "False",
                               .ready_since = "2026-01-01T00:00:00Z"});
}

inline Json MakePod(const std::string& ns, const std::string& name, const std::string& node,
                    int gpus, const std::string& phase = "Running") {
  return model::testing::Pod({.ns = ns, .name = name, .node = node, .gpus = gpus, .phase = phase});
}

// A rank pod of a job (labels nvl72.dev/job and nvl72.dev/rank).
inline Json MakeRankPod(const std::string& ns, const std::string& job, int rank,
                        const std::string& node, int gpus = 4) {
  return model::testing::Pod({.ns = ns,
                              .name = job + "-" + std::to_string(rank),
                              .node = node,
                              .gpus = gpus,
                              .job = job,
                              .rank = rank});
}

inline Json MakeJob(const std::string& ns, const std::string& name, int replicas,
                    int segment_size = 0) {
  return model::testing::Job(
      {.ns = ns,
       .name = name,
       .replicas = replicas,
       .segment_size = segment_size > 0 ? std::optional<int>(segment_size) : std::nullopt});
}

// Marks `job` admitted with ranks 0.. on `nodes`; `domains` one per segment.
inline void Admit(Json& job, const std::vector<std::string>& domains,
                  const std::vector<std::string>& nodes, const std::string& state = "Running") {
  job["status"] = {{"state", state},
                   {"conditions",
                    {{{"type", "Admitted"},
                      {"status", "True"},
                      {"reason", "Placed"},
                      {"message", "best fit: domain with the least leftover capacity"},
                      {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
  model::testing::Place(job, domains, nodes);
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
