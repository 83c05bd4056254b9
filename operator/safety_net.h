// The safety net: a rank that kube-scheduler refuses on its planned node does not strand its gang.
//
// The operator judges each rank pod against each node as kube-scheduler's main filters do
// (model/job_nodes.h), but kube-scheduler checks more (volume topology, pod affinity, custom
// plugins). When a rank pod of an admitted job has been unbound with PodScheduled=False reason
// Unschedulable for longer than the bound, the operator releases the gang's reservation and plans
// it again without that node:
//  - status: placement removed, the node (of every refusal that blames its node: BlamedRanks) added
//    to refusedNodes, replans + 1, replanGeneration =
//    metadata.generation, Admitted False reason Replanning; the admission pass then places the
//    job again (model::JudgeJob leaves refusedNodes out);
//  - the gang's rank pods are deleted (a job with no placement keeps no rank pods: DeleteLeftovers
//    is level-triggered, so a crash between the two steps converges);
//  - the bound doubles with every re-plan (backoff), and a refusal after max_replans re-plans makes
//  the job wait
//    with reason ReplanLimit until its spec changes (a new generation starts afresh).
// Thread-safety: pure functions over values.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/job_spec.h"

namespace nvl72::op {

using Json = nlohmann::json;

inline constexpr std::string_view kReasonReplanning = "Replanning";
inline constexpr std::string_view kReasonReplanLimit = "ReplanLimit";

struct SafetyNetOptions {
  std::chrono::seconds bound{60};  // --unschedulable-replan-seconds
  int max_replans = 3;             // --max-replans
};

// A rank pod kube-scheduler refuses: unbound, PodScheduled False with reason Unschedulable.
struct RefusedRank {
  int rank = -1;
  std::string node;                               // its planned node
  std::string message;                            // kube-scheduler's message
  std::chrono::system_clock::time_point since{};  // the condition's lastTransitionTime
};
// The refused ranks of `placement` among `pods`, in rank order.
std::vector<RefusedRank> RefusedRanks(const model::JobPlacement& placement,
                                      const std::vector<const Json*>& pods);

// The refusals that blame their node. When the ranks are in a PodGroup (operator/pod_groups.h),
// kube-scheduler refuses the whole group when one rank fails: that rank gets the node verdict
// ("0/<n> nodes are available: ..."), the others only the group's ("minCount (4) cannot be
// satisfied ..."), which says nothing about their nodes. So when any refusal is a node verdict,
// only those count; otherwise all do.
std::vector<RefusedRank> BlamedRanks(std::vector<RefusedRank> refused);

struct SafetyNetDecision {
  bool replan = false;  // write `status`, then delete the rank pods
  Json status;          // the job's status after the re-plan (when replan)
  std::string message;  // why (event, log, condition)
  // Look again then: the earliest time a refused rank reaches the bound.
  std::optional<std::chrono::milliseconds> recheck_after;
};
SafetyNetDecision DecideSafetyNet(const Json& job, const model::JobPlacement& placement,
                                  const std::vector<const Json*>& pods,
                                  const SafetyNetOptions& options,
                                  std::chrono::system_clock::time_point now);

// status.replans counted at the job's current generation (0 after a spec change).
int ReplansAtGeneration(const Json& job);
// True when a rank was refused again after max_replans re-plans at the job's current generation
// (Admitted reason ReplanLimit): admission leaves the job waiting until its spec changes.
bool ReplanLimitReached(const Json& job);

}  // namespace nvl72::op
