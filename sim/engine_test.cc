// Engine tests on clusters small enough to work out by hand. Drawings: racks are columns of nodes
// n0.., each node 4 GPUs unless said otherwise.
#include "sim/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sim/report.h"
#include "sim/runner.h"

namespace nvl72::sim {
namespace {

constexpr double kHour = 3600;

Trace MakeTrace(const std::string& rows) {
  StatusOr<Trace> t = ParseTrace("job_id,submission_time,duration,num_gpu\n" + rows, "test.csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Trace{};
}

SimOptions Options(int racks, int nodes_per_rack, int spares) {
  SimOptions o;
  o.cluster = ClusterShape{racks, nodes_per_rack, 4};
  o.spares = spares;
  o.mtbf_hours = 0;  // no random failures
  o.restart_minutes = 10;
  o.checkpoint_minutes = 1;
  return o;
}

PolicyMetrics RunPolicy(const Trace& trace, const std::string& policy_name,
                        const SimOptions& options, FailureSource* failures = nullptr,
                        FailureSource* rack_failures = nullptr) {
  auto policy = placement::MakePolicy(
      policy_name, placement::PolicyOptions{options.spares, options.spare_reserve});
  EXPECT_NE(policy, nullptr);
  StatusOr<PolicyMetrics> m = Simulate(trace, *policy, options, failures, rack_failures);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : PolicyMetrics{};
}

// Outages given per node; no further outage once a node's list is used up.
class ScriptedFailures final : public FailureSource {
 public:
  explicit ScriptedFailures(std::map<int, std::vector<NodeOutage>> script)
      : script_(std::move(script)) {}
  NodeOutage NextOutage(int node, double) override {
    std::vector<NodeOutage>& outages = script_[node];
    size_t& next = next_[node];
    if (next < outages.size()) {
      return outages[next++];
    }
    return NodeOutage{INFINITY, INFINITY};
  }

 private:
  std::map<int, std::vector<NodeOutage>> script_;
  std::map<int, size_t> next_;
};

// 2 racks x 2 nodes.      t=0    A: gang 8 GPUs, 100 s -> one whole rack
//   rack0  rack1          t=0    B: pod 4 GPUs, 200 s  -> one node of the other rack
//   [A]    [B]            t=10   C: gang 8 GPUs, 50 s  -> needs a whole rack: waits for A (t=100)
//   [A]    [ ]
// Waits 0, 0, 90 -> mean 30, p99 90. Waiting time [10, 100): healthy 16 GPUs x 90 s; useful
// (8 + 4) GPUs x 90 s -> usable 0.75; the free node of rack1 is useless to C -> stranded 4/16.
// Makespan: B ends at 200.
TEST(Simulate, HandComputedWaitsAndUsableCapacity) {
  const Trace trace = MakeTrace("A,0,100,8\nB,0,200,4\nC,10,50,8\n");
  for (const std::string policy : {"domain-best-fit", "nvl72"}) {
    SCOPED_TRACE(policy);
    PolicyMetrics m = RunPolicy(trace, policy, Options(2, 2, /*spares=*/0));
    EXPECT_EQ(m.jobs_completed, 3);
    EXPECT_DOUBLE_EQ(m.wait_mean_s, 30);
    EXPECT_DOUBLE_EQ(m.wait_p99_s, 90);
    EXPECT_DOUBLE_EQ(m.wait_mean_gang_s, 45);  // A 0, C 90
    EXPECT_DOUBLE_EQ(m.wait_mean_pod_s, 0);
    EXPECT_DOUBLE_EQ(m.waiting_hours * kHour, 90);
    EXPECT_NEAR(m.usable_capacity, 0.75, 1e-12);
    EXPECT_NEAR(m.stranded_gpu_ratio, 0.25, 1e-12);
    EXPECT_DOUBLE_EQ(m.makespan_s, 200);
    EXPECT_EQ(m.gang_starts, 2);
    EXPECT_EQ(m.pod_starts, 1);
    EXPECT_DOUBLE_EQ(m.single_domain_ratio, 1.0);
    EXPECT_NEAR(m.useful_gpu_hours_total * kHour, 8 * 100 + 4 * 200 + 8 * 50, 1e-6);
  }
}

// 2 racks x 2 nodes.   t=0 A: pod 4 GPUs, 1000 s (takes n0)
//   rack0  rack1       t=0 G: gang 8 GPUs, 100 s
//   [A]    [ ]         t=0 W: gang 8 GPUs, 10 s
//   [ ]    [ ]
// spread (emptiest nodes, topology-blind) puts G on n1 + n2: two domains, speed 0.57, so G runs
// 100 / 0.57 s and W waits that long. domain-best-fit puts G on rack1, W waits 100 s.
TEST(Simulate, CrossDomainSlowdownAppliesToSpread) {
  const Trace trace = MakeTrace("A,0,1000,4\nG,0,100,8\nW,0,10,8\n");
  const double slow = 100 / 0.57;

  PolicyMetrics spread = RunPolicy(trace, "spread", Options(2, 2, 0));
  EXPECT_EQ(spread.gang_starts, 2);
  EXPECT_EQ(spread.gang_starts_cross_domain, 2);
  EXPECT_DOUBLE_EQ(spread.single_domain_ratio, 0);
  EXPECT_NEAR(spread.wait_p99_s, slow, 1e-9);
  EXPECT_NEAR(spread.wait_mean_s, slow / 3, 1e-9);
  // While W waits: A's 4 GPUs at full speed + G's 8 GPUs at 0.57, over 16 healthy GPUs.
  EXPECT_NEAR(spread.usable_capacity, (4 + 8 * 0.57) / 16, 1e-9);
  EXPECT_NEAR(spread.slowdown_gpu_hours * kHour, 8 * 0.43 * (slow + 10 / 0.57), 1e-6);

  PolicyMetrics best_fit = RunPolicy(trace, "domain-best-fit", Options(2, 2, 0));
  EXPECT_EQ(best_fit.gang_starts_cross_domain, 0);
  EXPECT_DOUBLE_EQ(best_fit.single_domain_ratio, 1);
  EXPECT_DOUBLE_EQ(best_fit.wait_p99_s, 100);
  EXPECT_NEAR(best_fit.usable_capacity, (4 + 8) / 16.0, 1e-12);
}

// 1 rack x 3 nodes, 1 spare. G: gang 8 GPUs, 1000 s, on n0 + n1; n0 fails at t=100 (repaired at
// 5000). Checkpoint every 60 s -> 60 s saved, 40 s lost; restart 600 s.
// nvl72 replaces n0 by the spare n2 in place: G ends at 100 + 600 + 940 = 1640.
// domain-best-fit has no in-place recovery: G is requeued, restarts at once on n1 + n2, same end.
TEST(Simulate, FailureRecoversInPlaceForNvl72AndRequeuesForDomainBestFit) {
  const Trace trace = MakeTrace("G,0,1000,8\n");
  for (const std::string policy : {"nvl72", "domain-best-fit"}) {
    SCOPED_TRACE(policy);
    ScriptedFailures failures({{0, {NodeOutage{100, 5000}}}});
    PolicyMetrics m = RunPolicy(trace, policy, Options(1, 3, /*spares=*/1), &failures);
    EXPECT_EQ(m.node_failures, 1);
    EXPECT_EQ(m.gang_failures, 1);
    EXPECT_NEAR(m.makespan_s, 1640, 1e-9);
    EXPECT_NEAR(m.lost_gpu_hours * kHour, 8 * 40, 1e-9);
    EXPECT_NEAR(m.restart_gpu_hours * kHour, 8 * 600, 1e-9);
    EXPECT_EQ(m.jobs_completed, 1);
    // In place or placed again in the same pass (n1 + n2 are free): no recovery wait either way.
    EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, 0);
    if (policy == "nvl72") {
      EXPECT_EQ(m.gang_recovered_in_place, 1);
      EXPECT_DOUBLE_EQ(m.in_place_recovery_ratio, 1);
      EXPECT_EQ(m.requeues, 0);
      EXPECT_EQ(m.gang_starts, 1);
    } else {
      EXPECT_EQ(m.gang_recovered_in_place, 0);
      EXPECT_DOUBLE_EQ(m.in_place_recovery_ratio, 0);
      EXPECT_EQ(m.requeues, 1);
      EXPECT_EQ(m.gang_starts, 2);
    }
  }
}

// 1 rack x 2 nodes, no spare, --gang-recovery requeue: nvl72 finds no replacement for n0 and
// requeues G; G restarts when n0 is repaired at t=300: ends at 300 + 600 + 940.
TEST(Simulate, NoReplacementInTheDomainRequeuesTheGang) {
  const Trace trace = MakeTrace("G,0,1000,8\n");
  ScriptedFailures failures({{0, {NodeOutage{100, 300}}}});
  SimOptions options = Options(1, 2, /*spares=*/0);
  options.gang_recovery = GangRecovery::kRequeue;
  PolicyMetrics m = RunPolicy(trace, "nvl72", options, &failures);
  EXPECT_EQ(m.gang_failures, 1);
  EXPECT_EQ(m.gang_recovered_in_place, 0);
  EXPECT_DOUBLE_EQ(m.in_place_recovery_ratio, 0);
  EXPECT_EQ(m.requeues, 1);
  EXPECT_NEAR(m.makespan_s, 300 + 600 + 940, 1e-9);
  // Failed at 100, placed again at 300.
  EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, 200);
  EXPECT_DOUBLE_EQ(m.gang_recovery_wait_p99_s, 200);
  EXPECT_NEAR(m.gang_recovery_wait_gpu_hours * kHour, 8 * 200, 1e-9);
  // The requeued gang waited [100, 300) on a cluster with one healthy node: useful work 0.
  EXPECT_NEAR(m.waiting_hours * kHour, 200, 1e-9);
  EXPECT_NEAR(m.healthy_gpu_hours_waiting * kHour, 4 * 200, 1e-9);
  EXPECT_DOUBLE_EQ(m.usable_capacity, 0);
}

// The operator's recovery (--gang-recovery hold, the default) against the requeue model.
// 1 rack x 3 nodes, no spare. t=0: G (8 GPUs, 1000 s) on n0 n1, P (4 GPUs, 500 s) on n2.
//   t=100 n0 fails (back at 5000); t=200 Q (4 GPUs) arrives; t=500 P ends.
// hold: G keeps n1, so Q finds no node; at 500 G takes n2 in place (waited 400 s), restarts
//   (600 s) and ends at 1100 + 940 (60 s checkpointed); Q starts then.
// requeue: G frees n1 and Q takes it at 200; at 500 only n2 is free, so G waits for n0's repair
//   at 5000 (waited 4900 s).
TEST(Simulate, HeldGangTakesTheNextNodeOfItsRackWhereARequeuedOneLosesIt) {
  const Trace trace = MakeTrace("G,0,1000,8\nP,0,500,4\nQ,200,10000,4\n");
  for (GangRecovery recovery : {GangRecovery::kHold, GangRecovery::kRequeue}) {
    SCOPED_TRACE(std::string(GangRecoveryName(recovery)));
    ScriptedFailures failures({{0, {NodeOutage{100, 5000}}}});
    SimOptions options = Options(1, 3, /*spares=*/0);
    options.gang_recovery = recovery;
    const PolicyMetrics m = RunPolicy(trace, "nvl72", options, &failures);
    EXPECT_EQ(m.gang_failures, 1);
    EXPECT_EQ(m.jobs_completed, 3);
    if (recovery == GangRecovery::kHold) {
      EXPECT_EQ(m.gang_holds, 1);
      EXPECT_EQ(m.gang_recovered_in_place, 1);
      EXPECT_EQ(m.requeues, 0);
      EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, 400);
      EXPECT_EQ(m.gang_starts, 1);
    } else {
      EXPECT_EQ(m.gang_holds, 0);
      EXPECT_EQ(m.gang_recovered_in_place, 0);
      EXPECT_EQ(m.requeues, 1);
      EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, 4900);
      EXPECT_EQ(m.gang_starts, 2);
    }
  }
}

