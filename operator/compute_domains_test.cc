#include "operator/compute_domains.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using kube::FakeClient;
using kube::Verb;
using test_fixtures::kNs;

const Status kNotFound(StatusCode::kNotFound, "the server could not find the requested resource");

Json StoredJob(const std::string& name, int replicas, int segment) {
  Json job = model::testing::Job(
      {.ns = kNs,
       .name = name,
       .replicas = replicas,
       .segment_size = segment > 0 ? std::optional<int>(segment) : std::nullopt});
  job["metadata"]["uid"] = "uid-" + name;
  return job;
}

model::JobSpec SpecOf(const Json& job) {
  auto spec = model::ParseJobSpec(job["spec"]);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : model::JobSpec{};
}

std::vector<std::string> ClaimsOf(const Json& container) {
  std::vector<std::string> out;
  for (const Json& c : kube::AtPath(container, "/resources/claims")) out.push_back(c["name"]);
  return out;
}

TEST(ComputeDomainsModeTest, ParsesTheThreeModesAndNothingElse) {
  EXPECT_EQ(ParseComputeDomainsMode("auto"), ComputeDomainsMode::kAuto);
  EXPECT_EQ(ParseComputeDomainsMode("on"), ComputeDomainsMode::kOn);
  EXPECT_EQ(ParseComputeDomainsMode("off"), ComputeDomainsMode::kOff);
  EXPECT_FALSE(ParseComputeDomainsMode("On").has_value());
  EXPECT_FALSE(ParseComputeDomainsMode("").has_value());
}

TEST(FabricSpecTest, ComputeDomainNoneOrUnsetAndNothingElse) {
  Json job = StoredJob("j", 4, 0);
  EXPECT_FALSE(SpecOf(job).fabric.has_value());
  job["spec"]["fabric"] = "None";
  EXPECT_EQ(SpecOf(job).fabric, model::Fabric::kNone);
  job["spec"]["fabric"] = "ComputeDomain";
  EXPECT_EQ(SpecOf(job).fabric, model::Fabric::kComputeDomain);
  job["spec"]["fabric"] = "IMEX";
  auto bad = model::ParseJobSpec(job["spec"]);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "spec.fabric: must be ComputeDomain or None (got \"IMEX\")");
}

TEST(BuildComputeDomainTest, OnePerSegmentOwnedByTheJobNamingItsChannelTemplate) {
  const Json job = StoredJob("moe", 32, 16);
  const Json cd = BuildComputeDomain(job, SpecOf(job), 1);
  EXPECT_EQ(cd["apiVersion"], "resource.nvidia.com/v1beta1");
  EXPECT_EQ(cd["kind"], "ComputeDomain");
  EXPECT_EQ(cd["metadata"]["name"], "moe-seg-1");
  EXPECT_EQ(cd["metadata"]["namespace"], kNs);
  EXPECT_EQ(cd["metadata"]["labels"]["nvl72.dev/job"], "moe");
  EXPECT_EQ(kube::ControllerUid(cd), "uid-moe");
  EXPECT_EQ(cd["spec"]["channel"]["resourceClaimTemplate"]["name"], "moe-seg-1-channel");
  EXPECT_EQ(cd["spec"]["numNodes"], 16);
}

TEST(AddChannelClaimTest, KeepsTheUsersClaimsAndListsTheChannelInEveryContainerOnce) {
  Json pod = {{"spec",
               {{"resourceClaims", {{{"name", "mine"}, {"resourceClaimName", "scratch"}}}},
                {"initContainers", {{{"name", "init"}}}},
                {"containers",
                 {{{"name", "trainer"}, {"resources", {{"claims", {{{"name", "mine"}}}}}}},
                  {{"name", "sidecar"}}}}}}};
  AddChannelClaim(pod, "moe-seg-0-channel");
  AddChannelClaim(pod, "moe-seg-0-channel");
  const Json& claims = pod["spec"]["resourceClaims"];
  ASSERT_EQ(claims.size(), 2u);
  EXPECT_EQ(claims[0]["name"], "mine");
  EXPECT_EQ(claims[1]["name"], "nvl72-channel");
  EXPECT_EQ(claims[1]["resourceClaimTemplateName"], "moe-seg-0-channel");
  EXPECT_EQ(ClaimsOf(pod["spec"]["containers"][0]),
            (std::vector<std::string>{"mine", "nvl72-channel"}));
  EXPECT_EQ(ClaimsOf(pod["spec"]["containers"][1]), (std::vector<std::string>{"nvl72-channel"}));
  EXPECT_FALSE(pod["spec"]["initContainers"][0].contains("resources"));
}

