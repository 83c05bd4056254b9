#include "placement/defrag.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "placement/topology_for_test.h"

namespace nvl72::placement {
namespace {

// Two racks of 18 nodes; job `a` holds 8 nodes of rack a, job `b` 8 nodes of rack b.
struct TwoRacks {
  Snapshot s;
  std::vector<RunningJob> jobs;
  TwoRacks(bool a_preemptible, bool b_preemptible) {
    s.AddDomain("a", 18, 4);
    s.AddDomain("b", 18, 4);
    RunningJob a{"ns/a", a_preemptible, {}}, b{"ns/b", b_preemptible, {}};
    for (int i = 0; i < 8; ++i) {
      s.nodes[static_cast<size_t>(i)].gpu_used = 4;
      a.gpus_on_node.emplace_back(i, 4);
      s.nodes[18 + static_cast<size_t>(i)].gpu_used = 4;
      b.gpus_on_node.emplace_back(18 + i, 4);
    }
    // b is a little smaller in GPUs so the planner prefers moving it on a tie of move count.
    s.nodes[18].gpu_used = 2;
    b.gpus_on_node[0].second = 2;
    jobs = {a, b};
  }
};

GangRequest Sixteen() {
  GangRequest r;
  r.key = "ns/big";
  r.replicas = 16;
  return r;
}

TEST(DefragTest, OneMoveFreesARack) {
  TwoRacks t(true, true);
  auto p = MakePolicy("nvl72", {2});
  ASSERT_FALSE(p->PlaceGang(t.s, Sixteen()).placed);
  DefragPlan plan = PlanDefrag(t.s, *p, Sixteen(), t.jobs, 2);
  ASSERT_TRUE(plan.found) << plan.reason;
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0], 1) << "fewest GPUs moved";
  EXPECT_EQ(plan.domain, 1);
}

// The moved jobs are admitted gangs: their nodes are gang_reserved and their GPUs reclaimable (as
// model::ClusterState marks preemptible gangs). Moving one frees those nodes for the waiting gang.
TEST(DefragTest, MovingAGangFreesItsReservedNodes) {
  TwoRacks t(true, true);
  for (const RunningJob& j : t.jobs) {
    for (const auto& [node, gpus] : j.gpus_on_node) {
      t.s.nodes[static_cast<size_t>(node)].gang_reserved = true;
      t.s.nodes[static_cast<size_t>(node)].gpu_reclaimable = gpus;
    }
  }
  auto p = MakePolicy("nvl72", {2});
  ASSERT_FALSE(p->PlaceGang(t.s, Sixteen()).placed);
  DefragPlan plan = PlanDefrag(t.s, *p, Sixteen(), t.jobs, 2);
  ASSERT_TRUE(plan.found) << plan.reason;
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0], 1) << "fewest GPUs moved";
}

TEST(DefragTest, NeverMovesNonPreemptible) {
  TwoRacks t(true, false);
  auto p = MakePolicy("nvl72", {2});
  DefragPlan plan = PlanDefrag(t.s, *p, Sixteen(), t.jobs, 2);
  ASSERT_TRUE(plan.found);
  EXPECT_EQ(plan.moves, std::vector<int>{0});
  TwoRacks none(false, false);
  EXPECT_FALSE(PlanDefrag(none.s, *p, Sixteen(), none.jobs, 2).found);
}

TEST(DefragTest, RespectsBudget) {
  TwoRacks t(true, true);
  auto p = MakePolicy("nvl72", {2});
  DefragPlan plan = PlanDefrag(t.s, *p, Sixteen(), t.jobs, 0);
  EXPECT_FALSE(plan.found);
  EXPECT_NE(plan.reason.find("at most 0"), std::string::npos);
}

TEST(DefragTest, TwoSmallJobsMustBothMove) {
  Snapshot s;
  s.AddDomain("a", 18, 4);
  std::vector<RunningJob> jobs{{"ns/x", true, {{0, 4}, {1, 4}}}, {"ns/y", true, {{2, 4}}}};
  for (int i = 0; i < 3; ++i) s.nodes[static_cast<size_t>(i)].gpu_used = 4;
  // A hard reserve needs all 18 nodes for 16 ranks + 2 spares.
  auto p = MakePolicy("nvl72", {2, SpareReserve::kHard});
  DefragPlan plan = PlanDefrag(s, *p, Sixteen(), jobs, 3);
  ASSERT_TRUE(plan.found) << plan.reason;
  EXPECT_EQ(plan.moves.size(), 2u);
  // The soft reserve (default) lets 16 ranks take every free node: one move (x or y) is enough.
  auto soft = MakePolicy("nvl72", {2, SpareReserve::kSoft});
  DefragPlan one = PlanDefrag(s, *soft, Sixteen(), jobs, 3);
  ASSERT_TRUE(one.found) << one.reason;
  EXPECT_EQ(one.moves.size(), 1u);
}

