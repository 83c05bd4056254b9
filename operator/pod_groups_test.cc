#include "operator/pod_groups.h"

#include <gtest/gtest.h>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using kube::FakeClient;
using kube::Verb;
using test_fixtures::kNs;

// A stored NVL72Job (uid set) of `replicas` ranks in segments of `segment` (0 = one segment).
Json StoredJob(const std::string& name, int replicas, int segment, const std::string& mode,
               const std::string& priority_class = "") {
  Json job = model::testing::Job(
      {.ns = kNs,
       .name = name,
       .replicas = replicas,
       .mode = mode,
       .segment_size = segment > 0 ? std::optional<int>(segment) : std::nullopt});
  if (!priority_class.empty())
    job["spec"]["template"]["spec"]["priorityClassName"] = priority_class;
  job["metadata"]["uid"] = "uid-" + name;
  return job;
}

model::JobSpec SpecOf(const Json& job) {
  auto spec = model::ParseJobSpec(job["spec"]);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : model::JobSpec{};
}

// A rank pod of `job` as the API server stores it, in `group` ("" = none).
Json RankPod(const std::string& job, int rank, const std::string& group, bool deleting = false) {
  Json pod = model::testing::Pod({.ns = kNs,
                                  .name = job + "-" + std::to_string(rank),
                                  .node = "",
                                  .gpus = 4,
                                  .phase = "Running"});
  pod["metadata"]["labels"] = {{"nvl72.dev/job", job}, {"nvl72.dev/rank", std::to_string(rank)}};
  if (!group.empty()) pod["spec"]["schedulingGroup"] = {{"podGroupName", group}};
  if (deleting) pod["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z";
  return pod;
}

TEST(PodGroupsModeTest, ParsesTheThreeModesAndNothingElse) {
  EXPECT_EQ(ParsePodGroupsMode("auto"), PodGroupsMode::kAuto);
  EXPECT_EQ(ParsePodGroupsMode("on"), PodGroupsMode::kOn);
  EXPECT_EQ(ParsePodGroupsMode("off"), PodGroupsMode::kOff);
  EXPECT_FALSE(ParsePodGroupsMode("true").has_value());
  EXPECT_FALSE(ParsePodGroupsMode("").has_value());
}

TEST(DiscoverPodGroupApiTest, TakesTheNewestServedVersion) {
  FakeClient fake;  // serves every resource: v1beta1 answers first
  auto api = DiscoverPodGroupApi(fake);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ(api->version, "v1beta1");
  EXPECT_EQ(api->PodGroups().CollectionPath("ns1"),
            "/apis/scheduling.k8s.io/v1beta1/namespaces/ns1/podgroups");
  EXPECT_EQ(api->Workloads().ApiVersion(), "scheduling.k8s.io/v1beta1");
}

TEST(DiscoverPodGroupApiTest, FallsBackToV1alpha2AndToNoneOn404) {
  FakeClient fake;
  const Status not_found(StatusCode::kNotFound, "the server could not find the requested resource");
  // (FakeClient matches injected errors by group and resource, not version: the first List fails.)
  fake.InjectError(Verb::kList, PodGroupApi{"v1beta1"}.PodGroups(), not_found);
  auto api = DiscoverPodGroupApi(fake);  // 1.36
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->version, "v1alpha2");

  fake.InjectError(Verb::kList, PodGroupApi{"v1beta1"}.PodGroups(), not_found, 2);
  api = DiscoverPodGroupApi(fake);  // 1.35: neither
  ASSERT_TRUE(api.ok());
  EXPECT_FALSE(api->Served());
}

TEST(DiscoverPodGroupApiTest, AForbiddenListIsAnErrorNotAnAbsentApi) {
  FakeClient fake;
  fake.InjectError(Verb::kList, PodGroupApi{"v1beta1"}.PodGroups(),
                   Status(StatusCode::kPermissionDenied, "podgroups is forbidden"));
  auto api = DiscoverPodGroupApi(fake);
  EXPECT_EQ(api.status().code(), StatusCode::kPermissionDenied);
}

TEST(TopologyKeyTest, OnlyARequiredGangWithOneDomainLabelGetsAConstraint) {
  model::ClusterOptions cluster;
  cluster.domain_label = "nvidia.com/gpu.clique";
  EXPECT_EQ(TopologyKey(SpecOf(StoredJob("j", 4, 0, "Required")), cluster),
            "nvidia.com/gpu.clique");
  EXPECT_EQ(TopologyKey(SpecOf(StoredJob("j", 4, 0, "Preferred")), cluster), "");
  EXPECT_EQ(TopologyKey(SpecOf(StoredJob("j", 4, 0, "Unconstrained")), cluster), "");
  cluster.domain_label_fallback = "example.com/rack";
  EXPECT_EQ(TopologyKey(SpecOf(StoredJob("j", 4, 0, "Required")), cluster), "");
}