// After the wait bound a held gang moves whole where it fits (the operator's MoveGang), and that
// is not an in-place recovery. 2 racks x 2 nodes, no spare. t=0: A (8 GPUs, 150 s) on rack0,
// G (8 GPUs, 2000 s) on rack1; t=100 rack1-n0 fails for good. Rack0 is free from 150, but G waits
// out the bound (180 s) in its own rack first: moved at 280; with a bound of 0, at 150.
TEST(Simulate, HeldGangMovesAfterTheWaitBound) {
  const Trace trace = MakeTrace("A,0,150,8\nG,0,2000,8\n");
  for (double bound : {180.0, 0.0}) {
    SCOPED_TRACE(bound);
    ScriptedFailures failures({{2, {NodeOutage{100, 1e9}}}});
    SimOptions options = Options(2, 2, /*spares=*/0);
    options.recovery_wait_s = bound;
    const PolicyMetrics m = RunPolicy(trace, "nvl72", options, &failures);
    EXPECT_EQ(m.gang_holds, 1);
    EXPECT_EQ(m.gang_recovered_in_place, 0);
    EXPECT_EQ(m.gang_starts, 3);
    EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, bound > 0 ? 180 : 50);
    // 60 s of G's 100 s were checkpointed: 1940 s left after the restart.
    EXPECT_NEAR(m.makespan_s, (bound > 0 ? 280 : 150) + 600 + 1940, 1e-9);
  }
}

