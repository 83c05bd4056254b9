// Node health of a job's ranks: which ranks sit on nodes that count as failed. Pure; the basis of
// in-place recovery (issue 6), which replaces exactly these ranks.
//
// A node counts as failed for a rank when: it is gone (deleted / not in the snapshot); its Ready
// condition is not True for at least `grace` before `now` (a shorter blip changes nothing); it has
// an untolerated NoExecute taint (e.g. node.kubernetes.io/unreachable); or its allocatable GPUs
// dropped below what the rank needs. Cordoned nodes are failed only when the caller asks for it
// (`cordoned_fails`, the operator's --cordoned-ranks=move); by default running ranks stay.
// A rank also fails when its pod failed because of the node (PodFailedByNode): the node may look
// healthy, but the rank must not stay there. A pod that failed on its own (the application exited
// non-zero) is the job's outcome, not a node failure.
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster_state.h"

namespace nvl72::op {

enum class NodeFailure {
  kNone,
  kNodeGone,
  kNotReady,
  kNoExecuteTaint,
  kGpusLost,
  kPodFailedByNode,  // the rank's pod failed with a node-caused reason (PodFailedByNode)
  kCordoned,         // spec.unschedulable, only when the caller moves ranks off cordoned nodes
  kDrained,     // a cordoned node without the rank's pod (a drain evicted it): it cannot return
  kLeftDomain,  // a Required segment's node now carries another domain label (relabelled)
};
std::string_view NodeFailureName(NodeFailure f);

struct FailedRank {
  int rank = 0;
  std::string node;
  NodeFailure cause = NodeFailure::kNone;
  std::string detail;  // kPodFailedByNode: the pod's reason, e.g. "NodeLost"
};

// True when a failure has to move the rank at once because the rank no longer runs (or its node is
// dead); false for kCordoned, where the rank still runs and may stay until a node is free.
bool RankStopped(NodeFailure f);

// Health of one node for a rank of `gpus_per_replica` GPUs.
NodeFailure CheckNode(const model::ClusterState& state, std::string_view node, int gpus_per_replica,
                      std::chrono::seconds grace, std::chrono::system_clock::time_point now,
                      bool cordoned_fails = false);

// Why `pod` failed because of its node, or "" when it did not fail or failed on its own.
// Node-caused: phase Failed and either status.reason one the kubelet / node lifecycle sets for the
// node's sake (NodeLost, Evicted, NodeShutdown, Shutdown, Terminated, NodeAffinity,
// UnexpectedAdmissionError, OutOf<resource>), or a DisruptionTarget condition True whose reason
// is TerminationByKubelet, DeletionByTaintManager, DeletionByPodGC or EvictionByEvictionAPI (a
// drain). PreemptionByScheduler and plain container failures (reason "" / "Error") are not.
std::string PodFailedByNode(const nlohmann::json& pod);

// The ranks of `placement` whose node has failed, in rank order.
std::vector<FailedRank> FailedRanks(const model::ClusterState& state,
                                    const model::JobPlacement& placement, int gpus_per_replica,
                                    std::chrono::seconds grace,
                                    std::chrono::system_clock::time_point now,
                                    bool cordoned_fails = false);

}  // namespace nvl72::op
