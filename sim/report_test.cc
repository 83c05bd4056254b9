#include "sim/report.h"

#include <gtest/gtest.h>

namespace nvl72::sim {
namespace {

RunReport TwoPolicies() {
  RunReport r;
  r.config.trace_path = "t.csv";
  r.jobs = 3;
  r.policies = {"nvl72", "spread"};
  PolicyMetrics a;
  a.policy = "nvl72";
  a.usable_capacity = 0.9;
  a.gang_starts = 2;
  a.single_domain_ratio = 1;
  PolicyMetrics b;
  b.policy = "spread";
  b.usable_capacity = 0.6;
  r.results = {a, b};
  return r;
}

TEST(ReportToJson, HasTheContractedShape) {
  nlohmann::json j = ReportToJson(TwoPolicies());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 2u);
  ASSERT_TRUE(j.contains("config"));
  ASSERT_TRUE(j["policies"].contains("nvl72"));
  for (const char* key : {"usable_capacity", "wait_mean_s", "wait_p99_s", "single_domain_ratio",
                          "in_place_recovery_ratio", "stranded_gpu_ratio", "makespan_s"}) {
    EXPECT_TRUE(j["policies"]["spread"][key].is_number()) << key;
  }
  EXPECT_DOUBLE_EQ(j["policies"]["nvl72"]["usable_capacity"].get<double>(), 0.9);
  EXPECT_EQ(j["config"]["racks"], 8);
  EXPECT_EQ(j["config"]["trace"], "t.csv");
}

TEST(FormatTable, ShowsEachPolicyAndTheRatioToSpread) {
  const std::string table = FormatTable(TwoPolicies());
  EXPECT_NE(table.find("nvl72"), std::string::npos);
  EXPECT_NE(table.find("1.50x"), std::string::npos);  // 0.9 / 0.6
  EXPECT_NE(table.find("1.00x"), std::string::npos);
  EXPECT_NE(table.find("n/a"), std::string::npos);  // no gang failures
}

}  // namespace
}  // namespace nvl72::sim