// A held gang that is preemptible can still be evicted by another gang's recovery: it gives back
// the node it kept and waits in the queue (no second interruption, no node released twice). 1 rack
// x 5 nodes, no spare, jobs of <= 8 GPUs preemptible. t=0: P (8 GPUs) on n0 n1, G (12 GPUs) on
// n2-n4. t=100: n0 fails, P is held on n1. t=200: n2 fails; G's only candidate is n1, lent by P: P
// is evicted from its hold, G recovers in place on n1.
TEST(Simulate, HeldPreemptibleGangEvictedByAnotherRecovery) {
  const Trace trace = MakeTrace("P,0,500,8\nG,0,1000,12\n");
  ScriptedFailures failures({{0, {NodeOutage{100, 300}}}, {2, {NodeOutage{200, 400}}}});
  SimOptions options = Options(1, 5, /*spares=*/0);
  options.preemptible_max_gpus = 8;
  const PolicyMetrics m = RunPolicy(trace, "nvl72", options, &failures);
  EXPECT_EQ(m.gang_failures, 2);
  EXPECT_EQ(m.gang_holds, 1);
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_EQ(m.requeues, 1);
  EXPECT_EQ(m.gang_recovered_in_place, 1);  // G on n1
  EXPECT_EQ(m.jobs_completed, 2);
  EXPECT_EQ(m.jobs_never_placed, 0);
}

