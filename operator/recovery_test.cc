#include "operator/recovery.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/reconciler.h"

namespace nvl72::op {
namespace {

using kube::FakeClient;
using std::chrono::seconds;

constexpr const char* kNs = "team";

std::string NodeName(int rack, int i) {
  char name[32];
  std::snprintf(name, sizeof(name), "rack%d-node%02d", rack, i);
  return name;
}

Json Node(int rack, int i) {
  const std::string name = NodeName(rack, i);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.clique", "clique-" + std::to_string(rack)},
              {"kubernetes.io/hostname", name}}}}},
          {"spec", Json::object()},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", "4"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json Job(const std::string& name, int replicas, const std::string& policy = "InPlace",
         int grace = 30, int max_recoveries = 10) {
  return {
      {"apiVersion", "nvl72.dev/v1alpha1"},
      {"kind", "NVL72Job"},
      {"metadata", {{"name", name}, {"namespace", kNs}}},
      {"spec",
       {{"replicas", replicas},
        {"gpusPerReplica", 4},
        {"topology", {{"mode", "Required"}}},
        {"recovery",
         {{"policy", policy}, {"notReadyGraceSeconds", grace}, {"maxRecoveries", max_recoveries}}},
        {"template", {{"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}}}}}};
}

// A single 4-GPU pod bound to `node` (not a gang rank); `preemptible` adds the lender label.
Json SinglePod(const std::string& name, const std::string& node, bool preemptible) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", "other"}, {"labels", Json::object()}}},
            {"spec",
             {{"nodeName", node},
              {"containers",
               {{{"name", "c"},
                 {"image", "busybox"},
                 {"resources", {{"requests", {{"nvidia.com/gpu", "4"}}}}}}}}}}};
  if (preemptible) p["metadata"]["labels"]["nvl72.dev/preemptible"] = "true";
  return p;
}

// Drives a Reconciler over a FakeClient the way the controller would, synchronously, with a wall
// clock the test moves.
class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.EnableStatusSubresource(Nvl72JobsResource());
    store_ = std::make_unique<ClientStore>(&fake_, "");
    now_ = std::chrono::system_clock::from_time_t(
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
    Restart();
  }

  // A fresh Reconciler: what an operator restart leaves (no memory, same API state).
  void Restart() {
    reconciler_ = std::make_unique<Reconciler>(
        &fake_, store_.get(), nullptr, &metrics_, [this](const std::string& key) { Enqueue(key); },
        ReconcilerOptions{}, [this] { return now_; });
    reconciler_->recovery()->SetEnqueueAfter(
        [this](const std::string& key, std::chrono::milliseconds d) { delayed_[key] = d; });
  }

  void Enqueue(const std::string& key) {
    if (queued_.insert(key).second) queue_.push_back(key);
  }

  void AddRacks(int racks) {
    for (int r = 0; r < racks; ++r) {
      for (int i = 0; i < 18; ++i) ASSERT_TRUE(fake_.Create(kube::kNodes, "", Node(r, i)).ok());
    }
  }

  void Apply(const Json& job) {
    auto created = fake_.Create(Nvl72JobsResource(), kNs, job);
    ASSERT_TRUE(created.ok()) << created.status();
    Enqueue(kube::KeyOf(*created));
  }

  // Reconciles queued keys until nothing is queued; returns the number of failed reconciles.
  int RunUntilQuiet(int max_steps = 10000) {
    int errors = 0;
    for (int step = 0; step < max_steps && !queue_.empty(); ++step) {
      std::string key = queue_.front();
      queue_.pop_front();
      queued_.erase(key);
      Status s = reconciler_->Reconcile(key);
      if (!s.ok()) {
        ++errors;
        if (errors < 50) Enqueue(key);
      }
    }
    EXPECT_TRUE(queue_.empty());
    return errors;
  }

  Json GetJob(const std::string& name) {
    auto j = fake_.Get(Nvl72JobsResource(), kNs, name);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : Json();
  }

  std::vector<Json> PodsOf(const std::string& job) {
    auto l = fake_.List(kube::kPods, kNs, {.label_selector = "nvl72.dev/job=" + job});
    EXPECT_TRUE(l.ok());
    return l.ok() ? l->items : std::vector<Json>{};
  }

  model::JobPlacement PlacementOf(const std::string& name) {
    auto p = model::PlacementOf(GetJob(name));
    EXPECT_TRUE(p.ok() && p->has_value()) << name << " has no placement";
    return p.ok() && p->has_value() ? **p : model::JobPlacement{};
  }

  std::string Condition(const std::string& job, std::string_view type,
                        std::string* reason = nullptr) {
    const Json obj = GetJob(job);
    const Json* c = model::FindCondition(obj, type);
    if (c == nullptr) return "";
    if (reason != nullptr) *reason = c->value("reason", "");
    return c->value("status", "");
  }

  void Mutate(const kube::ResourceRef& r, const std::string& ns, const std::string& name,
              const std::function<void(Json&)>& fn) {
    for (bool status : {false, true}) {
      auto obj = fake_.Get(r, ns, name);
      ASSERT_TRUE(obj.ok()) << obj.status();
      fn(*obj);
      auto w = status ? fake_.UpdateStatus(r, ns, *obj) : fake_.Update(r, ns, *obj);
      ASSERT_TRUE(w.ok()) << w.status();
    }
  }

  // What the scheduler + kubelet would do: bind every pod of the job to its planned node, Running.
  void RunPods(const std::string& job) {
    for (auto& pod : PodsOf(job)) {
      if (pod["status"].value("phase", "") == "Running") continue;
      Mutate(kube::kPods, kNs, pod["metadata"]["name"], [&](Json& p) {
        p["status"]["phase"] = "Running";
        p["spec"]["nodeName"] = p["metadata"]["annotations"]["nvl72.dev/node"];
      });
    }
    Enqueue(std::string(kNs) + "/" + job);
  }

  // Node Ready=False since `since`, and the jobs on it enqueued (the controller's Node handler).
  void SetNotReady(const std::string& node, std::chrono::system_clock::time_point since) {
    Mutate(kube::kNodes, "", node, [&](Json& n) {
      n["status"]["conditions"] = {{{"type", "Ready"},
                                    {"status", "False"},
                                    {"lastTransitionTime", kube::FormatTime(since)}}};
    });
    EnqueueJobsOn(node);
  }
  void SetReady(const std::string& node) {
    Mutate(kube::kNodes, "", node, [&](Json& n) {
      n["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
    });
    EnqueueJobsOn(node);
  }
  void EnqueueJobsOn(const std::string& node) {
    auto l = fake_.List(Nvl72JobsResource(), "");
    ASSERT_TRUE(l.ok());
    std::vector<kube::ObjectPtr> jobs;
    for (auto& j : l->items) jobs.push_back(std::make_shared<const Json>(j));
    for (const auto& key : JobsWithRankOn(jobs, node)) Enqueue(key);
  }

  // Every rank has exactly one pod, named after it and planned on its placement node.
  void ExpectOnePodPerRank(const std::string& job) {
    model::JobPlacement p = PlacementOf(job);
    std::map<int, int> per_rank;
    for (const auto& pod : PodsOf(job)) {
      int rank = std::stoi(pod["metadata"]["labels"]["nvl72.dev/rank"].get<std::string>());
      ++per_rank[rank];
      ASSERT_NE(p.FindRank(rank), nullptr);
      EXPECT_EQ(pod["metadata"]["annotations"]["nvl72.dev/node"], p.FindRank(rank)->node)
          << "rank " << rank;
      EXPECT_FALSE(kube::IsBeingDeleted(pod));
    }
    EXPECT_EQ(per_rank.size(), p.ranks.size());
    for (const auto& [rank, n] : per_rank) EXPECT_EQ(n, 1) << "rank " << rank;
  }

  std::string RackOf(const std::string& node) { return node.substr(0, node.find('-')); }

  // Admits a 16-rank job on a 2-rack cluster and runs its pods. Returns its placement.
  model::JobPlacement StartJob(const Json& job) {
    Apply(job);
    RunUntilQuiet();
    RunPods(job["metadata"]["name"]);
    RunUntilQuiet();
    return PlacementOf(job["metadata"]["name"]);
  }

  FakeClient fake_;
  Metrics metrics_;
  std::unique_ptr<ClientStore> store_;
  std::unique_ptr<Reconciler> reconciler_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  std::map<std::string, std::chrono::milliseconds> delayed_;
  std::chrono::system_clock::time_point now_;
};

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
    n["spec"]["taints"] = {{{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}}};
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
