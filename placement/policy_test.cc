#include "placement/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "placement/topology_for_test.h"

namespace nvl72::placement {
namespace {

GangRequest Gang(int replicas, TopologyMode mode = TopologyMode::kRequired, int segment = 0,
                 int gpus = 4) {
  GangRequest r;
  r.key = "ns/job";
  r.replicas = replicas;
  r.gpus_per_replica = gpus;
  r.mode = mode;
  r.segment_size = segment;
  return r;
}

std::set<std::string> DomainsOf(const Snapshot& s, const GangPlacement& p) {
  std::set<std::string> out;
  for (NodeId id : p.rank_nodes)
    out.insert(s.domains[static_cast<size_t>(s.nodes[static_cast<size_t>(id)].domain)].name);
  return out;
}

const char* kEighteen = ". . . . . . . . . . . . . . . . . .";

struct GangCase {
  std::string name;
  std::string policy;
  int spares;
  std::string topology;
  GangRequest request;
  bool placed;
  std::set<std::string> domains;  // expected domains of the placement (when placed)
  std::string reason_contains;    // expected substring of the reason (when not placed)
};

class GangPlacementTable : public ::testing::TestWithParam<GangCase> {};

TEST_P(GangPlacementTable, Decides) {
  const GangCase& c = GetParam();
  Snapshot s = ParseTopology(c.topology);
  // This table pins the hard reserve; SoftReserveTable below covers the soft one (the default).
  auto policy = MakePolicy(c.policy, PolicyOptions{c.spares, SpareReserve::kHard});
  ASSERT_NE(policy, nullptr);
  GangDecision d = policy->PlaceGang(s, c.request);
  ASSERT_EQ(d.placed, c.placed) << d.reason;
  if (!c.placed) {
    EXPECT_NE(d.reason.find(c.reason_contains), std::string::npos) << d.reason;
    EXPECT_TRUE(d.placement.rank_nodes.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(d.placement.rank_nodes.size()), c.request.replicas);
  EXPECT_EQ(DomainsOf(s, d.placement), c.domains);
  std::set<NodeId> distinct(d.placement.rank_nodes.begin(), d.placement.rank_nodes.end());
  EXPECT_EQ(distinct.size(), d.placement.rank_nodes.size()) << "one rank per node";
  for (NodeId id : d.placement.rank_nodes) {
    const Node& n = s.nodes[static_cast<size_t>(id)];
    EXPECT_TRUE(n.Schedulable()) << n.name;
    EXPECT_GE(n.FreeGpus(), c.request.gpus_per_replica) << n.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placement, GangPlacementTable,
    ::testing::Values(
        GangCase{"ExactFitWithSpares",
                 "nvl72",
                 2,
                 std::string("a: ") + kEighteen,
                 Gang(16),
                 true,
                 {"a"},
                 ""},
        GangCase{"SparesAreKeptFromGangs",
                 "nvl72",
                 2,
                 std::string("a: ") + kEighteen,
                 Gang(17),
                 false,
                 {},
                 "largest free block is 16 nodes in a"},
        GangCase{"NoSparesInBaseline",
                 "domain-best-fit",
                 2,
                 std::string("a: ") + kEighteen,
                 Gang(17),
                 true,
                 {"a"},
                 ""},
        GangCase{"BestFitPicksTightestDomain",
                 "domain-best-fit",
                 0,
                 "a: . . . . . . . . . .\nb: . . . . . .\nc: . . . . . . . .",
                 Gang(5),
                 true,
                 {"b"},
                 ""},
        GangCase{
            "TiesGoToFirstDomain", "nvl72", 0, "a: . . . .\nb: . . . .", Gang(4), true, {"a"}, ""},
        GangCase{"UnhealthyCordonedTaintedSkipped",
                 "nvl72",
                 0,
                 "a: . X C T .\nb: . . .",
                 Gang(3),
                 true,
                 {"b"},
                 ""},
        GangCase{"UnhealthyLeaveNoRoom",
                 "nvl72",
                 0,
                 "a: . X C T . .\nb: . . 1",
                 Gang(4),
                 false,
                 {},
                 "needs 4 nodes with 4 free GPUs in one NVLink domain"},
        GangCase{"RequiredNeverSpans",
                 "nvl72",
                 0,
                 "a: . . . . . . . .\nb: . . . . . . . .",
                 Gang(16),
                 false,
                 {},
                 "largest free block is 8 nodes"},
        GangCase{"SegmentsEachInOneDomain",
                 "nvl72",
                 0,
                 "a: . . . . . . . .\nb: . . . . . . . .",
                 Gang(16, TopologyMode::kRequired, 8),
                 true,
                 {"a", "b"},
                 ""},
        GangCase{"SegmentsMayShareADomain",
                 "nvl72",
                 0,
                 "a: . . . . . . . .\nb: . .",
                 Gang(8, TopologyMode::kRequired, 4),
                 true,
                 {"a"},
                 ""},
        GangCase{"SegmentsThatDoNotTileWait",
                 "nvl72",
                 0,
                 "a: . . . . . .\nb: . . . . . .",
                 Gang(12, TopologyMode::kRequired, 4),
                 false,
                 {},
                 "needs 4 nodes"},
        GangCase{"PreferredSpansFewestDomains",
                 "nvl72",
                 0,
                 "a: . .\nb: . . . . .\nc: . . .",
                 Gang(8, TopologyMode::kPreferred),
                 true,
                 {"b", "c"},
                 ""},
        // Unconstrained: one domain when one fits (best fit), the fewest domains otherwise.
        GangCase{"UnconstrainedKeepsOneDomainWhenItFits",
                 "nvl72",
                 0,
                 "a: . . . . . .\nb: . . . .",
                 Gang(4, TopologyMode::kUnconstrained),
                 true,
                 {"b"},
                 ""},
        GangCase{"UnconstrainedSpansWhenNoDomainFits",
                 "nvl72",
                 0,
                 "a: . . .\nb: . . 4 4\nc: . . .",
                 Gang(5, TopologyMode::kUnconstrained),
                 true,
                 {"a", "c"},
                 ""},
        GangCase{"UnconstrainedWaitsForRoom",
                 "nvl72",
                 0,
                 "a: . .\nb: . 4",
                 Gang(4, TopologyMode::kUnconstrained),
                 false,
                 {},
                 "only 3 nodes free in the cluster"},
        GangCase{"OneNodeDomainsRequired",
                 "nvl72",
                 0,
                 "a: .\nb: .\nc: .",
                 Gang(2),
                 false,
                 {},
                 "largest free block is 1 node in a"},
        GangCase{
            "OneNodeDomainsSingleRank", "nvl72", 0, "a: 4\nb: .\nc: .", Gang(1), true, {"b"}, ""},
        GangCase{"PartialRanksUseTightestNodes",
                 "nvl72",
                 0,
                 "a: . . 2 2\nb: . . . .",
                 Gang(2, TopologyMode::kRequired, 0, 2),
                 true,
                 {"a"},
                 ""},
        GangCase{"SpreadIsTopologyBlind",
                 "spread",
                 0,
                 "a: . . 2 2\nb: . . . .",
                 Gang(4),
                 true,
                 {"a", "b"},
                 ""},
        GangCase{"FirstFitIsTopologyBlind",
                 "first-fit",
                 0,
                 "a: . 4 . 4\nb: . . . .",
                 Gang(3),
                 true,
                 {"a", "b"},
                 ""},
        GangCase{
            "InvalidRequest", "nvl72", 0, "a: . .", Gang(0), false, {}, "replicas must be >= 1"}),
    [](const auto& info) { return info.param.name; });

// The soft spare reserve (the default): the same request under the hard and the soft reserve, so
// each row shows what softness changes and what it must not change.
struct SoftReserveCase {
  std::string name;
  std::string topology;
  GangRequest request;
  std::set<std::string> hard;  // domains under the hard reserve; empty = waits
  std::set<std::string> soft;  // domains under the soft reserve; empty = waits
  std::string soft_reason;     // substring of the soft decision's reason
};

class SoftReserveTable : public ::testing::TestWithParam<SoftReserveCase> {};

TEST_P(SoftReserveTable, Decides) {
  const SoftReserveCase& c = GetParam();
  const Snapshot s = ParseTopology(c.topology);
  for (SpareReserve mode : {SpareReserve::kHard, SpareReserve::kSoft}) {
    auto policy = MakePolicy("nvl72", PolicyOptions{2, mode});
    const GangDecision d = policy->PlaceGang(s, c.request);
    const std::set<std::string>& want = mode == SpareReserve::kHard ? c.hard : c.soft;
    SCOPED_TRACE(std::string(SpareReserveName(mode)) + ": " + d.reason);
    ASSERT_EQ(d.placed, !want.empty());
    if (d.placed) {
      EXPECT_EQ(DomainsOf(s, d.placement), want);
      EXPECT_TRUE(d.placement.SegmentsInOneDomain(s, c.request.EffectiveSegmentSize()));
      std::set<NodeId> distinct(d.placement.rank_nodes.begin(), d.placement.rank_nodes.end());
      EXPECT_EQ(distinct.size(), d.placement.rank_nodes.size());
      for (NodeId id : d.placement.rank_nodes) {
        EXPECT_TRUE(s.nodes[static_cast<size_t>(id)].Schedulable());
        EXPECT_TRUE(s.nodes[static_cast<size_t>(id)].Empty());
      }
    }
    if (mode == SpareReserve::kSoft) {
      EXPECT_NE(d.reason.find(c.soft_reason), std::string::npos);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placement, SoftReserveTable,
    ::testing::Values(
        // Nothing fits outside the reserve: soft takes the spares instead of waiting.
        SoftReserveCase{"TakesSparesWhenNothingElseFits",
                        std::string("a: ") + kEighteen,
                        Gang(17),
                        {},
                        {"a"},
                        "soft reserve: fits nowhere else"},
        // A rack down one node ("providers guarantee 16 of 18"): a 16-node gang never fits under a
        // hard reserve of 2, and does under the soft one.
        SoftReserveCase{"SixteenOfEighteen",
                        "a: . . . . . . . . . . . . . . . . . X",
                        Gang(16),
                        {},
                        {"a"},
                        "fits nowhere else"},
        // Rack b is down two nodes, so its 16 healthy nodes fit the gang exactly: soft fills b and
        // keeps a's nodes free; hard finds no rack with 16 + 2.
        SoftReserveCase{"ExactFitOnADegradedRack",
                        "a: . . . . . . . . . . . . . . . . . X\n"
                        "b: . . . . . . . . . . . . . . . . X X",
                        Gang(16),
                        {},
                        {"b"},
                        ""},
        // Another domain takes the gang outside its reserve: soft keeps a's spares like hard does
        // (ignoring the reserve, best fit would pick a: 1 node left instead of 5).
        SoftReserveCase{"KeepsSparesWhenAnotherDomainFits",
                        "a: . . . . . .\nb: . . . . . . . . . .",
                        Gang(5),
                        {"b"},
                        {"b"},
                        ""},
        // The gang fills a's free nodes exactly: soft takes them (nothing stranded) instead of
        // breaking up b; hard sends it to b.
        SoftReserveCase{"ExactFitTakesSpares",
                        "a: . . . . . .\nb: . . . . . . . . . .",
                        Gang(6),
                        {"b"},
                        {"a"},
                        ""},
        // Per segment: the first 6-rank segment fills a exactly, the second goes to b's
        // non-reserve nodes; hard puts them in b and c.
        SoftReserveCase{"ExactFitPerSegment",
                        std::string("a: . . . . . .\nb: . . . . . . . . . .\nc: ") + kEighteen,
                        Gang(12, TopologyMode::kRequired, 6),
                        {"b", "c"},
                        {"a", "b"},
                        ""},
        // Issue #24, as a new user met it: a 16-node gang holds a's first 16 nodes, b and c are
        // empty. A 2-node gang would fill a's free nodes exactly, but they are the 16-node gang's
        // spares: soft leaves them and takes b's nodes outside its reserve, like hard.
        SoftReserveCase{"KeepsTheSparesOfARackFullOfGangs",
                        std::string("a: R R R R R R R R R R R R R R R R . .\nb: ") + kEighteen +
                            "\nc: " + kEighteen,
                        Gang(2),
                        {"b"},
                        {"b"},
                        ""},
        // The same rack with one of its 16 nodes held by a pod instead of a gang: no gang fills
        // the rack, the exact fit strands nothing there, so soft takes it.
        SoftReserveCase{"ExactFitWhereGangsDoNotFillTheRack",
                        std::string("a: R R R R R R R R R R R R R R R 4 . .\nb: ") + kEighteen,
                        Gang(2),
                        {"b"},
                        {"a"},
                        ""},
        // A rack full of gangs keeps its spares only from the exact-fit shortcut: a gang that fits
        // nowhere else still takes them rather than wait (the soft promise).
        SoftReserveCase{
            "GuardedSparesStillTakenWhenNothingElseFits",
            "a: R R R R R R R R R R R R R R R R . .\nb: R R R R R R R R R R R R R R R R R .",
            Gang(2),
            {},
            {"a"},
            "fits nowhere else"},
        // Soft never places what does not fit: the reason names the real free block, not the
        // reserve (10 nodes, not 8).
        SoftReserveCase{"StillWaitsWhenNoDomainFits",
                        "a: . . . . . . . . . .\nb: 4 4",
                        Gang(11),
                        {},
                        {},
                        "largest free block is 10 nodes in a"}),
    [](const auto& info) { return info.param.name; });

TEST(SpareReserveTest, DefaultIsSoftAndNamesRoundTrip) {
  EXPECT_EQ(PolicyOptions{}.spare_reserve, SpareReserve::kSoft);
  EXPECT_EQ(PolicyOptions{}.spares_per_domain, 2);
  for (SpareReserve mode : {SpareReserve::kHard, SpareReserve::kSoft}) {
    SpareReserve parsed = mode == SpareReserve::kHard ? SpareReserve::kSoft : SpareReserve::kHard;
    ASSERT_TRUE(ParseSpareReserve(SpareReserveName(mode), &parsed));
    EXPECT_EQ(parsed, mode);
  }
  SpareReserve untouched = SpareReserve::kHard;
  EXPECT_FALSE(ParseSpareReserve("Soft", &untouched));
  EXPECT_FALSE(ParseSpareReserve("", &untouched));
  EXPECT_EQ(untouched, SpareReserve::kHard);
}

TEST(SpareReserveTest, BaselineIgnoresTheMode) {
  // domain-best-fit keeps no spares whatever the options say.
  const Snapshot s = ParseTopology("a: . . . . . .\nb: . . . . . . . . . .");
  auto p = MakePolicy("domain-best-fit", {2, SpareReserve::kHard});
  const GangDecision d = p->PlaceGang(s, Gang(5));
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(DomainsOf(s, d.placement), std::set<std::string>{"a"});
}

TEST(GangPlacementTest, SegmentsAreConsecutiveRanks) {
  Snapshot s = ParseTopology("a: . . . . . .\nb: . . . . . .\nc: . . . . . .");
  auto p = MakePolicy("nvl72", {0});
  GangDecision d = p->PlaceGang(s, Gang(12, TopologyMode::kRequired, 4));
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_TRUE(d.placement.SegmentsInOneDomain(s, 4));
}

TEST(GangPlacementTest, ThousandDomainsPicksTheOnlyTightFit) {
  Snapshot s;
  for (int i = 0; i < 1000; ++i) s.AddDomain("d" + std::to_string(i), 18, 4);
  // Every domain is empty except d737, which has exactly 10 free nodes after its spares.
  for (int n = 0; n < 6; ++n) s.nodes[size_t{737} * 18 + static_cast<size_t>(n)].gpu_used = 4;
  auto p = MakePolicy("nvl72", {2});
  GangDecision d = p->PlaceGang(s, Gang(10));
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(DomainsOf(s, d.placement), std::set<std::string>{"d737"});
  // Deterministic: the same input gives the same nodes.
  EXPECT_EQ(p->PlaceGang(s, Gang(10)).placement.rank_nodes, d.placement.rank_nodes);
}

TEST(GangPlacementTest, SpareNodesAreTheLastEmptyOnes) {
  Snapshot s = ParseTopology("a: . . . . 4 .");
  auto p = MakePolicy("nvl72", {2});
  GangDecision d = p->PlaceGang(s, Gang(2));
  ASSERT_TRUE(d.placed);
  const auto spare = DesignatedSpares(s, 2);
  for (NodeId id : d.placement.rank_nodes) EXPECT_FALSE(spare[static_cast<size_t>(id)]);
  EXPECT_TRUE(spare[5]);
  EXPECT_TRUE(spare[3]);
  EXPECT_FALSE(spare[4]) << "a used node is never a spare";
}

// The per-job node mask (GangRequest::allowed_nodes): the job's own constraints, judged by the
// caller.
TEST(NodeMaskTest, GangGoesOnlyToAllowedNodes) {
  Snapshot s = ParseTopology("a: . . . .\nb: . . . .");
  GangRequest r = Gang(2);
  r.allowed_nodes = {false, false, false, false, true, false, true, false};
  auto p = MakePolicy("nvl72", {0});
  GangDecision d = p->PlaceGang(s, r);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(std::set<NodeId>(d.placement.rank_nodes.begin(), d.placement.rank_nodes.end()),
            (std::set<NodeId>{4, 6}));
}

TEST(NodeMaskTest, TooFewAllowedNodesInOneDomainWaits) {
  Snapshot s = ParseTopology("a: . . . .\nb: . . . .");
  GangRequest r = Gang(3);
  r.allowed_nodes = {true, true, false, false, true, true, false, false};  // 2 per domain
  for (const char* name : {"nvl72", "domain-best-fit"}) {
    GangDecision d = MakePolicy(name, {0})->PlaceGang(s, r);
    EXPECT_FALSE(d.placed) << name;
  }
  r.mode = TopologyMode::kPreferred;  // may span: 4 allowed nodes are enough
  EXPECT_TRUE(MakePolicy("nvl72", {0})->PlaceGang(s, r).placed);
}

// Issue 27 case 11: only a Required gang waits for room "in one NVLink domain"; the reason of a
// Preferred or Unconstrained gang that does not fit says what it needs without that.
TEST(WaitReasonTest, OnlyARequiredGangNeedsOneNvlinkDomain) {
  Snapshot s = ParseTopology("a: . . . .\nb: . . . .");
  for (const char* name : {"nvl72", "domain-best-fit"}) {
    for (TopologyMode mode :
         {TopologyMode::kRequired, TopologyMode::kPreferred, TopologyMode::kUnconstrained}) {
      GangDecision d = MakePolicy(name, {0})->PlaceGang(s, Gang(10, mode));
      SCOPED_TRACE(std::string(name) + " " + std::string(TopologyModeName(mode)) + ": " + d.reason);
      ASSERT_FALSE(d.placed);
      EXPECT_NE(d.reason.find("needs 10 nodes with 4 free GPUs"), std::string::npos);
      EXPECT_EQ(d.reason.find("in one NVLink domain") != std::string::npos,
                mode == TopologyMode::kRequired);
    }
  }
}

TEST(NodeMaskTest, MaskReplacesTheTaintFlagButNotHealthOrCordon) {
  // A job that tolerates the taint of T gets it; X (not ready) and C (cordoned) stay out.
  Snapshot s = ParseTopology("a: T X C .");
  GangRequest r = Gang(2);
  r.allowed_nodes = {true, true, true, true};
  GangDecision d = MakePolicy("nvl72", {0})->PlaceGang(s, r);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(std::set<NodeId>(d.placement.rank_nodes.begin(), d.placement.rank_nodes.end()),
            (std::set<NodeId>{0, 3}));
  EXPECT_FALSE(MakePolicy("nvl72", {0})->PlaceGang(s, Gang(2)).placed)
      << "without a verdict a tainted node is not eligible";
  for (const char* name : {"spread", "first-fit"}) {
    EXPECT_TRUE(MakePolicy(name, {0})->PlaceGang(s, r).placed) << name;
    EXPECT_FALSE(MakePolicy(name, {0})->PlaceGang(s, Gang(2)).placed) << name;
  }
}

TEST(NodeMaskTest, RecoveryReplacesOnlyOnAllowedNodes) {
  Snapshot s = ParseTopology("a: . . . . . .");
  GangRequest r = Gang(2);
  r.allowed_nodes = {true, true, true, false, false, false};
  s.nodes[1].ready = false;
  GangPlacement current{{0, 1}};
  const int failed[] = {1};
  RecoveryDecision d = MakePolicy("nvl72", {2})->SelectReplacements(s, r, current, failed);
  ASSERT_TRUE(d.recovered) << d.reason;
  EXPECT_EQ(d.replacement[0], 2) << "the spares (n4, n5) are not allowed for this job";
  r.allowed_nodes[2] = false;
  EXPECT_FALSE(MakePolicy("nvl72", {2})->SelectReplacements(s, r, current, failed).recovered);
}

TEST(NeverFitsTest, CountsSegmentsTheDomainsCanHold) {
  Snapshot s;
  for (int i = 0; i < 5; ++i) s.AddDomain("rack-" + std::to_string(i), 18, 4);
  GangRequest r = Gang(1600, TopologyMode::kRequired, 16);
  const std::string why = NeverFitsReason(s, r);
  EXPECT_NE(why.find("needs 100 segments of 16 nodes"), std::string::npos) << why;
  EXPECT_NE(why.find("hold 5: can never fit"), std::string::npos) << why;
  EXPECT_EQ(NeverFitsReason(s, Gang(90, TopologyMode::kRequired, 9)), "")
      << "two segments of 9 per domain of 18";
  EXPECT_NE(NeverFitsReason(s, Gang(20)), "") << "a 20-node segment in domains of 18";
  EXPECT_EQ(NeverFitsReason(s, Gang(90, TopologyMode::kPreferred)), "");
  EXPECT_NE(NeverFitsReason(s, Gang(91, TopologyMode::kUnconstrained)), "");
  EXPECT_NE(NeverFitsReason(s, Gang(2, TopologyMode::kRequired, 0, 8)), "") << "no node has 8 GPUs";
  s.nodes[0].ready = false;
  s.nodes[1].gpu_used = 4;
  EXPECT_EQ(NeverFitsReason(s, Gang(18)), "") << "use and health are not capacity";
}

TEST(RecoveryTest, ReplacesInSameDomainSparesFirst) {
  Snapshot s = ParseTopology("a: . . . . 2 .\nb: . . . .");
  auto p = MakePolicy("nvl72", {2});
  GangPlacement current{{0, 1, 2}};
  s.nodes[1].ready = false;
  const int failed[] = {1};
  RecoveryDecision r = p->SelectReplacements(s, Gang(3), current, failed);
  ASSERT_TRUE(r.recovered) << r.reason;
  EXPECT_EQ(r.replacement[0], 5) << "the last empty node of the domain is the first spare";
}

TEST(RecoveryTest, TwoFailuresGetDistinctNodes) {
  Snapshot s = ParseTopology("a: . . . . . .");
  auto p = MakePolicy("nvl72", {2});
  GangPlacement current{{0, 1, 2, 3}};
  s.nodes[0].ready = false;
  s.nodes[2].ready = false;
  const int failed[] = {0, 2};
  RecoveryDecision r = p->SelectReplacements(s, Gang(4), current, failed);
  ASSERT_TRUE(r.recovered) << r.reason;
  EXPECT_EQ(std::set<NodeId>(r.replacement.begin(), r.replacement.end()), (std::set<NodeId>{4, 5}));
}

TEST(RecoveryTest, NoHealthyNodeInDomainIsAReason) {
  Snapshot s = ParseTopology("a: . . X\nb: . . . .");
  auto p = MakePolicy("nvl72", {2});
  GangPlacement current{{0, 1}};
  s.nodes[1].ready = false;
  const int failed[] = {1};
  RecoveryDecision r = p->SelectReplacements(s, Gang(2), current, failed);
  EXPECT_FALSE(r.recovered);
  EXPECT_EQ(r.replacement[0], kNoNode);
  EXPECT_NE(r.reason.find("left in a"), std::string::npos) << r.reason;
}

TEST(RecoveryTest, PartlyUsedNodeWhenNoSpare) {
  Snapshot s = ParseTopology("a: . . 2 3");
  auto p = MakePolicy("nvl72", {2});
  GangPlacement current{{0, 1}};
  s.nodes[0].ready = false;
  const int failed[] = {0};
  RecoveryDecision r =
      p->SelectReplacements(s, Gang(2, TopologyMode::kRequired, 0, 1), current, failed);
  ASSERT_TRUE(r.recovered) << r.reason;
  EXPECT_EQ(r.replacement[0], 3) << "tightest fit: 1 free GPU on n3";
}

TEST(SpareLendingTest, PreemptibleGangBorrowsTheReserve) {
  Snapshot s = ParseTopology(std::string("a: ") + kEighteen);
  auto p = MakePolicy("nvl72", {2, SpareReserve::kHard});
  GangRequest r = Gang(17);
  EXPECT_FALSE(p->PlaceGang(s, r).placed);
  r.preemptible = true;
  GangDecision d = p->PlaceGang(s, r);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_NE(d.reason.find("borrows"), std::string::npos);
}

TEST(SpareLendingTest, ReclaimableNodesCountTowardTheReserve) {
  auto p = MakePolicy("nvl72", {2, SpareReserve::kHard});
  // Four empty nodes and two nodes lent to preemptible work: nothing more needs holding back.
  EXPECT_TRUE(p->PlaceGang(ParseTopology("a: . . . . P P"), Gang(4)).placed);
  EXPECT_FALSE(p->PlaceGang(ParseTopology("a: . . . . 4 4"), Gang(4)).placed);
  EXPECT_EQ(HeldBackSpares(ParseTopology("a: . . . . P 4"), 0, 2), 1);
  const auto spare = DesignatedSpares(ParseTopology("a: . . . . P 4"), 2);
  EXPECT_EQ(std::count(spare.begin(), spare.end(), true), 1);
  EXPECT_TRUE(spare[3]);
}

TEST(RecoveryTest, EvictsLentNodeWhenNoSpareIsFree) {
  Snapshot s = ParseTopology("a: 4 4 P 2");
  auto p = MakePolicy("nvl72", {2});
  GangPlacement current{{0, 1}};
  s.nodes[0].ready = false;
  const int failed[] = {0};
  RecoveryDecision r = p->SelectReplacements(s, Gang(2), current, failed);
  ASSERT_TRUE(r.recovered) << r.reason;
  EXPECT_EQ(r.replacement[0], 2);
  EXPECT_TRUE(r.evict[0]);
  // A free node needs no eviction and is preferred.
  Snapshot free_node = ParseTopology("a: 4 4 P .");
  free_node.nodes[0].ready = false;
  RecoveryDecision r2 = p->SelectReplacements(free_node, Gang(2), current, failed);
  EXPECT_EQ(r2.replacement[0], 3);
  EXPECT_FALSE(r2.evict[0]);
}

TEST(PodScoreTest, Nvl72PacksIntoFragmentedDomainAndAvoidsSpares) {
  Snapshot s = ParseTopology("a: . . . . . .\nb: 3 . . . . .\nc: 2 2 . . . R");
  auto p = MakePolicy("nvl72", {2});
  EXPECT_EQ(p->PlacePod(s, 1), 6) << "b-n0 has exactly one free GPU";
  EXPECT_EQ(p->PlacePod(s, 2), 12) << "c-n0: partly used, tightest, most fragmented domain";
  Snapshot full = ParseTopology("a: 4 4 . .");
  EXPECT_EQ(p->PlacePod(full, 4), 2) << "a spare is the last resort, not refused";
  Snapshot reserved = ParseTopology("a: R 4");
  EXPECT_EQ(p->PlacePod(reserved, 1), kNoNode);
}

TEST(PodScoreTest, Nvl72UsesEmptyNodeOfTheMostUsedDomain) {
  Snapshot s = ParseTopology("a: . . . . . .\nb: 4 4 . . . .");
  auto p = MakePolicy("nvl72", {1});
  const NodeId id = p->PlacePod(s, 4);
  ASSERT_NE(id, kNoNode);
  EXPECT_EQ(s.nodes[static_cast<size_t>(id)].domain, 1);
}

// Untouched domains alike: every empty node of the first outscores every one of the others, so
// pods scored on one view (a burst) open one domain, not several. Spares still score lowest.
TEST(PodScoreTest, Nvl72PrefersTheFirstOfUntouchedDomains) {
  Snapshot s = ParseTopology("a: 4 4 4 4 . .\nb: . . . . . .\nc: . . . . . .");
  auto p = MakePolicy("nvl72", {2});
  std::vector<NodeId> nodes;
  nodes.reserve(s.nodes.size());
  for (NodeId id = 0; id < static_cast<NodeId>(s.nodes.size()); ++id) nodes.push_back(id);
  std::vector<int64_t> scores(nodes.size());
  p->ScorePods(s, 1, nodes, scores);
  // a's two empty nodes are its spares; b and c keep two designated spares each (score 0).
  int64_t worst_b = std::numeric_limits<int64_t>::max(), best_c = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = s.nodes[i];
    if (scores[i] <= 0) continue;  // full or spare
    if (n.domain == 1) worst_b = std::min(worst_b, scores[i]);
    if (n.domain == 2) best_c = std::max(best_c, scores[i]);
  }
  ASSERT_NE(worst_b, std::numeric_limits<int64_t>::max());
  ASSERT_NE(best_c, -1);
  EXPECT_GT(worst_b, best_c);
  EXPECT_EQ(s.nodes[static_cast<size_t>(p->PlacePod(s, 1))].domain, 1);
  // Once b is touched, an untouched domain earlier in the order does not win over it.
  Snapshot later = ParseTopology("a: . . . . . .\nb: 1 . . . . .");
  const NodeId id = p->PlacePod(later, 4);
  ASSERT_NE(id, kNoNode);
  EXPECT_EQ(later.nodes[static_cast<size_t>(id)].domain, 1);
}

TEST(PodScoreTest, SpreadPicksTheEmptiestFirstFitTheFirst) {
  Snapshot s = ParseTopology("a: 2 3 . 1");
  EXPECT_EQ(MakePolicy("spread")->PlacePod(s, 1), 2);
  EXPECT_EQ(MakePolicy("first-fit")->PlacePod(s, 1), 0);
  EXPECT_EQ(MakePolicy("domain-best-fit")->PlacePod(s, 1), 1);
}

TEST(PodScoreTest, InfeasibleNodesScoreNegative) {
  Snapshot s = ParseTopology("a: 4 X C . 3");
  for (const std::string& name : PolicyNames()) {
    auto p = MakePolicy(name, {0});
    std::vector<NodeId> nodes{0, 1, 2, 3, 4};
    std::vector<int64_t> scores(nodes.size());
    p->ScorePods(s, 2, nodes, scores);
    EXPECT_LT(scores[0], 0) << name;
    EXPECT_LT(scores[1], 0) << name;
    EXPECT_LT(scores[2], 0) << name;
    EXPECT_GE(scores[3], 0) << name;
    EXPECT_LT(scores[4], 0) << name;
  }
}

TEST(NormalizeTest, MapsToOneToTenAndInfeasibleToZero) {
  const int64_t raw[] = {-1, 100, 550, 1000};
  EXPECT_EQ(NormalizeScores(raw), (std::vector<int>{0, 1, 5, 10}));
  const int64_t same[] = {7, 7};
  EXPECT_EQ(NormalizeScores(same), (std::vector<int>{10, 10}));
  const int64_t none[] = {-1, -5};
  EXPECT_EQ(NormalizeScores(none), (std::vector<int>{0, 0}));
}

TEST(PolicyFactoryTest, KnowsEveryNameAndRejectsOthers) {
  for (const std::string& name : PolicyNames()) {
    auto p = MakePolicy(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->Name(), name);
  }
  EXPECT_EQ(MakePolicy("best"), nullptr);
  EXPECT_TRUE(MakePolicy("nvl72")->RecoversInPlace());
  EXPECT_FALSE(MakePolicy("domain-best-fit")->RecoversInPlace());
  EXPECT_EQ(MakePolicy("nvl72", {3})->SparesPerDomain(), 3);
  EXPECT_EQ(MakePolicy("domain-best-fit", {3})->SparesPerDomain(), 0);
}

TEST(ValidateTest, NamesTheField) {
  GangRequest r = Gang(4);
  EXPECT_EQ(ValidateGangRequest(r), "");
  r.segment_size = 5;
  EXPECT_NE(ValidateGangRequest(r).find("segmentSize"), std::string::npos);
  r = Gang(4);
  r.gpus_per_replica = -1;
  EXPECT_NE(ValidateGangRequest(r).find("gpusPerReplica"), std::string::npos);
}

}  // namespace
}  // namespace nvl72::placement
