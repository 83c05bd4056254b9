// Metrics of one simulated policy and the small accounting helpers the engine integrates them with.
//
// All "waiting-time" quantities are integrals over the periods in which at least one job waits
// (submitted, not running, not finished): a policy that wastes capacity cannot hide behind an idle
// cluster. Definitions are in docs/simulator.md. Thread-safety: values / single-threaded helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvl72::sim {

struct PolicyMetrics {
  std::string policy;
  // The headline metrics (see docs/simulator.md).
  double usable_capacity = 0;      // useful GPU-s / healthy GPU-s, over waiting time
  double wait_mean_s = 0;          // submission -> first start
  double wait_p99_s = 0;           // nearest-rank 99th percentile
  double single_domain_ratio = 0;  // gang starts with every segment in one domain / gang starts
  double in_place_recovery_ratio =
      0;                          // gang failures recovered in place / gang failures (0 if none)
  double stranded_gpu_ratio = 0;  // stranded GPU-s / healthy GPU-s, over waiting time
  double makespan_s = 0;          // first submission -> last completion

  // Waits split by job kind (same definitions as above).
  double wait_mean_gang_s = 0;
  double wait_p99_gang_s = 0;
  double wait_mean_pod_s = 0;
  double wait_p99_pod_s = 0;
  // Gang failure -> the gang holds nodes again (0 for an in-place recovery; a requeued gang waits
  // until it is placed again). The restart cost that follows is the same for both and excluded.
  // Over gang failures; 0 if none. Invisible in usable_capacity (other jobs use the freed nodes).
  double gang_recovery_wait_mean_s = 0;
  double gang_recovery_wait_p99_s = 0;

  // Counters.
  int64_t jobs = 0;
  int64_t jobs_completed = 0;
  int64_t jobs_never_placed = 0;  // waited with the cluster idle and healthy: never fits
  int64_t gang_starts = 0;        // every start of a gang, including restarts after a requeue
  int64_t gang_starts_single_domain = 0;
  int64_t gang_starts_cross_domain = 0;  // DomainsSpanned > 1: ran at the cross-domain speed
  int64_t pod_starts = 0;
  int64_t node_failures = 0;  // node outages that began before the run ended
  int64_t node_failures_hitting_jobs = 0;
  int64_t gang_holds = 0;    // gang failures that waited holding their nodes (GangRecovery::kHold)
  int64_t rack_outages = 0;  // whole-rack outages that began before the run ended
  int64_t rack_outages_hitting_jobs = 0;
  int64_t job_interruptions = 0;  // jobs hit by a failure (pods + gangs)
  int64_t gang_failures = 0;
  int64_t gang_recovered_in_place = 0;
  int64_t requeues = 0;      // jobs stopped and put back into the queue
  int64_t preemptions = 0;   // preemptible jobs evicted to make room for a recovery
  int64_t defrag_plans = 0;  // defragmentation plans executed (each starts one waiting gang)
  int64_t defrag_moves = 0;  // preemptible jobs stopped and placed elsewhere by those plans

  // The integrals behind the ratios, in GPU-hours / hours.
  double waiting_hours = 0;  // time with at least one job waiting
  double healthy_gpu_hours_waiting = 0;
  double useful_gpu_hours_waiting = 0;
  double stranded_gpu_hours_waiting = 0;
  double spare_gpu_hours_waiting = 0;  // GPUs on designated spare nodes (not counted as stranded)
  double useful_gpu_hours_total = 0;   // over the whole run (not only waiting time)
  double lost_gpu_hours = 0;           // work lost to failures (since the last checkpoint)
  double restart_gpu_hours = 0;        // GPUs held while restarting (restart overhead)
  double slowdown_gpu_hours = 0;       // GPU-time x (1 - speed) of cross-domain gangs
  double gang_recovery_wait_gpu_hours = 0;  // sum over gang failures of GPUs x recovery wait
};

// Cumulative waiting time W(t) = integral_0^t [at least one job waits] dt, recorded as the engine
// advances, and queryable for any past instant. Work done in (a, b] by g GPUs at speed s counts
// g * s * (W(b) - W(a)) toward the usable-capacity numerator.
class WaitingClock {
 public:
  // Extends W to time `t` (>= the last time) using the flag recorded for [last, t), and records
  // `waiting_from_t` as the flag of the interval that starts at `t`. Calling it again with the same
  // `t` only replaces that flag (the engine does so after a scheduling pass).
  void Advance(double t, bool waiting_from_t);
  // W(t) for t <= the last time advanced to (earlier than the first record -> 0).
  double At(double t) const;
  double Total() const { return cumulative_.empty() ? 0 : cumulative_.back(); }

 private:
  std::vector<double> times_;       // breakpoints
  std::vector<double> cumulative_;  // W at each breakpoint
  std::vector<bool> waiting_;       // flag of [times_[i], times_[i+1])
};

// Nearest-rank percentile (p in (0, 100]) of `values`; 0 for no values. Sorts a copy.
double Percentile(std::vector<double> values, double p);

}  // namespace nvl72::sim
