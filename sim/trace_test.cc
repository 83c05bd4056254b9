#include "sim/trace.h"

#include <gtest/gtest.h>

#include <ostream>

namespace nvl72::sim {
namespace {

constexpr char kHeader[] = "job_id,submission_time,duration,num_gpu\n";

TEST(ParseTrace, SortsByArrivalAndKeepsLines) {
  StatusOr<Trace> t =
      ParseTrace(std::string(kHeader) + "b,20,5,8\na,10,7.5,1\r\nc,10,1,2\n", "x.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].id, "a");
  EXPECT_EQ(t->jobs[0].line, 3);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 7.5);
  EXPECT_EQ(t->jobs[1].id, "c");  // same time as a: file order
  EXPECT_EQ(t->jobs[2].id, "b");
  EXPECT_EQ(t->jobs[2].gpus, 8);
}

TEST(ParseTrace, ColumnsInAnyOrderAndExtraColumns) {
  StatusOr<Trace> t =
      ParseTrace("num_gpu,extra,duration,job_id,submission_time\n4,zz,100,j1,3\n", "x.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].gpus, 4);
  EXPECT_DOUBLE_EQ(t->jobs[0].submission_s, 3);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 100);
}

struct BadCase {
  const char* name;
  std::string text;
  std::string message;  // must appear in the error
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class ParseTraceErrors : public testing::TestWithParam<BadCase> {};

TEST_P(ParseTraceErrors, NamesFileAndLine) {
  StatusOr<Trace> t = ParseTrace(GetParam().text, "jobs.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(GetParam().message), std::string::npos)
      << t.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseTraceErrors,
    testing::Values(
        BadCase{"Empty", "", "jobs.csv:1: empty file"},
        BadCase{"OnlyBlank", "\n\n", "jobs.csv:1: empty file"},
        BadCase{"MissingColumn", "job_id,submission_time,num_gpu\na,1,1\n",
                "jobs.csv:1: header lacks column 'duration'"},
        BadCase{"NoRows", std::string(kHeader), "jobs.csv:1: no job rows"},
        BadCase{"NegativeDuration", std::string(kHeader) + "a,0,10,1\nb,5,-3,1\n",
                "jobs.csv:3: duration: expected a non-negative number"},
        BadCase{"NegativeSubmission", std::string(kHeader) + "a,-1,10,1\n",
                "jobs.csv:2: submission_time"},
        BadCase{"NonNumeric", std::string(kHeader) + "a,abc,10,1\n", "jobs.csv:2: submission_time"},
        BadCase{"NotFinite", std::string(kHeader) + "a,0,inf,1\n", "jobs.csv:2: duration"},
        BadCase{"ZeroGpus", std::string(kHeader) + "a,0,10,0\n", "jobs.csv:2: num_gpu"},
        BadCase{"FractionalGpus", std::string(kHeader) + "a,0,10,1.5\n", "jobs.csv:2: num_gpu"},
        BadCase{"MissingField", std::string(kHeader) + "a,0,10\n",
                "jobs.csv:2: expected 4 fields, found 3"},
        BadCase{"EmptyId", std::string(kHeader) + ",0,10,1\n", "jobs.csv:2: job_id"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(CheckJobsFitCluster, NamesTheJobTooLarge) {
  StatusOr<Trace> t = ParseTrace(std::string(kHeader) + "a,0,10,8\nbig,1,10,17\n", "jobs.csv");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(CheckJobsFitCluster(*t, 17).ok());
  Status s = CheckJobsFitCluster(*t, 16);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("jobs.csv:3: job big needs 17 GPUs"), std::string::npos)
      << s.message();
}

TEST(LoadTrace, UnreadableFileIsInvalidArgument) {
  StatusOr<Trace> t = LoadTrace("/nonexistent/dir/trace.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("/nonexistent/dir/trace.csv"), std::string::npos);
}

TEST(LoadTrace, ReadsTheBundledTraces) {
  StatusOr<Trace> t = LoadTrace(std::string(NVL72_SIM_TRACES_DIR) + "/cluster01.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(t->jobs.size(), 1500u);
  for (size_t i = 1; i < t->jobs.size(); ++i) {
    ASSERT_LE(t->jobs[i - 1].submission_s, t->jobs[i].submission_s);
  }
}

TEST(ApplyLoad, DividesSubmissionTimes) {
  StatusOr<Trace> t = ParseTrace(std::string(kHeader) + "a,100,10,1\nb,300,10,1\n", "x.csv");
  ASSERT_TRUE(t.ok());
  ApplyLoad(*t, 2.0);
  EXPECT_DOUBLE_EQ(t->jobs[0].submission_s, 50);
  EXPECT_DOUBLE_EQ(t->jobs[1].submission_s, 150);
  EXPECT_DOUBLE_EQ(t->jobs[1].duration_s, 10);  // work is unchanged
}

TEST(TruncateJobs, KeepsTheFirstInArrivalOrder) {
  StatusOr<Trace> t = ParseTrace(std::string(kHeader) + "late,9,1,1\nearly,1,1,1\n", "x.csv");
  ASSERT_TRUE(t.ok());
  TruncateJobs(*t, 1);
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].id, "early");
}

}  // namespace
}  // namespace nvl72::sim
