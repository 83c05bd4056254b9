#include "operator/defrag_executor.h"

#include <gtest/gtest.h>

#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using std::chrono::seconds;
using test_fixtures::Job;
using test_fixtures::kNs;

Json Preemptible(Json job) {
  job["spec"]["preemptible"] = true;
  return job;
}

// Two racks fragmented as defragmentation finds them: each rack holds one preemptible 8-node job
// (p1, p2) next to 8 free nodes and its 2 spares, so a 16-node Required gang fits nowhere although
// 20 nodes are free. Built through admission: A (8) + p1 (8) fill one rack, B (8) + p2 (8) the
// other, then A and B finish and are deleted.
class DefragTest : public test_fixtures::OperatorFixture {
 protected:
  void Fragment(bool preemptible = true, bool delete_b = true) {
    AddRacks(2);
    auto job = [&](const std::string& name, bool p) {
      return p ? Preemptible(Job(name, 8)) : Job(name, 8);
    };
    StartJob(job("a", false));
    StartJob(job("p1", preemptible));
    StartJob(job("b", false));
    StartJob(job("p2", preemptible));
    rack_p1_ = RackOf(PlacementOf("p1").ranks[0].node);
    rack_p2_ = RackOf(PlacementOf("p2").ranks[0].node);
    ASSERT_EQ(RackOf(PlacementOf("a").ranks[0].node), rack_p1_);
    ASSERT_EQ(RackOf(PlacementOf("b").ranks[0].node), rack_p2_);
    ASSERT_NE(rack_p1_, rack_p2_);
    std::vector<std::string> gone = {"a"};
    if (delete_b) gone.emplace_back("b");
    for (const auto& name : gone) {
      ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, name).ok());
      Enqueue(std::string(kNs) + "/" + name);
    }
    RunUntilQuiet();
    for (const auto& name : gone) ASSERT_FALSE(fake_.Get(Nvl72JobsResource(), kNs, name).ok());
  }

  // The inputs of PlanDefragMoves as the admission pass has them, read from the fake API.
  struct Inputs {
    std::vector<Json> jobs;
    model::ClusterState state;
    model::JobSpec waiting_spec;
    const Json* waiting = nullptr;
  };
  Inputs Read(const std::string& waiting) {
    Inputs in;
    auto nodes = fake_.List(kube::kNodes, "");
    auto pods = fake_.List(kube::kPods, "");
    auto jobs = fake_.List(Nvl72JobsResource(), "");
    EXPECT_TRUE(nodes.ok() && pods.ok() && jobs.ok());
    in.jobs = jobs->items;
    model::ClusterOptions opts;
    opts.now = now_;
    in.state = model::ClusterState::Build(nodes->items, pods->items, in.jobs, opts);
    for (const auto& j : in.jobs) {
      if (kube::Name(j) == waiting) in.waiting = &j;
    }
    EXPECT_NE(in.waiting, nullptr);
    if (in.waiting != nullptr) in.waiting_spec = *model::ParseJobSpec((*in.waiting)["spec"]);
    return in;
  }
  DefragDecision Plan(Inputs& in, const DefragOptions& options,
                      std::optional<std::chrono::system_clock::time_point> last_plan = {}) {
    std::vector<const Json*> ptrs;
    for (const auto& j : in.jobs) ptrs.push_back(&j);
    auto policy = placement::MakePolicy("nvl72");
    const placement::GangRequest request =
        model::JudgeJob(in.state, *in.waiting, in.waiting_spec, kube::KeyOf(*in.waiting), 0,
                        options.gpu_resource)
            .request;
    return PlanDefragMoves(*policy, in.state, {{in.waiting, &in.waiting_spec, 0, request}}, ptrs,
                           options, now_, last_plan);
  }
  Json& JobIn(Inputs& in, const std::string& name) {
    for (auto& j : in.jobs) {
      if (kube::Name(j) == name) return j;
    }
    ADD_FAILURE() << "no job " << name;
    return in.jobs.front();
  }
  // A waiting job, applied without running the queue (so no admission pass moves anything).
  void ApplyWaiting(const Json& job) {
    auto created = fake_.Create(Nvl72JobsResource(), kNs, job);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  std::string rack_p1_, rack_p2_;
};

