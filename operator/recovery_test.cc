#include "operator/recovery.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/reconciler.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using std::chrono::seconds;
using test_fixtures::Job;
using test_fixtures::JobCacheLag;
using test_fixtures::kNs;
using test_fixtures::NodeName;
using test_fixtures::SinglePod;

class RecoveryTest : public test_fixtures::OperatorFixture {};

TEST_F(RecoveryTest, OneFailedNodeIsReplacedByASpareOfTheSameDomain) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  ASSERT_EQ(before.ranks.size(), 16u);
  ASSERT_EQ(Condition("moe", model::kConditionRunning), "True");
  std::set<std::string> used;
  for (const auto& r : before.ranks) used.insert(r.node);

  const std::string dead = before.ranks[3].node;
  SetNotReady(dead, now_ - seconds(31));  // past the 30 s grace
  RunUntilQuiet();

  model::JobPlacement after = PlacementOf("moe");
  const std::string spare = after.ranks[3].node;
  EXPECT_NE(spare, dead);
  EXPECT_EQ(RackOf(spare), RackOf(dead));
  EXPECT_EQ(used.count(spare), 0u) << "took a node of the gang";
  EXPECT_EQ(spare, RackOf(dead) + "-node17") << "the last designated spare goes first";
  for (int r = 0; r < 16; ++r) {
    if (r != 3) {
      EXPECT_EQ(after.ranks[r].node, before.ranks[r].node) << "rank " << r << " moved";
    }
  }
  Json job = GetJob("moe");
  EXPECT_EQ(job["status"]["recoveries"], 1);
  EXPECT_EQ(job["status"]["lastRecoveryTime"], kube::FormatTime(now_));
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "ReplacingRanks");
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "False");
  ExpectOnePodPerRank("moe");
  auto pod3 = fake_.Get(kube::kPods, kNs, "moe-3");
  ASSERT_TRUE(pod3.ok());
  EXPECT_EQ((*pod3)["metadata"]["annotations"]["nvl72.dev/node"], spare);
  EXPECT_EQ(
      (*pod3)["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
      spare);
  // Only rank 3 was recreated: the other pods are the same objects.
  for (const auto& pod : PodsOf("moe")) {
    if (pod["metadata"]["name"] != "moe-3") {
      EXPECT_EQ(pod["status"]["phase"], "Running");
    }
  }
  // The dead pod was force-deleted.
  bool forced = false;
  for (const auto& a : fake_.Actions()) {
    if (a.verb == kube::Verb::kDelete && a.name == "moe-3") forced = true;
  }
  EXPECT_TRUE(forced);

  RunPods("moe");
  RunUntilQuiet();
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "False");
  EXPECT_EQ(reason, "Recovered");
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "True");
  EXPECT_EQ(GetJob("moe")["status"]["state"], "Running");
  // Nothing more happens.
  const size_t actions = fake_.Actions().size();
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  int writes = 0;
  for (size_t i = actions; i < fake_.Actions().size(); ++i) {
    auto v = fake_.Actions()[i].verb;
    if (v != kube::Verb::kGet && v != kube::Verb::kList) ++writes;
  }
  EXPECT_EQ(writes, 0);
}

TEST_F(RecoveryTest, TwoNodesFailingTogetherGetTwoDistinctSpares) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  SetNotReady(before.ranks[0].node, now_ - seconds(60));
  Mutate(kube::kNodes, "", before.ranks[9].node, [](Json& n) {
    n["spec"]["taints"] = {{{"key", "example.com/fabric-down"}, {"effect", "NoExecute"}}};
  });
  RunUntilQuiet();

  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[0].node, before.ranks[0].node);
  EXPECT_NE(after.ranks[9].node, before.ranks[9].node);
  EXPECT_NE(after.ranks[0].node, after.ranks[9].node);
  EXPECT_EQ(RackOf(after.ranks[0].node), RackOf(before.ranks[0].node));
  EXPECT_EQ(RackOf(after.ranks[9].node), RackOf(before.ranks[0].node));
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1) << "one recovery for both ranks";
  ExpectOnePodPerRank("moe");
}

