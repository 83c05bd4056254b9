// The extender's decisions: filter, prioritize, bind and preempt on an immutable ClusterView.
//
// No HTTP here (scheduler-plugin/server.h carries requests in and replies out) and no informers
// (scheduler-plugin/cluster_cache.h keeps the views fresh): a verb is a function of a view and the
// parsed request, plus, for bind only, the kube::Client that posts the Binding.
//
//   filter      a gang rank (label nvl72.dev/job) passes only on its planned node; another GPU pod
//   is
//               kept off nodes reserved for gangs and (if keep_off_spares) off designated spare
//               nodes; a pod without GPUs passes everywhere. Every failed node gets a reason.
//   prioritize  the placement core's single-pod score of the chosen policy, 0..10 (by rank of the
//               raw scores, or placement::NormalizeScores); a gang rank scores 10 on its planned
//               node.
//   bind        posts the Binding, refusing a gang rank on any node but its planned one.
//   preempt     drops every candidate node whose victims would break a running gang without taking
//               the whole gang; for a gang rank keeps only its planned node.
//
// Thread-safety: ClusterView is immutable once built; Extender is immutable after construction; all
// methods are const and may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "model/cluster_state.h"
#include "placement/policy.h"
#include "scheduler-plugin/wire.h"

namespace nvl72::extender {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A picture of the cluster, precomputed so that a request does lookups only.
struct ClusterView {
  model::ClusterState state;
  // Node name -> NodeId (heterogeneous lookup: no string copies on the hot path).
  std::unordered_map<std::string, placement::NodeId, StringHash, std::equal_to<>> node_ids;
  // By NodeId: a designated spare (placement::DesignatedSpares with the configured count).
  std::vector<bool> spare;
  // By NodeId: key ("ns/job") of one job whose reservation holds the node, "" if none.
  std::vector<std::string> reserved_for;
  // Live gang ranks (not terminated, bound or nominated, labels nvl72.dev/job + rank):
  // pod UID -> job key, and job key -> UIDs of its live ranks.
  std::unordered_map<std::string, std::string> gang_of_uid;
  std::unordered_map<std::string, std::vector<std::string>> gang_uids;
  bool synced = false;      // built from informer caches that had synced
  uint64_t generation = 0;  // unique per built view (> 0): the key of NodeNameList::resolved

  placement::NodeId FindNode(std::string_view name) const {
    auto it = node_ids.find(name);
    return it == node_ids.end() ? placement::kNoNode : it->second;
  }
  // FindNode of every name of `list` (kNoNode for unknown names), memoised in the list for this
  // view: a NodeNames array that comes again (NodeNamesCache) is resolved once per view.
  std::shared_ptr<const std::vector<placement::NodeId>> Resolve(const NodeNameList& list) const;
};

struct ViewOptions {
  // mark_tainted is false: kube-scheduler's TaintToleration filter has judged the pod's own
  // tolerations before it calls the extender, so a taint never makes the extender refuse a node.
  // node_facts is false: the extender never judges a job's constraints (the operator does).
  model::ClusterOptions cluster = [] {
    model::ClusterOptions c;
    c.mark_tainted = false;
    c.node_facts = false;
    return c;
  }();
  int spares_per_domain = 2;
};

// Builds a view from object lists (informer caches or test fixtures).
std::shared_ptr<const ClusterView> BuildView(const std::vector<const Json*>& nodes,
                                             const std::vector<const Json*>& pods,
                                             const std::vector<const Json*>& jobs,
                                             const ViewOptions& options, bool synced = true);
// The same with the pods' facts (model::PodFactsOf with options.cluster.gpu_resource).
std::shared_ptr<const ClusterView> BuildViewFromFacts(
    const std::vector<const Json*>& nodes, const std::vector<const model::PodFacts*>& pods,
    const std::vector<const Json*>& jobs, const ViewOptions& options, bool synced = true);

// How raw policy scores become the extender's 0..10.
enum class ScoreNormalization {
  // Distinct feasible raw scores by rank, spread evenly over 1..10 (infeasible 0). Keeps the
  // policy's
  // order between tiers: the nvl72 policy's raw scores span orders of magnitude (partly used node
  // >>
  // empty node of a busy domain > empty node of an idle domain > spare), which a linear map
  // collapses
  // to 1 for every empty node, leaving the choice among them to the scheduler's LeastAllocated.
  kRank,
  // placement::NormalizeScores: linear between the lowest and the highest feasible raw score.
  kLinear,
};

// Rank normalisation (see kRank). Same contract as placement::NormalizeScores.
std::vector<int> RankNormalizeScores(std::span<const int64_t> raw);

struct ExtenderOptions {
  std::string policy = "nvl72";
  ScoreNormalization normalization = ScoreNormalization::kRank;
  int spares_per_domain = 2;
  bool keep_off_spares = true;
  std::string gpu_resource = "nvidia.com/gpu";
};

// Filter outcome. Failed entries point into the request's node names and into `reasons`.
// The filter's reasons for keeping a GPU pod (not of a gang) off a node.
inline constexpr const char* kReservedReason = "node is reserved for an NVL72Job gang";
inline constexpr const char* kSpareReason =
    "node is a spare of its NVLink domain, kept free for gang recovery";

struct FilterDecision {
  std::vector<int> passed;  // indices into ExtenderArgs::node_names()
  std::vector<std::pair<int, const std::string*>> failed;
  std::vector<std::unique_ptr<std::string>> reasons;  // owned reason texts (shared by many nodes)
};

class Extender {
 public:
  // kInvalidArgument for an unknown policy name.
  static StatusOr<std::unique_ptr<Extender>> Create(const ExtenderOptions& options);

  const ExtenderOptions& options() const { return options_; }
  const placement::PlacementPolicy& policy() const { return *policy_; }

  // The planned node of a gang rank: annotation nvl72.dev/node, else the rank's node in the
  // reservation of its job. nullopt for a pod that is no gang rank or has no plan yet.
  std::optional<std::string> PlannedNode(const ClusterView& view, const PodInfo& pod) const;

  FilterDecision Filter(const ClusterView& view, const ExtenderArgs& args) const;
  // Scores 0..10 parallel to args.node_names().
  std::vector<int> Prioritize(const ClusterView& view, const ExtenderArgs& args) const;
  // Binds `pod` (the cached pod, or nullptr: then it is read through `client`) to args.node.
  // Returns "" on success, else the error for ExtenderBindingResult.Error. `job_key`, if given, is
  // set to "ns/job" when the pod is a gang rank (for logs).
  std::string Bind(const ClusterView& view, const PodInfo* pod, const BindingArgs& args,
                   kube::Client& client, std::string* job_key = nullptr) const;
  // The candidates that stay, in input order, victims unchanged.
  std::vector<std::pair<std::string, NodeVictims>> Preempt(const ClusterView& view,
                                                           const PreemptionArgs& args) const;

 private:
  Extender(ExtenderOptions options, std::unique_ptr<placement::PlacementPolicy> policy)
      : options_(std::move(options)), policy_(std::move(policy)) {}

  ExtenderOptions options_;
  std::unique_ptr<placement::PlacementPolicy> policy_;
};

}  // namespace nvl72::extender