// A rack outage takes every node of the rack at once: no replacement in the rack, so nvl72 moves
// the gang after its wait bound and domain-best-fit places it again at once. 2 racks x 3 nodes,
// spares 1; rack0 is down [100, 5000).
TEST(Simulate, RackOutageStopsEveryNodeOfTheRack) {
  const Trace trace = MakeTrace("G,0,1000,8\n");
  for (const std::string policy : {"nvl72", "domain-best-fit"}) {
    SCOPED_TRACE(policy);
    ScriptedFailures nodes({});
    ScriptedFailures racks({{0, {NodeOutage{100, 5000}}}});
    const PolicyMetrics m = RunPolicy(trace, policy, Options(2, 3, /*spares=*/1), &nodes, &racks);
    EXPECT_EQ(m.rack_outages, 1);
    EXPECT_EQ(m.rack_outages_hitting_jobs, 1);
    EXPECT_EQ(m.node_failures, 0);
    EXPECT_EQ(m.gang_failures, 1);  // one gang, two ranks in the rack: one failure
    EXPECT_EQ(m.gang_recovered_in_place, 0);
    EXPECT_DOUBLE_EQ(m.gang_recovery_wait_mean_s, policy == "nvl72" ? 180 : 0);
    EXPECT_EQ(m.jobs_completed, 1);
  }
}

// A node stays down while its own outage or its rack's holds it. 1 rack x 1 node: P (4 GPUs,
// 100 s) is stopped by n0's outage [50, 200); the rack is down [100, 300): P starts again at 300
// (not at 200) and ends at 300 + 600 + 100 (nothing checkpointed).
TEST(Simulate, NodeOutageInsideARackOutageEndsWithTheLaterOfBoth) {
  const Trace trace = MakeTrace("P,0,100,4\n");
  ScriptedFailures nodes({{0, {NodeOutage{50, 200}}}});
  ScriptedFailures racks({{0, {NodeOutage{100, 300}}}});
  const PolicyMetrics m = RunPolicy(trace, "nvl72", Options(1, 1, /*spares=*/0), &nodes, &racks);
  EXPECT_EQ(m.node_failures, 1);
  EXPECT_EQ(m.rack_outages, 1);
  EXPECT_EQ(m.rack_outages_hitting_jobs, 0);  // P was already stopped
  EXPECT_NEAR(m.makespan_s, 1000, 1e-9);
}

// A pod on a failed node is requeued at its arrival position and resumes from its checkpoint.
// 1 rack x 1 node. P: 1 GPU, 100 s; Q: 1 GPU, 10 s, arrives at t=60. n0 fails at 50, back at 80.
// P loses 50 s (no checkpoint yet), restarts at 80 before Q (earlier arrival) and ends at
// 80 + 600 + 100; Q starts at 80 on the same node (3 GPUs free) and waits 20 s.
TEST(Simulate, PodOnFailedNodeIsRequeuedInArrivalOrder) {
  const Trace trace = MakeTrace("P,0,100,1\nQ,60,10,1\n");
  ScriptedFailures failures({{0, {NodeOutage{50, 80}}}});
  PolicyMetrics m = RunPolicy(trace, "domain-best-fit", Options(1, 1, 0), &failures);
  EXPECT_EQ(m.job_interruptions, 1);
  EXPECT_EQ(m.requeues, 1);
  EXPECT_EQ(m.gang_failures, 0);
  EXPECT_EQ(m.pod_starts, 3);
  EXPECT_NEAR(m.lost_gpu_hours * kHour, 50, 1e-9);
  EXPECT_NEAR(m.makespan_s, 780, 1e-9);
  EXPECT_DOUBLE_EQ(m.wait_p99_s, 20);
}