TEST_F(DefragTest, AWaitingRequiredGangIsAdmittedAfterAPreemptibleJobMoves) {
  Fragment();
  const model::JobPlacement p1 = PlacementOf("p1"), p2 = PlacementOf("p2");
  Apply(Job("big", 16));
  RunUntilQuiet();

  const bool p1_moved = !(PlacementOf("p1") == p1);
  const bool p2_moved = !(PlacementOf("p2") == p2);
  ASSERT_NE(p1_moved, p2_moved) << "exactly one preemptible job moves (the fewest moves)";
  const std::string moved = p1_moved ? "p1" : "p2";
  const std::string freed = p1_moved ? rack_p1_ : rack_p2_;
  for (const auto& r : PlacementOf(moved).ranks) EXPECT_NE(RackOf(r.node), freed);
  std::string reason;
  EXPECT_EQ(Condition(moved, kConditionMoved, &reason), "True");
  EXPECT_EQ(reason, "Defragmentation");
  const Json status = GetJob(moved)["status"];
  EXPECT_EQ(status["defragMoves"], 1);
  EXPECT_EQ(status["lastDefragMoveTime"], kube::FormatTime(now_));
  ExpectOnePodPerRank(moved);
  EXPECT_EQ(moves_, std::vector<std::string>{"started"});

  // The waiting gang got the freed rack.
  const model::JobPlacement big = PlacementOf("big");
  ASSERT_EQ(big.ranks.size(), 16u);
  for (const auto& r : big.ranks) EXPECT_EQ(RackOf(r.node), freed);

  // The moved job runs again: its move completes.
  RunPods(moved);
  RunPods("big");
  RunUntilQuiet();
  EXPECT_EQ(Condition(moved, kConditionMoved, &reason), "False");
  EXPECT_EQ(reason, "MoveCompleted");
  EXPECT_EQ(Condition(moved, model::kConditionRunning), "True");
  EXPECT_EQ(Condition("big", model::kConditionRunning), "True");
  EXPECT_EQ(moves_, (std::vector<std::string>{"started", "completed"}));

  // Nothing moves again: the state is stable.
  const model::JobPlacement settled = PlacementOf(moved);
  Enqueue(Reconciler::kAdmissionKey);
  now_ += seconds(3600);
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf(moved), settled);
  EXPECT_EQ(moves_.size(), 2u);
}

TEST_F(DefragTest, NonPreemptibleJobsAreNeverMoved) {
  Fragment(/*preemptible=*/false);
  const model::JobPlacement p1 = PlacementOf("p1"), p2 = PlacementOf("p2");
  Apply(Job("big", 16));
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("p1"), p1);
  EXPECT_EQ(PlacementOf("p2"), p2);
  EXPECT_EQ(Condition("big", model::kConditionAdmitted), "False");
  EXPECT_TRUE(moves_.empty());
}

TEST_F(DefragTest, DefragmentationOffMovesNothing) {
  options_.defrag.enabled = false;
  Restart();
  Fragment();
  const model::JobPlacement p1 = PlacementOf("p1"), p2 = PlacementOf("p2");
  Apply(Job("big", 16));
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("p1"), p1);
  EXPECT_EQ(PlacementOf("p2"), p2);
  EXPECT_TRUE(moves_.empty());
}

TEST_F(DefragTest, PlanMovesOneJobAndGivesItNodesOutsideTheFreedDomain) {
  Fragment();
  ApplyWaiting(Job("big", 16));
  Inputs in = Read("big");
  DefragDecision d = Plan(in, DefragOptions{});
  ASSERT_TRUE(d.execute) << d.reason;
  ASSERT_EQ(d.moves.size(), 1u);
  EXPECT_EQ(d.waiting_key, "team/big");
  const std::string freed = d.moves[0].key == "team/p1" ? rack_p1_ : rack_p2_;
  EXPECT_EQ(RackOf(d.moves[0].from.ranks[0].node), freed);
  for (const auto& r : d.moves[0].to.ranks) EXPECT_NE(RackOf(r.node), freed);
}

// With NVIDIA's DRA driver every node of a running gang that uses ComputeDomains carries the
// ComputeDomain label: the label must not hide the nodes a move would free from the plan.
TEST_F(DefragTest, NodesLabelledForTheMovedGangsComputeDomainCountAsFreedByTheMove) {
  Fragment();
  for (const std::string job : {"p1", "p2"}) {
    for (const auto& r : PlacementOf(job).ranks) {
      Mutate(kube::kNodes, "", r.node, [&](Json& n) {
        n["metadata"]["labels"][std::string(model::kComputeDomainNodeLabel)] = "uid-" + job;
      });
    }
  }
  ApplyWaiting(Job("big", 16));
  Inputs in = Read("big");
  DefragDecision d = Plan(in, DefragOptions{});
  ASSERT_TRUE(d.execute) << d.reason;
  ASSERT_EQ(d.moves.size(), 1u);
}

TEST_F(DefragTest, AJobMovedWithinItsCooldownIsNotMovedAgain) {
  Fragment();
  ApplyWaiting(Job("big", 16));
  Inputs in = Read("big");
  DefragOptions options;
  options.cooldown = seconds(600);
  for (const char* name : {"p1", "p2"}) {
    JobIn(in, name)["status"]["lastDefragMoveTime"] = kube::FormatTime(now_ - seconds(100));
  }
  DefragDecision d = Plan(in, options);
  EXPECT_FALSE(d.execute) << d.reason;
  // Past the cooldown (and the minimum interval) they may move again.
  for (const char* name : {"p1", "p2"}) {
    JobIn(in, name)["status"]["lastDefragMoveTime"] = kube::FormatTime(now_ - seconds(601));
  }
  EXPECT_TRUE(Plan(in, options).execute);
}

