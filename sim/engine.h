// The discrete-event engine: replays one trace under one placement policy on a simulated cluster
// with node failures, and measures it.
//
// Model (details and sources in docs/simulator.md):
// - Jobs of <= gpus_per_node GPUs are single pods (PlacementPolicy::PlacePod); bigger jobs are
// gangs
//   of ceil(gpus / gpus_per_node) whole-node ranks, TopologyMode::kRequired, segment = the whole
//   gang when it has <= nodes_per_rack - spares ranks, else balanced segments of at most that size.
// - Queue: one policy-independent discipline: arrival order with greedy backfill. Per shape FIFO
//   queues; in a pass a shape that failed once is not tried again (the cluster only fills during a
//   pass). A requeued job keeps its original arrival position.
// - A gang spanning more than one domain runs at cross_domain_speed.
// - Node failures come from a FailureTimeline shared (by seed) by every policy. A job hit loses the
//   work since its last checkpoint; every restart costs restart_minutes. Policies with
//   RecoversInPlace() get SelectReplacements(); otherwise (or on failure) the job is requeued.
//   A replacement that needs an eviction requeues the preemptible jobs on that node first.
// - Rack outages (optional, rack_mtbf_hours): every node of the rack is NotReady until the rack is
//   repaired; a node is Ready when neither its own outage nor its rack's holds it down. All nodes
//   go down before any job is interrupted, so no recovery picks a node of the failing rack.
// - Defragmentation (options.defrag, the operator's rules: placement/defrag.h holds them for both,
//   operator/defrag_executor.h uses them too): after a pass, when a waiting gang does not fit
//   although enough GPUs are free in the cluster, placement::PlanDefrag picks the fewest
//   preemptible jobs to move within the budget; a plan that frees room (the gang fits in the freed
//   domain and every moved job fits elsewhere at once) is executed: the moved jobs are stopped like
//   an eviction (work since the checkpoint lost, restart cost), the gang starts, the moved jobs
//   start on their new nodes.
// Thread-safety: Simulate() is a pure function of its arguments; concurrent calls are safe when
// the policies are (they are const).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "placement/defrag.h"
#include "placement/policy.h"
#include "sim/failure_model.h"
#include "sim/metrics.h"
#include "sim/trace.h"

namespace nvl72::sim {

struct ClusterShape {
  int racks = 8;            // NVLink domains
  int nodes_per_rack = 18;  // GB200 NVL72: 18 compute trays
  int gpus_per_node = 4;    // 4 GPUs per tray

  int TotalGpus() const { return racks * nodes_per_rack * gpus_per_node; }
};

// The operator's defragmentation budget (DefragOptions, docs/recovery.md#defragmentation), in
// simulated time; the defaults are placement/defrag.h's, the operator's.
struct DefragBudget {
  bool enabled = true;  // the runner enables it per policy (see SimConfig::defrag)
  // Jobs moved per plan (--defrag-max-concurrent-moves).
  int max_moves = placement::kDefaultDefragMaxMoves;
  // Between two plans (--defrag-min-interval-seconds).
  double min_interval_s = placement::kDefaultDefragMinIntervalSeconds;
  // A moved job is not moved again within this (--defrag-cooldown-seconds).
  double cooldown_s = placement::kDefaultDefragCooldownSeconds;
};

// What a policy that recovers in place (nvl72) does when a failed rank finds no node in its domain.
enum class GangRecovery {
  // The operator's PlanRecovery: the gang keeps its healthy nodes and waits for a node in its
  // domain (Replace, in place); after recovery_wait_s it moves whole where PlaceGang finds room
  // without its own nodes (MoveGang), else it keeps waiting.
  kHold,
  // The model before (issue #24): the gang releases its nodes and is requeued at its arrival
  // position, like the baselines.
  kRequeue,
};

std::string_view GangRecoveryName(GangRecovery recovery);  // "hold", "requeue"
bool ParseGangRecovery(std::string_view text, GangRecovery* out);

struct SimOptions {
  ClusterShape cluster;
  double cross_domain_speed = 0.57;  // 1 - 0.43 (NVLink -> InfiniBand loss; docs/simulator.md)
  double mtbf_hours = 12669;         // per 4-GPU node, from Llama 3 (see docs/simulator.md)
  double repair_hours = 24;
  // Whole-rack outages (NVLink switch tray, fabric): every node of a rack goes NotReady together.
  // Mean up-time of one rack between outages; <= 0 disables them (the default: no sourced rate).
  double rack_mtbf_hours = 0;
  double rack_repair_hours = 24;  // mean time a failed rack stays down (exponential)
  double checkpoint_minutes = 30;
  double restart_minutes = 10;
  GangRecovery gang_recovery = GangRecovery::kHold;
  // The operator's wait bound before MoveGang: 3 x notReadyGraceSeconds (60 s) by default.
  double recovery_wait_s = 180;
  // PolicyOptions::spares_per_domain (its default, the operator's); also bounds segment size.
  int spares = placement::PolicyOptions{}.spares_per_domain;
  placement::SpareReserve spare_reserve = placement::PolicyOptions{}.spare_reserve;  // likewise
  // Jobs of at most this many GPUs are preemptible: their GPUs are marked Node::gpu_reclaimable, a
  // policy may count their nodes toward its spare reserve and evict them to recover a gang
  // (RecoveryDecision::evict). 0: no job is preemptible (the trace says nothing about it).
  int preemptible_max_gpus = 0;
  // Defragmentation moves only preemptible jobs: nothing while preemptible_max_gpus is 0.
  DefragBudget defrag;
  uint64_t seed = 1;
};

// Ranks per segment for a gang of `ranks` whole-node ranks (0 = one segment for the whole gang).
int SegmentSizeFor(int ranks, const ClusterShape& cluster, int spares);

// Replays `trace` (already load-scaled, sorted in arrival order, every job fitting the cluster)
// under `policy`. Node outages come from `failures` (tests script them) or, when null, from a
// FailureTimeline of options.mtbf_hours / repair_hours / seed. Returns InternalError if the policy
// returns an invalid placement.
// Rack outages likewise come from `rack_failures` or a FailureTimeline of rack_mtbf_hours /
// rack_repair_hours seeded from RackTimelineSeed(seed), so adding them leaves the node timeline as
// it was.
StatusOr<PolicyMetrics> Simulate(const Trace& trace, const placement::PlacementPolicy& policy,
                                 const SimOptions& options, FailureSource* failures = nullptr,
                                 FailureSource* rack_failures = nullptr);

}  // namespace nvl72::sim
