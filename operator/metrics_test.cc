// Metrics of nvl72-operator: the exposition itself (zero-initialised series, per-domain series that
// follow the domains, informer counters, the collect hook) and the values the Reconciler and
// JobRecovery put there while they admit and recover jobs on a FakeClient. Also the structured log
// line format and the liveness rule.
#include "operator/metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <set>
#include <sstream>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "model/test_objects_for_test.h"
#include "operator/controller.h"
#include "operator/job_objects.h"
#include "operator/log.h"
#include "operator/reconciler.h"
#include "operator/recovery.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using kube::FakeClient;
using std::chrono::seconds;

// The value of one exposed sample, e.g. Sample(text, "nvl72_operator_leader"); NaN-free: a missing
// series is reported through `found`.
double Sample(const std::string& text, const std::string& series, bool* found = nullptr) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      if (found != nullptr) *found = true;
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  if (found != nullptr) *found = false;
  return -1;
}

bool Has(const std::string& text, const std::string& series) {
  bool found = false;
  Sample(text, series, &found);
  return found;
}

TEST(MetricsTest, LabelledSeriesExistFromTheStartWithZero) {
  Metrics m;
  const std::string t = m.Serialize();
  for (auto o : Metrics::kRecoveryOutcomes) {
    EXPECT_EQ(Sample(t, "nvl72_operator_recoveries_total{outcome=\"" + std::string(o) + "\"}"), 0)
        << o;
  }
  for (auto r : Metrics::kDefragResults) {
    EXPECT_EQ(Sample(t, "nvl72_operator_defrag_moves_total{result=\"" + std::string(r) + "\"}"), 0);
  }
  for (auto s : Metrics::kJobStates) {
    EXPECT_EQ(Sample(t, "nvl72_operator_jobs{state=\"" + std::string(s) + "\"}"), 0) << s;
  }
  for (auto k : Metrics::kReconcileKinds) {
    for (auto r : Metrics::kReconcileResults) {
      EXPECT_EQ(Sample(t, "nvl72_operator_reconciles_total{kind=\"" + std::string(k) +
                              "\",result=\"" + std::string(r) + "\"}"),
                0);
    }
  }
  for (auto res : {"nvl72jobs", "pods", "nodes"}) {
    EXPECT_EQ(
        Sample(t, std::string("nvl72_operator_watch_restarts_total{resource=\"") + res + "\"}"), 0);
    EXPECT_EQ(Sample(t, std::string("nvl72_operator_relists_total{resource=\"") + res + "\"}"), 0);
  }
  for (auto verb : {"get", "list", "update", "patch", "delete"}) {
    EXPECT_EQ(
        Sample(t, std::string("nvl72_operator_api_request_duration_seconds_count{code=\"200\","
                              "verb=\"") +
                      verb + "\"}"),
        0)
        << verb;
  }
  EXPECT_EQ(
      Sample(t, "nvl72_operator_api_request_duration_seconds_count{code=\"201\",verb=\"create\"}"),
      0);
  EXPECT_EQ(Sample(t, "nvl72_operator_recovery_duration_seconds_count{outcome=\"in_place\"}"), 0);
  EXPECT_EQ(Sample(t, "nvl72_operator_leader"), 0);
  EXPECT_EQ(Sample(t, "nvl72_operator_cluster_fragmentation"), 0);
  EXPECT_EQ(Sample(t, "nvl72_operator_workqueue_retries_total"), 0);
}

// nvl72_operator_stuck_jobs{reason}: the count of the last collection per reason; a reason no job
// is stuck for any more drops to 0 (the NVL72JobsStuck alert must resolve).
TEST(MetricsTest, StuckJobsCountTheLastCollectionByReason) {
  Metrics m;
  m.SetStuckJobs({{"PodRejected", 2}, {"RankPending", 1}});
  std::string t = m.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_stuck_jobs{reason=\"PodRejected\"}"), 2) << t;
  EXPECT_EQ(Sample(t, "nvl72_operator_stuck_jobs{reason=\"RankPending\"}"), 1);
  m.SetStuckJobs({{"PodRejected", 1}});
  t = m.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_stuck_jobs{reason=\"PodRejected\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_stuck_jobs{reason=\"RankPending\"}"), 0);
}

