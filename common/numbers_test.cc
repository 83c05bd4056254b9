#include "common/numbers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace nvl72 {
namespace {

TEST(NumbersTest, WholeDoubleToInt64) {
  int64_t v = -7;
  EXPECT_TRUE(WholeDoubleToInt64(4.0, &v));
  EXPECT_EQ(v, 4);
  EXPECT_TRUE(WholeDoubleToInt64(-0.0, &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(WholeDoubleToInt64(-9223372036854775808.0, &v));
  EXPECT_EQ(v, std::numeric_limits<int64_t>::min());
  v = 1;
  EXPECT_FALSE(WholeDoubleToInt64(9223372036854775808.0, &v)) << "2^63 is one past the range";
  EXPECT_FALSE(WholeDoubleToInt64(1.44e95, &v));
  EXPECT_FALSE(WholeDoubleToInt64(-1e19, &v));
  EXPECT_FALSE(WholeDoubleToInt64(2.5, &v));
  EXPECT_FALSE(WholeDoubleToInt64(std::numeric_limits<double>::infinity(), &v));
  EXPECT_FALSE(WholeDoubleToInt64(std::nan(""), &v));
  EXPECT_EQ(v, 1) << "untouched on failure";
}

}  // namespace
}  // namespace nvl72