TEST(DefragTest, AlreadyFitsNeedsNoMoves) {
  Snapshot s;
  s.AddDomain("a", 18, 4);
  auto p = MakePolicy("nvl72", {2});
  DefragPlan plan = PlanDefrag(s, *p, Sixteen(), {}, 2);
  EXPECT_TRUE(plan.found);
  EXPECT_TRUE(plan.moves.empty());
}

// ---- The rules around the planner (shared by the operator and the simulator).

TEST(DefragRulesTest, PassPlansForAtMostThreeGangs) { EXPECT_EQ(kMaxGangsPlannedPerPass, 3); }

// docs/recovery.md and docs/simulator.md state these defaults (2 moves, 30 s, 600 s).
TEST(DefragRulesTest, BudgetDefaults) {
  EXPECT_EQ(kDefaultDefragMaxMoves, 2);
  EXPECT_EQ(kDefaultDefragMinIntervalSeconds, 30);
  EXPECT_EQ(kDefaultDefragCooldownSeconds, 600);
}

TEST(DefragRulesTest, FreeSchedulableGpusCountsOnlySchedulableNodes) {
  Snapshot s;
  s.AddDomain("a", 5, 4);
  s.AddDomain("b", 1, 4);
  s.nodes[0].gpu_used = 1;     // 3 free
  s.nodes[1].cordoned = true;  // 4 free but not schedulable
  s.nodes[2].gpu_used = 4;     // 0 free
  s.nodes[3].ready = false;    // not schedulable
  s.nodes[4].tainted = true;   // not schedulable
  s.nodes[5].gpu_used = 2;     // 2 free (rack b)
  EXPECT_EQ(FreeSchedulableGpus(s), 5);
  EXPECT_EQ(FreeSchedulableGpus(Snapshot{}), 0);
}

TEST(DefragRulesTest, OnlyRequiredGangsWithTheirGpusFreeAreEligible) {
  EXPECT_TRUE(DefragEligible({TopologyMode::kRequired, 64}, 64));
  EXPECT_TRUE(DefragEligible({TopologyMode::kRequired, 64}, 65));
  EXPECT_FALSE(DefragEligible({TopologyMode::kRequired, 64}, 63));
  EXPECT_FALSE(DefragEligible({TopologyMode::kPreferred, 8}, 100));
  EXPECT_FALSE(DefragEligible({TopologyMode::kUnconstrained, 8}, 100));
}

TEST(DefragRulesTest, GangsToPlanForTakesTheFirstThreeEligibleInOrder) {
  const std::vector<WaitingGang> waiting = {
      {TopologyMode::kRequired, 16},  // 0: more than the 10 free GPUs
      {TopologyMode::kRequired, 8},   // 1
      {TopologyMode::kPreferred, 4},  // 2: not Required
      {TopologyMode::kRequired, 4},   // 3
      {TopologyMode::kRequired, 10},  // 4: exactly the free GPUs
      {TopologyMode::kRequired, 2},   // 5: eligible, over the per-pass limit
      {TopologyMode::kRequired, 1},   // 6
  };
  EXPECT_EQ(GangsToPlanFor(waiting, 10), (std::vector<size_t>{1, 3, 4}));
  EXPECT_EQ(GangsToPlanFor(waiting, 3), (std::vector<size_t>{5, 6}));
  EXPECT_TRUE(GangsToPlanFor(waiting, 0).empty());
  EXPECT_TRUE(GangsToPlanFor({}, 100).empty());
}

TEST(DefragRulesTest, IntervalInSecondsAsPlainNumbers) {
  // Last plan at 100 s, 30 s between plans.
  EXPECT_EQ(DefragIntervalEnd<double>(100.0, 120.0, 30.0), std::optional<double>(130.0));
  EXPECT_EQ(DefragIntervalEnd<double>(100.0, 129.5, 30.0), std::optional<double>(130.0));
  EXPECT_EQ(DefragIntervalEnd<double>(100.0, 130.0, 30.0), std::nullopt) << "ends at 130";
  EXPECT_EQ(DefragIntervalEnd<double>(100.0, 500.0, 30.0), std::nullopt);
  EXPECT_EQ(DefragIntervalEnd<double>(std::nullopt, 0.0, 30.0), std::nullopt) << "never planned";
}