TEST_F(RecoveryTest, ANotReadyBlipInsideTheGraceChangesNothing) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string node = before.ranks[5].node;
  fake_.ClearActions();
  SetNotReady(node, now_ - seconds(10));  // grace 30 s
  delayed_.clear();
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_FALSE(GetJob("moe")["status"].contains("recoveries"));
  EXPECT_EQ(PodsOf("moe").size(), 16u);
  for (const auto& a : fake_.Actions()) {
    EXPECT_FALSE(a.verb == kube::Verb::kDelete || a.verb == kube::Verb::kCreate) << a.name;
  }
  // A re-check is scheduled for when the grace ends (20 s left).
  ASSERT_EQ(delayed_.count("team/moe"), 1u);
  EXPECT_GT(delayed_["team/moe"], std::chrono::milliseconds(19000));
  EXPECT_LE(delayed_["team/moe"], std::chrono::milliseconds(20500));

  now_ += seconds(15);  // the node comes back before the grace ends
  SetReady(node);
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_FALSE(GetJob("moe")["status"].contains("recoveries"));
  EXPECT_EQ(Condition("moe", model::kConditionRecovering), "");

  // The same NotReady held past the grace does recover.
  SetNotReady(node, now_ - seconds(10));
  now_ += seconds(21);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe").ranks[5].node, node);
}

TEST_F(RecoveryTest, NoHealthyNodeInTheDomainWaitsThenMovesTheGang) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "InPlace", 10));
  const std::string rack = RackOf(before.ranks[0].node);
  // The two spares of the job's rack are taken by ordinary (non-preemptible) pods.
  for (int i = 0; i < 18; ++i) {
    const std::string n = rack + "-node" + (i < 10 ? "0" : "") + std::to_string(i);
    bool in_gang = false;
    for (const auto& r : before.ranks) in_gang |= r.node == n;
    if (!in_gang) {
      ASSERT_TRUE(fake_.Create(kube::kPods, "other", SinglePod("hog-" + n, n, false)).ok());
    }
  }
  SetNotReady(before.ranks[2].node, now_ - seconds(11));
  RunUntilQuiet();

  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "WaitingForNode");
  EXPECT_EQ(PlacementOf("moe"), before) << "no move before the wait bound";
  EXPECT_EQ(PodsOf("moe").size(), 16u);
  ASSERT_EQ(delayed_.count("team/moe"), 1u);
  EXPECT_LE(delayed_["team/moe"], std::chrono::milliseconds(30500));  // 3 x 10 s grace

  now_ += seconds(15);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before) << "still inside the bound";

  now_ += seconds(16);
  Enqueue("team/moe");
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  ASSERT_EQ(after.ranks.size(), 16u);
  std::set<std::string> racks;
  for (const auto& r : after.ranks) racks.insert(RackOf(r.node));
  EXPECT_EQ(racks.size(), 1u);
  EXPECT_NE(*racks.begin(), rack);
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "MovingGang");
  ExpectOnePodPerRank("moe");
  RunPods("moe");
  RunUntilQuiet();
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "True");
  EXPECT_EQ(Condition("moe", model::kConditionRecovering), "False");
}

// A whole rack fails under two gangs. Both move to the one free rack; the second decision is made
// before the cache shows the first (two workers, a lagging informer). They must not share a node:
// the operator counts the placement it wrote itself until the cache catches up.
TEST_F(RecoveryTest, TwoGangsMovedFromAFailedRackNeverShareANode) {
  AddRacks(2);
  model::JobPlacement b = StartJob(Job("b", 8, "InPlace", 10));
  model::JobPlacement c = StartJob(Job("c", 4, "InPlace", 10));
  const std::string rack = RackOf(b.ranks[0].node);
  ASSERT_EQ(RackOf(c.ranks[0].node), rack) << "best fit puts both gangs into one rack";
  for (int i = 0; i < 18; ++i) {
    SetNotReady(rack + "-node" + (i < 10 ? "0" : "") + std::to_string(i), now_ - seconds(11));
  }
  RunUntilQuiet();  // both wait for a node of their own rack (bound 3 x 10 s)
  now_ += seconds(31);

  JobCacheLag lag(store_.get());
  Reconciler lagging(
      &fake_, &lag, nullptr, &metrics_, [](const std::string&) {}, options_,
      [this] { return now_; });
  lag.Freeze();
  ASSERT_TRUE(lagging.ReconcileJob("team/b").ok());
  ASSERT_TRUE(lagging.ReconcileJob("team/c").ok());  // the cache still shows b in the failed rack

  std::set<std::string> nodes;
  for (const char* job : {"b", "c"}) {
    model::JobPlacement moved = PlacementOf(job);
    for (const auto& r : moved.ranks) {
      EXPECT_NE(RackOf(r.node), rack) << job;
      EXPECT_TRUE(nodes.insert(r.node).second)
          << job << " rank " << r.rank << " on " << r.node << ", a node the other gang holds";
    }
  }
  EXPECT_EQ(nodes.size(), 12u);
}

