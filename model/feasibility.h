// Feasibility of a pod on a node, judged as kube-scheduler's filter plugins judge it, so that the
// operator never plans a rank where kube-scheduler will refuse it:
//   NodeUnschedulable  spec.unschedulable, unless the pod tolerates
//   node.kubernetes.io/unschedulable TaintToleration    every NoSchedule / NoExecute taint of the
//   node tolerated by some toleration
//                      (PreferNoSchedule never blocks)
//   NodeAffinity       spec.nodeSelector (every pair) and required node affinity (terms ORed,
//                      requirements of a term ANDed; matchExpressions on labels with In, NotIn,
//                      Exists, DoesNotExist, Gt, Lt; matchFields on metadata.name with In, NotIn)
//   NodeResourcesFit   the pod's effective requests (see PodRequests) fit allocatable minus what
//   the
//                      pods already on the node request, resource by resource, plus one pod slot
// This is the order of kube-scheduler's default profile (TaintToleration runs before NodeAffinity),
// and kube-scheduler reports the first filter that refuses.
// The semantics follow the plugin sources of the pinned k8s.io/kubernetes module
// (pkg/scheduler/framework/plugins/{nodeunschedulable,nodeaffinity,tainttoleration,noderesources})
// and k8s.io/component-helpers/scheduling/corev1; this is our own code, written from them.
//
// Resource amounts are int64 in milli-units (cpu "1" = 1000, memory "1Ki" = 1024000) so that one
// type serves every resource.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace nvl72::model {

// A Kubernetes quantity ("500m", "2", "1.5Gi", "1e3", "4k") in milli-units, rounded up as the API
// server rounds a request. False for text that is no quantity or does not fit int64.
bool ParseMilliQuantity(std::string_view text, int64_t* milli);
// The same for a JSON value (string or number).
bool ParseMilliQuantity(const nlohmann::json& value, int64_t* milli);
// Text given as a std::string or a literal would be ambiguous between the two above.
inline bool ParseMilliQuantity(const std::string& text, int64_t* milli) {
  return ParseMilliQuantity(std::string_view(text), milli);
}
inline bool ParseMilliQuantity(const char* text, int64_t* milli) {
  return ParseMilliQuantity(std::string_view(text), milli);
}

// Resource name -> amount in milli-units, sorted by name, names unique.
using ResourceList = std::vector<std::pair<std::string, int64_t>>;
// Amount of `name` in `list`, 0 when absent.
int64_t AmountOf(const ResourceList& list, std::string_view name);
// list += other (resource by resource).
void AddResources(ResourceList& list, const ResourceList& other);
// list -= other (resource by resource; may go negative).
void SubtractResources(ResourceList& list, const ResourceList& other);

struct Toleration {
  std::string key;           // "" with operator Exists: tolerates every key
  std::string op = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // "" tolerates every effect
};
struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  // "key=value:effect" (or "key:effect" without value), as kubectl prints a taint.
  std::string ToString() const;
};
// True when `toleration` tolerates `taint` (the API's ToleratesTaint).
bool Tolerates(const Toleration& toleration, const Taint& taint);

struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values;
};
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  // on labels
  std::vector<NodeSelectorRequirement> match_fields;       // key metadata.name; In / NotIn
};

// What kube-scheduler's filters read of a pod.
struct PodConstraints {
  std::vector<std::pair<std::string, std::string>> node_selector;
  // Required node affinity: the node must match at least one term. Empty = no required affinity.
  std::vector<NodeSelectorTerm> required_terms;
  std::vector<Toleration> tolerations;
  // Effective requests (PodRequests) without the resources the caller asked to leave out.
  ResourceList requests;
};

// Effective requests of a pod spec, as kube-scheduler computes them: for every resource,
// max(sum over containers + sum over restartable init containers (sidecars),
//     max over ordinary init containers of (its request + the sidecars started before it)),
// where pod-level spec.resources.requests (PodLevelResources, on by default since 1.34) replace
// that for cpu, memory and hugepages-*, plus spec.overhead. A container's request of a resource is
// resources.requests[r], else resources.limits[r] (the API server defaults a missing request to the
// limit; a missing pod-level request to the pod-level limit, unless it is cpu or memory that the
// containers request: then their total stands).
ResourceList PodRequests(const nlohmann::json& pod_spec);

// Reads the constraints of a pod spec (the `spec` of a Pod). Resources named in `skip_resources`
// (the GPU resource, which the placement core accounts itself) are left out of `requests`.
// Malformed fields are an error naming the field (kube-scheduler would refuse such a pod too).
StatusOr<PodConstraints> PodConstraintsOf(const nlohmann::json& pod_spec,
                                          const std::vector<std::string>& skip_resources = {});

// What kube-scheduler's filters read of a node.
struct NodeFacts {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key
  std::vector<Taint> taints;
  bool unschedulable = false;
  ResourceList allocatable;  // includes "pods"
};
NodeFacts NodeFactsOf(const nlohmann::json& node);

// What the pods already on a node take from it.
struct NodeUsage {
  ResourceList requested;  // sum of PodRequests of the pods bound there
  int pods = 0;            // number of those pods
};

// Which filter refuses the pod, in the order kube-scheduler reports them.
enum class Misfit {
  kNone,
  kUnschedulable,  // NodeUnschedulable
  kTaint,          // TaintToleration
  kNodeSelector,   // NodeAffinity: spec.nodeSelector
  kNodeAffinity,   // NodeAffinity: required node affinity
  kResources,      // NodeResourcesFit
};
std::string_view MisfitName(Misfit misfit);

struct Fit {
  Misfit misfit = Misfit::kNone;
  // What refuses, for reasons: "taint dedicated=team-a:NoSchedule", "cpu: requests 8, 2 of 16
  // free", "too many pods: 110 of 110". Empty when the pod fits.
  std::string detail;
  bool ok() const { return misfit == Misfit::kNone; }
};

// The first filter (in the order above) that refuses `pod` on `node` given `usage`.
Fit CheckNode(const PodConstraints& pod, const NodeFacts& node, const NodeUsage& usage);

// Each filter on its own (CheckNode calls them in order).
bool MatchesNodeSelector(const PodConstraints& pod, const NodeFacts& node);
bool MatchesRequiredAffinity(const PodConstraints& pod, const NodeFacts& node);
// The first NoSchedule / NoExecute taint of `node` no toleration of `pod` tolerates, or nullptr.
const Taint* UntoleratedTaint(const PodConstraints& pod, const NodeFacts& node);

}  // namespace nvl72::model