// The expected objects are written from k8s.io/api v0.37.2 scheduling/v1beta1 (PodGroupSpec,
// WorkloadReference, GangSchedulingPolicy, TopologyConstraint) and v0.36.6 scheduling/v1alpha2
// (PodGroupTemplateReference).
TEST(BuildPodGroupTest, V1beta1PodGroupOfASegment) {
  const Json job = StoredJob("moe", 32, 16, "Required", "training");
  const Json pg = BuildPodGroup(job, SpecOf(job), 1, {"v1beta1"}, "nvidia.com/gpu.clique");
  EXPECT_EQ(pg, Json::parse(R"({
    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
    "metadata": {"name": "moe-seg-1", "namespace": "team", "labels": {"nvl72.dev/job": "moe"},
      "ownerReferences": [{"apiVersion": "nvl72.dev/v1alpha1", "kind": "NVL72Job", "name": "moe",
                           "uid": "uid-moe", "controller": true, "blockOwnerDeletion": true}]},
    "spec": {"workloadRef": {"workloadName": "moe", "templateName": "segment"},
      "schedulingPolicy": {"gang": {"minCount": 16}},
      "schedulingConstraints": {"topology": [{"key": "nvidia.com/gpu.clique"}]},
      "priorityClassName": "training"}})"));
}

TEST(BuildPodGroupTest, V1alpha2ReferencesItsTemplateThroughPodGroupTemplateRef) {
  const Json job = StoredJob("moe", 8, 0, "Preferred");
  const Json pg = BuildPodGroup(job, SpecOf(job), 0, {"v1alpha2"}, "");
  EXPECT_EQ(pg["apiVersion"], "scheduling.k8s.io/v1alpha2");
  EXPECT_EQ(pg["spec"], Json::parse(R"({
    "podGroupTemplateRef": {"workload": {"workloadName": "moe", "podGroupTemplateName": "segment"}},
    "schedulingPolicy": {"gang": {"minCount": 8}}})"));
}

TEST(BuildWorkloadTest, OneTemplateForEverySegmentAndAControllerRefToTheJob) {
  const Json job = StoredJob("moe", 32, 16, "Required");
  const Json w = BuildWorkload(job, SpecOf(job), {"v1beta1"}, "nvidia.com/gpu.clique");
  EXPECT_EQ(w["kind"], "Workload");
  EXPECT_EQ(w["metadata"]["name"], "moe");
  EXPECT_EQ(w["metadata"]["ownerReferences"][0]["uid"], "uid-moe");
  EXPECT_EQ(w["spec"], Json::parse(R"({
    "controllerRef": {"apiGroup": "nvl72.dev", "kind": "NVL72Job", "name": "moe"},
    "podGroupTemplates": [{"name": "segment", "schedulingPolicy": {"gang": {"minCount": 16}},
      "schedulingConstraints": {"topology": [{"key": "nvidia.com/gpu.clique"}]}}]})"));
}

TEST(PodGroupToJoinTest, ANewPodJoinsItsSegmentsGroupOnlyWhenItsPeersAreInIt) {
  const model::JobSpec spec = SpecOf(StoredJob("moe", 8, 4, "Required"));
  const Json in0 = RankPod("moe", 0, "moe-seg-0");
  const Json out1 = RankPod("moe", 1, "");
  const Json out1_going = RankPod("moe", 1, "", /*deleting=*/true);
  const Json in5 = RankPod("moe", 5, "moe-seg-1");
  const Json other_job = RankPod("other", 2, "");
  const std::set<int> both = {0, 1};

  EXPECT_EQ(PodGroupToJoin("moe", spec, 2, {}, both), "moe-seg-0");  // a fresh gang
  EXPECT_EQ(PodGroupToJoin("moe", spec, 6, {&in0, &in5}, both), "moe-seg-1");
  EXPECT_EQ(PodGroupToJoin("moe", spec, 2, {&in0, &out1}, both), "")
      << "rank 1 runs outside the group: rank 2 would wait for minCount forever";
  EXPECT_EQ(PodGroupToJoin("moe", spec, 2, {&in0, &out1_going}, both), "moe-seg-0")
      << "a pod being deleted does not count";
  EXPECT_EQ(PodGroupToJoin("moe", spec, 6, {&out1, &other_job}, both), "moe-seg-1")
      << "another segment's pods and another job's do not count";
  EXPECT_EQ(PodGroupToJoin("moe", spec, 1, {&in0, &out1}, both), "moe-seg-0")
      << "the pod it replaces does not count";
  EXPECT_EQ(PodGroupToJoin("moe", spec, 6, {}, {0}), "") << "segment 1's group is not ready";
}

