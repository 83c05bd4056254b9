#include "operator/node_health.h"

namespace nvl72::op {
namespace {

std::string StringAt(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

bool RankStopped(NodeFailure f) { return f != NodeFailure::kNone && f != NodeFailure::kCordoned; }

std::string PodFailedByNode(const nlohmann::json& pod) {
  if (!pod.is_object() || !pod.contains("status")) return "";
  const nlohmann::json& status = pod["status"];
  if (StringAt(status, "phase") != "Failed") return "";
  std::string reason = StringAt(status, "reason");
  static constexpr std::string_view kNodeReasons[] = {"NodeLost",
                                                      "Evicted",
                                                      "NodeShutdown",
                                                      "Shutdown",
                                                      "Terminated",
                                                      "NodeAffinity",
                                                      "UnexpectedAdmissionError"};
  for (std::string_view r : kNodeReasons) {
    if (reason == r) return reason;
  }
  if (reason.size() > 5 && reason.rfind("OutOf", 0) == 0)
    return reason;  // e.g. OutOfnvidia.com/gpu
  const auto it = status.find("conditions");
  if (it == status.end() || !it->is_array()) return "";
  static constexpr std::string_view kDisruptionReasons[] = {
      "TerminationByKubelet", "DeletionByTaintManager", "DeletionByPodGC", "EvictionByEvictionAPI"};
  for (const auto& c : *it) {
    if (StringAt(c, "type") != "DisruptionTarget" || StringAt(c, "status") != "True") continue;
    const std::string why = StringAt(c, "reason");
    for (std::string_view r : kDisruptionReasons) {
      if (why == r) return "DisruptionTarget/" + why;
    }
  }
  return "";
}

std::string_view NodeFailureName(NodeFailure f) {
  switch (f) {
    case NodeFailure::kNone:
      return "Healthy";
    case NodeFailure::kNodeGone:
      return "NodeGone";
    case NodeFailure::kNotReady:
      return "NodeNotReady";
    case NodeFailure::kNoExecuteTaint:
      return "NodeNoExecuteTaint";
    case NodeFailure::kGpusLost:
      return "NodeGpusLost";
    case NodeFailure::kPodFailedByNode:
      return "PodFailedByNode";
    case NodeFailure::kCordoned:
      return "NodeCordoned";
    case NodeFailure::kDrained:
      return "NodeDrained";
    case NodeFailure::kLeftDomain:
      return "NodeLeftDomain";
  }
  return "Healthy";
}

NodeFailure CheckNode(const model::ClusterState& state, std::string_view node, int gpus_per_replica,
                      std::chrono::seconds grace, std::chrono::system_clock::time_point now,
                      bool cordoned_fails) {
  placement::NodeId id = state.FindNode(node);
  if (id == placement::kNoNode) return NodeFailure::kNodeGone;
  const model::NodeHealth& h = state.Health(id);
  if (h.no_execute_taint) return NodeFailure::kNoExecuteTaint;
  if (!h.ready_condition) {
    // Unknown transition time: treat as failed only without grace.
    if (!h.not_ready_since || now - *h.not_ready_since >= grace) return NodeFailure::kNotReady;
  }
  if (state.snapshot().nodes[id].gpu_capacity < gpus_per_replica) return NodeFailure::kGpusLost;
  if (cordoned_fails && state.snapshot().nodes[id].cordoned) return NodeFailure::kCordoned;
  return NodeFailure::kNone;
}

std::vector<FailedRank> FailedRanks(const model::ClusterState& state,
                                    const model::JobPlacement& placement, int gpus_per_replica,
                                    std::chrono::seconds grace,
                                    std::chrono::system_clock::time_point now,
                                    bool cordoned_fails) {
  std::vector<FailedRank> out;
  for (const auto& r : placement.ranks) {
    NodeFailure f = CheckNode(state, r.node, gpus_per_replica, grace, now, cordoned_fails);
    if (f != NodeFailure::kNone) out.push_back({r.rank, r.node, f, ""});
  }
  return out;
}

}  // namespace nvl72::op
