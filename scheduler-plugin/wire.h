// Wire format of the kube-scheduler HTTP extender (k8s.io/kube-scheduler/extender/v1).
//
// The Go structs have no json tags: the scheduler sends and expects Go field names ("NodeNames",
// "FailedNodes", "Host", ...). Replies are written in exactly that case; requests are parsed with
// the top-level field names matched case-insensitively, as Go's decoder does (old docs show
// lowercase names). Fields inside the embedded v1.Pod / v1.Node objects use their json tags.
//
// The filter/prioritize request is on the hot path: ParseExtenderArgs() scans the top level itself,
// reads NodeNames straight into strings, parses only the Pod (small) as a DOM and skips (while
// validating) everything else. Replies are written straight into a string.
//
// Nothing here throws; malformed input is a kInvalidArgument Status naming the problem.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace nvl72::extender {

using Json = nlohmann::json;

// What the extender reads of a v1.Pod.
struct PodInfo {
  std::string ns;
  std::string name;
  std::string uid;
  int gpus = 0;              // max(sum over containers, max over initContainers) of the GPU request
  std::string job;           // label nvl72.dev/job; "" = not a gang rank
  int rank = -1;             // label nvl72.dev/rank; -1 if absent or not a number
  std::string planned_node;  // annotation nvl72.dev/node
  std::string node_name;     // spec.nodeName

  std::string Key() const { return ns + "/" + name; }
  bool IsGang() const { return !job.empty(); }
};

// PodInfo from a whole v1.Pod object (the slow paths: bind, preempt, caches).
PodInfo PodInfoFromJson(const Json& pod, std::string_view gpu_resource);

// The node names of one filter/prioritize request. Immutable once built and shared: kube-scheduler
// sends the same NodeNames (all nodes to filter, the passed ones to prioritize) cycle after cycle,
// so a request whose NodeNames are byte for byte those of a recent one reuses the parse
// (NodeNamesCache) and, per cluster view, the name -> node resolution (`resolved`, see
// scheduler-plugin/extender.h).
struct NodeNameList {
  std::vector<std::string> names;  // unescaped, in request order
  // Every name as a JSON string literal (quotes included) back to back, and where each one ends:
  // replies echo the request's own literals instead of escaping every name again.
  std::string literals;
  std::vector<uint32_t> literal_end;

  // Builds the list from names (literals escaped here).
  static std::shared_ptr<NodeNameList> FromNames(std::vector<std::string> names);
  // The entries at `indices` (in that order) as a new list, and in `*raw` that list as the JSON
  // array kube-scheduler sends for it ("[" literals joined by "," "]": Go's encoding of the same
  // strings gives the same literals). The filter's passed nodes come back as the prioritize's
  // NodeNames.
  std::shared_ptr<NodeNameList> Subset(std::span<const int> indices, std::string* raw) const;
  size_t size() const { return names.size(); }
  std::string_view Literal(size_t i) const {
    const uint32_t begin = i == 0 ? 0 : literal_end[i - 1];
    return std::string_view(literals).substr(begin, literal_end[i] - begin);
  }

  // Resolution memo, filled by the extender: NodeIds of `names` in the view whose generation is
  // `resolved_generation` (0 = none yet). Guarded by `resolved_mu`.
  mutable std::mutex resolved_mu;
  mutable uint64_t resolved_generation = 0;
  mutable std::shared_ptr<const std::vector<int32_t>> resolved;
  // The filter's passed indices last registered as a prioritize array (Service::RememberPassed) and
  // the view generation they were computed in: a repeat is not copied and registered again.
  mutable uint64_t passed_generation = 0;
  mutable std::vector<int> passed;
};

// Recently seen NodeNames arrays (their exact bytes, from '[' to ']') and their parses.
// Thread-safe.
class NodeNamesCache {
 public:
  explicit NodeNamesCache(size_t capacity = 4) : capacity_(capacity) {}
  // A cached array that `text` starts with (its bytes, already validated when first parsed), or
  // nullptr; `*length` is set to its size. Lets a request skip scanning a repeated array.
  std::shared_ptr<const NodeNameList> FindPrefixOf(std::string_view text, size_t* length) const;
  void Insert(std::string_view raw, std::shared_ptr<const NodeNameList> list);
  int64_t hits() const;
  // Size of the most recently used list (0 if none): a size hint for parsing the next one.
  size_t LastSize() const;