TEST(JoinPodGroupTest, SetsTheGroupUnlessTheTemplateChoseOne) {
  Json pod = {{"spec", {{"containers", Json::array()}}}};
  JoinPodGroup(pod, "");
  EXPECT_FALSE(pod["spec"].contains("schedulingGroup"));
  JoinPodGroup(pod, "moe-seg-0");
  EXPECT_EQ(pod["spec"]["schedulingGroup"], Json({{"podGroupName", "moe-seg-0"}}));
  JoinPodGroup(pod, "moe-seg-1");
  EXPECT_EQ(pod["spec"]["schedulingGroup"]["podGroupName"], "moe-seg-0");
}

class PodGroupWriterTest : public ::testing::Test {
 protected:
  PodGroupWriter Writer(PodGroupsMode mode) {
    return PodGroupWriter(
        &fake_,
        {.mode = mode, .cluster = {}, .field_manager = "test", .reprobe = std::chrono::seconds(60)},
        [this] { return now_; });
  }
  std::vector<std::string> Names(const kube::ResourceRef& r) {
    auto l = fake_.List(r, kNs);
    EXPECT_TRUE(l.ok());
    std::vector<std::string> names;
    if (l.ok()) {
      for (const Json& o : l->items) names.push_back(kube::Name(o));
    }
    return names;
  }
  FakeClient fake_;
  std::chrono::steady_clock::time_point now_{};
  const PodGroupApi v1beta1_{"v1beta1"};
};

TEST_F(PodGroupWriterTest, EnsureCreatesTheWorkloadAndOneGroupPerSegmentOnce) {
  PodGroupWriter w = Writer(PodGroupsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  const Json job = StoredJob("moe", 32, 16, "Required");
  auto ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(*ready, (std::set<int>{0, 1}));
  EXPECT_EQ(Names(v1beta1_.Workloads()), std::vector<std::string>{"moe"});
  EXPECT_EQ(Names(v1beta1_.PodGroups()), (std::vector<std::string>{"moe-seg-0", "moe-seg-1"}));
  ready = w.Ensure(job, SpecOf(job));  // again: the groups exist and are the job's
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, (std::set<int>{0, 1}));
  EXPECT_EQ(Names(v1beta1_.PodGroups()).size(), 2u);
}

TEST_F(PodGroupWriterTest, AGroupOfAnotherOwnerOrBeingDeletedIsNotJoined) {
  PodGroupWriter w = Writer(PodGroupsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  const Json old_job = StoredJob("moe", 8, 4, "Required");
  Json job = old_job;
  job["metadata"]["uid"] = "uid-moe-2";  // recreated under the same name
  Json foreign = BuildPodGroup(old_job, SpecOf(old_job), 1, v1beta1_, "");
  ASSERT_TRUE(fake_.Create(v1beta1_.PodGroups(), kNs, foreign).ok());
  auto ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, std::set<int>{0});
}

TEST_F(PodGroupWriterTest, AutoGoesOnWithoutGroupsWhenAWriteIsRefused) {
  PodGroupWriter w = Writer(PodGroupsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  const Json job = StoredJob("moe", 8, 0, "Required", "missing-class");
  fake_.InjectError(
      Verb::kCreate, v1beta1_.PodGroups(),
      Status(StatusCode::kPermissionDenied, "no PriorityClass with name missing-class was found"));
  auto ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->empty());
  EXPECT_TRUE(w.Api().Served()) << "one refused object does not set the API aside";
  ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, std::set<int>{0});
}

TEST_F(PodGroupWriterTest, AnApiThatWentAwayIsSetAsideAndAskedForAgainLater) {
  PodGroupWriter w = Writer(PodGroupsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  const Json job = StoredJob("moe", 8, 0, "Required");
  fake_.InjectError(
      Verb::kCreate, v1beta1_.Workloads(),
      Status(StatusCode::kNotFound, "the server could not find the requested resource"));
  auto ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->empty());
  EXPECT_FALSE(w.Api().Served()) << "set aside until the next probe";
  now_ += std::chrono::seconds(59);
  EXPECT_FALSE(w.Api().Served());
  now_ += std::chrono::seconds(2);
  EXPECT_EQ(w.Api().version, "v1beta1");
  ready = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, std::set<int>{0});
}

