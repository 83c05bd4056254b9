// Defragmentation planner: the fewest moves of preemptible jobs that make room for a waiting gang.
//
// Given a Required gang that does not fit, find a domain where evicting the fewest preemptible jobs
// (each job moved whole) lets the gang's first segment fit under the given policy, within a budget
// of moves. Pure; thread-safe.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "placement/policy.h"
#include "placement/snapshot.h"

namespace nvl72::placement {

// A job currently holding GPUs, as the planner sees it.
struct RunningJob {
  std::string key;
  bool preemptible = false;
  std::vector<std::pair<NodeId, int>> gpus_on_node;  // (node, GPUs this job uses there)
};

struct DefragPlan {
  bool found = false;
  DomainId domain = kNoDomain;  // the domain that is freed
  std::vector<int> moves;       // indexes into the `jobs` span, fewest first
  std::string reason;           // why nothing was found, or a summary of the plan
};

// REQUIRES: max_moves >= 0. Jobs whose key is in no domain are ignored.
DefragPlan PlanDefrag(const Snapshot& snapshot, const PlacementPolicy& policy,
                      const GangRequest& waiting, std::span<const RunningJob> jobs, int max_moves);

}  // namespace nvl72::placement
