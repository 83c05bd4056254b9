#include "scheduler-plugin/extender.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "kube/fake_client.h"
#include "scheduler-plugin/fixtures_for_test.h"

namespace nvl72::extender {
namespace {

using testing::MakeJob;
using testing::MakePod;
using testing::MakeRacks;
using testing::Ptrs;

// Two racks of six 4-GPU nodes, one spare per domain:
//   rack-0: R R 2 . . S      R = reserved by gang ml/big (ranks 0, 1 running), 2 = 2 GPUs used
//   rack-1: G . . . . S      G = single-rank gang ml/solo running, S = designated spare
class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_ = MakeRacks(2, 6);
    pods_ = {MakePod("ml", "big-0", 4, "r000-n00", "big", 0, "r000-n00"),
             MakePod("ml", "big-1", 4, "r000-n01", "big", 1, "r000-n01"),
             MakePod("ml", "small", 2, "r000-n02"),
             MakePod("ml", "solo-0", 4, "r001-n00", "solo", 0, "r001-n00")};
    jobs_ = {MakeJob("ml", "big", 4, {"r000-n00", "r000-n01"}, "rack-0"),
             MakeJob("ml", "solo", 4, {"r001-n00"}, "rack-1")};
    Rebuild();
    auto e = Extender::Create(options_);
    ASSERT_TRUE(e.ok()) << e.status();
    ext_ = std::move(*e);
  }

  void Rebuild() {
    ViewOptions vo;
    vo.spares_per_domain = 1;
    view_ = BuildView(Ptrs(nodes_), Ptrs(pods_), Ptrs(jobs_), vo);
  }

  ExtenderArgs Args(const Json& pod) {
    ExtenderArgs a;
    a.pod = PodInfoFromJson(pod, "nvidia.com/gpu");
    a.node_cache_capable = true;
    std::vector<std::string> names;
    for (const Json& n : nodes_) names.push_back(n["metadata"]["name"].get<std::string>());
    a.SetNodeNames(std::move(names));
    return a;
  }

  static std::vector<std::string> Passed(const ExtenderArgs& a, const FilterDecision& d) {
    std::vector<std::string> out;
    for (int i : d.passed) out.push_back(a.node_names()[static_cast<size_t>(i)]);
    return out;
  }
  static std::map<std::string, std::string> Failed(const ExtenderArgs& a, const FilterDecision& d) {
    std::map<std::string, std::string> out;
    for (const auto& [i, r] : d.failed) out[a.node_names()[static_cast<size_t>(i)]] = *r;
    return out;
  }

  ExtenderOptions options_{.policy = "nvl72", .spares_per_domain = 1};
  std::vector<Json> nodes_, pods_, jobs_;
  std::shared_ptr<const ClusterView> view_;
  std::unique_ptr<Extender> ext_;
};

TEST_F(ExtenderTest, UnknownPolicyIsAnError) {
  ExtenderOptions o;
  o.policy = "magic";
  auto e = Extender::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nvl72"), std::string::npos);
}

TEST_F(ExtenderTest, ViewPrecomputesSparesReservationsAndGangs) {
  const auto& snap = view_->state.snapshot();
  ASSERT_EQ(snap.nodes.size(), 12u);
  EXPECT_TRUE(view_->spare[static_cast<size_t>(view_->FindNode("r000-n05"))]);
  EXPECT_TRUE(view_->spare[static_cast<size_t>(view_->FindNode("r001-n05"))]);
  EXPECT_FALSE(view_->spare[static_cast<size_t>(view_->FindNode("r000-n04"))]);
  EXPECT_EQ(view_->reserved_for[static_cast<size_t>(view_->FindNode("r000-n01"))], "ml/big");
  EXPECT_EQ(view_->gang_of_uid.at("uid-ml-big-1"), "ml/big");
  EXPECT_EQ(view_->gang_uids.at("ml/big").size(), 2u);
  EXPECT_EQ(view_->FindNode("nope"), placement::kNoNode);
}

// kube-scheduler's TaintToleration filter judges a pod's tolerations before it calls the extender:
// a taint never makes the extender refuse a node (a single pod that tolerates dedicated=x may go
// there), whatever the taint.
TEST_F(ExtenderTest, ATaintedNodeIsNotRefusedByTheExtender) {
  for (Json& n : nodes_) {
    n["spec"]["taints"] = {{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}};
  }
  Rebuild();
  ExtenderArgs a = Args(MakePod("ml", "single", 1));
  EXPECT_FALSE(Passed(a, ext_->Filter(*view_, a)).empty());
  EXPECT_FALSE(view_->state.snapshot().nodes[0].tainted);
}