TEST(MetricsTest, DomainSeriesFollowTheSnapshot) {
  placement::Snapshot snap;
  placement::DomainId a = snap.AddDomain("rack-a", 18, 4);
  snap.AddDomain("rack-b", 18, 4);
  // rack-a: 3 nodes fully used, 1 node with 1 GPU used, 1 node NotReady.
  const auto& an = snap.domains[a].nodes;
  for (int i = 0; i < 3; ++i) snap.nodes[an[i]].gpu_used = 4;
  snap.nodes[an[3]].gpu_used = 1;
  snap.nodes[an[4]].ready = false;
  Metrics m;
  m.SetClusterStats(snap, placement::ComputeStats(snap, 2, {}));
  std::string t = m.Serialize();
  const std::string a_l = "{domain=\"rack-a\"}", b_l = "{domain=\"rack-b\"}";
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_nodes" + a_l), 18);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_healthy_nodes" + a_l), 17);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_gpus" + a_l), 72);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_allocated_gpus" + a_l), 13);
  // 17 healthy nodes, 3 full, one with 3 free: 13 * 4 + 3.
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_free_gpus" + a_l), 55);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_spare_gpus" + a_l), 8);
  // 13 empty healthy nodes minus 2 spares.
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_largest_gang_nodes" + a_l), 11);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_free_gpus" + b_l), 72);
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_largest_gang_nodes" + b_l), 16);
  // Free whole-node blocks 11 + 16, the largest 16.
  EXPECT_NEAR(Sample(t, "nvl72_operator_cluster_fragmentation"), 1.0 - 16.0 / 27.0, 1e-9);

  // rack-b goes away: its series go with it.
  placement::Snapshot only_a;
  only_a.AddDomain("rack-a", 18, 4);
  m.SetClusterStats(only_a, placement::ComputeStats(only_a, 2, {}));
  t = m.Serialize();
  EXPECT_FALSE(Has(t, "nvl72_operator_domain_free_gpus" + b_l));
  EXPECT_FALSE(Has(t, "nvl72_operator_domain_nodes" + b_l));
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_free_gpus" + a_l), 72);
  EXPECT_EQ(Sample(t, "nvl72_operator_cluster_fragmentation"), 0);
}

TEST(MetricsTest, StrandedGpusAreMeasuredAgainstTheWaitingShapes) {
  placement::Snapshot snap;
  placement::DomainId a = snap.AddDomain("rack-a", 18, 4);
  const auto& an = snap.domains[a].nodes;
  for (int i = 0; i < 14; ++i) snap.nodes[an[i]].gpu_used = 4;
  snap.nodes[an[14]].gpu_used = 2;  // 2 free GPUs on a partly used node
  // Left: node 14 (2 free), nodes 15..17 empty of which 2 are spares -> 1 empty node for gangs.
  const std::vector<placement::JobShape> gang16 = {{.nodes = 16, .gpus_per_node = 4}};
  Metrics m;
  m.SetClusterStats(snap, placement::ComputeStats(snap, 2, gang16));
  const std::string t = m.Serialize();
  // A 16-node gang can use neither the partly used node nor the single empty non-spare node.
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_stranded_gpus{domain=\"rack-a\"}"), 2 + 4);
}

TEST(MetricsTest, InformerCountersMoveByTheIncrease) {
  Metrics m;
  kube::InformerStats s;
  s.watch_restarts = 3;
  s.relists = 1;
  m.SetInformer("pods", s, 10);
  s.watch_restarts = 5;
  m.SetInformer("pods", s, 12);
  std::string t = m.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_watch_restarts_total{resource=\"pods\"}"), 5);
  EXPECT_EQ(Sample(t, "nvl72_operator_relists_total{resource=\"pods\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_cache_objects{resource=\"pods\"}"), 12);
  // A new informer starts from 0 again: its counts add up, the exposed counter never goes back.
  kube::InformerStats fresh;
  fresh.watch_restarts = 2;
  m.SetInformer("pods", fresh, 12);
  t = m.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_watch_restarts_total{resource=\"pods\"}"), 7);
}