TEST_F(RecoveryTest, FailsAfterMaxRecoveries) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "InPlace", 30, 1));
  SetNotReady(before.ranks[1].node, now_ - seconds(40));
  RunUntilQuiet();
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  RunPods("moe");
  RunUntilQuiet();

  SetNotReady(before.ranks[7].node, now_ - seconds(40));
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionFailed, &reason), "True");
  EXPECT_EQ(reason, "MaxRecoveriesExceeded");
  EXPECT_EQ(GetJob("moe")["status"]["state"], "Failed");
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  // A failed job gives its GPUs back: its pods are being deleted.
  EXPECT_TRUE(PodsOf("moe").empty());
}

TEST_F(RecoveryTest, PolicyNoneFailsTheJob) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "None"));
  SetNotReady(before.ranks[1].node, now_ - seconds(40));
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionFailed, &reason), "True");
  EXPECT_EQ(reason, "NodeFailed");
}

TEST_F(RecoveryTest, RestartGangRecreatesEveryRankInTheSameDomain) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "RestartGang"));
  std::map<std::string, std::string> uids;
  for (const auto& pod : PodsOf("moe")) uids[pod["metadata"]["name"]] = pod["metadata"]["uid"];
  SetNotReady(before.ranks[4].node, now_ - seconds(40));
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  EXPECT_EQ(RackOf(after.ranks[4].node), RackOf(before.ranks[4].node));
  EXPECT_NE(after.ranks[4].node, before.ranks[4].node);
  ExpectOnePodPerRank("moe");
  for (const auto& pod : PodsOf("moe")) {
    EXPECT_NE(uids[pod["metadata"]["name"]], pod["metadata"]["uid"]) << pod["metadata"]["name"];
    EXPECT_EQ(pod["metadata"]["annotations"]["nvl72.dev/recovery"], "1");
  }
}

TEST_F(RecoveryTest, ARestartBetweenTheStatusWriteAndThePodsConverges) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  SetNotReady(before.ranks[3].node, now_ - seconds(31));
  // The status write succeeds, then the operator "dies": the delete of the dead pod fails and the
  // process is replaced before it retries.
  fake_.InjectError(kube::Verb::kDelete, kube::kPods, Status(StatusCode::kUnavailable, "crash"), 1);
  Enqueue("team/moe");
  {
    std::string key = queue_.front();
    queue_.pop_front();
    queued_.erase(key);
    EXPECT_FALSE(reconciler_->Reconcile(key).ok());
  }
  model::JobPlacement committed = PlacementOf("moe");
  EXPECT_NE(committed.ranks[3].node, before.ranks[3].node);
  EXPECT_EQ(
      fake_.Get(kube::kPods, kNs, "moe-3")->at("metadata").at("annotations").at("nvl72.dev/node"),
      before.ranks[3].node)
      << "the dead pod is still there";

  queue_.clear();
  queued_.clear();
  Restart();
  Enqueue("team/moe");  // the restarted controller enqueues every job
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(PlacementOf("moe"), committed) << "no second recovery";
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  ExpectOnePodPerRank("moe");

  // Same with a crash between the delete and the create.
  SetNotReady(committed.ranks[8].node, now_ - seconds(31));
  fake_.InjectError(kube::Verb::kCreate, kube::kPods, Status(StatusCode::kUnavailable, "crash"), 1);
  {
    std::string key = queue_.front();
    queue_.pop_front();
    queued_.erase(key);
    EXPECT_FALSE(reconciler_->Reconcile(key).ok());
  }
  EXPECT_FALSE(fake_.Get(kube::kPods, kNs, "moe-8").ok()) << "deleted, not yet recreated";
  queue_.clear();
  queued_.clear();
  Restart();
  Enqueue("team/moe");
  EXPECT_EQ(RunUntilQuiet(), 0);
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 2);
  ExpectOnePodPerRank("moe");
  EXPECT_EQ(PodsOf("moe").size(), 16u);
}

