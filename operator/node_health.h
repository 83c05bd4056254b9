// Node health of a job's ranks: which ranks sit on nodes that count as failed. Pure; the basis of
// in-place recovery (issue 6), which replaces exactly these ranks.
//
// A node counts as failed for a rank when: it is gone (deleted / not in the snapshot); its Ready
// condition is not True for at least `grace` before `now` (a shorter blip changes nothing); it has an
// untolerated NoExecute taint (e.g. node.kubernetes.io/unreachable); or its allocatable GPUs dropped
// below what the rank needs. Cordoned nodes are NOT failed (running ranks stay).
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster_state.h"

namespace nvl72::op {

enum class NodeFailure { kNone, kNodeGone, kNotReady, kNoExecuteTaint, kGpusLost };
std::string_view NodeFailureName(NodeFailure f);

struct FailedRank {
  int rank = 0;
  std::string node;
  NodeFailure cause = NodeFailure::kNone;
};

// Health of one node for a rank of `gpus_per_replica` GPUs.
NodeFailure CheckNode(const model::ClusterState& state, std::string_view node, int gpus_per_replica,
                      std::chrono::seconds grace, std::chrono::system_clock::time_point now);

// The ranks of `placement` whose node has failed, in rank order.
std::vector<FailedRank> FailedRanks(const model::ClusterState& state,
                                    const model::JobPlacement& placement, int gpus_per_replica,
                                    std::chrono::seconds grace,
                                    std::chrono::system_clock::time_point now);

}  // namespace nvl72::op