// 1 rack x 3 nodes, 1 spare, pods of <= 4 GPUs preemptible. G: gang 8 GPUs on n0 + n1; P: pod
// 4 GPUs, 5000 s, arrives at t=1 and can only go to the spare n2 (lent to preemptible work). n0
// fails at t=100: nvl72 evicts P from n2 and recovers G there in place; G ends at 1640, P restarts
// then with 5000 - 60 s left: ends at 1640 + 600 + 4940 = 7180.
// Without preemptible work n2 cannot be reclaimed: G is requeued instead.
TEST(Simulate, RecoveryEvictsPreemptibleWorkFromALentSpare) {
  const Trace trace = MakeTrace("G,0,1000,8\nP,1,5000,4\n");
  SimOptions options = Options(1, 3, /*spares=*/1);
  options.preemptible_max_gpus = 4;
  ScriptedFailures failures({{0, {NodeOutage{100, 5000}}}});
  PolicyMetrics m = RunPolicy(trace, "nvl72", options, &failures);
  EXPECT_EQ(m.gang_recovered_in_place, 1);
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_EQ(m.requeues, 1);
  EXPECT_NEAR(m.makespan_s, 7180, 1e-9);

  // Without lending P is never evicted: the held gang waits in its rack until n0 is back (5000).
  options.preemptible_max_gpus = 0;
  ScriptedFailures again({{0, {NodeOutage{100, 5000}}}});
  PolicyMetrics no_lending = RunPolicy(trace, "nvl72", options, &again);
  EXPECT_EQ(no_lending.preemptions, 0);
  EXPECT_EQ(no_lending.gang_holds, 1);
  EXPECT_EQ(no_lending.requeues, 0);
  EXPECT_EQ(no_lending.gang_recovered_in_place, 1);
  EXPECT_DOUBLE_EQ(no_lending.gang_recovery_wait_mean_s, 5000 - 100);
  // The requeue model: no eviction either; the gang is requeued.
  options.gang_recovery = GangRecovery::kRequeue;
  ScriptedFailures third({{0, {NodeOutage{100, 5000}}}});
  PolicyMetrics requeued = RunPolicy(trace, "nvl72", options, &third);
  EXPECT_EQ(requeued.gang_recovered_in_place, 0);
  EXPECT_EQ(requeued.preemptions, 0);
  EXPECT_EQ(requeued.requeues, 1);
}

TEST(Simulate, GangThatNeverFitsIsReportedNotLooped) {
  // A hard reserve holds back both nodes of the only rack: an 8-GPU gang can never start.
  const Trace trace = MakeTrace("G,0,10,8\nP,5,10,1\n");
  SimOptions hard = Options(1, 2, /*spares=*/2);
  hard.spare_reserve = placement::SpareReserve::kHard;
  PolicyMetrics m = RunPolicy(trace, "nvl72", hard);
  EXPECT_EQ(m.jobs_never_placed, 1);
  EXPECT_EQ(m.jobs_completed, 1);
  PolicyMetrics ok = RunPolicy(trace, "domain-best-fit", Options(1, 2, 2));
  EXPECT_EQ(ok.jobs_never_placed, 0);
  EXPECT_EQ(ok.jobs_completed, 2);
  // The soft reserve (default) lets it take the spares: it fits nowhere else.
  PolicyMetrics soft = RunPolicy(trace, "nvl72", Options(1, 2, 2));
  EXPECT_EQ(soft.jobs_never_placed, 0);
  EXPECT_EQ(soft.jobs_completed, 2);
  // With frequent failures there is never a long healthy idle period; the run still ends.
  SimOptions flaky = hard;
  flaky.mtbf_hours = 0.01;
  flaky.repair_hours = 0.01;
  PolicyMetrics m2 = RunPolicy(trace, "nvl72", flaky);
  EXPECT_EQ(m2.jobs_never_placed, 1);
  EXPECT_EQ(m2.jobs_completed, 1);
}

// Greedy backfill: a small job behind a big one that does not fit starts at once.
TEST(Simulate, BackfillsPastAJobThatDoesNotFit) {
  // 1 rack x 2 nodes. A: 4 GPUs; G: 8 GPUs (waits for A); P: 4 GPUs (fits on the other node).
  const Trace trace = MakeTrace("A,0,100,4\nG,1,10,8\nP,2,10,4\n");
  PolicyMetrics m = RunPolicy(trace, "domain-best-fit", Options(1, 2, 0));
  // Waits: A 0, G 99 (until A ends at 100), P 0.
  EXPECT_DOUBLE_EQ(m.wait_p99_s, 99);
  EXPECT_DOUBLE_EQ(m.wait_mean_s, 33);
}