TEST_F(RecoveryTest, APreemptibleLenderIsEvictedWhenRecoveryNeedsItsNode) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string rack = RackOf(before.ranks[0].node);
  std::set<std::string> gang;
  for (const auto& r : before.ranks) gang.insert(r.node);
  std::vector<std::string> lent;
  for (int i = 0; i < 18; ++i) {
    const std::string n = NodeName(rack.back() - '0', i);
    if (gang.count(n) != 0) continue;
    lent.push_back(n);
    ASSERT_TRUE(
        fake_.Create(kube::kPods, "other", SinglePod("lender-" + std::to_string(i), n, true)).ok());
  }
  ASSERT_EQ(lent.size(), 2u);
  SetNotReady(before.ranks[6].node, now_ - seconds(31));
  RunUntilQuiet();
  const std::string to = PlacementOf("moe").ranks[6].node;
  EXPECT_TRUE(to == lent[0] || to == lent[1]) << to;
  auto l = fake_.List(kube::kPods, "other");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->items.size(), 1u) << "exactly the lender on the chosen node was evicted";
  for (const auto& p : l->items) EXPECT_NE(p["spec"]["nodeName"], to);
  ExpectOnePodPerRank("moe");
}

// Sets the phase (and reason / a DisruptionTarget condition) of a rank pod, as the kubelet or the
// node lifecycle would, and enqueues its job (the controller's Pod handler).
void FailPod(RecoveryTest& t, const std::string& pod, const std::string& reason,
             const std::string& disruption_reason = "") {
  t.Mutate(kube::kPods, kNs, pod, [&](Json& p) {
    p["status"]["phase"] = "Failed";
    if (!reason.empty()) p["status"]["reason"] = reason;
    if (!disruption_reason.empty()) {
      p["status"]["conditions"] = {
          {{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", disruption_reason}}};
    }
  });
  t.Enqueue(std::string(kNs) + "/" + pod.substr(0, pod.rfind('-')));
}

TEST_F(RecoveryTest, APodFailedByItsNodeIsRecoveredInPlace) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  std::set<std::string> gang;
  for (const auto& r : before.ranks) gang.insert(r.node);
  const std::string node = before.ranks[5].node;
  FailPod(*this, "moe-5", "NodeLost");  // the node itself still looks Ready
  RunUntilQuiet();

  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[5].node, node) << "a node-caused failure moves the rank";
  EXPECT_EQ(RackOf(after.ranks[5].node), RackOf(node));
  EXPECT_EQ(gang.count(after.ranks[5].node), 0u);
  for (int r = 0; r < 16; ++r) {
    if (r != 5) {
      EXPECT_EQ(after.ranks[r].node, before.ranks[r].node) << "rank " << r;
    }
  }
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  EXPECT_NE(Condition("moe", model::kConditionFailed), "True");
  ExpectOnePodPerRank("moe");
  auto pod = fake_.Get(kube::kPods, kNs, "moe-5");
  ASSERT_TRUE(pod.ok());
  EXPECT_NE((*pod)["status"].value("phase", ""), "Failed") << "the failed pod was replaced";
  RunPods("moe");
  RunUntilQuiet();
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "True");
}

TEST_F(RecoveryTest, APodFailedWithADisruptionTargetByTheTaintManagerIsRecovered) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  FailPod(*this, "moe-2", "", "DeletionByTaintManager");
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe").ranks[2].node, before.ranks[2].node);
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
}

TEST_F(RecoveryTest, APodThatFailedOnItsOwnFailsTheJobAndDoesNotMove) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  FailPod(*this, "moe-5", "Error");  // the application exited non-zero
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_FALSE(GetJob("moe")["status"].contains("recoveries"));
  EXPECT_EQ(Condition("moe", model::kConditionFailed), "True");
}

TEST_F(RecoveryTest, PreemptionByTheSchedulerIsNotANodeFailure) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  FailPod(*this, "moe-1", "", "PreemptionByScheduler");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_EQ(Condition("moe", model::kConditionFailed), "True");
}

