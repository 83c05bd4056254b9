// The job's own scheduling constraints and the safety net, end to end through the Reconciler over
// kube::FakeClient: taints with and without the job's toleration, GKE's GPU taint, nodeSelector,
// and a rank kube-scheduler refuses on its planned node (docs/operator.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kube/clock.h"
#include "kube/events.h"
#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/reconciler.h"
#include "operator/safety_net.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_fixtures::Job;
using test_fixtures::kNs;
using test_fixtures::NodeName;
using test_fixtures::SinglePod;

// The shared fixture, with an EventRecorder so that tests can read the events the operator writes.
class ConstraintsTest : public test_fixtures::OperatorFixture {
 protected:
  void SetUp() override {
    OperatorFixture::SetUp();
    events_ = std::make_unique<kube::EventRecorder>(
        &fake_, &clock_, kube::EventRecorderOptions{"nvl72.dev/operator", "test"});
    RestartWithEvents();
  }
  // OperatorFixture::Restart with the event recorder: a fresh Reconciler with the current options_.
  void RestartWithEvents() {
    reconciler_ = std::make_unique<Reconciler>(
        &fake_, store_.get(), events_.get(), &metrics_,
        [this](const std::string& key) { Enqueue(key); }, options_, [this] { return now_; });
    reconciler_->SetEnqueueAfter(
        [this](const std::string& key, milliseconds d) { RecordDelay(key, d); });
  }
  void TearDown() override {
    reconciler_.reset();
    events_.reset();
  }

  // Taints every node of `rack` with `taint`.
  void TaintRack(int rack, const Json& taint) {
    for (int i = 0; i < 18; ++i) {
      Mutate(kube::kNodes, "", NodeName(rack, i),
             [&](Json& n) { n["spec"]["taints"] = Json::array({taint}); });
    }
  }

  // Fills every node of `rack` with a 4-GPU pod that is no gang rank.
  void FillRack(int rack) {
    for (int i = 0; i < 18; ++i) {
      const std::string node = NodeName(rack, i);
      auto p = fake_.Create(kube::kPods, "other", SinglePod("fill-" + node, node, false));
      ASSERT_TRUE(p.ok()) << p.status();
    }
  }

  // The message of the job's Admitted condition.
  std::string AdmittedMessage(const std::string& job) {
    const Json obj = GetJob(job);
    const Json* c = model::FindCondition(obj, model::kConditionAdmitted);
    return c == nullptr ? "" : c->value("message", "");
  }