// Defragmentation. 2 racks x 16 nodes, no spares; jobs of <= 28 GPUs (7 nodes) preemptible.
//   rack0         rack1         t=0  X: 9 nodes, 100 s, not preemptible -> rack0
//   [X x9][A x7]  [Y x9][B x7]  t=0  Y: 9 nodes, 100 s, not preemptible -> rack1
//                               t=1  A, B: 7 nodes each, 10000 s, preemptible -> rack0, rack1
// At t=100 X and Y end: 9 free nodes per rack, 18 in all. G (16 nodes, 1000 s) arrives at t=200:
// 64 GPUs are free but no rack has 16 free nodes. Moving A to rack1 frees rack0: G starts at 200.
// A ran 199 s: 180 s are checkpointed (every 60 s), 19 s lost; restart 600 s: A ends at
// 200 + 600 + 9820 = 10620 instead of 10001. Without defragmentation G waits for A until 10001.
Trace DefragTrace() {
  return MakeTrace("X,0,100,36\nY,0,100,36\nA,1,10000,28\nB,1,10000,28\nG,200,1000,64\n");
}

SimOptions DefragOptions(int preemptible_max_gpus) {
  SimOptions o = Options(2, 16, /*spares=*/0);
  o.preemptible_max_gpus = preemptible_max_gpus;
  return o;
}

TEST(SimulateDefrag, MovesPreemptibleJobsSoThatAWaitingGangStarts) {
  PolicyMetrics m = RunPolicy(DefragTrace(), "nvl72", DefragOptions(28));
  EXPECT_EQ(m.defrag_plans, 1);
  EXPECT_EQ(m.defrag_moves, 1);
  EXPECT_EQ(m.requeues, 1);                // the eviction path
  EXPECT_EQ(m.preemptions, 0);             // that counter is for recoveries
  EXPECT_EQ(m.gang_starts, 6);             // 5 first starts + A again
  EXPECT_DOUBLE_EQ(m.wait_p99_gang_s, 0);  // G started on arrival
  EXPECT_NEAR(m.lost_gpu_hours * kHour, 28 * 19, 1e-6);
  EXPECT_NEAR(m.restart_gpu_hours * kHour, 28 * 600, 1e-6);
  EXPECT_NEAR(m.makespan_s, 10620, 1e-9);  // the moved job A ends last, later than unmoved
  EXPECT_DOUBLE_EQ(m.single_domain_ratio, 1);
  EXPECT_EQ(m.jobs_completed, 5);

  SimOptions off = DefragOptions(28);
  off.defrag.enabled = false;
  PolicyMetrics waits = RunPolicy(DefragTrace(), "nvl72", off);
  EXPECT_EQ(waits.defrag_moves, 0);
  EXPECT_EQ(waits.requeues, 0);
  EXPECT_DOUBLE_EQ(waits.wait_p99_gang_s, 10001 - 200);  // G waits for A
  EXPECT_NEAR(waits.makespan_s, 10001 + 1000, 1e-9);
  EXPECT_DOUBLE_EQ(m.waiting_hours, 0);  // with the move nobody ever waits
  EXPECT_NEAR(waits.waiting_hours * kHour, 10001 - 200, 1e-9);
}

TEST(SimulateDefrag, NeverMovesANonPreemptibleJob) {
  // A and B (28 GPUs) are not preemptible at 4 or 0 GPUs. The 1-GPU pod P (on a free node from
  // t=150) is preemptible at 4, so the planner runs, but moving P alone frees no rack: nothing
  // moves and G waits for A and B.
  const Trace trace = MakeTrace(
      "X,0,100,36\nY,0,100,36\nA,1,10000,28\nB,1,10000,28\nP,150,100000,1\nG,200,1000,64\n");
  for (int preemptible_max_gpus : {0, 4}) {
    SCOPED_TRACE(preemptible_max_gpus);
    PolicyMetrics m = RunPolicy(trace, "nvl72", DefragOptions(preemptible_max_gpus));
    EXPECT_EQ(m.defrag_plans, 0);
    EXPECT_EQ(m.defrag_moves, 0);
    EXPECT_EQ(m.requeues, 0);
    EXPECT_DOUBLE_EQ(m.wait_p99_gang_s, 10001 - 200);
  }
}

// 2 racks x 16 nodes; jobs of <= 16 GPUs (4 nodes) preemptible.
//   rack0                rack1          t=0 X: 8 nodes, 100 s; P, Q: 4 nodes each, preemptible
//   [X x8][P x4][Q x4]   [Y x8][Z x8]   t=0 Y: 8 nodes, 10000 s; Z: 8 nodes, 100 s
// At t=200 G (16 nodes) waits with 16 nodes free (8 per rack): rack0 is freed only by moving both
// P and Q (to rack1's 8 free nodes).
TEST(SimulateDefrag, MaxMovesPerPlanIsABudget) {
  const Trace trace = MakeTrace(
      "X,0,100,32\nP,0,10000,16\nQ,0,10000,16\nY,0,10000,32\nZ,0,100,32\nG,200,1000,64\n");
  PolicyMetrics two = RunPolicy(trace, "nvl72", DefragOptions(16));
  EXPECT_EQ(two.defrag_plans, 1);
  EXPECT_EQ(two.defrag_moves, 2);
  EXPECT_DOUBLE_EQ(two.wait_p99_gang_s, 0);

  SimOptions one = DefragOptions(16);
  one.defrag.max_moves = 1;
  PolicyMetrics m = RunPolicy(trace, "nvl72", one);
  EXPECT_EQ(m.defrag_moves, 0);
  EXPECT_DOUBLE_EQ(m.wait_p99_gang_s, 10000 - 200);  // until P, Q and Y end
}

