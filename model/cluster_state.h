// ClusterState: a placement::Snapshot built from Kubernetes objects, plus the lookups callers need
// around it (node name <-> NodeId, the planned node of a pod, which job holds which node).
//
// Built from three lists (typically informer caches):
//  - Nodes: domain from label `domain_label` (else `domain_label_fallback`; a GPU node with neither
//    label becomes a domain of its own, named "node/<name>", so it never joins a multi-node
//    Required gang); gpu capacity = status.allocatable[gpu_resource]; degraded = allocatable below
//    status.capacity (unhealthy GPUs) or below the fullest node of the domain; ready = Ready
//    condition "True" (or NotReady for less than `not_ready_grace` at `now`); cordoned =
//    spec.unschedulable; tainted = a NoSchedule/NoExecute taint other than the GPU resource's own
//    NoSchedule taint, which every rank pod tolerates (RankTolerations; `mark_tainted` false:
//    never). no_execute_taint: a NoExecute taint no RankTolerations tolerate. What kube-scheduler's
//    filters read of the node (NodeFactsOf) is kept per node for the per-job verdict
//    (model/job_nodes.h). Nodes with no GPUs and no domain label are left out. Domains and the
//    nodes inside them are ordered by name.
//  - Pods: every pod that is not terminated (phase Succeeded/Failed) and is bound (spec.nodeName)
//  or
//    nominated (status.nominatedNodeName) to a node uses its GPU request there: max(sum over
//    containers, max over initContainers) of requests[gpu] (limits if requests lack it). Bound pods
//    also add their requests of every resource (PodRequests) to their node's NodeUsage.
//  - NVL72Jobs with HoldsReservation(): each rank holds `gpusPerReplica` GPUs on its node whether
//  its
//    pod exists or not, and marks the node gang_reserved. A rank pod (labels nvl72.dev/job +
//    nvl72.dev/rank of a reserving job) that sits on its planned node or is unbound is not counted
//    a second time; a rank pod bound elsewhere counts on that node too.
//
// Thread-safety: a value after Build(); const methods are safe concurrently. Reserve() mutates.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "model/feasibility.h"
#include "model/job_spec.h"
#include "model/names.h"
#include "placement/snapshot.h"

namespace nvl72::model {

struct ClusterOptions {
  std::string domain_label = std::string(kDefaultDomainLabel);
  std::string domain_label_fallback;  // "" = none
  std::string gpu_resource = std::string(kGpuResource);
  // Whether a taint marks a node `tainted` (see above). The scheduler extender sets false:
  // kube-scheduler has judged the pod's tolerations before it asks the extender.
  bool mark_tainted = true;
  // Keep NodeFacts and NodeUsage per node (Facts(), Usage(): the per-job verdict of
  // model/job_nodes.h). The scheduler extender, which never judges jobs, sets false.
  bool node_facts = true;
  // A node whose Ready condition is not True counts as ready while its lastTransitionTime is less
  // than `not_ready_grace` before `now`. Grace 0 (default): not ready at once.
  std::chrono::system_clock::time_point now{};
  std::chrono::seconds not_ready_grace{0};
};

// Health facts of one node as read from its object (for recovery decisions of the operator).
struct NodeHealth {
  bool ready_condition = false;  // Ready == "True"
  // lastTransitionTime of the Ready condition when it is not True; nullopt if unknown.
  std::optional<std::chrono::system_clock::time_point> not_ready_since;
  // A NoExecute taint rank pods do not tolerate. The node lifecycle taints (not-ready, unreachable)
  // are tolerated (RankToleratesNoExecute): they come with a Ready condition that is not True,
  // which the job's grace judges.
  bool no_execute_taint = false;
};

// Told of a placement the operator wrote to a job's status (`written`: the job as the API server
// returned it), so that its next decisions count the placement before its informer cache shows it.
using PlacementWritten =
    std::function<void(const Json& written, int gpus_per_replica, const JobPlacement& placement)>;

// One admitted job's reservation as seen by the snapshot.
struct Reservation {
  std::string job_key;  // "<namespace>/<name>"
  int gpus_per_replica = 0;
  JobPlacement placement;
  std::vector<placement::NodeId>
      rank_nodes;  // per entry of placement.ranks; kNoNode if unknown node
};

// What ClusterState::Build (and the extender's view) reads of a pod, taken from its JSON once by
// PodFactsOf: a long-lived cache keeps these per object so that a rebuild does not walk the JSON of
// every pod again (map lookups into the objects were most of a rebuild's time).
struct PodFacts {
  std::string ns;
  std::string uid;
  std::string node_name;    // spec.nodeName ("" = not bound)
  std::string nominated;    // status.nominatedNodeName
  std::string job;          // a gang rank's job (GangRankOf), "" for other pods
  int rank = -1;            // its rank
  int gpus = 0;             // PodGpuRequest
  bool terminated = false;  // PodTerminated
  ResourceList requests;    // PodRequests of its spec (what it takes from a node once bound)
};
PodFacts PodFactsOf(const Json& pod, std::string_view gpu_resource);

// True for the NoExecute taint keys that rank pods tolerate without a time limit
// (kRankToleratedNoExecuteTaints).
bool RankToleratesNoExecute(std::string_view taint_key);
// The tolerations the operator gives every rank pod on top of the template's: the GPU resource's
// own NoSchedule taint (what the ExtendedResourceToleration admission plugin would add, which
// clusters do not all enable) and the node lifecycle NoExecute taints
// (kRankToleratedNoExecuteTaints).
std::vector<Toleration> RankTolerations(std::string_view gpu_resource);
// PodFactsOf of every pod (null entries skipped), and pointers to them as BuildFromFacts takes
// them.
struct PodFactsList {
  std::vector<PodFacts> facts;
  std::vector<const PodFacts*> ptrs;  // into `facts`, which a move of the list keeps in place
};
PodFactsList PodFactsOfAll(const std::vector<const Json*>& pods, std::string_view gpu_resource);

class ClusterState {
 public:
  ClusterState() = default;