  // Events of `reason` the operator wrote in the test namespace.
  std::vector<Json> EventsOf(const std::string& reason) {
    EXPECT_TRUE(events_->Flush(seconds(5)));
    auto l = fake_.List(kube::kEvents, kNs);
    EXPECT_TRUE(l.ok()) << l.status();
    std::vector<Json> out;
    if (!l.ok()) return out;
    for (const auto& e : l->items) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  // How many times the operator said `reason`: repeats of one event are a series (count >= 2).
  int EventCount(const std::string& reason) {
    int n = 0;
    for (const auto& e : EventsOf(reason)) {
      n += e.contains("series") ? e["series"].value("count", 1) : 1;
    }
    return n;
  }

  // The pod creates the fake API server was sent since the last ClearActions.
  int PodCreates() const {
    int n = 0;
    for (const auto& a : fake_.Actions()) {
      n += a.verb == kube::Verb::kCreate && a.resource == kube::kPods.DisplayName() ? 1 : 0;
    }
    return n;
  }

  // A rank pod of the job, as kube-scheduler leaves it when it refuses the pod: unbound,
  // PodScheduled False reason Unschedulable since `since`.
  void Refuse(const std::string& pod, std::chrono::system_clock::time_point since) {
    Mutate(kube::kPods, kNs, pod, [&](Json& p) {
      p["spec"].erase("nodeName");
      p["status"]["phase"] = "Pending";
      p["status"]["conditions"] = {
          {{"type", "PodScheduled"},
           {"status", "False"},
           {"reason", "Unschedulable"},
           {"message", "0/36 nodes are available: 1 node(s) didn't match pod anti-affinity rules."},
           {"lastTransitionTime", kube::FormatTime(since)}}};
    });
  }

  // Binds every rank pod of `job` except `except` to its planned node, Running.
  void BindAllBut(const std::string& job, const std::string& except) {
    for (auto& pod : PodsOf(job)) {
      const std::string name = pod["metadata"]["name"];
      if (name == except) continue;
      Mutate(kube::kPods, kNs, name, [&](Json& p) {
        p["status"]["phase"] = "Running";
        p["spec"]["nodeName"] = p["metadata"]["annotations"]["nvl72.dev/node"];
      });
    }
  }

  kube::FakeClock clock_;
  std::unique_ptr<kube::EventRecorder> events_;
};

Json WithToleration(Json job, const Json& toleration) {
  job["spec"]["template"]["spec"]["tolerations"] = Json::array({toleration});
  return job;
}

Json WithNodeSelector(Json job, const std::string& key, const std::string& value) {
  job["spec"]["template"]["spec"]["nodeSelector"] = {{key, value}};
  return job;
}

TEST_F(ConstraintsTest, ATaintedRackIsOnlyForJobsThatTolerateItsTaint) {
  AddRacks(2);
  FillRack(0);
  TaintRack(1, {{"key", "dedicated"}, {"value", "team-a"}, {"effect", "NoSchedule"}});

  Apply(Job("plain", 16));
  EXPECT_EQ(RunUntilQuiet(), 0);
  std::string reason;
  EXPECT_EQ(Condition("plain", model::kConditionAdmitted, &reason), "False");
  EXPECT_EQ(reason, "Waiting");
  EXPECT_EQ(GetJob("plain")["status"]["state"], "Waiting");
  EXPECT_FALSE(GetJob("plain")["status"].contains("placement"));
  EXPECT_TRUE(PodsOf("plain").empty());
  const std::string why = AdmittedMessage("plain");
  EXPECT_NE(why.find("18 by taint dedicated=team-a:NoSchedule (not tolerated)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("the rank pod's constraints rule out 18 of 36 nodes"), std::string::npos)
      << why;
  auto waiting = EventsOf("Waiting");
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_NE(waiting[0].value("note", "").find("taint dedicated=team-a:NoSchedule"),
            std::string::npos);

  Apply(WithToleration(Job("team-a", 16), {{"key", "dedicated"},
                                           {"operator", "Equal"},
                                           {"value", "team-a"},
                                           {"effect", "NoSchedule"}}));
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("team-a", model::kConditionAdmitted), "True");
  const model::JobPlacement p = PlacementOf("team-a");
  ASSERT_EQ(p.ranks.size(), 16u);
  for (const auto& r : p.ranks) EXPECT_EQ(RackOf(r.node), "rack1") << "rank " << r.rank;
  ExpectOnePodPerRank("team-a");
  // The rank pods carry the template's toleration, so kube-scheduler lets them onto rack 1.
  for (const auto& pod : PodsOf("team-a")) {
    bool tolerated = false;
    for (const auto& t : pod["spec"]["tolerations"]) {
      tolerated =
          tolerated || (t.value("key", "") == "dedicated" && t.value("value", "") == "team-a");
    }
    EXPECT_TRUE(tolerated) << pod["metadata"]["name"];
  }
  // The other job still waits, for the same reason.
  EXPECT_EQ(Condition("plain", model::kConditionAdmitted), "False");
  EXPECT_NE(AdmittedMessage("plain").find("taint dedicated=team-a:NoSchedule"), std::string::npos);
}

TEST_F(ConstraintsTest, GkesGpuTaintIsToleratedByEveryRankPod) {
  AddRacks(1);
  TaintRack(0, {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}});

  Apply(Job("moe", 16));
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted), "True");
  ASSERT_EQ(PlacementOf("moe").ranks.size(), 16u);
  ExpectOnePodPerRank("moe");
  const Json gpu_toleration = {
      {"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
  auto pods = PodsOf("moe");
  ASSERT_EQ(pods.size(), 16u);
  for (const auto& pod : pods) {
    const Json& tolerations = pod["spec"]["tolerations"];
    ASSERT_TRUE(tolerations.is_array()) << pod["metadata"]["name"];
    EXPECT_NE(std::find(tolerations.begin(), tolerations.end(), gpu_toleration), tolerations.end())
        << pod["metadata"]["name"] << ": " << tolerations.dump();
  }
}

TEST_F(ConstraintsTest, ANodeSelectorOnOneHostFitsOneRankOnly) {
  AddRacks(2);
  const std::string host = NodeName(1, 5);

  Apply(WithNodeSelector(Job("pair", 2), "kubernetes.io/hostname", host));
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("pair", model::kConditionAdmitted), "False");
  EXPECT_TRUE(PodsOf("pair").empty());
  EXPECT_EQ(AdmittedMessage("pair"),
            "needs 2 nodes in one NVLink domain where the rank pod can run; the most in one "
            "domain is 1 (clique-1): the rank pod's constraints rule out 35 of 36 nodes: 35 by "
            "nodeSelector kubernetes.io/hostname=" +
                host);

  Apply(WithNodeSelector(Job("single", 1), "kubernetes.io/hostname", host));
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("single", model::kConditionAdmitted), "True");
  const model::JobPlacement p = PlacementOf("single");
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].node, host);
  ExpectOnePodPerRank("single");
  EXPECT_EQ(Condition("pair", model::kConditionAdmitted), "False");
}