TEST(ComputeDomainConditionTest, SaysWhatIsMissingFirst) {
  std::vector<SegmentDomain> s(2);
  s[0] = {.name = "j-seg-0",
          .template_name = "j-seg-0-channel",
          .exists = true,
          .template_ready = true,
          .ready = true,
          .nodes = 16,
          .problem = ""};
  s[1] = {.name = "j-seg-1",
          .template_name = "j-seg-1-channel",
          .exists = true,
          .template_ready = false,
          .ready = false,
          .nodes = 0,
          .problem = ""};
  DomainCondition c = ComputeDomainCondition(s, 16);
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "TemplatePending");
  EXPECT_NE(c.message.find("ResourceClaimTemplate j-seg-1-channel"), std::string::npos);
  s[1].template_ready = true;
  s[1].nodes = 3;
  c = ComputeDomainCondition(s, 16);
  EXPECT_EQ(c.reason, "NotReady");
  EXPECT_EQ(c.message, "ComputeDomain j-seg-1 not Ready: 3 of 16 nodes joined");
  s[1].ready = true;
  c = ComputeDomainCondition(s, 16);
  EXPECT_EQ(c.status, "True");
  EXPECT_EQ(c.message, "ComputeDomains Ready for 2 segments (16 nodes each)");
  s[0].problem = "belongs to another owner";
  EXPECT_EQ(ComputeDomainCondition(s, 16).reason, "Unusable");
}

class ComputeDomainWriterTest : public ::testing::Test {
 protected:
  ComputeDomainWriter Writer(ComputeDomainsMode mode) {
    return ComputeDomainWriter(&fake_, {.mode = mode, .reprobe = std::chrono::seconds(60)},
                               [this] { return now_; });
  }
  FakeClient fake_;
  std::chrono::steady_clock::time_point now_{};
};

TEST_F(ComputeDomainWriterTest, AutoFollowsTheCrdAndNoticesItWhenInstalledLater) {
  fake_.InjectError(Verb::kList, ComputeDomainsResource(), kNotFound);
  ComputeDomainWriter w = Writer(ComputeDomainsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  model::JobSpec unset;
  model::JobSpec explicit_cd;
  explicit_cd.fabric = model::Fabric::kComputeDomain;
  EXPECT_FALSE(w.Wanted(unset));
  EXPECT_TRUE(w.Wanted(explicit_cd)) << "spec.fabric decides over the default";
  EXPECT_NE(w.Unavailable(explicit_cd).find("serves no computedomains.resource.nvidia.com"),
            std::string::npos);
  EXPECT_EQ(w.Unavailable(unset), "");

  now_ += std::chrono::seconds(30);
  EXPECT_FALSE(w.Served()) << "not asked again before the reprobe interval";
  now_ += std::chrono::seconds(31);
  EXPECT_TRUE(w.Served()) << "the CRD was installed since";
  EXPECT_TRUE(w.Wanted(unset));
  EXPECT_EQ(w.Unavailable(explicit_cd), "");
}

TEST_F(ComputeDomainWriterTest, OnRefusesToStartWithoutTheCrdAndOffWantsNone) {
  fake_.InjectError(Verb::kList, ComputeDomainsResource(), kNotFound);
  ComputeDomainWriter on = Writer(ComputeDomainsMode::kOn);
  Status s = on.Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  ComputeDomainWriter off = Writer(ComputeDomainsMode::kOff);
  ASSERT_TRUE(off.Start().ok());
  EXPECT_FALSE(off.Wanted(model::JobSpec{}));
  model::JobSpec explicit_cd;
  explicit_cd.fabric = model::Fabric::kComputeDomain;
  EXPECT_NE(off.Unavailable(explicit_cd).find("--compute-domains=off"), std::string::npos);
}

TEST_F(ComputeDomainWriterTest, EnsureCreatesOncePerSegmentAndReadsTemplateAndStatus) {
  ComputeDomainWriter w = Writer(ComputeDomainsMode::kOn);
  ASSERT_TRUE(w.Start().ok());
  const Json job = StoredJob("moe", 32, 16);
  auto first = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_TRUE((*first)[1].exists);
  EXPECT_FALSE((*first)[1].template_ready);
  // NVIDIA's controller: the template of segment 1, and segment 1 Ready.
  ASSERT_TRUE(fake_
                  .Create(ResourceClaimTemplatesResource(), kNs,
                          {{"metadata", {{"name", "moe-seg-1-channel"}, {"namespace", kNs}}}})
                  .ok());
  auto cd = fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-1");
  ASSERT_TRUE(cd.ok());
  (*cd)["status"] = {{"status", "Ready"}, {"nodes", Json::array({{{"name", "n1"}}})}};
  ASSERT_TRUE(fake_.Update(ComputeDomainsResource(), kNs, *cd).ok());
  fake_.ClearActions();
  auto second = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)[0].template_ready);
  EXPECT_TRUE((*second)[1].template_ready);
  EXPECT_TRUE((*second)[1].ready);
  EXPECT_EQ((*second)[1].nodes, 1);
  for (const auto& a : fake_.Actions()) EXPECT_NE(a.verb, Verb::kCreate) << "created once";
}

