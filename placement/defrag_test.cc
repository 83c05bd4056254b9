#include "placement/defrag.h"

#include <gtest/gtest.h>

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
      s.nodes[static_cast<size_t>(18 + i)].gpu_used = 4;
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

}  // namespace
}  // namespace nvl72::placement
