#include "sim/metrics.h"

#include <gtest/gtest.h>

namespace nvl72::sim {
namespace {

TEST(WaitingClock, IntegratesOnlyWaitingIntervals) {
  WaitingClock w;
  w.Advance(10, false);  // [10, 20) idle
  w.Advance(20, true);   // [20, 50) waiting
  w.Advance(50, false);  // [50, 60) idle
  w.Advance(60, true);   // [60, 70) waiting
  w.Advance(70, true);
  EXPECT_DOUBLE_EQ(w.At(0), 0);
  EXPECT_DOUBLE_EQ(w.At(15), 0);
  EXPECT_DOUBLE_EQ(w.At(20), 0);
  EXPECT_DOUBLE_EQ(w.At(35), 15);
  EXPECT_DOUBLE_EQ(w.At(50), 30);
  EXPECT_DOUBLE_EQ(w.At(55), 30);
  EXPECT_DOUBLE_EQ(w.At(65), 35);
  EXPECT_DOUBLE_EQ(w.At(70), 40);
  EXPECT_DOUBLE_EQ(w.Total(), 40);
}

TEST(WaitingClock, SameTimeReplacesTheFlagOfWhatFollows) {
  WaitingClock w;
  w.Advance(0, false);
  w.Advance(10, false);
  w.Advance(10, true);  // a pass at t=10 left jobs waiting
  w.Advance(30, false);
  EXPECT_DOUBLE_EQ(w.At(30), 20);
}

TEST(Percentile, NearestRank) {
  EXPECT_DOUBLE_EQ(Percentile({}, 99), 0);
  EXPECT_DOUBLE_EQ(Percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(Percentile({3, 1, 2}, 50), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) {
    hundred.push_back(i);
  }
  EXPECT_DOUBLE_EQ(Percentile(hundred, 99), 99);
  hundred.push_back(1000);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 99), 100);  // rank ceil(0.99 * 101) = 100
}

}  // namespace
}  // namespace nvl72::sim