// The two spares of the job's rack hold ordinary pods, so a failed rank has nowhere to go in its
// domain. Returns the job's rack.
std::string FillSpares(RecoveryTest& t, const model::JobPlacement& p) {
  std::string rack = t.RackOf(p.ranks[0].node);
  for (int i = 0; i < 18; ++i) {
    const std::string n = NodeName(rack.back() - '0', i);
    bool in_gang = false;
    for (const auto& r : p.ranks) in_gang |= r.node == n;
    if (!in_gang) {
      EXPECT_TRUE(t.fake_.Create(kube::kPods, "other", SinglePod("hog-" + n, n, false)).ok());
    }
  }
  return rack;
}

TEST_F(RecoveryTest, WaitForDomainSecondsOfTheJobBoundsTheWait) {
  AddRacks(2);
  Json job = Job("moe", 16, "InPlace", 10);
  job["spec"]["recovery"]["waitForDomainSeconds"] = 5;  // not 3 x 10 s
  model::JobPlacement before = StartJob(job);
  const std::string rack = FillSpares(*this, before);
  SetNotReady(before.ranks[2].node, now_ - seconds(11));
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "WaitingForNode");
  ASSERT_EQ(delayed_.count("team/moe"), 1u);
  EXPECT_LE(delayed_["team/moe"], std::chrono::milliseconds(5500));
  EXPECT_GE(delayed_["team/moe"], std::chrono::milliseconds(4500));

  now_ += seconds(6);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "MovingGang");
  for (const auto& r : PlacementOf("moe").ranks) EXPECT_NE(RackOf(r.node), rack);
}

TEST_F(RecoveryTest, TheOperatorWaitBoundAppliesWhenTheJobSetsNone) {
  options_.recovery.wait_bound = seconds(20);
  Restart();
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "InPlace", 10));
  FillSpares(*this, before);
  SetNotReady(before.ranks[2].node, now_ - seconds(11));
  RunUntilQuiet();
  ASSERT_EQ(delayed_.count("team/moe"), 1u);
  EXPECT_GE(delayed_["team/moe"], std::chrono::milliseconds(19500));
  EXPECT_LE(delayed_["team/moe"], std::chrono::milliseconds(20500));
  now_ += seconds(15);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before) << "15 s < the 20 s bound";
  now_ += seconds(6);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe"), before);
}

TEST_F(RecoveryTest, APreferredGangSpansDomainsWhenNoDomainHasRoom) {
  AddRacks(2);
  Json job = Job("moe", 16, "InPlace", 10);
  job["spec"]["topology"]["mode"] = "Preferred";
  model::JobPlacement before = StartJob(job);
  const std::string rack = FillSpares(*this, before);
  // The other rack keeps only 10 nodes free: 16 ranks fit no single rack any more.
  const int other = rack == "rack0" ? 1 : 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(fake_
                    .Create(kube::kPods, "other",
                            SinglePod("busy-" + std::to_string(i), NodeName(other, i), false))
                    .ok());
  }
  const std::string dead = before.ranks[2].node;
  SetNotReady(dead, now_ - seconds(11));
  RunUntilQuiet();
  now_ += seconds(31);
  Enqueue("team/moe");
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  std::set<std::string> racks;
  for (const auto& r : after.ranks) {
    racks.insert(RackOf(r.node));
    EXPECT_NE(r.node, dead);
  }
  EXPECT_EQ(racks.size(), 2u) << "Preferred spans domains";
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  ExpectOnePodPerRank("moe");
}

TEST_F(RecoveryTest, ARequiredGangWithNoRoomAnywhereKeepsWaitingAndNeverSpans) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "InPlace", 10));
  const std::string rack = FillSpares(*this, before);
  const int other = rack == "rack0" ? 1 : 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(fake_
                    .Create(kube::kPods, "other",
                            SinglePod("busy-" + std::to_string(i), NodeName(other, i), false))
                    .ok());
  }
  SetNotReady(before.ranks[2].node, now_ - seconds(11));
  RunUntilQuiet();
  now_ += seconds(31);
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "WaitingForNode");
}

void Cordon(RecoveryTest& t, const std::string& node) {
  t.Mutate(kube::kNodes, "", node, [](Json& n) { n["spec"]["unschedulable"] = true; });
  t.EnqueueJobsOn(node);
  t.Enqueue(Reconciler::kAdmissionKey);
}