TEST_F(ExtenderTest, GangPodPassesOnlyOnItsPlannedNode) {
  auto a = Args(MakePod("ml", "big-0", 4, "", "big", 0, "r000-n00"));
  FilterDecision d = ext_->Filter(*view_, a);
  EXPECT_EQ(Passed(a, d), std::vector<std::string>{"r000-n00"});
  auto failed = Failed(a, d);
  EXPECT_EQ(failed.size(), 11u);
  EXPECT_EQ(failed["r001-n03"], "pod ml/big-0 is planned for node r000-n00");
}

TEST_F(ExtenderTest, GangPodWithoutAnnotationUsesTheReservation) {
  auto a = Args(MakePod("ml", "big-1", 4, "", "big", 1));
  EXPECT_EQ(Passed(a, ext_->Filter(*view_, a)), std::vector<std::string>{"r000-n01"});
  auto scores = ext_->Prioritize(*view_, a);
  EXPECT_EQ(scores[1], 10);
  EXPECT_EQ(std::count(scores.begin(), scores.end(), 0), 11);
}

TEST_F(ExtenderTest, GangPodWithoutPlanFailsEverywhere) {
  auto a = Args(MakePod("ml", "new-0", 4, "", "new", 0));
  FilterDecision d = ext_->Filter(*view_, a);
  EXPECT_TRUE(d.passed.empty());
  EXPECT_NE(Failed(a, d)["r000-n03"].find("no planned node"), std::string::npos);
}

TEST_F(ExtenderTest, PodWithoutGpusPassesUntouched) {
  auto a = Args(MakePod("ml", "web", 0));
  FilterDecision d = ext_->Filter(*view_, a);
  EXPECT_EQ(d.passed.size(), 12u);
  EXPECT_TRUE(d.failed.empty());
}

// The name -> node resolution is memoised in the (shared) name list per view: a request against a
// newer view must not see the ids of an older one.
TEST_F(ExtenderTest, NameResolutionIsRememberedPerView) {
  auto a = Args(MakePod("ml", "one", 1));
  const auto before = Failed(a, ext_->Filter(*view_, a));
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(view_->Resolve(*a.nodes), view_->Resolve(*a.nodes));  // the memo, not a new vector
  auto empty = BuildView({}, {}, {}, ViewOptions{});
  const FilterDecision none_known = ext_->Filter(*empty, a);  // unknown nodes: no opinion
  EXPECT_TRUE(none_known.failed.empty());
  EXPECT_EQ(none_known.passed.size(), a.node_names().size());
  EXPECT_EQ(Failed(a, ext_->Filter(*view_, a)), before);
}

TEST_F(ExtenderTest, GpuPodKeptOffReservedAndSpareNodes) {
  auto a = Args(MakePod("ml", "one", 1));
  std::vector<std::string> names = a.node_names();
  names.emplace_back("cpu-only");  // not a GPU node we know: no opinion
  a.SetNodeNames(std::move(names));
  FilterDecision d = ext_->Filter(*view_, a);
  auto failed = Failed(a, d);
  EXPECT_EQ(failed.size(), 5u);
  // One text per kind whatever the job or domain (kube-scheduler groups reasons by their text).
  EXPECT_EQ(failed["r000-n00"], kReservedReason);
  EXPECT_EQ(failed["r000-n01"], kReservedReason);
  EXPECT_EQ(failed["r001-n00"], kReservedReason);
  EXPECT_EQ(failed["r000-n05"], kSpareReason);
  EXPECT_EQ(failed["r001-n05"], kSpareReason);
  EXPECT_EQ(d.reasons.size(), 2u);
  auto passed = Passed(a, d);
  EXPECT_EQ(passed.size(), 8u);
  EXPECT_NE(std::find(passed.begin(), passed.end(), "cpu-only"), passed.end());
}

TEST_F(ExtenderTest, KeepOffSparesCanBeDisabled) {
  options_.keep_off_spares = false;
  auto e = Extender::Create(options_);
  ASSERT_TRUE(e.ok());
  auto a = Args(MakePod("ml", "one", 1));
  auto failed = Failed(a, (*e)->Filter(*view_, a));
  EXPECT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed.count("r000-n05"), 0u);
}