TEST_F(ConstraintsTest, ARankKubeSchedulerRefusesIsPlannedAgainElsewhere) {
  AddRacks(2);
  Apply(Job("moe", 4));
  EXPECT_EQ(RunUntilQuiet(), 0);
  const model::JobPlacement before = PlacementOf("moe");
  ASSERT_EQ(before.ranks.size(), 4u);
  const std::string refused = before.ranks[1].node;
  BindAllBut("moe", "moe-1");
  Refuse("moe-1", now_);
  const std::string key = std::string(kNs) + "/moe";

  // Within the bound (60 s by default): the reservation stays and the job is looked at again when
  // the bound ends.
  now_ += seconds(30);
  ASSERT_TRUE(reconciler_->Reconcile(key).ok());
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_EQ(PodsOf("moe").size(), 4u);
  ASSERT_EQ(delayed_.count(key), 1u);
  EXPECT_GE(delayed_[key], milliseconds(30'000));
  EXPECT_LE(delayed_[key], milliseconds(31'000));
  EXPECT_EQ(metrics_.Replans(), 0);
  // The refusal shows in the Placed condition with kube-scheduler's message.
  std::string placed_reason;
  EXPECT_EQ(Condition("moe", model::kConditionPlaced, &placed_reason), "False");
  EXPECT_EQ(placed_reason, "Unschedulable");
  const Json waiting_job = GetJob("moe");
  const Json* placed = model::FindCondition(waiting_job, model::kConditionPlaced);
  ASSERT_NE(placed, nullptr);
  EXPECT_NE(placed->value("message", "").find("didn't match pod anti-affinity rules"),
            std::string::npos)
      << placed->dump();

  // Past the bound: the reservation goes, the node is refused, the gang's pods are deleted.
  now_ += seconds(31);
  ASSERT_TRUE(reconciler_->Reconcile(key).ok());
  Json job = GetJob("moe");
  EXPECT_FALSE(job["status"].contains("placement")) << job["status"].dump();
  EXPECT_EQ(job["status"]["refusedNodes"], Json::array({refused}));
  EXPECT_EQ(job["status"]["replans"], 1);
  EXPECT_EQ(job["status"]["replanGeneration"], job["metadata"]["generation"]);
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted, &reason), "False");
  EXPECT_EQ(reason, kReasonReplanning);
  for (const auto& pod : PodsOf("moe")) {
    EXPECT_TRUE(kube::IsBeingDeleted(pod)) << pod["metadata"]["name"] << " was not deleted";
  }
  EXPECT_EQ(metrics_.Replans(), 1);
  auto events = EventsOf("RankUnschedulable");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_NE(events[0].value("note", "").find(refused), std::string::npos) << events[0].dump();

  // The next admission pass plans the gang again without the refused node.
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted), "True");
  const model::JobPlacement after = PlacementOf("moe");
  ASSERT_EQ(after.ranks.size(), 4u);
  for (const auto& r : after.ranks) EXPECT_NE(r.node, refused) << "rank " << r.rank;
  ExpectOnePodPerRank("moe");
  EXPECT_EQ(GetJob("moe")["status"]["refusedNodes"], Json::array({refused}));
}