TEST_F(RecoveryTest, ByDefaultRanksOnACordonedNodeKeepRunning) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  Cordon(*this, before.ranks[4].node);
  fake_.ClearActions();
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  for (const auto& a : fake_.Actions()) {
    EXPECT_FALSE(a.verb == kube::Verb::kDelete || a.verb == kube::Verb::kCreate ||
                 a.verb == kube::Verb::kUpdateStatus)
        << kube::VerbName(a.verb) << " " << a.name;
  }
}

TEST_F(RecoveryTest, MoveModeMovesARankOffACordonedNodeGracefully) {
  options_.recovery.move_cordoned_ranks = true;
  options_.recovery.stale_pod_grace_seconds = 30;
  Restart();
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string cordoned = before.ranks[4].node;
  Cordon(*this, cordoned);
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[4].node, cordoned);
  EXPECT_EQ(RackOf(after.ranks[4].node), RackOf(cordoned));
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  ExpectOnePodPerRank("moe");
  // A new job never lands on the cordoned node.
  Apply(Job("next", 16));
  RunUntilQuiet();
  for (const auto& r : PlacementOf("next").ranks) EXPECT_NE(r.node, cordoned);
}

// A graceful delete that no kubelet confirms (the finalizer stands in for it): once the pod is
// kOverdue (10 s) past its deletionTimestamp it is forced, so the new rank pod can take its name.
int DeletesOf(const kube::FakeClient& fake, const std::string& name) {
  int n = 0;
  for (const auto& a : fake.Actions()) n += a.verb == kube::Verb::kDelete && a.name == name;
  return n;
}

TEST_F(RecoveryTest, AGracefulDeleteNobodyConfirmsIsForcedOnceOverdue) {
  options_.recovery.move_cordoned_ranks = true;
  options_.recovery.stale_pod_grace_seconds = 30;
  Restart();
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string old_node = before.ranks[4].node;
  Mutate(kube::kPods, kNs, "moe-4",
         [](Json& p) { p["metadata"]["finalizers"] = {"test.nvl72.dev/kubelet"}; });
  Cordon(*this, old_node);
  RunUntilQuiet();
  ASSERT_EQ(DeletesOf(fake_, "moe-4"), 1) << "deleted gracefully once";
  auto lingering = fake_.Get(kube::kPods, kNs, "moe-4");
  ASSERT_TRUE(lingering.ok());
  ASSERT_EQ((*lingering)["spec"]["nodeName"], old_node);
  EXPECT_EQ((*lingering)["metadata"]["deletionGracePeriodSeconds"], 30);
  // deletionTimestamp is the end of the grace period (the fake's clock is the real one, which
  // now_ started from, truncated to seconds).
  now_ += seconds(35);  // 4-5 s past it: still the kubelet's to confirm
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(DeletesOf(fake_, "moe-4"), 1);
  now_ += seconds(10);  // 14-15 s past it
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_EQ(DeletesOf(fake_, "moe-4"), 2) << "forced once overdue";
  lingering = fake_.Get(kube::kPods, kNs, "moe-4");
  ASSERT_TRUE(lingering.ok());
  EXPECT_EQ((*lingering)["metadata"]["deletionGracePeriodSeconds"], 0);

  auto pod = fake_.Get(kube::kPods, kNs, "moe-4");  // the finalizer goes: the pod with it
  ASSERT_TRUE(pod.ok());
  (*pod)["metadata"].erase("finalizers");
  ASSERT_TRUE(fake_.Update(kube::kPods, kNs, *pod).ok());
  Enqueue("team/moe");
  RunUntilQuiet();
  EXPECT_NE(PlacementOf("moe").ranks[4].node, old_node);
  ExpectOnePodPerRank("moe");
}

TEST_F(RecoveryTest, MoveModeKeepsACordonedRankWhenNoNodeIsFree) {
  options_.recovery.move_cordoned_ranks = true;
  Restart();
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  FillSpares(*this, before);
  delayed_.clear();
  Cordon(*this, before.ranks[4].node);
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before) << "no wait, no gang move for a rank that still runs";
  EXPECT_EQ(Condition("moe", model::kConditionRecovering), "");
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "True");
  EXPECT_EQ(delayed_.count("team/moe"), 1u) << "looks again later";
}