TEST_F(ExtenderTest, PrioritizePacksIntoPartlyUsedNodesOfBusyDomains) {
  auto a = Args(MakePod("ml", "one", 1));
  a.SetNodeNames({"r001-n02", "r000-n03", "r000-n02", "r001-n05", "unknown"});
  auto scores = ext_->Prioritize(*view_, a);
  ASSERT_EQ(scores.size(), 5u);
  EXPECT_EQ(scores[2], 10);  // the partly used node
  EXPECT_EQ(scores[4], 0);   // unknown node
  for (int s : scores) EXPECT_LE(s, 10);
  for (int i : {0, 1, 3}) EXPECT_GE(scores[static_cast<size_t>(i)], 1);
  // Among empty nodes: the busier rack first, the spare last.
  a.SetNodeNames({"r001-n02", "r000-n03", "r001-n05"});
  scores = ext_->Prioritize(*view_, a);
  EXPECT_EQ(scores[1], 10);
  EXPECT_GT(scores[1], scores[0]);
  EXPECT_GT(scores[0], scores[2]);
  EXPECT_EQ(scores[2], 1);
}

TEST(RankNormalizeTest, KeepsOrderAcrossTiers) {
  const std::vector<int64_t> raw = {-1, 0, 1'000'002, 1'000'004, 3'000'000'000, 1'000'004};
  EXPECT_EQ(RankNormalizeScores(raw), (std::vector<int>{0, 1, 4, 7, 10, 7}));
  // The linear map of the core collapses the middle tiers.
  EXPECT_EQ(placement::NormalizeScores(raw), (std::vector<int>{0, 1, 1, 1, 10, 1}));
  EXPECT_EQ(RankNormalizeScores(std::vector<int64_t>{5, 5}), (std::vector<int>{10, 10}));
  EXPECT_EQ(RankNormalizeScores(std::vector<int64_t>{-1}), (std::vector<int>{0}));
  // More distinct values than levels: still monotone, still 1..10.
  std::vector<int64_t> many;
  many.reserve(100);
  for (int i = 0; i < 100; ++i) many.push_back(static_cast<int64_t>(i) * i);
  const auto s = RankNormalizeScores(many);
  EXPECT_EQ(s.front(), 1);
  EXPECT_EQ(s.back(), 10);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
}

// Against the definition, computed the obvious way (sort + unique + lower_bound), on random scores
// with few and with many distinct values, up to the full int64 range.
TEST(RankNormalizeTest, MatchesTheDefinitionOnRandomScores) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const size_t n = rng() % 300;
    const int64_t range = round % 3 == 0 ? 5 : round % 3 == 1 ? 1'000'000 : INT64_MAX;
    std::vector<int64_t> raw(n);
    for (auto& v : raw)
      v = rng() % 5 == 0 ? -1 : static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
    std::vector<int64_t> levels;
    for (int64_t v : raw) {
      if (v >= 0) levels.push_back(v);
    }
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    std::vector<int> want(n, 0);
    const auto top = static_cast<int64_t>(levels.size()) - 1;
    for (size_t i = 0; i < n; ++i) {
      if (raw[i] < 0) continue;
      const auto rank = std::lower_bound(levels.begin(), levels.end(), raw[i]) - levels.begin();
      want[i] = top == 0 ? 10 : 1 + static_cast<int>(rank * 9 / top);
    }
    ASSERT_EQ(RankNormalizeScores(raw), want) << "round " << round;
  }
}

TEST_F(ExtenderTest, LinearNormalizationIsAvailable) {
  options_.normalization = ScoreNormalization::kLinear;
  auto e = Extender::Create(options_);
  ASSERT_TRUE(e.ok());
  auto a = Args(MakePod("ml", "one", 1));
  a.SetNodeNames({"r001-n02", "r000-n03", "r000-n02"});
  EXPECT_EQ((*e)->Prioritize(*view_, a), (std::vector<int>{1, 1, 10}));
}

TEST_F(ExtenderTest, PrioritizeWithSpreadPolicyPrefersEmptyNodes) {
  options_.policy = "spread";
  auto e = Extender::Create(options_);
  ASSERT_TRUE(e.ok());
  auto a = Args(MakePod("ml", "one", 1));
  a.SetNodeNames({"r000-n02", "r000-n03"});
  auto scores = (*e)->Prioritize(*view_, a);
  EXPECT_LT(scores[0], scores[1]);
}