TEST_F(ConstraintsTest, TheBoundDoublesAfterAReplanAndTheLimitLeavesTheJobWaiting) {
  options_.safety_net = {.bound = seconds(60), .max_replans = 1};
  RestartWithEvents();
  AddRacks(2);
  Apply(Job("moe", 4));
  EXPECT_EQ(RunUntilQuiet(), 0);
  const std::string key = std::string(kNs) + "/moe";

  // First refusal: re-plan 1 of at most 1.
  const std::string first = PlacementOf("moe").ranks[0].node;
  BindAllBut("moe", "moe-0");
  Refuse("moe-0", now_);
  now_ += seconds(60);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);
  ASSERT_EQ(GetJob("moe")["status"]["replans"], 1);
  ExpectOnePodPerRank("moe");

  // Second refusal, on the new plan: the bound is now 120 s.
  const std::string second = PlacementOf("moe").ranks[2].node;
  EXPECT_NE(second, first);
  BindAllBut("moe", "moe-2");
  Refuse("moe-2", now_);
  now_ += seconds(119);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(PlacementOf("moe").ranks[2].node, second);
  EXPECT_EQ(GetJob("moe")["status"]["replans"], 1);
  ASSERT_EQ(delayed_.count(key), 1u);
  EXPECT_GE(delayed_[key], milliseconds(1'000));
  EXPECT_LE(delayed_[key], milliseconds(2'000));

  // At 120 s, past --max-replans: the job waits with reason ReplanLimit and keeps no rank pods.
  now_ += seconds(1);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);
  Json job = GetJob("moe");
  EXPECT_FALSE(job["status"].contains("placement")) << job["status"].dump();
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted, &reason), "False");
  EXPECT_EQ(reason, kReasonReplanLimit);
  EXPECT_TRUE(ReplanLimitReached(job));
  EXPECT_EQ(job["status"]["refusedNodes"], Json::array({first, second}));
  for (const auto& pod : PodsOf("moe")) EXPECT_TRUE(kube::IsBeingDeleted(pod));
  EXPECT_EQ(metrics_.Replans(), 2);
  // Later admission passes leave it alone.
  Enqueue(Reconciler::kAdmissionKey);
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_FALSE(GetJob("moe")["status"].contains("placement"));
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted, &reason), "False");
  EXPECT_EQ(reason, kReasonReplanLimit);

  // A spec change (a new generation) starts afresh: admitted again, any node allowed.
  Mutate(Nvl72JobsResource(), kNs, "moe",
         [](Json& j) { j["spec"]["template"]["metadata"]["labels"]["try"] = "2"; });
  ASSERT_GT(GetJob("moe")["metadata"]["generation"].get<int64_t>(), 1);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted), "True");
  EXPECT_EQ(PlacementOf("moe").ranks.size(), 4u);
  EXPECT_FALSE(ReplanLimitReached(GetJob("moe")));
}

// docs/operator.md: "A job without a placement never keeps rank pods, so a crash between the status
// write and the deletions converges." The operator crashes after writing the re-plan; the restarted
// one may run its admission pass before it reconciles the job.
TEST_F(ConstraintsTest, ACrashBetweenTheReplanAndTheDeletionsConverges) {
  AddRacks(2);
  Apply(Job("moe", 4));
  EXPECT_EQ(RunUntilQuiet(), 0);
  const std::string refused = PlacementOf("moe").ranks[1].node;
  BindAllBut("moe", "moe-1");
  Refuse("moe-1", now_);
  now_ += seconds(61);
  const std::string key = std::string(kNs) + "/moe";
  fake_.InjectError(kube::Verb::kDelete, kube::kPods, UnavailableError("crash"), 4);
  EXPECT_FALSE(reconciler_->Reconcile(key).ok());
  ASSERT_FALSE(GetJob("moe")["status"].contains("placement"));
  ASSERT_EQ(PodsOf("moe").size(), 4u);  // none deleted

  RestartWithEvents();
  queue_.clear();
  queued_.clear();
  Enqueue(Reconciler::kAdmissionKey);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);
  // Whatever is left to wait for (at most the doubled bound) passes.
  now_ += seconds(240);
  Enqueue(key);
  EXPECT_EQ(RunUntilQuiet(), 0);

  Json job = GetJob("moe");
  EXPECT_EQ(Condition("moe", model::kConditionAdmitted), "True") << job["status"].dump();
  EXPECT_EQ(job["status"]["refusedNodes"], Json::array({refused})) << job["status"].dump();
  EXPECT_EQ(job["status"]["replans"], 1);
  ExpectOnePodPerRank("moe");
}

