#include "placement/fragmentation.h"

#include <gtest/gtest.h>

#include "placement/topology_for_test.h"

namespace nvl72::placement {
namespace {

TEST(FragmentationTest, CountsPerDomain) {
  Snapshot s = ParseTopology("a: . . 2 4 X\nb: . . . .");
  ClusterStats st = ComputeStats(s, 1, {});
  const DomainStats& a = st.domains[0];
  EXPECT_EQ(a.nodes, 5);
  EXPECT_EQ(a.healthy_nodes, 4);
  EXPECT_EQ(a.gpus_total, 20);
  EXPECT_EQ(a.gpus_healthy, 16);
  EXPECT_EQ(a.gpus_used, 6);
  EXPECT_EQ(a.gpus_free, 10);
  EXPECT_EQ(a.empty_nodes, 2);
  EXPECT_EQ(a.spare_nodes, 1);
  EXPECT_EQ(a.gpus_spare, 4);
  EXPECT_EQ(a.largest_gang_nodes, 1);
  EXPECT_EQ(st.domains[1].largest_gang_nodes, 3);
  EXPECT_EQ(st.largest_gang_nodes, 3);
  EXPECT_DOUBLE_EQ(st.fragmentation, 1.0 - 3.0 / 4.0);
  EXPECT_EQ(st.stranded_gpus, 0) << "no demand, nothing stranded";
}

TEST(FragmentationTest, StrandedDependsOnTheMix) {
  // a: one empty node beyond the spare and a node with 2 free GPUs; b: three empty nodes.
  Snapshot s = ParseTopology("a: . 2 .\nb: . . .");
  const JobShape gangs_of_two[] = {{2, 4}};
  ClusterStats st = ComputeStats(s, 1, gangs_of_two);
  // a: 2 free GPUs on a-n1 and the empty a-n0 (a block of 1 < 2) are stranded; a-n2 is the spare.
  EXPECT_EQ(st.domains[0].stranded_gpus, 2 + 4);
  EXPECT_EQ(st.domains[1].stranded_gpus, 0);
  const JobShape small_pods[] = {{1, 2}};
  EXPECT_EQ(ComputeStats(s, 1, small_pods).stranded_gpus, 0);
  const JobShape big_pods[] = {{1, 4}};
  EXPECT_EQ(ComputeStats(s, 1, big_pods).stranded_gpus, 2);
}

TEST(FragmentationTest, NoFreeBlockMeansNoFragmentation) {
  Snapshot s = ParseTopology("a: 4 4\nb: 4 X");
  ClusterStats st = ComputeStats(s, 0, {});
  EXPECT_EQ(st.largest_gang_nodes, 0);
  EXPECT_DOUBLE_EQ(st.fragmentation, 0.0);
}

}  // namespace
}  // namespace nvl72::placement