TEST_F(ComputeDomainWriterTest, ADomainOfAnotherOwnerIsNotUsedAndDeleteLeavesIt) {
  ComputeDomainWriter w = Writer(ComputeDomainsMode::kOn);
  ASSERT_TRUE(w.Start().ok());
  Json job = StoredJob("moe", 16, 0);
  job["status"]["fabric"] = "ComputeDomain";
  const Json foreign = Json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1",
      "kind": "ComputeDomain", "metadata": {"name": "moe-seg-0", "namespace": "team",
      "labels": {"nvl72.dev/job": "moe"}, "ownerReferences": [{"apiVersion": "nvl72.dev/v1alpha1",
      "kind": "NVL72Job", "name": "moe", "uid": "uid-of-an-older-moe", "controller": true}]},
      "spec": {"channel": {"resourceClaimTemplate": {"name": "moe-seg-0-channel"}}}})");
  fake_.Seed(ComputeDomainsResource(), foreign);
  auto got = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE((*got)[0].exists);
  EXPECT_EQ((*got)[0].problem, "belongs to another owner");
  ASSERT_TRUE(w.Delete(job).ok());
  EXPECT_TRUE(fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-0").ok());
}

TEST_F(ComputeDomainWriterTest, ACrdThatGoesAwayMakesTheJobsDomainsUnusableNotAnError) {
  ComputeDomainWriter w = Writer(ComputeDomainsMode::kAuto);
  ASSERT_TRUE(w.Start().ok());
  ASSERT_TRUE(w.Served());
  const Json job = StoredJob("moe", 32, 16);
  ASSERT_TRUE(w.Ensure(job, SpecOf(job)).ok());
  fake_.InjectError(Verb::kList, ComputeDomainsResource(), kNotFound);
  auto got = w.Ensure(job, SpecOf(job));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  const DomainCondition c = ComputeDomainCondition(*got, 16);
  EXPECT_EQ(c.reason, "Unusable");
  EXPECT_NE(c.message.find("no longer serves computedomains.resource.nvidia.com"),
            std::string::npos)
      << c.message;
  EXPECT_FALSE(w.Served()) << "new gangs go without until a probe finds the CRD again";
}