  static ClusterState Build(const std::vector<const Json*>& nodes,
                            const std::vector<const Json*>& pods,
                            const std::vector<const Json*>& jobs, const ClusterOptions& options);
  // The same with the pods' facts (PodFactsOf with options.gpu_resource) instead of their JSON.
  static ClusterState BuildFromFacts(const std::vector<const Json*>& nodes,
                                     const std::vector<const PodFacts*>& pods,
                                     const std::vector<const Json*>& jobs,
                                     const ClusterOptions& options);
  // Convenience overload over values.
  static ClusterState Build(const std::vector<Json>& nodes, const std::vector<Json>& pods,
                            const std::vector<Json>& jobs, const ClusterOptions& options);

  const placement::Snapshot& snapshot() const { return snapshot_; }

  // NodeId of a node name, or placement::kNoNode.
  placement::NodeId FindNode(std::string_view name) const;
  // REQUIRES: 0 <= id < snapshot().nodes.size().
  const std::string& NodeName(placement::NodeId id) const { return snapshot_.nodes[id].name; }
  const NodeHealth& Health(placement::NodeId id) const { return health_[id]; }
  // What kube-scheduler's filters read of the node, and what the pods bound there request.
  // REQUIRES: built with ClusterOptions::node_facts.
  const NodeFacts& Facts(placement::NodeId id) const { return facts_[id]; }
  const NodeUsage& Usage(placement::NodeId id) const { return usage_[id]; }
  // DomainId of a domain name, or placement::kNoDomain.
  placement::DomainId FindDomain(std::string_view name) const;

  // Node planned for a pod: annotation nvl72.dev/node, else the node the reservation of the pod's
  // job (labels nvl72.dev/job + nvl72.dev/rank, same namespace) gives its rank. nullopt for pods
  // that are no gang rank. The name may be of a node not in the snapshot (deleted node).
  std::optional<std::string> PlannedNode(const Json& pod) const;

  // Reservations held, keyed by job key.
  const std::map<std::string, Reservation>& reservations() const { return reservations_; }
  const Reservation* FindReservation(std::string_view job_key) const;
  // Keys of the jobs that hold a rank on `node`.
  std::vector<std::string> JobsOnNode(placement::NodeId node) const;

  // Adds a reservation made after Build() (the operator after committing a placement) so the next
  // decision in the same pass sees it. Idempotent per job key: an existing reservation of the job
  // is replaced (its GPUs released first).
  void Reserve(const std::string& job_key, int gpus_per_replica, const JobPlacement& placement);
  // Releases a job's reservation (no-op if it holds none).
  void Release(const std::string& job_key);

 private:
  // BuildFromFacts' steps, in order.
  void AddNodes(const std::vector<const Json*>& nodes, const ClusterOptions& options);
  void AddNode(const std::string& name, const Json& obj, const ClusterOptions& options,
               const std::vector<Toleration>& rank_tolerations);
  void AddReservations(const std::vector<const Json*>& jobs);
  // The GPUs of the pods not counted by a reservation, on their node.
  void CountPods(const std::vector<const PodFacts*>& pods, const ClusterOptions& options);
  void ApplyReservation(const Reservation& r, int sign);
  // Adds a bound pod's requests to its node's usage.
  void CountOnNode(const PodFacts& pod);

  placement::Snapshot snapshot_;
  std::vector<NodeHealth> health_;
  std::vector<NodeFacts> facts_;
  std::vector<NodeUsage> usage_;
  std::unordered_map<std::string, placement::NodeId> node_ids_;
  std::unordered_map<std::string, placement::DomainId> domain_ids_;
  std::map<std::string, Reservation> reservations_;
  // Count of reservations holding a rank on each node (gang_reserved == count > 0).
  std::vector<int> reserved_ranks_;
};

// GPUs a pod requests: max(sum over containers, max over initContainers) of
// resources.requests[resource] (limits[resource] where requests lack it). Unparsable quantities
// count 0.
int PodGpuRequest(const Json& pod, std::string_view resource = kGpuResource);
// Phase Succeeded or Failed.
bool PodTerminated(const Json& pod);
// kube-scheduler's refusal of an unbound pod: its PodScheduled condition when that is False with
// reason Unschedulable (message: why), else nullptr.
const Json* UnschedulableCondition(const Json& pod);
// True if the pod carries the labels of a gang rank; `job` and `rank` receive them.
bool GangRankOf(const Json& pod, std::string* job, int* rank);
// The assignment `pod` is the current pod of: a gang rank of `placement` with the rank's pod name
// and planned for the rank's node (nvl72.dev/node). nullptr for a leftover of an earlier placement
// (a rank moved by recovery or defragmentation), whose phase says nothing about the job now.
const RankAssignment* CurrentRankOf(const Json& pod, const JobPlacement& placement);

}  // namespace nvl72::model