TEST_F(PodGroupWriterTest, OnReturnsRefusalsAndRefusesToStartWithoutTheApi) {
  PodGroupWriter on = Writer(PodGroupsMode::kOn);
  ASSERT_TRUE(on.Start().ok());
  const Json job = StoredJob("moe", 8, 0, "Required");
  fake_.InjectError(Verb::kCreate, v1beta1_.PodGroups(),
                    Status(StatusCode::kPermissionDenied, "podgroups is forbidden"));
  EXPECT_EQ(on.Ensure(job, SpecOf(job)).status().code(), StatusCode::kPermissionDenied);

  fake_.InjectError(Verb::kList, v1beta1_.PodGroups(), Status(StatusCode::kNotFound, "not found"),
                    2);
  PodGroupWriter on_1_35 = Writer(PodGroupsMode::kOn);
  Status s = on_1_35.Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("GenericWorkload"), std::string::npos) << s.message();
}

TEST_F(PodGroupWriterTest, OffWritesNothing) {
  PodGroupWriter off = Writer(PodGroupsMode::kOff);
  ASSERT_TRUE(off.Start().ok());
  const Json job = StoredJob("moe", 8, 0, "Required");
  auto ready = off.Ensure(job, SpecOf(job));
  ASSERT_TRUE(ready.ok());
  EXPECT_TRUE(ready->empty());
  EXPECT_TRUE(fake_.Actions().empty());
}

TEST_F(PodGroupWriterTest, DeleteRemovesOnlyTheJobsOwnObjects) {
  PodGroupWriter w = Writer(PodGroupsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  const Json job = StoredJob("moe", 8, 4, "Required");
  ASSERT_TRUE(w.Ensure(job, SpecOf(job)).ok());
  Json stranger = BuildPodGroup(StoredJob("moe", 8, 4, "Required"), SpecOf(job), 7, v1beta1_, "");
  stranger["metadata"]["ownerReferences"][0]["uid"] = "uid-someone-else";
  ASSERT_TRUE(fake_.Create(v1beta1_.PodGroups(), kNs, stranger).ok());
  ASSERT_TRUE(w.Delete(job).ok());
  EXPECT_EQ(Names(v1beta1_.PodGroups()), std::vector<std::string>{"moe-seg-7"});
  EXPECT_TRUE(Names(v1beta1_.Workloads()).empty());
}

// The reconciler and recovery with groups on: rank pods join their segment's group, a replacement
// pod joins the same group, and deleting the job deletes the groups.
class PodGroupsReconcilerTest : public test_fixtures::OperatorFixture {
 protected:
  void SetUp() override {
    options_.pod_groups = PodGroupsMode::kOn;
    OperatorFixture::SetUp();
    ASSERT_TRUE(reconciler_->pod_groups()->Start().ok());
  }
  std::string GroupOf(const std::string& pod) {
    auto p = fake_.Get(kube::kPods, kNs, pod);
    if (!p.ok()) return "(no pod " + pod + ")";
    const Json& g = kube::AtPath(*p, "/spec/schedulingGroup/podGroupName");
    return g.is_string() ? g.get<std::string>() : "";
  }
  const PodGroupApi api_{"v1beta1"};
};

TEST_F(PodGroupsReconcilerTest, RankPodsJoinTheirSegmentsGroupAndReplacementsJoinItToo) {
  AddRacks(2);
  Json job =
      model::testing::Job({.ns = kNs,
                           .name = "moe",
                           .replicas = 32,
                           .segment_size = 16,
                           .recovery = {{"policy", "InPlace"}, {"notReadyGraceSeconds", 30}}});
  model::JobPlacement before = StartJob(job);
  ASSERT_EQ(before.ranks.size(), 32u);
  for (int r = 0; r < 32; ++r) {
    EXPECT_EQ(GroupOf("moe-" + std::to_string(r)), r < 16 ? "moe-seg-0" : "moe-seg-1");
  }
  auto pg = fake_.Get(api_.PodGroups(), kNs, "moe-seg-1");
  ASSERT_TRUE(pg.ok());
  EXPECT_EQ((*pg)["spec"]["schedulingPolicy"]["gang"]["minCount"], 16);

  const std::string dead = before.ranks[20].node;
  SetNotReady(dead, now_ - std::chrono::seconds(31));
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe").ranks[20].node, dead);
  EXPECT_EQ(GroupOf("moe-20"), "moe-seg-1") << "the replacement joins the same group";

  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "moe").ok());
  Enqueue("team/moe");
  RunUntilQuiet();
  auto groups = fake_.List(api_.PodGroups(), kNs);
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->items.empty());
  EXPECT_FALSE(fake_.Get(api_.Workloads(), kNs, "moe").ok());
}

}  // namespace
}  // namespace nvl72::op