// `kubectl drain` (issue 27 case 2): the node is cordoned and the rank pod evicted. Even with the
// default --cordoned-ranks=keep the rank cannot come back there (nothing new starts on a cordoned
// node), so it moves to a spare of its rack like a rank on a failed node.
void Drain(RecoveryTest& t, const std::string& job, int rank) {
  const model::RankAssignment a = *t.PlacementOf(job).FindRank(rank);
  Cordon(t, a.node);
  ASSERT_TRUE(t.fake_.Delete(kube::kPods, kNs, a.pod).ok());
  t.Enqueue(std::string(kNs) + "/" + job);
}

TEST_F(RecoveryTest, ADrainedRankMovesToASpareOfItsRackWhenCordonedRanksStay) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string drained = before.ranks[4].node;
  Drain(*this, "moe", 4);
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[4].node, drained);
  EXPECT_EQ(RackOf(after.ranks[4].node), RackOf(drained));
  for (int r = 0; r < 16; ++r) {
    if (r != 4) {
      EXPECT_EQ(after.ranks[r].node, before.ranks[r].node) << "rank " << r;
    }
  }
  EXPECT_EQ(GetJob("moe")["status"]["recoveries"], 1);
  ExpectOnePodPerRank("moe");
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "ReplacingRanks");
  RunPods("moe");
  RunUntilQuiet();
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "True");
}

TEST_F(RecoveryTest, ADrainedRankWithNoFreeNodeWaitsWithAReasonAndNoPodOnTheCordonedNode) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  FillSpares(*this, before);
  const std::string drained = before.ranks[4].node;
  Drain(*this, "moe", 4);
  RunUntilQuiet();
  std::string reason;
  EXPECT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  EXPECT_EQ(reason, "WaitingForNode");
  EXPECT_EQ(Condition("moe", model::kConditionRunning), "False");
  for (const auto& pod : PodsOf("moe")) {
    EXPECT_NE(pod["metadata"]["annotations"]["nvl72.dev/node"], drained)
        << "a rank pod recreated on the cordoned node stays Pending there";
  }
}

TEST_F(RecoveryTest, ARankOnACordonedNodeWhosePodStillRunsStaysByDefault) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  Cordon(*this, before.ranks[4].node);
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe"), before);
  EXPECT_EQ(GetJob("moe")["status"].value("recoveries", 0), 0);
}

// GPU Feature Discovery relabels a node's clique when its NVLink connectivity changes (issue 27
// case 3): the rank is no longer in its segment's NVLink domain and is recovered in that domain.
TEST_F(RecoveryTest, ARankWhoseNodeLeftItsDomainIsRecoveredInsideTheDomain) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string moved = before.ranks[2].node;
  Mutate(kube::kNodes, "", moved,
         [](Json& n) { n["metadata"]["labels"]["nvidia.com/gpu.clique"] = "clique-9"; });
  EnqueueJobsOn(moved);
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[2].node, moved);
  EXPECT_EQ(RackOf(after.ranks[2].node), RackOf(moved));
  EXPECT_EQ(after.domains, before.domains);
  EXPECT_EQ(GetJob("moe")["status"]["domains"], before.domains.at(0));
  ExpectOnePodPerRank("moe");
  EXPECT_NE(GetJob("moe")["status"]["conditions"].dump().find("NodeLeftDomain"), std::string::npos);
}

TEST_F(RecoveryTest, ARemovedDomainLabelTakesTheRankOutOfItsDomainToo) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16));
  const std::string moved = before.ranks[7].node;
  Mutate(kube::kNodes, "", moved,
         [](Json& n) { n["metadata"]["labels"].erase("nvidia.com/gpu.clique"); });
  EnqueueJobsOn(moved);
  RunUntilQuiet();
  model::JobPlacement after = PlacementOf("moe");
  EXPECT_NE(after.ranks[7].node, moved);
  EXPECT_EQ(RackOf(after.ranks[7].node), RackOf(moved));
}

TEST_F(RecoveryTest, APreferredJobKeepsItsRanksWhenANodeIsRelabelled) {
  AddRacks(2);
  Json job = Job("moe", 16);
  job["spec"]["topology"]["mode"] = "Preferred";
  model::JobPlacement before = StartJob(job);
  Mutate(kube::kNodes, "", before.ranks[2].node,
         [](Json& n) { n["metadata"]["labels"]["nvidia.com/gpu.clique"] = "clique-9"; });
  EnqueueJobsOn(before.ranks[2].node);
  RunUntilQuiet();
  const model::JobPlacement after = PlacementOf("moe");
  ASSERT_EQ(after.ranks.size(), before.ranks.size());
  for (size_t r = 0; r < after.ranks.size(); ++r) {
    EXPECT_EQ(after.ranks[r].node, before.ranks[r].node) << "Preferred asks for no single domain";
  }
}