TEST(DefragRulesTest, IntervalWithChronoDurations) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  // The length may be given in coarser units than the instants.
  EXPECT_EQ(DefragIntervalEnd(std::optional<milliseconds>(milliseconds(1'000)), milliseconds(1'500),
                              seconds(30)),
            std::optional<milliseconds>(milliseconds(31'000)));
  EXPECT_EQ(DefragIntervalEnd(std::optional<milliseconds>(milliseconds(1'000)),
                              milliseconds(30'999), seconds(30)),
            std::optional<milliseconds>(milliseconds(31'000)));
  EXPECT_EQ(DefragIntervalEnd(std::optional<milliseconds>(milliseconds(1'000)),
                              milliseconds(31'000), seconds(30)),
            std::nullopt);
  EXPECT_EQ(DefragIntervalEnd<milliseconds>(std::nullopt, milliseconds(5), seconds(30)),
            std::nullopt);
}

TEST(DefragRulesTest, CooldownExcludesRecentlyMovedPreemptibleJobs) {
  // Now 1000 s, cooldown 600 s.
  std::vector<RunningJob> jobs = {
      {"never-moved", true, {}},      {"moved-500", true, {}},  // cooling down until 1100
      {"moved-450", true, {}},                                  // until 1050: the earliest end
      {"fixed-moved-900", false, {}},  // not preemptible: no cooldown end counted (1500)
      {"moved-300", true, {}},         // cooldown over at 900
      {"moved-400", true, {}},         // ends exactly now (1000): a candidate again
  };
  const std::vector<std::optional<double>> last_moves = {std::nullopt, 500.0, 450.0,
                                                         900.0,        300.0, 400.0};
  const std::optional<double> earliest = SelectDefragCandidates(jobs, last_moves, 1000.0, 600.0);
  EXPECT_EQ(earliest, std::optional<double>(1050.0));
  std::vector<bool> preemptible;
  preemptible.reserve(jobs.size());
  for (const RunningJob& j : jobs) preemptible.push_back(j.preemptible);
  EXPECT_EQ(preemptible, (std::vector<bool>{true, false, false, false, true, true}));
}

TEST(DefragRulesTest, NoCooldownEndWhenNoJobIsExcludedByOne) {
  std::vector<RunningJob> jobs = {{"a", true, {}}, {"b", false, {}}};
  const std::vector<std::optional<double>> last_moves = {100.0, 990.0};
  EXPECT_EQ(SelectDefragCandidates(jobs, last_moves, 1000.0, 600.0), std::nullopt);
  EXPECT_TRUE(jobs[0].preemptible);
  EXPECT_FALSE(jobs[1].preemptible);
}

TEST(DefragRulesTest, CooldownWithChronoDurations) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  std::vector<RunningJob> jobs = {{"a", true, {}}, {"b", true, {}}};
  const std::vector<std::optional<milliseconds>> last_moves = {milliseconds(400'001),
                                                               milliseconds(400'000)};
  // Now 1000 s, cooldown 600 s: a moved 1 ms after b is inside its cooldown for 1 ms more.
  EXPECT_EQ(SelectDefragCandidates(jobs, last_moves, milliseconds(1'000'000), seconds(600)),
            std::optional<milliseconds>(milliseconds(1'000'001)));
  EXPECT_FALSE(jobs[0].preemptible);
  EXPECT_TRUE(jobs[1].preemptible);
}

TEST(DefragRulesTest, PlaceInFreedDomainNeedsTheFirstSegmentInThatDomain) {
  TwoRacks t(true, true);
  auto p = MakePolicy("nvl72", {2});
  // Nothing released: 16 ranks fit in neither rack (10 free nodes each).
  EXPECT_FALSE(PlaceInFreedDomain(t.s, *p, Sixteen(), 0));
  EXPECT_FALSE(PlaceInFreedDomain(t.s, *p, Sixteen(), 1));
  // Job b released: rack b (nodes 18..35) is empty and takes the gang; rack a is not freed.
  Snapshot freed = t.s;
  for (const auto& [node, gpus] : t.jobs[1].gpus_on_node) {
    freed.nodes[static_cast<size_t>(node)].gpu_used -= gpus;
  }
  const std::optional<GangPlacement> in_b = PlaceInFreedDomain(freed, *p, Sixteen(), 1);
  ASSERT_TRUE(in_b);
  ASSERT_EQ(in_b->rank_nodes.size(), 16u);
  for (NodeId n : in_b->rank_nodes) {
    EXPECT_GE(n, 18);
    EXPECT_LE(n, 35);
  }
  EXPECT_FALSE(PlaceInFreedDomain(freed, *p, Sixteen(), 0));
}

}  // namespace
}  // namespace nvl72::placement
