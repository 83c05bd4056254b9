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

}  // namespace
}  // namespace nvl72::op