TEST(MetricsTest, CollectHookRunsAtEveryScrapeUntilRemoved) {
  Metrics m;
  int calls = 0;
  m.SetCollectHook([&] {
    ++calls;
    m.SetWorkQueue(7, 2);
    m.SetLeader(true);
  });
  std::string t = m.Serialize();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_workqueue_depth"), 7);
  EXPECT_EQ(Sample(t, "nvl72_operator_workqueue_delayed"), 2);
  EXPECT_EQ(Sample(t, "nvl72_operator_leader"), 1);
  m.Serialize();
  EXPECT_EQ(calls, 2);
  m.SetCollectHook({});
  m.Serialize();
  EXPECT_EQ(calls, 2);
}

TEST(MetricsTest, DefragMovesAndApiRequests) {
  Metrics m;
  m.CountDefragMove("started");
  m.CountDefragMove("started");
  m.CountDefragMove("completed");
  m.ObserveApiRequest("update", 409, 0.003);
  m.ObserveApiRequest("get", 200, 0.001);
  m.ObserveApiRequest("get", 0, 5.0);
  const std::string t = m.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_defrag_moves_total{result=\"started\"}"), 2);
  EXPECT_EQ(Sample(t, "nvl72_operator_defrag_moves_total{result=\"completed\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_defrag_moves_total{result=\"failed\"}"), 0);
  EXPECT_EQ(m.DefragMoves("started"), 2);
  EXPECT_EQ(
      Sample(t, "nvl72_operator_api_request_duration_seconds_count{code=\"409\",verb=\"update\"}"),
      1);
  EXPECT_EQ(
      Sample(t, "nvl72_operator_api_request_duration_seconds_count{code=\"200\",verb=\"get\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_api_request_duration_seconds_count{code=\"0\",verb=\"get\"}"),
            1);
  // 3 ms falls in the 5 ms bucket, not in the 2.5 ms one.
  EXPECT_EQ(Sample(t,
                   "nvl72_operator_api_request_duration_seconds_bucket{code=\"409\",verb="
                   "\"update\",le=\"0.0025\"}"),
            0);
  EXPECT_EQ(Sample(t,
                   "nvl72_operator_api_request_duration_seconds_bucket{code=\"409\",verb="
                   "\"update\",le=\"0.005\"}"),
            1);
}

// ---------------------------------------------------------------------------------------------
// Job states, recovery outcomes (pure)

Json WithStatus(Json status) {
  return {{"metadata", {{"name", "j"}, {"namespace", "ns"}}}, {"status", std::move(status)}};
}

TEST(JobMetricStateTest, StateFromStatusAndRecoveringCondition) {
  EXPECT_EQ(JobMetricState(Json{{"metadata", {{"name", "j"}}}}), "Pending");
  EXPECT_EQ(JobMetricState(WithStatus({{"state", "Waiting"}})), "Waiting");
  Json recovering = {{"state", "Running"},
                     {"conditions", {{{"type", "Recovering"}, {"status", "True"}}}}};
  EXPECT_EQ(JobMetricState(WithStatus(recovering)), "Recovering");
  recovering["state"] = "Failed";
  EXPECT_EQ(JobMetricState(WithStatus(recovering)), "Failed");
  Json recovered = {{"state", "Running"},
                    {"conditions", {{{"type", "Recovering"}, {"status", "False"}}}}};
  EXPECT_EQ(JobMetricState(WithStatus(recovered)), "Running");

  std::vector<kube::ObjectPtr> jobs = {
      std::make_shared<const Json>(WithStatus({{"state", "Running"}})),
      std::make_shared<const Json>(WithStatus({{"state", "Running"}})),
      std::make_shared<const Json>(WithStatus({{"state", "Waiting"}}))};
  auto counts = CountJobStates(jobs);
  EXPECT_EQ(counts["Running"], 2);
  EXPECT_EQ(counts["Waiting"], 1);
  EXPECT_EQ(counts.size(), 2u);
}

