#include "operator/node_health.h"

namespace nvl72::op {

std::string_view NodeFailureName(NodeFailure f) {
  switch (f) {
    case NodeFailure::kNone: return "Healthy";
    case NodeFailure::kNodeGone: return "NodeGone";
    case NodeFailure::kNotReady: return "NodeNotReady";
    case NodeFailure::kNoExecuteTaint: return "NodeNoExecuteTaint";
    case NodeFailure::kGpusLost: return "NodeGpusLost";
  }
  return "Healthy";
}

NodeFailure CheckNode(const model::ClusterState& state, std::string_view node, int gpus_per_replica,
                      std::chrono::seconds grace, std::chrono::system_clock::time_point now) {
  placement::NodeId id = state.FindNode(node);
  if (id == placement::kNoNode) return NodeFailure::kNodeGone;
  const model::NodeHealth& h = state.Health(id);
  if (h.no_execute_taint) return NodeFailure::kNoExecuteTaint;
  if (!h.ready_condition) {
    // Unknown transition time: treat as failed only without grace.
    if (!h.not_ready_since || now - *h.not_ready_since >= grace) return NodeFailure::kNotReady;
  }
  if (state.snapshot().nodes[id].gpu_capacity < gpus_per_replica) return NodeFailure::kGpusLost;
  return NodeFailure::kNone;
}

std::vector<FailedRank> FailedRanks(const model::ClusterState& state,
                                    const model::JobPlacement& placement, int gpus_per_replica,
                                    std::chrono::seconds grace,
                                    std::chrono::system_clock::time_point now) {
  std::vector<FailedRank> out;
  for (const auto& r : placement.ranks) {
    NodeFailure f = CheckNode(state, r.node, gpus_per_replica, grace, now);
    if (f != NodeFailure::kNone) out.push_back({r.rank, r.node, f});
  }
  return out;
}

}  // namespace nvl72::op