// 4 racks x 16 nodes; jobs of <= 24 GPUs (6 nodes) preemptible.
//   rack0         rack1         rack2         rack3       X, Y: 10 nodes, end at 100
//   [X x10][A x6] [Y x10][B x6] [R x9][7 free] [S x9][7 free]   A, B preemptible, R, S long
// G1 and G2 (16 nodes each) arrive at t=200. G1: move A to rack2, G1 takes rack0. G2: move B to
// rack3 -- but not before the minimum interval since the first plan has passed.
TEST(SimulateDefrag, MinimumIntervalBetweenPlans) {
  const Trace trace = MakeTrace(
      "X,0,100,40\nY,0,100,40\nR,0,10000,36\nS,0,10000,36\nA,0,10000,24\nB,0,10000,24\n"
      "G1,200,10000,64\nG2,200,10000,64\n");
  for (double interval : {0.0, 30.0, 100.0}) {
    SCOPED_TRACE(interval);
    SimOptions o = DefragOptions(24);
    o.cluster.racks = 4;
    o.defrag.min_interval_s = interval;
    PolicyMetrics m = RunPolicy(trace, "nvl72", o);
    EXPECT_EQ(m.defrag_plans, 2);
    EXPECT_EQ(m.defrag_moves, 2);
    // G2 starts when the interval ends (the operator's retry_after), not at the next event.
    EXPECT_DOUBLE_EQ(m.wait_p99_gang_s, interval);
    EXPECT_DOUBLE_EQ(m.single_domain_ratio, 1);
  }
}

// 3 racks x 16 nodes; jobs of <= 24 GPUs (6 nodes) preemptible; all start at t=0.
//   rack0          rack1         rack2         X ends at 100, B at 150, C at 300, E at 305;
//   [X x10][A x6]  [B x9][C x7]  [D x9][E x7]  D long; A (preemptible) 1000 s
// t=200 G1 (16 nodes): A moves to rack1 (rack2 is full), G1 takes rack0.
// t=310 G2 (16 nodes): rack1 holds only A, rack2 has 7 free nodes: moving A again frees rack1.
// A ran 200 s (180 s saved) and restarted at 200 (+600 s): it ends at 800 + 820 = 1620.
TEST(SimulateDefrag, AMovedJobIsNotMovedAgainWithinTheCooldown) {
  const Trace trace = MakeTrace(
      "X,0,100,40\nB,0,150,36\nD,0,100000,36\nC,0,300,28\nE,0,305,28\nA,0,1000,24\n"
      "G1,200,100000,64\nG2,310,100,64\n");
  SimOptions o = DefragOptions(24);
  o.cluster.racks = 3;
  o.defrag.cooldown_s = 0;
  PolicyMetrics no_cooldown = RunPolicy(trace, "nvl72", o);
  EXPECT_EQ(no_cooldown.defrag_plans, 2);
  EXPECT_EQ(no_cooldown.defrag_moves, 2);  // A twice
  EXPECT_DOUBLE_EQ(no_cooldown.wait_p99_gang_s, 0);

  // Cooldown 600 s: A may move again from t=800 on; the next pass after that runs at t=1000 (A's
  // superseded completion event), so G2 starts then, not at 310.
  o.defrag.cooldown_s = 600;
  PolicyMetrics m = RunPolicy(trace, "nvl72", o);
  EXPECT_EQ(m.defrag_moves, 2);
  EXPECT_GE(m.wait_p99_gang_s, 800 - 310);
  EXPECT_DOUBLE_EQ(m.wait_p99_gang_s, 1000 - 310);

  // A cooldown longer than A's life: A moves once, G2 waits until A ends.
  o.defrag.cooldown_s = 100000;
  PolicyMetrics once = RunPolicy(trace, "nvl72", o);
  EXPECT_EQ(once.defrag_plans, 1);
  EXPECT_EQ(once.defrag_moves, 1);
  EXPECT_DOUBLE_EQ(once.wait_p99_gang_s, 1620 - 310);
}