// A recovery waiting for a node takes one as soon as it frees (issue 27 case 5), not at its bound:
// the admission pass that freed capacity triggers enqueues it.
TEST_F(RecoveryTest, ARecoveryWaitingForANodeTakesOneAsSoonAsItFrees) {
  AddRacks(2);
  model::JobPlacement before = StartJob(Job("moe", 16, "InPlace", 10));
  const std::string rack = FillSpares(*this, before);
  const std::string dead = before.ranks[2].node;
  SetNotReady(dead, now_ - seconds(11));
  RunUntilQuiet();
  std::string reason;
  ASSERT_EQ(Condition("moe", model::kConditionRecovering, &reason), "True");
  ASSERT_EQ(reason, "WaitingForNode");
  const std::string freed = rack + "-node17";
  ASSERT_TRUE(fake_.Delete(kube::kPods, "other", "hog-" + freed).ok());
  Enqueue(Reconciler::kAdmissionKey);  // the controller's pod-deleted handler
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("moe").ranks[2].node, freed) << "no wait for the 30 s bound";
}

TEST_F(RecoveryTest, AHealthyJobIsCheckedOnItsOwnNodesNotTheWholeCluster) {
  AddRacks(4);
  model::JobPlacement before = StartJob(Job("moe", 16));
  std::set<std::string> rank_nodes;
  for (const auto& r : before.ranks) rank_nodes.insert(r.node);
  // Reconciles of the placed job count what they read: its own rank nodes by name, never a list
  // of every node or every pod (the whole-cluster snapshot, O(nodes + pods) per reconcile).
  auto reads = [&] {
    int node_lists = 0, pod_lists = 0;
    std::set<std::string> nodes_got;
    for (const auto& a : fake_.Actions()) {
      if (a.verb == kube::Verb::kList && a.resource == "nodes") ++node_lists;
      if (a.verb == kube::Verb::kList && a.resource == "pods" && a.ns.empty()) ++pod_lists;
      if (a.verb == kube::Verb::kGet && a.resource == "nodes") nodes_got.insert(a.name);
    }
    return std::make_tuple(node_lists, pod_lists, nodes_got);
  };
  fake_.ClearActions();
  Enqueue("team/moe");
  RunUntilQuiet();
  auto [node_lists, pod_lists, nodes_got] = reads();
  EXPECT_EQ(node_lists, 0);
  EXPECT_EQ(pod_lists, 0);
  EXPECT_EQ(nodes_got, rank_nodes);

  // One of its nodes fails: the same reconcile now reads the whole cluster and recovers.
  const std::string failed = before.ranks[3].node;
  SetNotReady(failed, now_ - seconds(60));
  fake_.ClearActions();
  Enqueue("team/moe");
  RunUntilQuiet();
  std::tie(node_lists, pod_lists, nodes_got) = reads();
  EXPECT_GE(node_lists, 1);
  EXPECT_NE(PlacementOf("moe").ranks[3].node, failed);
  EXPECT_EQ(RackOf(PlacementOf("moe").ranks[3].node), RackOf(failed));
}

TEST_F(RecoveryTest, JobsWithRankOnFindsTheJobsOfANode) {
  std::vector<kube::ObjectPtr> jobs;
  jobs.push_back(std::make_shared<const Json>(
      Json{{"metadata", {{"name", "a"}, {"namespace", "x"}}},
           {"status", {{"placement", {{"ranks", {{{"rank", 0}, {"node", "n1"}}}}}}}}}));
  jobs.push_back(
      std::make_shared<const Json>(Json{{"metadata", {{"name", "b"}, {"namespace", "x"}}}}));
  EXPECT_EQ(JobsWithRankOn(jobs, "n1"), std::vector<std::string>{"x/a"});
  EXPECT_TRUE(JobsWithRankOn(jobs, "n2").empty());
}

}  // namespace
}  // namespace nvl72::op