TEST_F(ExtenderTest, BindPostsTheBindingForOrdinaryPods) {
  kube::FakeClient client;
  auto created = client.Create(kube::kPods, "ml", MakePod("ml", "one", 1));
  ASSERT_TRUE(created.ok());
  BindingArgs b{"one", "ml", kube::Uid(*created), "r000-n03"};
  EXPECT_EQ(ext_->Bind(*view_, nullptr, b, client), "");
  auto pod = client.Get(kube::kPods, "ml", "one");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"]["nodeName"], "r000-n03");
  // Already bound: the API server's 409 comes back as the Error.
  EXPECT_NE(ext_->Bind(*view_, nullptr, b, client), "");
}

TEST_F(ExtenderTest, BindRefusesAGangPodOffItsPlannedNode) {
  kube::FakeClient client;
  Json pod = MakePod("ml", "big-0", 4, "", "big", 0, "r000-n00");
  ASSERT_TRUE(client.Create(kube::kPods, "ml", pod).ok());
  const PodInfo info = PodInfoFromJson(pod, "nvidia.com/gpu");
  client.ClearActions();
  std::string err = ext_->Bind(*view_, &info, {"big-0", "ml", "", "r000-n03"}, client);
  EXPECT_NE(err.find("refusing"), std::string::npos);
  EXPECT_NE(err.find("planned for node r000-n00"), std::string::npos);
  for (const auto& act : client.Actions()) EXPECT_NE(act.verb, kube::Verb::kBind);
  EXPECT_EQ(ext_->Bind(*view_, &info, {"big-0", "ml", "", "r000-n00"}, client), "");
  EXPECT_EQ((*client.Get(kube::kPods, "ml", "big-0"))["spec"]["nodeName"], "r000-n00");
}

TEST_F(ExtenderTest, BindReportsAMissingPod) {
  kube::FakeClient client;
  EXPECT_NE(
      ext_->Bind(*view_, nullptr, {"ghost", "ml", "", "r000-n03"}, client).find("cannot read pod"),
      std::string::npos);
}

TEST_F(ExtenderTest, PreemptNeverBreaksARunningGang) {
  PreemptionArgs a;
  a.pod = PodInfoFromJson(MakePod("ml", "urgent", 4), "nvidia.com/gpu");
  a.victims = {{"r000-n00", {{"uid-ml-big-0"}, 0}},   // one rank of a 2-rank gang: breaks it
               {"r001-n00", {{"uid-ml-solo-0"}, 0}},  // the whole (1-rank) gang goes: fine
               {"r000-n02", {{"uid-ml-small"}, 1}}};  // an ordinary pod
  auto out = ext_->Preempt(*view_, a);
  std::vector<std::string> nodes;
  nodes.reserve(out.size());
  for (const auto& [n, v] : out) nodes.push_back(n);
  // r000-n00 and r001-n00 are also reserved by gangs: the filter keeps this pod off them anyway.
  EXPECT_EQ(nodes, std::vector<std::string>{"r000-n02"});
  EXPECT_EQ(out[0].second.num_pdb_violations, 1);

  // A rank of another gang planned on r001-n00 may take the whole single-rank gang's node.
  a.pod = PodInfoFromJson(MakePod("ml", "next-0", 4, "", "next", 0, "r001-n00"), "nvidia.com/gpu");
  out = ext_->Preempt(*view_, a);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "r001-n00");
  // ... but never one rank of a bigger gang.
  a.pod = PodInfoFromJson(MakePod("ml", "next-0", 4, "", "next", 0, "r000-n00"), "nvidia.com/gpu");
  EXPECT_TRUE(ext_->Preempt(*view_, a).empty());
}

TEST_F(ExtenderTest, PreemptKeepsWholeGangVictims) {
  // Both ranks of ml/big on one candidate (as if they shared a node): the whole gang goes.
  PreemptionArgs a;
  a.pod = PodInfoFromJson(MakePod("ml", "next-0", 4, "", "next", 0, "r000-n00"), "nvidia.com/gpu");
  a.victims = {{"r000-n00", {{"uid-ml-big-0", "uid-ml-big-1"}, 0}}};
  EXPECT_EQ(ext_->Preempt(*view_, a).size(), 1u);
}

}  // namespace
}  // namespace nvl72::extender
