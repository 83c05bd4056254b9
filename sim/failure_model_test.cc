#include "sim/failure_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nvl72::sim {
namespace {

TEST(DeterministicRandom, UniformInUnitInterval) {
  DeterministicRandom rng(7);
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(DeterministicRandom, FirstDrawFollowsTheStandardEngine) {
  // std::mt19937_64's 10000th output for the default seed is fixed by the C++ standard
  // ([rand.predef]): 9981545732273789042. Our Uniform() is its top 53 bits / 2^53.
  std::mt19937_64 reference;
  reference.discard(9999);
  EXPECT_EQ(reference(), 9981545732273789042ULL);
  DeterministicRandom rng(std::mt19937_64::default_seed);
  std::mt19937_64 same;
  EXPECT_DOUBLE_EQ(rng.Uniform(), static_cast<double>(same() >> 11) / 9007199254740992.0);
}

TEST(DeterministicRandom, ExponentialHasTheRequestedMean) {
  DeterministicRandom rng(42);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    sum += rng.Exponential(5.0);
  }
  EXPECT_NEAR(sum / n, 5.0, 0.05);  // standard error 5 / sqrt(n) = 0.011
}

TEST(FailureTimeline, NodeStreamsAreIndependentOfConsumptionOrder) {
  FailureModelOptions options{100, 10, 3};
  FailureTimeline a(4, options), b(4, options);
  // a: node 0 three times, then node 3. b: node 3 first.
  NodeOutage a0 = a.NextOutage(0, 0);
  a.NextOutage(0, 0);
  a.NextOutage(0, 0);
  NodeOutage a3 = a.NextOutage(3, 0);
  NodeOutage b3 = b.NextOutage(3, 0);
  NodeOutage b0 = b.NextOutage(0, 0);
  EXPECT_EQ(a0.fail_s, b0.fail_s);
  EXPECT_EQ(a3.fail_s, b3.fail_s);
  EXPECT_EQ(a3.repaired_s, b3.repaired_s);
  EXPECT_NE(a0.fail_s, a3.fail_s);
}

TEST(FailureTimeline, OutagesAlternateAndMatchTheRates) {
  const double mtbf_h = 50, repair_h = 5;
  FailureTimeline t(1, FailureModelOptions{mtbf_h, repair_h, 11});
  double last_repair = 1000;
  double up = 0, down = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    NodeOutage o = t.NextOutage(0, 1000);
    ASSERT_GT(o.fail_s, last_repair);
    ASSERT_GT(o.repaired_s, o.fail_s);
    up += o.fail_s - last_repair;
    down += o.repaired_s - o.fail_s;
    last_repair = o.repaired_s;
  }
  EXPECT_NEAR(up / n / 3600, mtbf_h, mtbf_h * 0.03);
  EXPECT_NEAR(down / n / 3600, repair_h, repair_h * 0.03);
}

TEST(FailureTimeline, SeedsDifferAndDisabledMeansNever) {
  FailureTimeline a(2, FailureModelOptions{100, 10, 1}), b(2, FailureModelOptions{100, 10, 2});
  EXPECT_NE(a.NextOutage(1, 0).fail_s, b.NextOutage(1, 0).fail_s);
  FailureTimeline off(2, FailureModelOptions{0, 10, 1});
  EXPECT_TRUE(std::isinf(off.NextOutage(0, 0).fail_s));
}

}  // namespace
}  // namespace nvl72::sim
