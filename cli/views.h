// Views of kubectl-nvl72: the rack map, the job list and the explanation of one job, rendered as
// text from a ClusterView (a model::ClusterState plus the NVL72Jobs and their pods).
//
// Everything here is a pure function of its inputs (no client, no clock, no environment), so the
// rendering is unit-tested on fixed objects. The glyphs of a node (one character per node):
//   '#' holds a rank of a gang (admitted NVL72Job)    '+' used by other pods (partly or fully)
//   '.' free                                         's' designated spare
//   (placement::DesignatedSpares) 'X' failed: not Ready, cordoned or carrying a taint GPU work does
//   not tolerate
// Thread-safety: pure functions over values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster_state.h"
#include "placement/policy.h"

namespace nvl72::cli {

using Json = nlohmann::json;

struct ViewOptions {
  // Empty schedulable nodes per domain held back from new gangs (the operator's
  // --spares-per-domain).
  int spares_per_domain = 2;
  // The operator's --spare-reserve: whether a gang that fits nowhere else may take the spares.
  placement::SpareReserve spare_reserve = placement::SpareReserve::kSoft;
  model::ClusterOptions cluster;  // domain label, GPU resource
};

// What the views read: the snapshot the operator and the extender would build from the same
// objects, and the jobs and rank pods themselves.
struct ClusterView {
  model::ClusterState state;
  std::vector<Json> jobs;  // every NVL72Job (all namespaces), sorted by namespace/name
  std::vector<Json> pods;  // every pod (all namespaces); rank pods are found by name
  int spares_per_domain = 2;
  placement::SpareReserve spare_reserve = placement::SpareReserve::kSoft;
  std::string gpu_resource = std::string(model::kGpuResource);
};

ClusterView BuildView(const std::vector<Json>& nodes, std::vector<Json> pods,
                      std::vector<Json> jobs, const ViewOptions& options);

// The glyph of node `id` (see the file comment). `designated_spare` is DesignatedSpares()[id].
char NodeGlyph(const placement::Node& node, bool designated_spare);

// Display names of domains: when every domain name shares a prefix ending in '.' (GPU Feature
// Discovery's "<clusterUUID>.<cliqueID>"), the prefix is dropped and returned in `*common_prefix`.
std::vector<std::string> ShortDomainNames(const placement::Snapshot& snapshot,
                                          std::string* common_prefix);

// `kubectl nvl72 racks`: one line per domain (node glyphs, healthy / used / spare / failed nodes,
// free GPUs, largest gang that fits, jobs holding nodes there), a cluster summary and a legend.
// Jobs in `current_namespace` are shown by name, others as namespace/name.
std::string RenderRacks(const ClusterView& view, std::string_view current_namespace);

// `kubectl nvl72 jobs`: one line per job of `ns` ("" = all namespaces) and, for admitted jobs, one
// line per domain showing which of its nodes the job holds.
std::string RenderJobs(const ClusterView& view, std::string_view ns);

// `kubectl nvl72 explain`: where the job runs and why, or why it waits (its conditions plus a fresh
// decision of the nvl72 placement policy on the current snapshot).
// REQUIRES: `job` is an NVL72Job object.
std::string RenderExplain(const ClusterView& view, const Json& job);

// Summary state of a job: status.state when set, else derived from the conditions ("Failed",
// "Succeeded", "Recovering", "Running", "Placed", "Admitted", "Waiting", "Pending"); "Terminating"
// while a deletion is pending.
std::string JobState(const Json& job);

// "0-3,5,7-9" for a sorted list of ranks.
std::string FormatRanges(const std::vector<int>& sorted);

}  // namespace nvl72::cli