// --defrag on: only the operator's policy defragments; all: every policy.
TEST(RunSimulation, DefragScopeOnIsTheOperatorPolicyOnly) {
  SimConfig c;
  c.options = DefragOptions(28);
  c.policies = {"nvl72", "domain-best-fit"};
  StatusOr<RunReport> on = RunSimulationOnTrace(c, DefragTrace());
  c.defrag = DefragScope::kAll;
  StatusOr<RunReport> all = RunSimulationOnTrace(c, DefragTrace());
  c.defrag = DefragScope::kOff;
  StatusOr<RunReport> off = RunSimulationOnTrace(c, DefragTrace());
  ASSERT_TRUE(on.ok() && all.ok() && off.ok());
  EXPECT_EQ(on->results[0].defrag_moves, 1);
  EXPECT_EQ(on->results[1].defrag_moves, 0);
  EXPECT_EQ(all->results[0].defrag_moves, 1);
  EXPECT_EQ(all->results[1].defrag_moves, 1);
  EXPECT_EQ(off->results[0].defrag_moves, 0);
  EXPECT_EQ(ReportToJson(*on)["config"]["defrag"], "on");
  EXPECT_EQ(ReportToJson(*on)["policies"]["nvl72"]["defrag_moves"], 1);
}

TEST(SegmentSizeFor, WholeGangWhenItFitsARackElseBalancedSegments) {
  const ClusterShape nvl72{8, 18, 4};
  EXPECT_EQ(SegmentSizeFor(16, nvl72, 2), 0);
  EXPECT_EQ(SegmentSizeFor(17, nvl72, 2), 9);  // 2 segments of <= 16
  EXPECT_EQ(SegmentSizeFor(32, nvl72, 2), 16);
  EXPECT_EQ(SegmentSizeFor(40, nvl72, 2), 14);  // 3 segments
  EXPECT_EQ(SegmentSizeFor(18, nvl72, 0), 0);
  EXPECT_EQ(SegmentSizeFor(4, ClusterShape{2, 2, 4}, 5), 2);  // reserve >= rack: cap at the rack
}

SimConfig DeterminismConfig(uint64_t seed) {
  SimConfig c;
  c.trace_path = "cluster01.csv";
  c.options.cluster.racks = 2;
  c.options.mtbf_hours = 300;  // frequent failures so that the seed matters
  c.options.seed = seed;
  c.max_jobs = 400;
  return c;
}

TEST(RunSimulation, SameSeedSameJsonOtherSeedDiffers) {
  StatusOr<Trace> trace = LoadTrace(std::string(NVL72_SIM_TRACES_DIR) + "/cluster01.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  StatusOr<RunReport> a = RunSimulationOnTrace(DeterminismConfig(1), *trace);
  StatusOr<RunReport> b = RunSimulationOnTrace(DeterminismConfig(1), *trace);
  StatusOr<RunReport> c = RunSimulationOnTrace(DeterminismConfig(2), *trace);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_GT(a->results[0].node_failures, 0);
  EXPECT_EQ(ReportToJson(*a).dump(), ReportToJson(*b).dump());
  EXPECT_NE(ReportToJson(*a).dump(), ReportToJson(*c).dump());
  // Every Required gang of the topology-aware policies sits in one domain.
  for (const PolicyMetrics& m : a->results) {
    if (m.policy == "nvl72" || m.policy == "domain-best-fit") {
      EXPECT_DOUBLE_EQ(m.single_domain_ratio, 1) << m.policy;
    }
  }
}

TEST(RunSimulation, LoadFactorCompressesArrivals) {
  // 1 rack x 1 node. A: 4 GPUs, 100 s at t=0; B: 4 GPUs at t=150 -> at load 2, t=75: waits 25 s.
  const Trace trace = MakeTrace("A,0,100,4\nB,150,10,4\n");
  SimConfig c;
  c.options = Options(1, 1, 0);
  c.policies = {"domain-best-fit"};
  StatusOr<RunReport> base = RunSimulationOnTrace(c, trace);
  c.load = 2;
  StatusOr<RunReport> doubled = RunSimulationOnTrace(c, trace);
  ASSERT_TRUE(base.ok() && doubled.ok());
  EXPECT_DOUBLE_EQ(base->results[0].wait_mean_s, 0);
  EXPECT_DOUBLE_EQ(doubled->results[0].wait_p99_s, 25);
  EXPECT_DOUBLE_EQ(doubled->trace_span_s, 75);
  EXPECT_EQ(ReportToJson(*doubled)["config"]["load"], 2.0);
}

TEST(RunSimulation, RejectsUnknownPolicyAndJobsLargerThanTheCluster) {
  const Trace trace = MakeTrace("A,0,100,4\nB,1,10,12\n");
  SimConfig c;
  c.options = Options(1, 2, 0);
  c.policies = {"nvl72", "bogus"};
  StatusOr<RunReport> r = RunSimulationOnTrace(c, trace);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown policy 'bogus'"), std::string::npos);
  c.policies = {};
  r = RunSimulationOnTrace(c, trace);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test.csv:3: job B needs 12 GPUs"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace nvl72::sim
