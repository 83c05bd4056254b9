#include "cli/views.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cli/test_objects.h"
#include "placement/topology_for_test.h"

namespace nvl72::cli {
namespace {

using testing::Fixture;

// The explain expectations below were written for the hard reserve; the soft one has its own test.
ClusterView FixtureView(int spares = 2,
                        placement::SpareReserve reserve = placement::SpareReserve::kHard) {
  Fixture f;
  ViewOptions o;
  o.spares_per_domain = spares;
  o.spare_reserve = reserve;
  return BuildView(f.nodes, f.pods, f.jobs, o);
}

TEST(NodeGlyphTest, OneCharacterPerNodeState) {
  placement::Snapshot s = placement::ParseTopology("d: . 2 R X C T .");
  std::string row;
  for (const auto& n : s.nodes) row += NodeGlyph(n, false);
  EXPECT_EQ(row, ".+#XXX.");
  EXPECT_EQ(NodeGlyph(s.nodes[0], true), 's');
  s.nodes[0].degraded = true;  // lost GPUs: never shown as a spare
  EXPECT_EQ(NodeGlyph(s.nodes[0], true), 'd');
  // A failed node is shown failed even if a gang or the spare reserve would claim it.
  EXPECT_EQ(NodeGlyph(s.nodes[3], true), 'X');
}

TEST(ShortDomainNamesTest, DropsTheSharedClusterUuid) {
  placement::Snapshot s;
  s.AddDomain("6f1c-uuid.0", 1, 4);
  s.AddDomain("6f1c-uuid.1", 1, 4);
  std::string prefix;
  EXPECT_EQ(ShortDomainNames(s, &prefix), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(prefix, "6f1c-uuid.");
}

TEST(ShortDomainNamesTest, KeepsNamesWithoutACommonDottedPrefix) {
  placement::Snapshot s;
  s.AddDomain("rack-a", 1, 4);
  s.AddDomain("rack-b", 1, 4);
  std::string prefix = "x";
  EXPECT_EQ(ShortDomainNames(s, &prefix), (std::vector<std::string>{"rack-a", "rack-b"}));
  EXPECT_EQ(prefix, "");
}

TEST(FormatRangesTest, CollapsesRuns) {
  EXPECT_EQ(FormatRanges({}), "");
  EXPECT_EQ(FormatRanges({0}), "0");
  EXPECT_EQ(FormatRanges({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
}

TEST(JobStateTest, StatusStateThenConditions) {
  Fixture f;
  EXPECT_EQ(JobState(f.jobs[0]), "Running");
  EXPECT_EQ(JobState(f.jobs[2]), "Pending");
  Json j = f.jobs[0];
  j["status"].erase("state");
  EXPECT_EQ(JobState(j), "Admitted");
  j["status"]["conditions"][0]["status"] = "False";
  EXPECT_EQ(JobState(j), "Waiting");
  j["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_EQ(JobState(j), "Terminating");
}

TEST(RenderRacksTest, RackMap) {
  EXPECT_EQ(RenderRacks(FixtureView(), "default"),
            "NVLink domains c0ffee.*\n"
            "DOMAIN  NODES   HEALTHY  USED  SPARE  FAILED  FREE GPUS  LARGEST GANG  JOBS\n"
            "0       ###+ss  6/6      4     2      0       10/24      0 nodes       train\n"
            "1       ...ssX  5/6      0     2      1       20/24      3 nodes       -\n"
            "\n"
            "2 domains, 11/12 nodes healthy, 30/48 GPUs free, largest gang that fits: 3 nodes, "
            "fragmentation 0.00, 1 job holding GPUs\n"
            "# gang rank  + used by other pods  . free  s spare (2 held back per domain)  "
            "d lost GPUs  X failed / cordoned / tainted\n");
}

// A node that lost GPUs (the device plugin dropped 2 of 4 from allocatable) is marked 'd': it is
// neither free for a gang nor a spare, although it still takes pods (found trying the map by hand:
// it showed as '.', free).
TEST(RenderRacksTest, ANodeThatLostGpusIsMarkedAndIsNoSpare) {
  Fixture f;
  for (auto& n : f.nodes) {
    if (n["metadata"]["name"] != "r1-n4") continue;
    n["status"]["allocatable"]["nvidia.com/gpu"] = "2";
    n["status"]["capacity"]["nvidia.com/gpu"] = "4";
  }
  const std::string out = RenderRacks(BuildView(f.nodes, f.pods, f.jobs, {}), "default");
  // The spares move to the next empty nodes, r1-n2 and r1-n3.
  EXPECT_NE(out.find("1       ..ssdX  5/6      0     2"), std::string::npos) << out;
}

TEST(RenderRacksTest, JobsOfOtherNamespacesAreQualifiedAndSparesFollowTheFlag) {
  std::string out = RenderRacks(FixtureView(/*spares=*/0), "team");
  EXPECT_NE(
      out.find("###+..  6/6      4     0      0       10/24      2 nodes       default/train"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(".....X"), std::string::npos) << out;
}

TEST(RenderRacksTest, NoGpuNodes) {
  ClusterView v = BuildView({}, {}, {}, {});
  EXPECT_NE(RenderRacks(v, "default").find("No GPU nodes found"), std::string::npos);
}

TEST(RenderJobsTest, NamespaceListWithPlacementRows) {
  std::string out = RenderJobs(FixtureView(), "default");
  EXPECT_EQ(out,
            "NAME   STATE    RANKS  GPUS  TOPOLOGY  DOMAINS  RECOVERIES\n"
            "big    Waiting  4x4    16    Required  -        0\n"
            "train  Running  3x4    12    Required  0        0\n"
            "\n"
            "Placements (# rank of the job, ! rank on a failed node, X other failed node, . other "
            "node):\n"
            "  train  0  [###...]  ranks 0-2\n");
}

TEST(RenderJobsTest, AllNamespacesAndEmpty) {
  std::string out = RenderJobs(FixtureView(), "");
  EXPECT_NE(out.find("NAMESPACE  NAME"), std::string::npos) << out;
  EXPECT_NE(out.find("team       small  Pending"), std::string::npos) << out;
  EXPECT_NE(out.find("  default/train  0  [###...]  ranks 0-2"), std::string::npos) << out;
  EXPECT_EQ(RenderJobs(FixtureView(), "nobody"), "No NVL72Jobs in namespace nobody.\n");
}

TEST(RenderJobsTest, RankOnAFailedNodeIsMarked) {
  Fixture f;
  f.nodes[1] = testing::MakeNode("r0-n1", "c0ffee.0", /*ready=*/false);
  ClusterView v = BuildView(f.nodes, f.pods, f.jobs, {});
  EXPECT_NE(RenderJobs(v, "default").find("[#!#...]"), std::string::npos);
  EXPECT_NE(RenderRacks(v, "default").find("#X#+ss"), std::string::npos);
}

TEST(RenderExplainTest, RunningJob) {
  ClusterView v = FixtureView();
  std::string out = RenderExplain(v, v.jobs[1]);  // sorted: default/big, default/train, team/small
  EXPECT_NE(out.find("NVL72Job default/train: Running\n"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          "3 ranks x 4 GPUs (12 GPUs), topology Required, 1 segment of 3 ranks, recovery InPlace"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("Placement:   1 domain: 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("segment 0  ranks 0-2  domain 0  [###...]"), std::string::npos) << out;
  EXPECT_NE(out.find("1     r0-n1  Ready       train-1  Running"), std::string::npos) << out;
  EXPECT_NE(out.find("Why here:    best fit"), std::string::npos) << out;
  EXPECT_NE(out.find("Admitted  True    Placed"), std::string::npos) << out;
}

TEST(RenderExplainTest, AJobWithComputeDomainsShowsThemAndWhetherTheyAreReady) {
  ClusterView v = FixtureView();
  Json job = v.jobs[1];  // default/train
  EXPECT_EQ(RenderExplain(v, job).find("Fabric:"), std::string::npos) << "none without";
  job["status"]["fabric"] = "ComputeDomain";
  EXPECT_NE(RenderExplain(v, job).find("Fabric:      IMEX ComputeDomain train-seg-0 (not checked "
                                       "yet)\n"),
            std::string::npos)
      << RenderExplain(v, job);
  job["status"]["conditions"].push_back({{"type", "ComputeDomainReady"},
                                         {"status", "False"},
                                         {"reason", "NotReady"},
                                         {"message",
                                          "ComputeDomain train-seg-0 not Ready: 2 of 3 "
                                          "nodes joined"}});
  const std::string out = RenderExplain(v, job);
  EXPECT_NE(out.find("Fabric:      IMEX ComputeDomain train-seg-0: not Ready (NotReady: "
                     "ComputeDomain train-seg-0 not Ready: 2 of 3 nodes joined)\n"),
            std::string::npos)
      << out;
}

// Issue 27 case 10: a Preferred gang whose one segment spans two domains is one segment with a row
// per domain it uses, not two segments of which one is empty.
TEST(RenderExplainTest, APreferredSegmentSpanningTwoDomainsIsOneSegmentWithARowPerDomain) {
  Fixture f;
  Json wide = testing::MakeJob("default", "wide", 4);
  wide["spec"]["topology"]["mode"] = "Preferred";
  testing::Admit(wide, {"c0ffee.0", "c0ffee.1"}, {"r0-n4", "r0-n5", "r1-n0", "r1-n1"});
  for (int r = 0; r < 4; ++r) {
    f.pods.push_back(testing::MakeRankPod(
        "default", "wide", r,
        r < 2 ? "r0-n" + std::to_string(r + 4) : "r1-n" + std::to_string(r - 2)));
  }
  f.jobs.push_back(wide);
  ClusterView v = BuildView(f.nodes, f.pods, f.jobs, {});
  const auto it = std::find_if(v.jobs.begin(), v.jobs.end(),
                               [](const Json& j) { return j["metadata"]["name"] == "wide"; });
  ASSERT_NE(it, v.jobs.end());
  const std::string out = RenderExplain(v, *it);
  EXPECT_NE(out.find("segment 0  ranks 0-1  domain 0"), std::string::npos) << out;
  EXPECT_NE(out.find("segment 0  ranks 2-3  domain 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("segment 1"), std::string::npos) << out;
}

TEST(RenderExplainTest, ARefusedRankShowsTheSchedulersMessage) {
  Fixture f;
  for (auto& p : f.pods) {
    if (p["metadata"]["name"] != "train-1") continue;
    p["spec"].erase("nodeName");
    p["status"] = {
        {"phase", "Pending"},
        {"conditions",
         {{{"type", "PodScheduled"},
           {"status", "False"},
           {"reason", "Unschedulable"},
           {"message",
            "0/12 nodes are available: 1 node(s) didn't match pod anti-affinity rules."}}}}};
  }
  ClusterView v = BuildView(f.nodes, f.pods, f.jobs, {});
  std::string out = RenderExplain(v, v.jobs[1]);
  EXPECT_NE(out.find("train-1  Pending (unschedulable)"), std::string::npos) << out;
  EXPECT_NE(out.find("Refused:     rank 1 on r0-n1: 0/12 nodes are available: 1 node(s) didn't "
                     "match pod anti-affinity rules.\n"),
            std::string::npos)
      << out;
}

TEST(RenderExplainTest, WaitingJobSaysWhyAndWhatTheCoreDecidesNow) {
  ClusterView v = FixtureView();
  std::string out = RenderExplain(v, v.jobs[0]);
  EXPECT_NE(out.find("NVL72Job default/big: Waiting"), std::string::npos) << out;
  EXPECT_NE(out.find("Placement:   none"), std::string::npos) << out;
  EXPECT_NE(out.find("Why it waits: needs 4 nodes"), std::string::npos) << out;
  EXPECT_EQ(out.find("it fits"), std::string::npos) << out;
  // The free blocks count what the waiting reason counts (issue 27 case 12): 3 in domain 1.
  EXPECT_NE(out.find("largest free block is 3 nodes"), std::string::npos) << out;
  EXPECT_NE(out.find("nodes that can take a rank now: 1: 3 nodes, 0: 0 nodes (2 spare nodes per "
                     "domain held back)"),
            std::string::npos)
      << out;
}

// Issue 27 case 12 where whole empty nodes and the policy's count differ: ranks of 2 GPUs also fit
// the half-used node r0-n3, so domain 0 offers 1 node, as the waiting reason counts it.
TEST(RenderExplainTest, FreeBlocksOfSmallRanksCountHalfUsedNodesAsTheReasonDoes) {
  Fixture f;
  Json half = testing::MakeJob("default", "half", 4);
  half["spec"]["gpusPerReplica"] = 2;
  f.jobs.push_back(half);
  ViewOptions o;
  o.spares_per_domain = 2;
  o.spare_reserve = placement::SpareReserve::kHard;
  ClusterView v = BuildView(f.nodes, f.pods, f.jobs, o);
  const auto it = std::find_if(v.jobs.begin(), v.jobs.end(),
                               [](const Json& j) { return j["metadata"]["name"] == "half"; });
  ASSERT_NE(it, v.jobs.end());
  const std::string out = RenderExplain(v, *it);
  EXPECT_NE(out.find("needs 4 nodes with 2 free GPUs"), std::string::npos) << out;
  EXPECT_NE(out.find("nodes that can take a rank now: 1: 3 nodes, 0: 1 node"), std::string::npos)
      << out;
}

TEST(RenderExplainTest, JobTheOperatorHasNotSeenFitsNow) {
  ClusterView v = FixtureView();
  std::string out = RenderExplain(v, v.jobs[2]);
  EXPECT_NE(out.find("NVL72Job team/small: Pending"), std::string::npos) << out;
  EXPECT_NE(out.find("is nvl72-operator running?"), std::string::npos) << out;
  EXPECT_NE(out.find("it fits: the nvl72 policy would place it in 1"), std::string::npos) << out;
}

// A job that fits but waits for ComputeDomains the cluster does not serve: explain must not claim
// the operator admits it on its next pass.
TEST(RenderExplainTest, AJobWaitingForComputeDomainsIsNotSaidToBeAdmittedNext) {
  Fixture f;
  Json& small = f.jobs[2];  // team/small: fits now
  small["spec"]["fabric"] = "ComputeDomain";
  small["status"]["conditions"] = {
      {{"type", "Admitted"},
       {"status", "False"},
       {"reason", "Waiting"},
       {"message",
        "spec.fabric is ComputeDomain, but the API server serves no "
        "computedomains.resource.nvidia.com (install NVIDIA's DRA driver); set spec.fabric None "
        "to run without multi-node NVLink"}}};
  ClusterView v = BuildView(f.nodes, f.pods, f.jobs, {});
  const std::string out = RenderExplain(v, v.jobs[2]);
  EXPECT_NE(out.find(", not preemptible, fabric ComputeDomain\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("it fits"), std::string::npos) << out;
  EXPECT_NE(out.find("Now:         the nodes are there (0), but it waits for ComputeDomains: see "
                     "above\n"),
            std::string::npos)
      << out;
}

TEST(RenderExplainTest, SoftReserveIsWhatTheOperatorWouldDo) {
  // Domain 0's only free nodes are its 2 spares: the 2-rank job fills them exactly under the soft
  // reserve (the operator's default) and goes to domain 1 under the hard one.
  ClusterView v = FixtureView(2, placement::SpareReserve::kSoft);
  std::string out = RenderExplain(v, v.jobs[2]);
  EXPECT_NE(out.find("it fits: the nvl72 policy would place it in 0"), std::string::npos) << out;
}

TEST(RenderExplainTest, InvalidSpec) {
  Fixture f;
  Json bad = testing::MakeJob("default", "bad", 0);
  ClusterView v = BuildView(f.nodes, f.pods, {bad}, {});
  EXPECT_NE(RenderExplain(v, v.jobs[0]).find("Spec:        invalid: spec.replicas"),
            std::string::npos)
      << RenderExplain(v, v.jobs[0]);
}

}  // namespace
}  // namespace nvl72::cli