Json RecoveringSince(std::string_view reason, const std::string& since) {
  return {{"conditions",
           {{{"type", "Recovering"},
             {"status", "True"},
             {"reason", reason},
             {"lastTransitionTime", since}}}}};
}

TEST(RecoveryFinishedByTest, OutcomeFromTheReasonTimedFromTheConditionStart) {
  const auto t0 = std::chrono::system_clock::from_time_t(1'800'000'000);
  const std::string since = kube::FormatTime(t0);
  RecoveryPlan done;
  done.action = RecoveryAction::kNone;
  done.write_status = true;
  done.status = {
      {"conditions", {{{"type", "Recovering"}, {"status", "False"}, {"reason", "Recovered"}}}}};

  auto f = RecoveryFinishedBy(RecoveringSince("ReplacingRanks", since), done, t0 + seconds(42));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->outcome, "in_place");
  ASSERT_TRUE(f->seconds.has_value());
  EXPECT_DOUBLE_EQ(*f->seconds, 42);

  f = RecoveryFinishedBy(RecoveringSince("MovingGang", since), done, t0 + seconds(90));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->outcome, "moved");
  EXPECT_DOUBLE_EQ(f->seconds.value_or(-1), 90);

  // A node that came back while the job waited: nothing was recovered.
  RecoveryPlan back = done;
  back.status["conditions"][0]["reason"] = "NodeRecovered";
  EXPECT_FALSE(RecoveryFinishedBy(RecoveringSince("WaitingForNode", since), back, t0).has_value());
  // Still replacing: nothing finished yet.
  RecoveryPlan replacing;
  replacing.action = RecoveryAction::kReplace;
  replacing.write_status = true;
  EXPECT_FALSE(
      RecoveryFinishedBy(RecoveringSince("ReplacingRanks", since), replacing, t0).has_value());
  // No write: nothing changes.
  RecoveryPlan idle;
  EXPECT_FALSE(RecoveryFinishedBy(RecoveringSince("ReplacingRanks", since), idle, t0).has_value());

  RecoveryPlan fail;
  fail.action = RecoveryAction::kFail;
  fail.write_status = true;
  f = RecoveryFinishedBy(Json::object(), fail, t0);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->outcome, "failed");
  EXPECT_FALSE(f->seconds.has_value());
}

// ---------------------------------------------------------------------------------------------
// The Reconciler and JobRecovery fill the metrics.

constexpr const char* kNs = "team";

// An NVL72Job in kNs of `replicas` 4-GPU ranks, recovery InPlace after a 30 s grace.
Json JobObj(const std::string& name, int replicas) {
  return model::testing::Job({.ns = kNs,
                              .name = name,
                              .replicas = replicas,
                              .recovery = {{"policy", "InPlace"}, {"notReadyGraceSeconds", 30}}});
}

class OperatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.EnableStatusSubresource(Nvl72JobsResource());
    store_ = std::make_unique<ClientStore>(&fake_, "");
    now_ = std::chrono::system_clock::from_time_t(
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
    // A hard reserve: these tests need a gang (17 nodes) that never fits next to 2 spares.
    ReconcilerOptions options;
    options.spare_reserve = placement::SpareReserve::kHard;
    reconciler_ = std::make_unique<Reconciler>(
        &fake_, store_.get(), nullptr, &metrics_, [this](const std::string& key) { Enqueue(key); },
        options, [this] { return now_; });
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 18; ++i)
        EXPECT_TRUE(fake_.Create(kube::kNodes, "", test_fixtures::Node(r, i)).ok());
    }
  }
  void Enqueue(const std::string& key) {
    if (queued_.insert(key).second) queue_.push_back(key);
  }
  void RunUntilQuiet() {
    for (int step = 0; step < 10000 && !queue_.empty(); ++step) {
      std::string key = queue_.front();
      queue_.pop_front();
      queued_.erase(key);
      if (!reconciler_->Reconcile(key).ok() && ++errors_ < 50) Enqueue(key);
    }
    ASSERT_TRUE(queue_.empty());
  }
  void Apply(const Json& job) {
    auto c = fake_.Create(Nvl72JobsResource(), kNs, job);
    ASSERT_TRUE(c.ok()) << c.status();
    Enqueue(kube::KeyOf(*c));
  }
  Json GetJob(const std::string& name) {
    auto j = fake_.Get(Nvl72JobsResource(), kNs, name);
    EXPECT_TRUE(j.ok());
    return j.ok() ? *j : Json();
  }
  // The scheduler and kubelet: every pod of `job` bound to its planned node and Running.
  void RunPods(const std::string& job) {
    auto l = fake_.List(kube::kPods, kNs, {.label_selector = "nvl72.dev/job=" + job});
    ASSERT_TRUE(l.ok());
    for (auto& pod : l->items) {
      if (pod["status"].value("phase", "") == "Running") continue;
      for (bool status : {false, true}) {
        auto p = fake_.Get(kube::kPods, kNs, pod["metadata"]["name"].get<std::string>());
        ASSERT_TRUE(p.ok());
        (*p)["status"]["phase"] = "Running";
        (*p)["spec"]["nodeName"] = (*p)["metadata"]["annotations"]["nvl72.dev/node"];
        ASSERT_TRUE(
            (status ? fake_.UpdateStatus(kube::kPods, kNs, *p) : fake_.Update(kube::kPods, kNs, *p))
                .ok());
      }
    }
    Enqueue(std::string(kNs) + "/" + job);
  }
  void FailNode(const std::string& node, std::chrono::system_clock::time_point since) {
    for (bool status : {false, true}) {
      auto n = fake_.Get(kube::kNodes, "", node);
      ASSERT_TRUE(n.ok());
      (*n)["status"]["conditions"] = {{{"type", "Ready"},
                                       {"status", "False"},
                                       {"lastTransitionTime", kube::FormatTime(since)}}};
      ASSERT_TRUE(
          (status ? fake_.UpdateStatus(kube::kNodes, "", *n) : fake_.Update(kube::kNodes, "", *n))
              .ok());
    }
  }

  FakeClient fake_;
  Metrics metrics_;
  std::unique_ptr<ClientStore> store_;
  std::unique_ptr<Reconciler> reconciler_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  int errors_ = 0;
  std::chrono::system_clock::time_point now_;
};

