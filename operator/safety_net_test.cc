#include "operator/safety_net.h"

#include <gtest/gtest.h>

#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"

namespace nvl72::op {
namespace {

using std::chrono::seconds;
using Time = std::chrono::system_clock::time_point;

const Time kT0 = std::chrono::system_clock::from_time_t(1'800'000'000);

model::JobPlacement TwoRanks() {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}, {1, "n1", "j-1"}};
  return p;
}

Json Job(int64_t generation) {
  return {{"metadata", {{"name", "j"}, {"namespace", "ns"}, {"generation", generation}}},
          {"status", {{"placement", model::PlacementToJson(TwoRanks())}, {"domains", "d"}}}};
}

// Rank pod `rank` of job j: bound to `node`, or unbound and refused since `since` when node is "".
Json RankPod(int rank, const std::string& node, Time since = kT0,
             const std::string& reason = "Unschedulable") {
  Json p = {{"metadata",
             {{"name", "j-" + std::to_string(rank)},
              {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", std::to_string(rank)}}}}},
            {"spec", Json::object()},
            {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) {
    p["spec"]["nodeName"] = node;
    return p;
  }
  p["status"]["conditions"] = {
      {{"type", "PodScheduled"},
       {"status", "False"},
       {"reason", reason},
       {"message", "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules."},
       {"lastTransitionTime", kube::FormatTime(since)}}};
  return p;
}

std::string ConditionReason(const Json& status, std::string_view type) {
  const Json job = {{"status", status}};
  const Json* c = model::FindCondition(job, type);
  return c == nullptr ? "" : c->value("reason", "");
}

TEST(RefusedRanksTest, OnlyUnboundRanksOfThePlacementThatKubeSchedulerCallsUnschedulable) {
  const Json bound = RankPod(0, "n0");
  const Json refused = RankPod(1, "");
  const Json error = RankPod(1, "", kT0, "SchedulerError");  // an extender error is no refusal
  Json other = RankPod(5, "");                               // rank not in the placement
  auto r = RefusedRanks(TwoRanks(), {&bound, &refused, &other});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rank, 1);
  EXPECT_EQ(r[0].node, "n1");
  EXPECT_EQ(r[0].since, kT0);
  EXPECT_NE(r[0].message.find("anti-affinity"), std::string::npos);
  EXPECT_TRUE(RefusedRanks(TwoRanks(), {&bound, &error}).empty());
}

TEST(SafetyNetTest, BeforeTheBoundItLooksAgainWhenTheBoundEnds) {
  const Json pod = RankPod(1, "");
  SafetyNetDecision d = DecideSafetyNet(Job(1), TwoRanks(), {&pod}, {}, kT0 + seconds(45));
  EXPECT_FALSE(d.replan);
  ASSERT_TRUE(d.recheck_after.has_value());
  EXPECT_EQ(*d.recheck_after, std::chrono::milliseconds(15'000));
}

TEST(SafetyNetTest, AfterTheBoundTheReservationGoesAndTheNodeIsRefused) {
  const Json pod = RankPod(1, "");
  const Json job = Job(3);
  SafetyNetDecision d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  EXPECT_FALSE(d.status.contains("placement"));
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n1"}));
  EXPECT_EQ(d.status["replans"], 1);
  EXPECT_EQ(d.status["replanGeneration"], 3);
  EXPECT_EQ(d.status["state"], "Waiting");
  EXPECT_EQ(ConditionReason(d.status, model::kConditionAdmitted), kReasonReplanning);
  EXPECT_NE(d.message.find("rank 1 on its planned node n1"), std::string::npos) << d.message;
  // The admission pass leaves the refused node out of the next plan.
  Json written = job;
  written["status"] = d.status;
  EXPECT_EQ(model::RefusedNodes(written), std::vector<std::string>{"n1"});
  EXPECT_FALSE(ReplanLimitReached(written));
}

// A PodGroup refused as a whole: rank 1 failed its own filters (the node verdict), rank 0 carries
// only the group's verdict. Only n1 is refused; with no node verdict at all, every refusal counts.
TEST(SafetyNetTest, AGroupVerdictDoesNotBlameTheNodeOfARankThatFitIt) {
  Json group_only = RankPod(0, "");
  group_only["status"]["conditions"][0]["message"] =
      "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining";
  const Json culprit = RankPod(1, "");
  SafetyNetDecision d =
      DecideSafetyNet(Job(1), TwoRanks(), {&group_only, &culprit}, {}, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n1"}));
  EXPECT_NE(d.message.find("rank 1 on its planned node n1"), std::string::npos) << d.message;

  d = DecideSafetyNet(Job(1), TwoRanks(), {&group_only}, {}, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n0"}));
}

TEST(SafetyNetTest, TheBoundDoublesWithEachReplanAndTheLimitStopsReplanning) {
  const Json pod = RankPod(0, "");
  Json job = Job(1);
  job["status"]["replans"] = 1;
  job["status"]["replanGeneration"] = 1;
  job["status"]["refusedNodes"] = {"n7"};
  EXPECT_FALSE(DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(119)).replan);
  SafetyNetDecision d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(120));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(d.status["replans"], 2);
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n7", "n0"}));

  job["status"]["replans"] = 3;  // --max-replans 3 reached: the next refusal makes it wait
  d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(60 * 8));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(ConditionReason(d.status, model::kConditionAdmitted), kReasonReplanLimit);
  Json written = job;
  written["status"] = d.status;
  EXPECT_TRUE(ReplanLimitReached(written));
  // A spec change (new generation) starts afresh.
  written["metadata"]["generation"] = 2;
  EXPECT_FALSE(ReplanLimitReached(written));
  EXPECT_EQ(ReplansAtGeneration(written), 0);
  EXPECT_TRUE(model::RefusedNodes(written).empty());
}

// The job after `d` was written.
Json Written(const Json& job, const SafetyNetDecision& d) {
  Json out = job;
  out["status"] = d.status;
  return out;
}

TEST(RefusedRanksTest, AConditionThatIsNoRefusalOrABoundPodIsNotARefusedRank) {
  Json scheduled = RankPod(0, "");  // PodScheduled True: kube-scheduler has accepted it
  scheduled["status"]["conditions"][0]["status"] = "True";
  Json stale = RankPod(1, "");  // bound since: a PodScheduled False left over is no refusal
  stale["spec"]["nodeName"] = "n1";
  Json no_condition = RankPod(0, "");
  no_condition["status"].erase("conditions");
  Json not_a_rank = RankPod(1, "");
  not_a_rank["metadata"].erase("labels");
  EXPECT_TRUE(RefusedRanks(TwoRanks(), {&scheduled, &stale, &no_condition, &not_a_rank}).empty());
}

TEST(RefusedRanksTest, InRankOrder) {
  const Json r1 = RankPod(1, "", kT0 + seconds(5));
  const Json r0 = RankPod(0, "", kT0 + seconds(9));
  auto r = RefusedRanks(TwoRanks(), {&r1, &r0});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].rank, 0);
  EXPECT_EQ(r[0].node, "n0");
  EXPECT_EQ(r[0].since, kT0 + seconds(9));
  EXPECT_EQ(r[1].rank, 1);
  EXPECT_EQ(r[1].node, "n1");
  EXPECT_EQ(r[1].since, kT0 + seconds(5));
}

TEST(SafetyNetTest, NothingRefusedIsNothingToDo) {
  const Json bound0 = RankPod(0, "n0");
  const Json bound1 = RankPod(1, "n1");
  SafetyNetDecision d =
      DecideSafetyNet(Job(1), TwoRanks(), {&bound0, &bound1}, {}, kT0 + seconds(3600));
  EXPECT_FALSE(d.replan);
  EXPECT_FALSE(d.recheck_after.has_value());
}

TEST(SafetyNetTest, ItLooksAgainWhenTheFirstRefusedRankReachesTheBound) {
  const Json r0 = RankPod(0, "", kT0);
  const Json r1 = RankPod(1, "", kT0 + seconds(20));
  SafetyNetDecision d = DecideSafetyNet(Job(1), TwoRanks(), {&r1, &r0}, {}, kT0 + seconds(30));
  EXPECT_FALSE(d.replan);
  ASSERT_TRUE(d.recheck_after.has_value());
  EXPECT_EQ(*d.recheck_after, std::chrono::milliseconds(30'000));

  // Both past the bound: both nodes are refused in one re-plan.
  d = DecideSafetyNet(Job(1), TwoRanks(), {&r1, &r0}, {}, kT0 + seconds(80));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n0", "n1"}));
  EXPECT_EQ(d.status["replans"], 1);
}

TEST(SafetyNetTest, TheBoundComesFromTheOptions) {
  const Json pod = RankPod(1, "");
  const SafetyNetOptions options{.bound = seconds(10), .max_replans = 3};
  SafetyNetDecision d = DecideSafetyNet(Job(1), TwoRanks(), {&pod}, options, kT0 + seconds(4));
  EXPECT_FALSE(d.replan);
  ASSERT_TRUE(d.recheck_after.has_value());
  EXPECT_EQ(*d.recheck_after, std::chrono::milliseconds(6'000));
  EXPECT_TRUE(DecideSafetyNet(Job(1), TwoRanks(), {&pod}, options, kT0 + seconds(10)).replan);
}

TEST(SafetyNetTest, TheReleasedStatusKeepsWhatTheSafetyNetDoesNotOwn) {
  const Json pod = RankPod(1, "");
  Json job = Job(2);
  job["status"]["recoveries"] = 2;
  job["status"]["observedGeneration"] = 2;
  SafetyNetDecision d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  EXPECT_FALSE(d.status.contains("placement"));
  EXPECT_EQ(d.status["recoveries"], 2);
  EXPECT_EQ(d.status["replanGeneration"], 2);
  const Json written = Written(job, d);
  const Json* admitted = model::FindCondition(written, model::kConditionAdmitted);
  ASSERT_NE(admitted, nullptr);
  EXPECT_EQ((*admitted)["status"], "False");
  EXPECT_EQ((*admitted)["reason"], kReasonReplanning);
  EXPECT_FALSE(admitted->value("message", "").empty());
  EXPECT_EQ(ReplansAtGeneration(written), 1);
}

// With --max-replans 3, re-plans 1, 2 and 3 come after 60, 120 and 240 s; the fourth refusal (after
// 480 s) makes the job wait with reason ReplanLimit.
TEST(SafetyNetTest, ReplansBackOffUntilTheLimit) {
  Json job = Job(5);
  Time since = kT0;
  for (int i = 0; i < 4; ++i) {
    const int rank = i % 2;
    const Json pod = RankPod(rank, "", since);
    const auto bound = seconds(60) * (1 << i);
    SafetyNetDecision early =
        DecideSafetyNet(job, TwoRanks(), {&pod}, {}, since + bound - seconds(1));
    EXPECT_FALSE(early.replan) << "refusal " << i;
    ASSERT_TRUE(early.recheck_after.has_value());
    EXPECT_EQ(*early.recheck_after, std::chrono::milliseconds(1000)) << "refusal " << i;

    SafetyNetDecision d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, since + bound);
    ASSERT_TRUE(d.replan) << "refusal " << i;
    job = Written(job, d);
    EXPECT_EQ(job["status"]["replanGeneration"], 5);
    EXPECT_FALSE(job["status"].contains("placement"));
    if (i < 3) {
      EXPECT_EQ(ConditionReason(job["status"], model::kConditionAdmitted), kReasonReplanning);
      EXPECT_EQ(ReplansAtGeneration(job), i + 1);
      EXPECT_FALSE(ReplanLimitReached(job));
    } else {
      EXPECT_EQ(ConditionReason(job["status"], model::kConditionAdmitted), kReasonReplanLimit);
      EXPECT_EQ(ReplansAtGeneration(job), 3);
      EXPECT_TRUE(ReplanLimitReached(job));
    }
    // The job is admitted again between refusals (its placement back in its status).
    job["status"]["placement"] = model::PlacementToJson(TwoRanks());
    since = since + bound + seconds(30);
  }
  EXPECT_EQ(job["status"]["refusedNodes"], Json::array({"n0", "n1"}));
}

TEST(SafetyNetTest, NoReplansAllowedMakesTheFirstRefusalFinal) {
  const Json pod = RankPod(0, "");
  const SafetyNetOptions options{.bound = seconds(60), .max_replans = 0};
  SafetyNetDecision d = DecideSafetyNet(Job(1), TwoRanks(), {&pod}, options, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  const Json written = Written(Job(1), d);
  EXPECT_EQ(ConditionReason(d.status, model::kConditionAdmitted), kReasonReplanLimit);
  EXPECT_TRUE(ReplanLimitReached(written));
  EXPECT_FALSE(written["status"].contains("placement"));
}

TEST(SafetyNetTest, ANewGenerationStartsAfresh) {
  const Json pod = RankPod(1, "");
  Json job = Job(2);  // re-planned twice at generation 1, then the spec changed
  job["status"]["replans"] = 2;
  job["status"]["replanGeneration"] = 1;
  job["status"]["refusedNodes"] = {"n7", "n8"};
  EXPECT_EQ(ReplansAtGeneration(job), 0);
  EXPECT_TRUE(model::RefusedNodes(job).empty());
  // The bound is the unscaled one again, the count starts at 1, the old refusals are gone.
  SafetyNetDecision d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(60));
  ASSERT_TRUE(d.replan);
  EXPECT_EQ(d.status["replans"], 1);
  EXPECT_EQ(d.status["replanGeneration"], 2);
  EXPECT_EQ(d.status["refusedNodes"], Json::array({"n1"}));
  EXPECT_EQ(ConditionReason(d.status, model::kConditionAdmitted), kReasonReplanning);

  // A job left at the limit is free to be admitted once its spec changes.
  job["status"]["replans"] = 3;
  job["status"]["replanGeneration"] = 2;
  d = DecideSafetyNet(job, TwoRanks(), {&pod}, {}, kT0 + seconds(480));
  ASSERT_TRUE(d.replan);
  Json limited = Written(job, d);
  ASSERT_TRUE(ReplanLimitReached(limited));
  limited["metadata"]["generation"] = 3;
  EXPECT_FALSE(ReplanLimitReached(limited));
  EXPECT_EQ(ReplansAtGeneration(limited), 0);
}

}  // namespace
}  // namespace nvl72::op
