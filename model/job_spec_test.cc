#include "model/job_spec.h"

#include <gtest/gtest.h>

#include "model/names.h"

namespace nvl72::model {
namespace {

Json ValidSpec() {
  return Json::parse(R"({
    "replicas": 16, "gpusPerReplica": 4,
    "topology": {"mode": "Required"},
    "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}
  })");
}

TEST(ParseJobSpecTest, DefaultsAndValues) {
  Json spec = Json::parse(R"({"replicas": 2, "template": {}})");
  auto s = ParseJobSpec(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 2);
  EXPECT_EQ(s->gpus_per_replica, 4);
  EXPECT_EQ(s->mode, placement::TopologyMode::kRequired);
  EXPECT_EQ(s->segment_size, 0);
  EXPECT_EQ(s->EffectiveSegmentSize(), 2);
  EXPECT_FALSE(s->preemptible);
  EXPECT_EQ(s->recovery.policy, RecoveryPolicy::kInPlace);
  EXPECT_EQ(s->recovery.not_ready_grace_seconds, 60);
  EXPECT_EQ(s->recovery.max_recoveries, 10);
  EXPECT_FALSE(s->recovery.wait_for_domain_seconds.has_value()) << "absent = operator default";
}

TEST(ParseJobSpecTest, AllFields) {
  Json spec = Json::parse(R"({
    "replicas": 32, "gpusPerReplica": 2, "preemptible": true,
    "topology": {"mode": "Preferred", "segmentSize": 16},
    "recovery": {"policy": "RestartGang", "notReadyGraceSeconds": 5, "maxRecoveries": 3,
                 "waitForDomainSeconds": 45},
    "template": {"metadata": {"labels": {"a": "b"}}}
  })");
  auto s = ParseJobSpec(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 32);
  EXPECT_EQ(s->gpus_per_replica, 2);
  EXPECT_TRUE(s->preemptible);
  EXPECT_EQ(s->mode, placement::TopologyMode::kPreferred);
  EXPECT_EQ(s->segment_size, 16);
  EXPECT_EQ(s->recovery.policy, RecoveryPolicy::kRestartGang);
  EXPECT_EQ(s->recovery.not_ready_grace_seconds, 5);
  EXPECT_EQ(s->recovery.max_recoveries, 3);
  EXPECT_EQ(s->recovery.wait_for_domain_seconds, 45);
  EXPECT_EQ(s->pod_template["metadata"]["labels"]["a"], "b");

  auto r = ToGangRequest(*s, "ns/j", 7);
  EXPECT_EQ(r.key, "ns/j");
  EXPECT_EQ(r.replicas, 32);
  EXPECT_EQ(r.gpus_per_replica, 2);
  EXPECT_EQ(r.segment_size, 16);
  EXPECT_EQ(r.priority, 7);
  EXPECT_TRUE(r.preemptible);
  EXPECT_EQ(placement::ValidateGangRequest(r), "");
}

struct InvalidCase {
  const char* name;
  const char* patch;  // merge patch applied to ValidSpec()
  const char* field;  // expected message prefix
};

class InvalidSpecTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidSpecTest, NamesTheField) {
  Json spec = ValidSpec();
  spec.merge_patch(Json::parse(GetParam().patch));
  auto s = ParseJobSpec(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message().rfind(GetParam().field, 0), 0u) << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidSpecTest,
    ::testing::Values(
        InvalidCase{"replicas_missing", R"({"replicas": null})", "spec.replicas: is required"},
        InvalidCase{"replicas_zero", R"({"replicas": 0})", "spec.replicas: must be >= 1"},
        InvalidCase{"replicas_string", R"({"replicas": "4"})", "spec.replicas: must be an integer"},
        // Found by the job_spec fuzzer: a double outside int64's range was cast (undefined
        // behaviour).
        InvalidCase{"replicas_huge_float", R"({"replicas": 1.44e95})",
                    "spec.replicas: out of range"},
        InvalidCase{"replicas_huge_unsigned", R"({"replicas": 18446744073709551615})",
                    "spec.replicas: out of range"},
        InvalidCase{"replicas_above_int32", R"({"replicas": 4294967300.0})",
                    "spec.replicas: out of range"},
        InvalidCase{"replicas_fraction", R"({"replicas": 2.5})",
                    "spec.replicas: must be an integer"},
        InvalidCase{"gpus_zero", R"({"gpusPerReplica": 0})", "spec.gpusPerReplica"},
        InvalidCase{"gpus_too_many", R"({"gpusPerReplica": 9})", "spec.gpusPerReplica"},
        InvalidCase{"mode_bad", R"({"topology": {"mode": "Maybe"}})", "spec.topology.mode"},
        InvalidCase{"segment_not_divisor", R"({"topology": {"segmentSize": 5}})",
                    "spec.topology.segmentSize: 5 does not divide"},
        InvalidCase{"segment_negative", R"({"topology": {"segmentSize": -1}})",
                    "spec.topology.segmentSize"},
        InvalidCase{"required_too_big", R"({"replicas": 20})", "spec.topology.segmentSize"},
        InvalidCase{"segment_too_big", R"({"replicas": 40, "topology": {"segmentSize": 20}})",
                    "spec.topology.segmentSize: 20 is larger than a domain"},
        InvalidCase{"preemptible_string", R"({"preemptible": "yes"})", "spec.preemptible"},
        InvalidCase{"recovery_policy", R"({"recovery": {"policy": "Later"}})",
                    "spec.recovery.policy"},
        InvalidCase{"grace_negative", R"({"recovery": {"notReadyGraceSeconds": -1}})",
                    "spec.recovery.notReadyGraceSeconds"},
        InvalidCase{"wait_negative", R"({"recovery": {"waitForDomainSeconds": -1}})",
                    "spec.recovery.waitForDomainSeconds"},
        InvalidCase{"max_recoveries_negative", R"({"recovery": {"maxRecoveries": -2}})",
                    "spec.recovery.maxRecoveries"},
        InvalidCase{"template_missing", R"({"template": null})", "spec.template: is required"},
        InvalidCase{"template_not_object", R"({"template": 3})", "spec.template: must be"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ParseJobSpecTest, PreferredGangLargerThanDomainIsFine) {
  Json spec = ValidSpec();
  spec["replicas"] = 20;
  spec["topology"]["mode"] = "Preferred";
  EXPECT_TRUE(ParseJobSpec(spec).ok());
  spec["topology"]["mode"] = "Unconstrained";
  EXPECT_TRUE(ParseJobSpec(spec).ok());
}

TEST(ParseJobSpecTest, NotAnObject) { EXPECT_FALSE(ParseJobSpec(Json::array()).ok()); }

TEST(PlacementTest, RoundTrip) {
  JobPlacement p;
  p.domains = {"rack-a", "rack-b"};
  p.ranks = {{0, "n1", "j-0"}, {1, "n2", "j-1"}};
  Json j = PlacementToJson(p);
  EXPECT_EQ(j["ranks"][1]["node"], "n2");
  auto back = ParsePlacement(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  EXPECT_EQ(back->FindRank(1)->pod, "j-1");
  EXPECT_EQ(back->FindRank(5), nullptr);
}

TEST(PlacementTest, ParseErrorsNameTheField) {
  auto bad = ParsePlacement(
      Json::parse(R"({"ranks": [{"rank": 0, "node": "a"}, {"rank": 0, "node": "b"}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("status.placement.ranks[1].rank"), std::string::npos);
  bad = ParsePlacement(Json::parse(R"({"ranks": [{"rank": 0}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("status.placement.ranks[0].node"), std::string::npos);
}

TEST(PlacementTest, SortedByRank) {
  auto p = ParsePlacement(
      Json::parse(R"({"ranks": [{"rank": 1, "node": "b"}, {"rank": 0, "node": "a"}]})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ranks[0].node, "a");
}

TEST(PlacementTest, PlacementOfObject) {
  Json job = {{"metadata", {{"name", "j"}}}};
  auto none = PlacementOf(job);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  job["status"]["placement"] = {{"domains", {"d"}},
                                {"ranks", {{{"rank", 0}, {"node", "n"}, {"pod", "j-0"}}}}};
  auto some = PlacementOf(job);
  ASSERT_TRUE(some.ok());
  ASSERT_TRUE(some->has_value());
  EXPECT_EQ((*some)->ranks[0].node, "n");
  EXPECT_TRUE(HoldsReservation(job));
  job["status"]["conditions"] = {{{"type", "Succeeded"}, {"status", "True"}}};
  EXPECT_TRUE(JobFinished(job));
  EXPECT_FALSE(HoldsReservation(job));
}

TEST(PlacementTest, MakeJobPlacementListsDomainsPerSegment) {
  placement::Snapshot snap;
  snap.AddDomain("a", 4, 4);
  snap.AddDomain("b", 4, 4);
  placement::GangPlacement g;
  g.rank_nodes = {4, 5, 0, 1};  // segment 0 in b, segment 1 in a
  JobPlacement p = MakeJobPlacement(snap, g, "job", 2);
  EXPECT_EQ(p.domains, (std::vector<std::string>{"b", "a"}));
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.ranks[0].node, "b-n0");
  EXPECT_EQ(p.ranks[3].pod, "job-3");
}

TEST(JobPriorityTest, AnnotationWinsThenClassThenZero) {
  Json job = Json::parse(R"({"metadata": {"annotations": {"nvl72.dev/priority": "50"}},
    "spec": {"template": {"spec": {"priorityClassName": "high"}}}})");
  EXPECT_EQ(PriorityClassName(job), "high");
  EXPECT_EQ(JobPriority(job, 1000), 50);
  job["metadata"]["annotations"]["nvl72.dev/priority"] = "x";
  EXPECT_EQ(JobPriority(job, 1000), 1000);
  EXPECT_EQ(JobPriority(job, std::nullopt), 0);
}

TEST(NamesTest, RankPodName) { EXPECT_EQ(RankPodName("moe", 3), "moe-3"); }

}  // namespace
}  // namespace nvl72::model