TEST_F(DefragTest, AMoveInFlightBlocksTheNextPlan) {
  Fragment();
  ApplyWaiting(Job("big", 16));
  Inputs in = Read("big");
  JobIn(in, "p2")["status"]["conditions"].push_back(
      {{"type", "Moved"}, {"status", "True"}, {"reason", "Defragmentation"}});
  DefragDecision d = Plan(in, DefragOptions{});
  EXPECT_FALSE(d.execute);
  EXPECT_NE(d.reason.find("being moved"), std::string::npos) << d.reason;
}

// A moved job whose new pods never run (an image that never pulls): after the move timeout the
// move ends (Moved False / MoveTimedOut) and no longer blocks the next plan.
TEST_F(DefragTest, AMoveWhosePodsNeverRunTimesOutAndFreesTheBudget) {
  // The stuck rule would look earlier (at 300 s, the earliest delay wins): off, to see the
  // timeout's.
  options_.stuck_after = seconds(0);
  Restart();
  Fragment();
  Apply(Job("big", 16));
  RunUntilQuiet();
  const std::string moved = Condition("p1", kConditionMoved) == "True" ? "p1" : "p2";
  ASSERT_EQ(Condition(moved, kConditionMoved), "True");
  // The job reconcile asked to look again when the move times out (default 600 s).
  ASSERT_EQ(delayed_.count(std::string(kNs) + "/" + moved), 1u);
  EXPECT_GT(delayed_[std::string(kNs) + "/" + moved], std::chrono::milliseconds(599000));

  // Before the timeout: still in flight, the next plan waits.
  now_ += seconds(599);
  Enqueue(std::string(kNs) + "/" + moved);
  RunUntilQuiet();
  EXPECT_EQ(Condition(moved, kConditionMoved), "True");
  ApplyWaiting(Job("next", 16));
  Inputs in = Read("next");
  EXPECT_NE(Plan(in, DefragOptions{}).reason.find("being moved"), std::string::npos);

  // At the timeout the job reconcile ends the move; the budget is free again.
  now_ += seconds(2);
  Enqueue(std::string(kNs) + "/" + moved);
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition(moved, kConditionMoved, &reason), "False");
  EXPECT_EQ(reason, "MoveTimedOut");
  EXPECT_EQ(moves_, (std::vector<std::string>{"started", "failed"}));
  Inputs after = Read("next");
  EXPECT_EQ(Plan(after, DefragOptions{}).reason.find("being moved"), std::string::npos);
  // Even with Moved still True (the reconcile's write not seen yet), a timed-out move does not
  // count against the budget.
  JobIn(after, moved)["status"]["conditions"] =
      Json::array({{{"type", "Moved"}, {"status", "True"}, {"reason", "Defragmentation"}}});
  EXPECT_EQ(Plan(after, DefragOptions{}).reason.find("being moved"), std::string::npos);
}

TEST_F(DefragTest, TheMinimumIntervalDelaysTheNextPlan) {
  Fragment();
  ApplyWaiting(Job("big", 16));
  Inputs in = Read("big");
  DefragOptions options;
  options.min_interval = seconds(30);
  DefragDecision d = Plan(in, options, now_ - seconds(10));
  EXPECT_FALSE(d.execute);
  ASSERT_TRUE(d.retry_after.has_value());
  EXPECT_GT(*d.retry_after, std::chrono::milliseconds(19000));
  EXPECT_LE(*d.retry_after, std::chrono::milliseconds(20000));
  EXPECT_TRUE(Plan(in, options, now_ - seconds(31)).execute);
}

TEST_F(DefragTest, APlanThatLeavesAMovedJobWithoutNodesIsNotExecuted) {
  // Only A goes: p1's rack has 10 free nodes, p2's rack is full. Moving p1 would make room for a
  // 12-node gang, but p1 itself would then find 8 nodes nowhere.
  Fragment(/*preemptible=*/true, /*delete_b=*/false);
  ApplyWaiting(Job("mid", 12));
  Inputs in = Read("mid");
  DefragDecision d = Plan(in, DefragOptions{});
  EXPECT_FALSE(d.execute);
  EXPECT_NE(d.reason.find("no other nodes"), std::string::npos) << d.reason;

  // And through the reconciler: nothing is written, nothing moves.
  const model::JobPlacement p1 = PlacementOf("p1");
  Enqueue("team/mid");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("p1"), p1);
  EXPECT_TRUE(moves_.empty());
}

}  // namespace
}  // namespace nvl72::op
