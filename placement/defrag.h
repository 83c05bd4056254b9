// Defragmentation planner: the fewest moves of preemptible jobs that make room for a waiting gang.
//
// Given a Required gang that does not fit, find a domain where evicting the fewest preemptible jobs
// (each job moved whole) lets the gang's first segment fit under the given policy, within a budget
// of moves. Pure; thread-safe.
//
// The rules around the planner live here too, once, for both callers: the operator
// (op::PlanDefragMoves, operator/defrag_executor.h) and the simulator (sim::Run::DefragPass,
// sim/engine.cc); docs/recovery.md#defragmentation. They read no clock: times are passed in as a
// plain number (the simulator: seconds) or a std::chrono::duration since a fixed epoch (the
// operator: system_clock ticks), instants and lengths in the same type.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
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

// ---- Which waiting gangs a pass plans for.

// Waiting gangs (in admission order) one pass plans for at most: PlanDefrag tries job combinations
// per domain, so this bounds the work of one pass. The rest wait for the next pass.
inline constexpr int kMaxGangsPlannedPerPass = 3;

// A waiting gang as the trigger sees it.
struct WaitingGang {
  TopologyMode mode = TopologyMode::kRequired;
  int gpus = 0;  // of all its ranks (GangRequest::TotalGpus)
};

// The free GPUs of the schedulable nodes: what a waiting gang's GPUs are compared with.
int FreeSchedulableGpus(const Snapshot& snapshot);

// The trigger: a Required gang that waits although the schedulable nodes have its GPUs free in
// total (`free_gpus`, FreeSchedulableGpus). Other modes span domains instead of waiting.
bool DefragEligible(const WaitingGang& gang, int free_gpus);

// The gangs one pass plans for: the eligible ones, in the order of `waiting` (admission order), at
// most kMaxGangsPlannedPerPass. Returns their indexes into `waiting`.
std::vector<size_t> GangsToPlanFor(std::span<const WaitingGang> waiting, int free_gpus);

// ---- Budget and cooldown. `Time`: a number or a std::chrono::duration (see the top).

// The budget's defaults: jobs moved per plan, seconds between two plans, seconds before a moved job
// may move again (the operator's DefragOptions, the simulator's DefragBudget).
inline constexpr int kDefaultDefragMaxMoves = 2;
inline constexpr int kDefaultDefragMinIntervalSeconds = 30;
inline constexpr int kDefaultDefragCooldownSeconds = 600;

// When a wait of `length` that began at `since` ends, if `now` is inside it; nullopt when there is
// no wait (`since` none) or it is over (now - since >= length).
template <class Time>
std::optional<Time> WaitEnd(std::optional<std::type_identity_t<Time>> since, Time now,
                            std::type_identity_t<Time> length) {
  if (since && now - *since < length) return *since + length;
  return std::nullopt;
}

// The budget's minimum interval between two plans: nullopt when a plan may be made at `now`, else
// when the interval since `last_plan` (the latest plan or move; none: never) ends. Nothing is
// planned before then; look again at that time.
template <class Time>
std::optional<Time> DefragIntervalEnd(std::optional<std::type_identity_t<Time>> last_plan, Time now,
                                      std::type_identity_t<Time> min_interval) {
  return WaitEnd<Time>(last_plan, now, min_interval);
}

// The candidates for PlanDefrag: a running job may be moved when it is preemptible
// (RunningJob::preemptible, as the caller sets it with any rule of its own) and was not moved
// within `cooldown` (last_moves[i] for jobs[i]; none: never moved). Clears `preemptible` of the
// jobs inside their cooldown and returns the earliest end of those cooldowns (the first time a
// candidate comes back by itself), nullopt when the cooldown excluded no job. REQUIRES:
// last_moves.size() == jobs.size().
template <class Time>
std::optional<Time> SelectDefragCandidates(
    std::span<RunningJob> jobs,
    std::span<const std::optional<std::type_identity_t<Time>>> last_moves, Time now,
    std::type_identity_t<Time> cooldown) {
  std::optional<Time> earliest;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].preemptible) continue;
    if (const std::optional<Time> end = WaitEnd<Time>(last_moves[i], now, cooldown)) {
      jobs[i].preemptible = false;
      if (!earliest || *end < *earliest) earliest = end;
    }
  }
  return earliest;
}

// ---- Whether a plan frees room.

// The placement of `gang` on `freed` (the snapshot with the plan's moved jobs released) when its
// first segment (rank 0's node) lands in `domain`, the domain the plan frees; nullopt otherwise.
// PlanDefrag judges its candidates by the same rule; the callers check a plan with it before they
// also place the moved jobs elsewhere.
std::optional<GangPlacement> PlaceInFreedDomain(const Snapshot& freed,
                                                const PlacementPolicy& policy,
                                                const GangRequest& gang, DomainId domain);

}  // namespace nvl72::placement