TEST_F(ComputeDomainWriterTest, DeleteFollowsTheJobNotTheModeOfNow) {
  ComputeDomainWriter on = Writer(ComputeDomainsMode::kOn);
  ASSERT_TRUE(on.Start().ok());
  Json job = StoredJob("moe", 16, 0);
  ASSERT_TRUE(on.Ensure(job, SpecOf(job)).ok());
  ComputeDomainWriter off = Writer(ComputeDomainsMode::kOff);  // the operator restarted with off
  ASSERT_TRUE(off.Delete(job).ok());
  EXPECT_TRUE(fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-0").ok())
      << "a job admitted without ComputeDomains (no status.fabric) owns none: nothing listed";
  job["status"]["fabric"] = "ComputeDomain";
  ASSERT_TRUE(off.Delete(job).ok());
  EXPECT_FALSE(fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-0").ok());
}

// The reconciler and recovery with ComputeDomains on, NVIDIA's controller played by the test.
class ComputeDomainsReconcilerTest : public test_fixtures::OperatorFixture {
 protected:
  void SetUp() override {
    options_.compute_domains = ComputeDomainsMode::kOn;
    fake_.EnableStatusSubresource(ComputeDomainsResource());
    OperatorFixture::SetUp();
    ASSERT_TRUE(reconciler_->compute_domains()->Start().ok());
  }
  // What NVIDIA's controller does for every ComputeDomain: its channel template.
  void DriverCreatesTemplates() {
    auto l = fake_.List(ComputeDomainsResource(), kNs);
    ASSERT_TRUE(l.ok());
    for (const Json& cd : l->items) {
      const std::string name = cd["spec"]["channel"]["resourceClaimTemplate"]["name"];
      Json t = {{"metadata", {{"name", name}, {"namespace", kNs}}}};
      auto c = fake_.Create(ResourceClaimTemplatesResource(), kNs, t);
      ASSERT_TRUE(c.ok() || kube::IsAlreadyExists(c.status()));
    }
  }
  void LabelNode(const std::string& node, const std::string& domain_uid) {
    Mutate(kube::kNodes, "", node, [&](Json& n) {
      n["metadata"]["labels"][std::string(model::kComputeDomainNodeLabel)] = domain_uid;
    });
  }
  std::string ChannelTemplateOf(const std::string& pod) {
    auto p = fake_.Get(kube::kPods, kNs, pod);
    if (!p.ok()) return "(no pod " + pod + ")";
    for (const Json& c : kube::AtPath(*p, "/spec/resourceClaims")) {
      if (c["name"] == "nvl72-channel") return c["resourceClaimTemplateName"];
    }
    return "";
  }
  void DelayRun() {
    for (const auto& [key, d] : std::map(delayed_)) Enqueue(key);
    RunUntilQuiet();
  }
};

TEST_F(ComputeDomainsReconcilerTest, RankPodsWaitForTheChannelTemplateThenCarryTheirSegmentsClaim) {
  AddRacks(2);
  Apply(model::testing::Job({.ns = kNs,
                             .name = "moe",
                             .replicas = 32,
                             .segment_size = 16,
                             .recovery = {{"policy", "InPlace"}, {"notReadyGraceSeconds", 30}}}));
  RunUntilQuiet();
  EXPECT_EQ(GetJob("moe")["status"]["fabric"], "ComputeDomain");
  EXPECT_TRUE(fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-0").ok());
  EXPECT_TRUE(fake_.Get(ComputeDomainsResource(), kNs, "moe-seg-1").ok());
  EXPECT_TRUE(PodsOf("moe").empty()) << "no rank pod before its channel template exists";
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionComputeDomainReady, &reason), "False");
  EXPECT_EQ(reason, "TemplatePending");
  EXPECT_EQ(Condition("moe", model::kConditionRunning, &reason), "False");
  EXPECT_EQ(reason, "ClaimPending") << "the Running condition says why no rank pod exists";
  EXPECT_NE(GetJob("moe")["status"]["conditions"].dump().find(
                "rank pods of segment 0 wait for ResourceClaimTemplate moe-seg-0-channel"),
            std::string::npos);
  EXPECT_EQ(delayed_.count("team/moe"), 1u) << "looked at again while not Ready";

  DriverCreatesTemplates();
  DelayRun();
  RunPods("moe");
  RunUntilQuiet();
  ASSERT_EQ(PodsOf("moe").size(), 32u);
  for (int r = 0; r < 32; ++r) {
    EXPECT_EQ(ChannelTemplateOf("moe-" + std::to_string(r)),
              r < 16 ? "moe-seg-0-channel" : "moe-seg-1-channel");
  }
  for (const char* cd : {"moe-seg-0", "moe-seg-1"}) {
    Mutate(ComputeDomainsResource(), kNs, cd, [](Json& d) { d["status"]["status"] = "Ready"; });
  }
  DelayRun();
  EXPECT_EQ(Condition("moe", model::kConditionComputeDomainReady, &reason), "True");

  const model::JobPlacement before = PlacementOf("moe");
  const std::string dead = before.ranks[20].node;
  SetNotReady(dead, now_ - std::chrono::seconds(31));
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe").ranks[20].node, dead);
  EXPECT_EQ(ChannelTemplateOf("moe-20"), "moe-seg-1-channel") << "the replacement joins it";

  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "moe").ok());
  Enqueue("team/moe");
  RunUntilQuiet();
  auto left = fake_.List(ComputeDomainsResource(), kNs);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->items.empty());
}

