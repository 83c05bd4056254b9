#include "sim/synthetic.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "sim/failure_model.h"
#include "sim/runner.h"

namespace nvl72::sim {
namespace {

TEST(LlmMixRecipe, SharesSumToOneAndRackSizedGangsCarryHalf) {
  const std::vector<MixClass> recipe = LlmMixRecipe(4);
  double total = 0, rack_sized = 0;
  for (const MixClass& k : recipe) {
    total += k.gpu_hour_share;
    if (k.gpus == 64 || k.gpus == 72) rack_sized += k.gpu_hour_share;
    // Segments of at most a rack (18 nodes of 4 GPUs); 0 = the engine's rule for small jobs.
    EXPECT_LE(k.segment_nodes, 18) << k.name;
    if (k.gpus > 18 * 4) {
      EXPECT_EQ(k.segment_nodes, 16) << k.name;
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(rack_sized, 0.5, 1e-12);
}

// Over a long horizon the mix offers load x cluster GPUs, each class its share (law of large
// numbers: the tolerances are several standard deviations wide, the seed is fixed).
TEST(MakeMixTrace, OffersTheLoadInTheRecipeShares) {
  MixOptions o;
  o.days = 400;
  const std::vector<MixClass> recipe = LlmMixRecipe(4);
  const Trace t = MakeMixTrace(recipe, o);
  std::map<int, double> gpu_hours;  // by job size
  double total = 0;
  for (const TraceJob& j : t.jobs) {
    gpu_hours[j.gpus] += j.gpus * j.duration_s / 3600;
    total += j.gpus * j.duration_s / 3600;
  }
  const double target = o.load * o.cluster_gpus * o.days * 24;
  EXPECT_NEAR(total / target, 1.0, 0.08);
  for (const MixClass& k : recipe) {
    EXPECT_NEAR(gpu_hours[k.gpus] / total, k.gpu_hour_share, 0.35 * k.gpu_hour_share) << k.name;
  }
}

TEST(MakeMixTrace, SortedDeterministicAndSeeded) {
  MixOptions o;
  o.days = 10;
  const Trace a = MakeMixTrace(LlmMixRecipe(4), o);
  const Trace b = MakeMixTrace(LlmMixRecipe(4), o);
  ASSERT_FALSE(a.jobs.empty());
  EXPECT_EQ(a.file, "synthetic:llm");
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].id, b.jobs[i].id);
    EXPECT_EQ(a.jobs[i].submission_s, b.jobs[i].submission_s);
    EXPECT_EQ(a.jobs[i].line, static_cast<int>(i) + 2);
    if (i > 0) {
      EXPECT_LE(a.jobs[i - 1].submission_s, a.jobs[i].submission_s);
    }
    EXPECT_LT(a.jobs[i].submission_s, o.days * 86400);
  }
  o.seed = 2;
  const Trace c = MakeMixTrace(LlmMixRecipe(4), o);
  EXPECT_TRUE(c.jobs.size() != a.jobs.size() || c.jobs[0].submission_s != a.jobs[0].submission_s);
}

// A cluster too small for the mix's largest jobs is bad input that says how many racks it needs,
// whether or not such a job happens to arrive in the window.
TEST(RunSimulation, MixOnTooFewRacksNamesTheRacksItNeeds) {
  SimConfig config;
  config.mix = "llm";
  config.mix_days = 1;
  config.options.cluster.racks = 2;
  StatusOr<RunReport> r = RunSimulation(config);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("256-GPU jobs need at least 4 racks"), std::string::npos)
      << r.status().message();
  config.options.cluster.racks = 4;
  config.policies = {"nvl72"};
  EXPECT_TRUE(RunSimulation(config).ok());
  // Racks of 16 nodes cannot hold the 18-node gangs: said, not left as never-placed jobs.
  config.options.cluster.racks = 8;
  config.options.cluster.nodes_per_rack = 16;
  r = RunSimulation(config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("72-GPU jobs need 18 nodes in one rack"), std::string::npos)
      << r.status().message();
}

// Class c's arrivals must not replay node c's outage draws (same seed, same stream order).
TEST(MakeMixTrace, DrawsApartFromTheNodeFailureStreams) {
  MixOptions o;
  o.days = 30;
  const Trace t = MakeMixTrace(LlmMixRecipe(4), o);
  DeterministicRandom node0(NodeStreamSeed(o.seed, 0));
  const double node0_first_uptime = node0.Exponential(1.0);
  // The first job of class 0 (rack16) arrives after Exponential(1 / rate) of the mix stream; with
  // a shared stream it would be the same draw scaled, i.e. the same uniform.
  DeterministicRandom class0(NodeStreamSeed(MixSeed(o.seed), 0));
  EXPECT_NE(class0.Exponential(1.0), node0_first_uptime);
  ASSERT_FALSE(t.jobs.empty());
}

}  // namespace
}  // namespace nvl72::sim
