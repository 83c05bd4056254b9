#include "scheduler-plugin/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace nvl72::extender {
namespace {

bool Contains(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(ExtenderMetricsTest, VerbSeriesExistFromTheStartWithZero) {
  Metrics m;
  const std::string t = "\n" + m.Serialize();
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    EXPECT_TRUE(Contains(
        t, std::string("nvl72_extender_requests_total{code=\"200\",verb=\"") + verb + "\"} 0"))
        << verb;
    EXPECT_TRUE(Contains(
        t, std::string("nvl72_extender_request_duration_seconds_count{verb=\"") + verb + "\"} 0"));
  }
  EXPECT_TRUE(Contains(
      t, "nvl72_extender_api_request_duration_seconds_count{code=\"201\",verb=\"create\"} 0"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_bind_refusals_total 0"));
}

TEST(ExtenderMetricsTest, InformerCountersMoveByTheIncrease) {
  Metrics m;
  std::string t = "\n" + m.Serialize();
  for (const char* r : {"nodes", "pods", "nvl72jobs"}) {  // from the start, at 0
    EXPECT_TRUE(
        Contains(t, std::string("nvl72_extender_watch_restarts_total{resource=\"") + r + "\"} 0"))
        << r;
    EXPECT_TRUE(Contains(t, std::string("nvl72_extender_relists_total{resource=\"") + r + "\"} 0"))
        << r;
  }
  kube::InformerStats s;
  s.watch_restarts = 3;
  s.relists = 1;
  m.SetInformer("pods", s, 120);
  s.watch_restarts = 5;  // cumulative: +2
  s.watch_errors = 4;
  m.SetInformer("pods", s, 118);
  t = "\n" + m.Serialize();
  EXPECT_TRUE(Contains(t, "nvl72_extender_watch_restarts_total{resource=\"pods\"} 5"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_relists_total{resource=\"pods\"} 1"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_watch_errors_total{resource=\"pods\"} 4"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_cache_objects{resource=\"pods\"} 118"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_watch_restarts_total{resource=\"nodes\"} 0"));
  // A new informer starts from zero again: its whole count is new.
  kube::InformerStats fresh;
  fresh.watch_restarts = 1;
  m.SetInformer("pods", fresh, 3);
  EXPECT_TRUE(
      Contains("\n" + m.Serialize(), "nvl72_extender_watch_restarts_total{resource=\"pods\"} 6"));
}

TEST(ExtenderMetricsTest, RequestsAndApiCallsCountByVerbAndCode) {
  Metrics m;
  m.ObserveRequest("filter", 200, 0.001);
  m.ObserveRequest("filter", 400, 0.001);
  m.ObserveApiRequest("create", 409, 0.01);
  const std::string t = "\n" + m.Serialize();
  EXPECT_TRUE(Contains(t, "nvl72_extender_requests_total{code=\"200\",verb=\"filter\"} 1"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_requests_total{code=\"400\",verb=\"filter\"} 1"));
  EXPECT_TRUE(Contains(t, "nvl72_extender_request_duration_seconds_count{verb=\"filter\"} 2"));
  EXPECT_TRUE(Contains(
      t, "nvl72_extender_api_request_duration_seconds_count{code=\"409\",verb=\"create\"} 1"));
}

}  // namespace
}  // namespace nvl72::extender