// Issue 27 case 1: the API server rejects a rank pod (an unknown PriorityClass). The job must not
// sit Admitted in silence: the Running condition names the rejection, an Event says it once per
// attempt, the reconcile does not hot-loop on the error, and it tries again later; past the stuck
// bound the job gets a Stuck event with that reason.
TEST_F(ConstraintsTest, ARankPodTheApiServerRejectsIsNamedRetriedAndStuckAfterTheBound) {
  options_.stuck_after = seconds(120);
  RestartWithEvents();
  AddRacks(1);
  const Status forbidden = kube::StatusFromApiStatus(
      {{"code", 403},
       {"reason", "Forbidden"},
       {"message",
        "pods \"rej-1\" is forbidden: no PriorityClass with name does-not-exist was found"}});
  fake_.InjectError(kube::Verb::kCreate, kube::kPods, forbidden, 1000);
  Apply(Job("rej", 4));
  EXPECT_EQ(RunUntilQuiet(), 0) << "a rejection is no error to retry with backoff";
  std::string reason;
  EXPECT_EQ(Condition("rej", model::kConditionRunning, &reason), "False");
  EXPECT_EQ(reason, "PodRejected");
  const Json job = GetJob("rej");
  const Json* running = model::FindCondition(job, model::kConditionRunning);
  ASSERT_NE(running, nullptr);
  EXPECT_NE(running->value("message", "").find("does-not-exist"), std::string::npos)
      << running->dump();
  EXPECT_FALSE(EventsOf("PodRejected").empty());
  ASSERT_EQ(delayed_.count("team/rej"), 1u);
  EXPECT_EQ(delayed_["team/rej"], options_.rejected_retry) << "tried again later";
  EXPECT_TRUE(EventsOf("Stuck").empty());

  // Reconciles inside the retry window (status writes, pod and node events wake the job) send no
  // create and say nothing new; the first one after the window tries again.
  const int rejected_events = EventCount("PodRejected");
  fake_.ClearActions();
  for (int i = 0; i < 3; ++i) {
    now_ += seconds(5);
    Enqueue("team/rej");
    RunUntilQuiet();
  }
  EXPECT_EQ(PodCreates(), 0) << "no create inside the retry window";
  EXPECT_EQ(EventCount("PodRejected"), rejected_events);
  EXPECT_EQ(Condition("rej", model::kConditionRunning, &reason), "False");
  EXPECT_EQ(reason, "PodRejected") << "the remembered rejection still names the cause";
  now_ += options_.rejected_retry;
  Enqueue("team/rej");
  RunUntilQuiet();
  EXPECT_GT(PodCreates(), 0) << "tried again after the retry window";
  EXPECT_GT(EventCount("PodRejected"), rejected_events);

  now_ += seconds(121);
  Enqueue("team/rej");
  RunUntilQuiet();
  const auto stuck = EventsOf("Stuck");
  ASSERT_EQ(stuck.size(), 1u);
  EXPECT_NE(stuck[0].value("note", "").find("PodRejected"), std::string::npos) << stuck[0].dump();
  // Said once per reason, not on every reconcile.
  now_ += seconds(30);
  Enqueue("team/rej");
  RunUntilQuiet();
  EXPECT_EQ(EventsOf("Stuck").size(), 1u);
}

}  // namespace
}  // namespace nvl72::op