// Rank pods are created from the placement this process wrote while the informer cache still shows
// the job unadmitted (no status.fabric yet): they must carry the channel claim all the same.
TEST_F(ComputeDomainsReconcilerTest, PodsCreatedBeforeTheCacheShowsTheAdmissionCarryTheClaim) {
  AddRacks(1);
  Apply(test_fixtures::Job("lag", 4));
  Enqueue("team/lag");
  while (!queue_.empty() && queue_.front() != Reconciler::kAdmissionKey) {
    const std::string key = queue_.front();
    queue_.pop_front();
    queued_.erase(key);
    ASSERT_TRUE(reconciler_->Reconcile(key).ok());
  }
  const Json stale = GetJob("lag");  // finalizer on, not admitted
  ASSERT_FALSE(model::PlacementOf(stale)->has_value());
  test_fixtures::StaleStore stale_store(store_.get(), stale);
  ReconcilerOptions options;
  options.compute_domains = ComputeDomainsMode::kOn;
  Reconciler lagging(
      &fake_, &stale_store, nullptr, nullptr, [](const std::string&) {}, options);
  ASSERT_TRUE(lagging.compute_domains()->Start().ok());
  ASSERT_TRUE(lagging.AdmitPending().ok());
  ASSERT_EQ(GetJob("lag")["status"]["fabric"], "ComputeDomain");
  ASSERT_TRUE(lagging.ReconcileJob("team/lag").ok());
  DriverCreatesTemplates();
  ASSERT_TRUE(lagging.ReconcileJob("team/lag").ok());
  ASSERT_EQ(PodsOf("lag").size(), 4u) << "created from the assumed placement";
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ChannelTemplateOf("lag-" + std::to_string(r)), "lag-seg-0-channel") << r;
  }
}

TEST_F(ComputeDomainsReconcilerTest, ANodeOfAnotherComputeDomainIsSkippedByPlacementAndRecovery) {
  AddRacks(1);
  const std::string busy = test_fixtures::NodeName(0, 5);
  LabelNode(busy, "uid-of-a-users-own-domain");
  model::JobPlacement p = StartJob(test_fixtures::Job("big", 16));
  ASSERT_EQ(p.ranks.size(), 16u);
  auto on_busy = [&](const model::JobPlacement& q) {
    return std::any_of(q.ranks.begin(), q.ranks.end(),
                       [&](const auto& a) { return a.node == busy; });
  };
  EXPECT_FALSE(on_busy(p));
  // Two failures: the first takes the one free unlabelled node, the second finds none.
  for (int i : {0, 1}) {
    SetNotReady(PlacementOf("big").ranks[i].node, now_ - std::chrono::seconds(31));
    RunUntilQuiet();
    EXPECT_FALSE(on_busy(PlacementOf("big"))) << "failure " << i;
  }
  const Json big = GetJob("big");
  const Json* waiting = model::FindCondition(big, model::kConditionRecovering);
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->value("reason", ""), "WaitingForNode");
  EXPECT_NE(waiting->value("message", "").find("1 by a ComputeDomain still on the node"),
            std::string::npos)
      << "says why the free node is not taken: " << waiting->dump();
}

// A job re-admitted (the safety net re-plans it) keeps the fabric of its first admission: here
// None, from before the CRD was installed.
TEST_F(ComputeDomainsReconcilerTest, AReadmittedJobKeepsItsFabric) {
  AddRacks(1);
  Apply(test_fixtures::Job("old", 4));
  Mutate(Nvl72JobsResource(), kNs, "old", [](Json& j) { j["status"]["fabric"] = "None"; });
  Enqueue("team/old");
  RunUntilQuiet();
  ASSERT_EQ(PodsOf("old").size(), 4u);
  EXPECT_EQ(GetJob("old")["status"]["fabric"], "None");
  EXPECT_FALSE(PodsOf("old")[0]["spec"].contains("resourceClaims"));
  EXPECT_FALSE(fake_.Get(ComputeDomainsResource(), kNs, "old-seg-0").ok());
}

TEST_F(ComputeDomainsReconcilerTest, FabricComputeDomainWaitsWhileTheCrdIsNotServed) {
  options_.compute_domains = ComputeDomainsMode::kAuto;
  fake_.InjectError(Verb::kList, ComputeDomainsResource(), kNotFound, 100);
  Restart();
  ASSERT_TRUE(reconciler_->compute_domains()->Start().ok());
  AddRacks(1);
  Json wants = test_fixtures::Job("wants", 4);
  wants["spec"]["fabric"] = "ComputeDomain";
  Apply(wants);
  Apply(test_fixtures::Job("plain", 4));
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition("wants", model::kConditionAdmitted, &reason), "False");
  EXPECT_NE(GetJob("wants")["status"]["conditions"].dump().find("spec.fabric is ComputeDomain"),
            std::string::npos);
  EXPECT_EQ(GetJob("plain")["status"]["fabric"], "None") << "nothing changes without the CRD";
  EXPECT_EQ(PodsOf("plain").size(), 4u);
  EXPECT_FALSE(PodsOf("plain")[0]["spec"].contains("resourceClaims"));
  for (const auto& a : fake_.Actions()) {
    EXPECT_FALSE(a.verb == Verb::kCreate && a.resource.find("computedomains") == 0) << a.resource;
  }
}

}  // namespace
}  // namespace nvl72::op