 private:
  struct Entry {
    std::string raw;
    std::shared_ptr<const NodeNameList> list;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  mutable std::vector<Entry> entries_;  // most recently used first
  mutable int64_t hits_ = 0;
};

// ExtenderArgs of the filter and prioritize verbs.
struct ExtenderArgs {
  PodInfo pod;
  // True when the request carries "NodeNames" (nodeCacheCapable); false when it carries
  // "Nodes": {"items": [...]} (full-Nodes mode) or neither (zero nodes).
  bool node_cache_capable = false;
  bool has_nodes = false;          // "Nodes" was a non-null object
  bool node_names_cached = false;  // NodeNames was a recent array (NodeNamesCache hit)
  // NodeNames, or metadata.name of each Nodes.items entry. Never null.
  std::shared_ptr<const NodeNameList> nodes = std::make_shared<NodeNameList>();

  const std::vector<std::string>& node_names() const { return nodes->names; }
  void SetNodeNames(std::vector<std::string> names) {
    nodes = NodeNameList::FromNames(std::move(names));
  }
};

// Parses a filter/prioritize request body. `gpu_resource` is the extended resource counted as GPUs.
// With a `cache`, a NodeNames array seen recently is not parsed again (the cached list is shared).
// Errors (kInvalidArgument): not JSON, not an object, no Pod, NodeNames not an array of strings,
// Nodes.items entries without a name, an unparsable GPU quantity.
StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body, std::string_view gpu_resource,
                                         NodeNamesCache* cache = nullptr);

// ExtenderBindingArgs.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
StatusOr<BindingArgs> ParseBindingArgs(std::string_view body);

// ExtenderPreemptionArgs. Both victim forms are read into the meta form (pod UIDs per node).
struct NodeVictims {
  std::vector<std::string> pod_uids;
  int64_t num_pdb_violations = 0;
};
struct PreemptionArgs {
  PodInfo pod;
  std::vector<std::pair<std::string, NodeVictims>> victims;  // by node name, in input order
};
StatusOr<PreemptionArgs> ParsePreemptionArgs(std::string_view body, std::string_view gpu_resource);

// ---- replies ----

// ExtenderFilterResult in node-cache mode: NodeNames = passed, Nodes = null.
// Views into strings the caller keeps alive until serialized. Reasons are usually shared by many
// nodes (one per job or domain): the serializer escapes a run of the same reason once.
struct FilterReply {
  // True when the node names in `passed` and `failed` are JSON string literals already (quotes
  // included: NodeNameList::Literal), written as they are; false: plain names, escaped here.
  bool names_are_literals = false;
  std::vector<std::string_view> passed;
  std::vector<std::pair<std::string_view, std::string_view>> failed;
  std::vector<std::pair<std::string_view, std::string_view>> unresolvable;
  std::string error;
};
std::string SerializeFilterResult(const FilterReply& reply);
// Full-Nodes mode: "Nodes": {"items": [the passed node objects]}, "NodeNames": null.
// `passed_nodes` are the request's node objects that passed, in order.
std::string SerializeFilterResultFullNodes(const std::vector<const Json*>& passed_nodes,
                                           const FilterReply& reply);

// HostPriorityList.
std::string SerializeHostPriorityList(const std::vector<std::string>& hosts,
                                      const std::vector<int>& scores);
// The same for the request's nodes, echoing their JSON literals.
std::string SerializeHostPriorities(const NodeNameList& hosts, const std::vector<int>& scores);
// ExtenderBindingResult.
std::string SerializeBindingResult(std::string_view error);
// ExtenderPreemptionResult (always the meta form).
std::string SerializePreemptionResult(
    const std::vector<std::pair<std::string, NodeVictims>>& victims);

// {"Error": message}: the body of a 4xx/5xx reply.
std::string ErrorBody(std::string_view message);

// Appends `s` as a JSON string literal (quoted, escaped) to `out`.
void AppendJsonString(std::string& out, std::string_view s);

// Parses a resource quantity of a countable resource ("4", "4.0", "1k", 4). False if it is not a
// whole, non-negative number.
bool ParseCountQuantity(const Json& value, int64_t* out);
bool ParseCountQuantity(std::string_view value, int64_t* out);

}  // namespace nvl72::extender
