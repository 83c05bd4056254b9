// The nodes where a rank of a job can run, as kube-scheduler will judge its pod, and the reason a
// job waits. One home for both, shared by admission, recovery, defragmentation and `kubectl nvl72
// explain`:
//  - RankPodConstraints: the rank pod as the operator creates it (the template's spec plus
//    RankTolerations; the GPU resource is left to the placement core);
//  - EvaluateJobNodes: CheckNode against every node of a ClusterState (its NodeFacts and
//    NodeUsage), minus the nodes where kube-scheduler already refused a rank of the job
//    (status.refusedNodes, the safety net of docs/operator.md);
//  - JobGangRequest: the placement request with that verdict as its node mask;
//  - WaitingReason: why PlaceGang could not place it, in words a user can act on.
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/cluster_state.h"
#include "model/feasibility.h"
#include "model/job_spec.h"
#include "placement/policy.h"

namespace nvl72::model {

// Constraints of the job's rank pods (spec.template.spec plus RankTolerations(gpu_resource)).
// Errors name the field under spec.template.spec.
StatusOr<PodConstraints> RankPodConstraints(const JobSpec& spec, std::string_view gpu_resource);

struct JobNodes {
  std::vector<bool> allowed;  // by NodeId of the state
  int allowed_count = 0;
  // Nodes ruled out, per cause.
  struct Excluded {
    std::string cause;  // "nodeSelector", "required node affinity", "taint k=v:NoSchedule", ...
    int nodes = 0;
    std::string example;  // the first node's detail where the cause alone does not say it all
  };
  std::vector<Excluded> excluded;  // causes in the order nodes are first ruled out (NodeId order)
  int total = 0;                   // nodes judged

  // "" when no node is ruled out, else e.g. "the rank pod's constraints rule out 72 of 90 nodes:
  // 54 by nodeSelector, 18 by taint dedicated=team-a:NoSchedule (not tolerated)".
  std::string Summary() const;
};

// `refused`: node names kube-scheduler refused a rank of this job on (status.refusedNodes).
// A node labelled for a ComputeDomain (kComputeDomainNodeLabel: NVIDIA's driver serves one per
// node) that no admitted gang holds is ruled out too: a user's own ComputeDomain, or one whose
// gang left and whose claims the driver has not unprepared yet. A node a gang holds keeps its
// label while the gang runs; the reservation alone decides about it (so the gang's own ranks and
// defragmentation, which frees such nodes by moving the gang, are not blocked by the label).
JobNodes EvaluateJobNodes(const ClusterState& state, const PodConstraints& pod,
                          const std::vector<std::string>& refused = {});

// ToGangRequest with the verdict as allowed_nodes.
placement::GangRequest JobGangRequest(const JobSpec& spec, std::string key, int priority,
                                      const JobNodes& nodes);

// Why a gang waits: NeverFitsReason when the cluster can never hold it; else, when the verdict
// leaves too few nodes in every domain, that count and its causes; else the placement core's
// reason, followed by the verdict's summary when it rules anything out.
std::string WaitingReason(const placement::Snapshot& snapshot,
                          const placement::GangRequest& request, const JobNodes& nodes,
                          const placement::GangDecision& decision);

// status.refusedNodes of a job (nodes the safety net took out of its plans), when recorded at the
// job's current generation (status.replanGeneration == metadata.generation), else none.
std::vector<std::string> RefusedNodes(const Json& job);

// Everything above for one job object on one state: its request with the verdict as node mask.
// When the template's constraints do not parse, `error` says why and the request has no mask
// (kube-scheduler would refuse such a pod anyway: the caller makes the job wait with `error`).
struct JobVerdict {
  placement::GangRequest request;
  JobNodes nodes;
  std::string error;
};
JobVerdict JudgeJob(const ClusterState& state, const Json& job, const JobSpec& spec,
                    std::string key, int priority, std::string_view gpu_resource);

}  // namespace nvl72::model