TEST_F(OperatorMetricsTest, AdmissionFillsDomainJobAndWaitMetrics) {
  Apply(JobObj("a", 16));
  Apply(JobObj("big", 17));  // 17 ranks never fit: 18 nodes minus 2 spares
  now_ += seconds(100);      // both were created ~100 s before the pass
  RunUntilQuiet();
  ASSERT_TRUE(model::PlacementOf(GetJob("a"))->has_value());
  const std::string t = metrics_.Serialize();

  EXPECT_EQ(Sample(t, "nvl72_operator_admitted_jobs_total"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_admission_wait_seconds_count"), 1);
  const double wait = Sample(t, "nvl72_operator_admission_wait_seconds_sum");
  EXPECT_GE(wait, 99);  // creationTimestamp comes from the fake's real clock, second resolution
  EXPECT_LE(wait, 102);
  EXPECT_EQ(Sample(t, "nvl72_operator_waiting_jobs"), 1);
  EXPECT_GE(Sample(t, "nvl72_operator_longest_wait_seconds"), 99);
  EXPECT_GE(Sample(t, "nvl72_operator_placement_decision_duration_seconds_count"), 2);

  // One domain holds the 16 ranks (64 GPUs), the other is empty.
  std::set<double> free;
  for (auto d : {"clique-0", "clique-1"}) {
    free.insert(Sample(t, std::string("nvl72_operator_domain_free_gpus{domain=\"") + d + "\"}"));
  }
  EXPECT_EQ(free, (std::set<double>{72 - 64, 72}));
  // The waiting 17-rank shape fits no domain: the 16 gang nodes of the idle domain are stranded for
  // it; spare nodes never count as stranded (the busy domain's 2 free nodes are its spares).
  EXPECT_EQ(Sample(t, "nvl72_operator_domain_stranded_gpus{domain=\"clique-0\"}") +
                Sample(t, "nvl72_operator_domain_stranded_gpus{domain=\"clique-1\"}"),
            72 - 8);
}

TEST_F(OperatorMetricsTest, AnInPlaceRecoveryIsCountedOnceWithItsDuration) {
  Apply(JobObj("moe", 16));
  RunUntilQuiet();
  RunPods("moe");
  RunUntilQuiet();
  auto placement = model::PlacementOf(GetJob("moe"));
  ASSERT_TRUE(placement.ok() && placement->has_value());
  const std::string dead = (*placement)->ranks[3].node;

  FailNode(dead, now_ - seconds(31));  // past the 30 s grace
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(metrics_.RecoveryCount("in_place"), 0) << "counted before the ranks run again";

  now_ += seconds(12);  // the replacement pod takes 12 s to run
  RunPods("moe");
  RunUntilQuiet();
  Enqueue("team/moe");
  RunUntilQuiet();
  const std::string t = metrics_.Serialize();
  EXPECT_EQ(Sample(t, "nvl72_operator_recoveries_total{outcome=\"in_place\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_recoveries_total{outcome=\"moved\"}"), 0);
  EXPECT_EQ(Sample(t, "nvl72_operator_recoveries_total{outcome=\"failed\"}"), 0);
  EXPECT_EQ(Sample(t, "nvl72_operator_recovery_duration_seconds_count{outcome=\"in_place\"}"), 1);
  EXPECT_EQ(Sample(t, "nvl72_operator_recovery_duration_seconds_sum{outcome=\"in_place\"}"), 12);
}

TEST_F(OperatorMetricsTest, ReconcilesAreCountedByKindAndResult) {
  Apply(JobObj("a", 4));
  RunUntilQuiet();
  EXPECT_GE(metrics_.ReconcileCount("admission", "ok"), 1);
  EXPECT_GE(metrics_.ReconcileCount("job", "ok"), 2);  // finalizer, then pods
  EXPECT_EQ(metrics_.ReconcileCount("job", "error"), 0);
}

// ---------------------------------------------------------------------------------------------

TEST(LogFormatTest, JsonLineCarriesLevelMessageAndKeys) {
  const long long ms = 1'800'000'000'123LL;
  std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kWarning, ms, "say \"hi\"\n",
                                   {{"job", "team/moe"}, {"node", "rack1-node03"}});
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line";
  Json j = Json::parse(line);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["msg"], "say \"hi\"\n");
  EXPECT_EQ(j["job"], "team/moe");
  EXPECT_EQ(j["node"], "rack1-node03");
  EXPECT_EQ(j["ts"], "2027-01-15T08:00:00.123Z");
}

TEST(LogFormatTest, TextLineAppendsKeys) {
  std::string line = FormatLogLine(LogFormat::kText, LogLevel::kInfo, 1'800'000'000'005LL,
                                   "admitted team/moe", {{"job", "team/moe"}, {"why", "a b"}});
  EXPECT_EQ(line, "I 08:00:00.005 admitted team/moe job=team/moe why=\"a b\"\n");
  LogFormat f = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml", &f));
}

TEST(HealthTest, WorkersStalledOnlyWhileLeadingWithWorkWaiting) {
  using std::chrono::minutes;
  EXPECT_TRUE(WorkersStalled(true, 3, minutes(6), seconds(300)));
  EXPECT_FALSE(WorkersStalled(true, 3, minutes(4), seconds(300)));
  EXPECT_FALSE(WorkersStalled(true, 0, minutes(60), seconds(300))) << "idle is healthy";
  EXPECT_FALSE(WorkersStalled(false, 3, minutes(60), seconds(300))) << "a standby has no workers";
  EXPECT_FALSE(WorkersStalled(true, 3, minutes(60), seconds(0))) << "off";
}

}  // namespace
}  // namespace nvl72::op
