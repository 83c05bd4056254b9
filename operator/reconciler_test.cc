#include "operator/reconciler.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "kube/fake_client.h"
#include "model/names.h"
#include "model/test_objects_for_test.h"
#include "operator/test_fixtures_for_test.h"

namespace nvl72::op {
namespace {

using kube::FakeClient;

using test_fixtures::kNs;
using test_fixtures::Node;

// An NVL72Job in kNs of `replicas` 4-GPU ranks, topology `mode` with segments of `segment` nodes.
Json Job(const std::string& name, int replicas, int segment = 0,
         const std::string& mode = "Required") {
  return model::testing::Job(
      {.ns = kNs, .name = name, .replicas = replicas, .mode = mode, .segment_size = segment});
}

// Drives a Reconciler over a FakeClient like the controller would, synchronously.
class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.EnableStatusSubresource(Nvl72JobsResource());
    store_ = std::make_unique<ClientStore>(&fake_, "");
    reconciler_ = MakeReconciler();
  }

  std::unique_ptr<Reconciler> MakeReconciler() {
    return std::make_unique<Reconciler>(
        &fake_, store_.get(), nullptr, &metrics_, [this](const std::string& key) { Enqueue(key); },
        ReconcilerOptions{});
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

  // Reconciles queued keys until nothing is queued (errors requeue up to a bound).
  void RunUntilQuiet(int max_steps = 10000) {
    for (int step = 0; step < max_steps && !queue_.empty(); ++step) {
      std::string key = queue_.front();
      queue_.pop_front();
      queued_.erase(key);
      Status s = reconciler_->Reconcile(key);
      if (!s.ok()) {
        ++errors_;
        if (errors_ < 100) Enqueue(key);
      }
    }
    ASSERT_TRUE(queue_.empty());
  }

  Json GetJob(const std::string& name) {
    auto j = fake_.Get(Nvl72JobsResource(), kNs, name);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : Json();
  }

  std::vector<Json> PodsOf(const std::string& job) {
    kube::ListOptions opts;
    opts.label_selector = "nvl72.dev/job=" + job;
    auto l = fake_.List(kube::kPods, kNs, opts);
    EXPECT_TRUE(l.ok());
    return l.ok() ? l->items : std::vector<Json>{};
  }

  model::JobPlacement PlacementOf(const std::string& name) {
    auto p = model::PlacementOf(GetJob(name));
    EXPECT_TRUE(p.ok() && p->has_value()) << name << " has no placement";
    return p.ok() && p->has_value() ? **p : model::JobPlacement{};
  }

  // Domains (rack numbers) of a job's ranks, per segment.
  std::set<std::string> RacksOf(const model::JobPlacement& p, int from, int to) {
    std::set<std::string> racks;
    for (int r = from; r < to; ++r)
      racks.insert(p.ranks[r].node.substr(0, p.ranks[r].node.find('-')));
    return racks;
  }

  std::string ConditionReason(const Json& job, std::string_view type) {
    const Json* c = model::FindCondition(job, type);
    return c == nullptr ? "" : c->value("reason", "");
  }

  // Applies `fn` to an object's spec (Update) and then to its status (UpdateStatus).
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

  void SetPodPhases(const std::string& job, const std::string& phase) {
    for (auto& pod : PodsOf(job)) {
      Mutate(kube::kPods, kNs, pod["metadata"]["name"], [&](Json& p) {
        p["status"]["phase"] = phase;
        p["spec"]["nodeName"] = p["metadata"]["annotations"]["nvl72.dev/node"];
      });
    }
    Enqueue(std::string(kNs) + "/" + job);
  }

  int CountCreates(const std::string& resource) {
    int n = 0;
    for (const auto& a : fake_.Actions()) {
      if (a.verb == kube::Verb::kCreate && a.resource == resource) ++n;
    }
    return n;
  }

  FakeClient fake_;
  Metrics metrics_;
  std::unique_ptr<ClientStore> store_;
  std::unique_ptr<Reconciler> reconciler_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  int errors_ = 0;
};

TEST_F(ReconcilerTest, AdmitsAGangIntoOneDomainAndCreatesItsPods) {
  AddRacks(4);
  Apply(Job("moe", 16));
  RunUntilQuiet();

  Json job = GetJob("moe");
  model::JobPlacement p = PlacementOf("moe");
  ASSERT_EQ(p.ranks.size(), 16u);
  EXPECT_EQ(p.domains.size(), 1u);
  EXPECT_EQ(RacksOf(p, 0, 16).size(), 1u);
  EXPECT_TRUE(model::ConditionIsTrue(job, model::kConditionAdmitted));
  EXPECT_EQ(job["status"]["state"], "Admitted");
  EXPECT_EQ(job["metadata"]["finalizers"][0], "nvl72.dev/reservation");

  auto pods = PodsOf("moe");
  ASSERT_EQ(pods.size(), 16u);
  std::set<std::string> nodes;
  for (const auto& pod : pods) {
    int rank = std::stoi(pod["metadata"]["labels"]["nvl72.dev/rank"].get<std::string>());
    EXPECT_EQ(pod["metadata"]["name"], "moe-" + std::to_string(rank));
    const std::string node = pod["metadata"]["annotations"]["nvl72.dev/node"];
    EXPECT_EQ(node, p.FindRank(rank)->node);
    nodes.insert(node);
    EXPECT_EQ(pod["spec"]["schedulerName"], "nvl72-scheduler");
    EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["controller"], true);
    EXPECT_EQ(
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
           ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        node);
    std::map<std::string, std::string> env;
    for (const auto& e : pod["spec"]["containers"][0]["env"]) env[e["name"]] = e["value"];
    EXPECT_EQ(env["NVL72_RANK"], std::to_string(rank));
    EXPECT_EQ(env["NVL72_WORLD_SIZE"], "16");
    EXPECT_EQ(env["MASTER_ADDR"], "moe-0.moe.team.svc");
    EXPECT_EQ(env["MASTER_PORT"], "29500");
    EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "4");
  }
  EXPECT_EQ(nodes.size(), 16u);
  auto svc = fake_.Get(kube::kServices, kNs, "moe");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
  EXPECT_EQ(metrics_.AdmittedTotal(), 1);
}

TEST_F(ReconcilerTest, SpareNodesStayEmptyAndSegmentsEachGetADomain) {
  AddRacks(4);
  Apply(Job("big", 16));
  Apply(Job("a", 8));
  Apply(Job("b", 8));
  Apply(Job("seg", 32, 16));
  RunUntilQuiet();

  std::map<std::string, int> used_per_rack;
  for (const char* name : {"big", "a", "b", "seg"}) {
    model::JobPlacement p = PlacementOf(name);
    const int seg = std::string(name) == "seg" ? 16 : static_cast<int>(p.ranks.size());
    for (int s = 0; s < static_cast<int>(p.ranks.size()); s += seg) {
      EXPECT_EQ(RacksOf(p, s, s + seg).size(), 1u) << name << " segment " << s / seg;
    }
    for (const auto& r : p.ranks) ++used_per_rack[r.node.substr(0, r.node.find('-'))];
  }
  // 16 + 8 + 8 + 32 = 64 ranks on 4 racks of 18 with 2 spares each: every rack keeps 2 empty nodes.
  for (const auto& [rack, used] : used_per_rack) EXPECT_LE(used, 16) << rack;
  EXPECT_EQ(PlacementOf("seg").domains.size(), 2u);
}

TEST_F(ReconcilerTest, TooBigJobWaitsWithAReasonAndDeletionAdmitsTheNext) {
  AddRacks(2);
  Apply(Job("first", 16));
  Apply(Job("second", 8));
  RunUntilQuiet();
  Apply(Job("third", 16));
  RunUntilQuiet();

  Json third = GetJob("third");
  EXPECT_FALSE(model::ConditionIsTrue(third, model::kConditionAdmitted));
  EXPECT_EQ(ConditionReason(third, model::kConditionAdmitted), "Waiting");
  const std::string msg =
      model::FindCondition(third, model::kConditionAdmitted)->value("message", "");
  EXPECT_NE(msg.find("needs 16 nodes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("one NVLink domain"), std::string::npos) << msg;
  // The soft spare reserve (default) is not what keeps "third" out: the reason names the real free
  // block (10 nodes), not the 8 left after the reserve.
  EXPECT_NE(msg.find("largest free block is 10 nodes in clique-"), std::string::npos) << msg;
  EXPECT_EQ(third["status"]["state"], "Waiting");
  EXPECT_TRUE(PodsOf("third").empty());
  EXPECT_EQ(metrics_.WaitingJobs(), 1);

  // Delete "first": the finalizer releases its reservation and "third" takes its domain.
  const std::string freed_rack = PlacementOf("first").ranks[0].node.substr(0, 5);
  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "first").ok());
  Enqueue("team/first");
  RunUntilQuiet();
  EXPECT_FALSE(fake_.Get(Nvl72JobsResource(), kNs, "first").ok());  // finalizer removed
  EXPECT_TRUE(PodsOf("first").empty());
  model::JobPlacement p3 = PlacementOf("third");
  EXPECT_EQ(p3.ranks[0].node.substr(0, 5), freed_rack);
  EXPECT_EQ(PodsOf("third").size(), 16u);
}

// `kubectl delete --cascade=orphan`: the API server puts the `orphan` finalizer on the job; the
// operator releases the reservation and leaves the pods and the Service to the garbage collector,
// which takes the job's ownerReferences off them.
TEST_F(ReconcilerTest, OrphanDeletionKeepsThePodsAndReleasesTheReservation) {
  AddRacks(1);
  Apply(Job("kept", 8));
  RunUntilQuiet();
  ASSERT_EQ(PodsOf("kept").size(), 8u);
  Mutate(Nvl72JobsResource(), kNs, "kept",
         [](Json& j) { j["metadata"]["finalizers"].push_back("orphan"); });
  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "kept").ok());
  Enqueue("team/kept");
  RunUntilQuiet();
  auto job = fake_.Get(Nvl72JobsResource(), kNs, "kept");
  ASSERT_TRUE(job.ok()) << "the orphan finalizer (the garbage collector's) still holds it";
  EXPECT_EQ(job->at("metadata").at("finalizers"), Json::array({"orphan"}));
  EXPECT_EQ(PodsOf("kept").size(), 8u);
  for (const auto& pod : PodsOf("kept")) EXPECT_FALSE(kube::IsBeingDeleted(pod));
  EXPECT_TRUE(fake_.Get(kube::kServices, kNs, "kept").ok());
}

// A background deletion deletes the job's own pods; a pod the garbage collector already orphaned
// (no controller reference to this job) is left alone.
TEST_F(ReconcilerTest, DeletionDeletesOnlyPodsTheJobStillControls) {
  AddRacks(1);
  Apply(Job("gone", 4));
  RunUntilQuiet();
  ASSERT_EQ(PodsOf("gone").size(), 4u);
  Mutate(kube::kPods, kNs, "gone-0", [](Json& p) { p["metadata"].erase("ownerReferences"); });
  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "gone").ok());
  Enqueue("team/gone");
  RunUntilQuiet();
  EXPECT_FALSE(fake_.Get(Nvl72JobsResource(), kNs, "gone").ok());
  auto left = PodsOf("gone");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["metadata"]["name"], "gone-0");
}

// A cache that has not seen the newest rank pod yet (the informer lags the API server).
class LaggingStore : public ClientStore {
 public:
  LaggingStore(kube::Client* client, std::string hidden)
      : ClientStore(client, ""), hidden_(std::move(hidden)) {}
  std::vector<ObjectPtr> PodsOfJob(const std::string& ns, const std::string& name) const override {
    auto pods = ClientStore::PodsOfJob(ns, name);
    std::erase_if(pods, [&](const ObjectPtr& p) { return kube::Name(*p) == hidden_; });
    return pods;
  }

 private:
  std::string hidden_;
};

// Deleting a job right after creating it: the last rank pod is created but not cached yet. The
// finalizer must still delete it (issue 27 case 7: orphans in 2 of 37 tries).
TEST_F(ReconcilerTest, DeletionDeletesARankPodTheCacheHasNotSeenYet) {
  AddRacks(1);
  Apply(Job("quick", 4));
  RunUntilQuiet();
  ASSERT_EQ(PodsOf("quick").size(), 4u);
  store_ = std::make_unique<LaggingStore>(&fake_, "quick-3");
  reconciler_ = MakeReconciler();
  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "quick").ok());
  Enqueue("team/quick");
  RunUntilQuiet();
  EXPECT_FALSE(fake_.Get(Nvl72JobsResource(), kNs, "quick").ok());
  EXPECT_TRUE(PodsOf("quick").empty()) << "no orphan rank pod left on its GPUs";
}

TEST_F(ReconcilerTest, HigherPriorityFirstThenCreationTime) {
  AddRacks(1);
  // Seeded with explicit creation times; "late-high" has the highest priority.
  auto seed = [&](const std::string& name, const std::string& created, const std::string& prio) {
    Json j = Job(name, 16);
    j["metadata"]["creationTimestamp"] = created;
    j["metadata"]["finalizers"] = {"nvl72.dev/reservation"};
    if (!prio.empty()) j["metadata"]["annotations"]["nvl72.dev/priority"] = prio;
    fake_.Seed(Nvl72JobsResource(), j);
  };
  seed("early-low", "2026-01-01T00:00:00Z", "");
  seed("late-high", "2026-01-01T00:05:00Z", "100");
  seed("earlier-low", "2025-12-31T00:00:00Z", "");
  Enqueue(Reconciler::kAdmissionKey);
  RunUntilQuiet();
  EXPECT_TRUE(model::ConditionIsTrue(GetJob("late-high"), model::kConditionAdmitted));
  EXPECT_FALSE(model::ConditionIsTrue(GetJob("early-low"), model::kConditionAdmitted));
  EXPECT_FALSE(model::ConditionIsTrue(GetJob("earlier-low"), model::kConditionAdmitted));

  // Free the rack: of the two equal-priority jobs the earlier one goes first.
  ASSERT_TRUE(fake_.Delete(Nvl72JobsResource(), kNs, "late-high").ok());
  Enqueue("team/late-high");
  RunUntilQuiet();
  EXPECT_TRUE(model::ConditionIsTrue(GetJob("earlier-low"), model::kConditionAdmitted));
  EXPECT_FALSE(model::ConditionIsTrue(GetJob("early-low"), model::kConditionAdmitted));
}

TEST_F(ReconcilerTest, RestartRebuildsFromTheApiWithoutPlacingTwice) {
  AddRacks(2);
  Apply(Job("j", 16));
  Apply(Job("k", 8));
  RunUntilQuiet();
  const model::JobPlacement pj = PlacementOf("j");
  const model::JobPlacement pk = PlacementOf("k");
  // Lose three pods of j (crash between creates) and restart the operator with no memory.
  for (const char* pod : {"j-3", "j-7", "j-15"})
    ASSERT_TRUE(fake_.Delete(kube::kPods, kNs, pod).ok());
  fake_.ClearActions();
  reconciler_ = MakeReconciler();
  Enqueue(Reconciler::kAdmissionKey);
  Enqueue("team/j");
  Enqueue("team/k");
  RunUntilQuiet();
  EXPECT_EQ(PlacementOf("j"), pj);
  EXPECT_EQ(PlacementOf("k"), pk);
  EXPECT_EQ(CountCreates("pods"), 3);
  auto pods = PodsOf("j");
  ASSERT_EQ(pods.size(), 16u);
  for (const auto& pod : pods) {
    int rank = std::stoi(pod["metadata"]["labels"]["nvl72.dev/rank"].get<std::string>());
    EXPECT_EQ(pod["metadata"]["annotations"]["nvl72.dev/node"], pj.FindRank(rank)->node);
  }
}

TEST_F(ReconcilerTest, StaleCacheNeverPlacesAJobTwice) {
  AddRacks(2);
  Apply(Job("j", 16));
  // Capture j as the cache would show it before admission (finalizer on, no placement).
  Enqueue("team/j");
  while (!queue_.empty()) {
    std::string key = queue_.front();
    if (key == Reconciler::kAdmissionKey) break;
    queue_.pop_front();
    queued_.erase(key);
    ASSERT_TRUE(reconciler_->Reconcile(key).ok());
  }
  Json stale = GetJob("j");
  ASSERT_FALSE(model::PlacementOf(stale)->has_value());
  RunUntilQuiet();
  const model::JobPlacement first = PlacementOf("j");

  // A fresh process whose cache still shows j unplaced: the commit re-reads and adopts.
  test_fixtures::StaleStore stale_store(store_.get(), stale);
  Reconciler other(
      &fake_, &stale_store, nullptr, nullptr, [this](const std::string& key) { Enqueue(key); },
      ReconcilerOptions{});
  fake_.ClearActions();
  ASSERT_TRUE(other.AdmitPending().ok());
  EXPECT_EQ(PlacementOf("j"), first);
  for (const auto& a : fake_.Actions()) EXPECT_NE(a.verb, kube::Verb::kUpdateStatus);
  EXPECT_EQ(other.LastPass().admitted, 0);
  // And a second job admitted by that process does not get j's nodes.
  Apply(Job("k", 16));
  queue_.clear();
  queued_.clear();
  ASSERT_TRUE(other.ReconcileJob("team/k").ok());
  ASSERT_TRUE(other.AdmitPending().ok());
  model::JobPlacement pk = PlacementOf("k");
  std::set<std::string> j_nodes;
  for (const auto& r : first.ranks) j_nodes.insert(r.node);
  for (const auto& r : pk.ranks) EXPECT_EQ(j_nodes.count(r.node), 0u) << r.node;
}

TEST_F(ReconcilerTest, InvalidSpecIsReportedNotRetried) {
  AddRacks(1);
  Json bad = Job("bad", 16);
  bad["spec"]["topology"]["segmentSize"] = 5;
  Apply(bad);
  RunUntilQuiet();
  Json job = GetJob("bad");
  EXPECT_EQ(ConditionReason(job, model::kConditionAdmitted), "InvalidSpec");
  EXPECT_EQ(job["status"]["state"], "Invalid");
  EXPECT_TRUE(PodsOf("bad").empty());
  EXPECT_EQ(errors_, 0);
}

TEST_F(ReconcilerTest, CompletionFreesCapacity) {
  AddRacks(1);
  Apply(Job("a", 16));
  Apply(Job("b", 16));
  RunUntilQuiet();
  EXPECT_FALSE(model::ConditionIsTrue(GetJob("b"), model::kConditionAdmitted));

  SetPodPhases("a", "Running");
  RunUntilQuiet();
  EXPECT_EQ(GetJob("a")["status"]["state"], "Running");
  EXPECT_TRUE(model::ConditionIsTrue(GetJob("a"), model::kConditionPlaced));

  SetPodPhases("a", "Succeeded");
  RunUntilQuiet();
  EXPECT_EQ(GetJob("a")["status"]["state"], "Succeeded");
  EXPECT_TRUE(model::ConditionIsTrue(GetJob("b"), model::kConditionAdmitted));
  EXPECT_EQ(PodsOf("b").size(), 16u);
}

TEST_F(ReconcilerTest, FailedRankFailsTheJobAndStopsTheOthers) {
  AddRacks(1);
  Apply(Job("a", 4));
  RunUntilQuiet();
  SetPodPhases("a", "Running");
  RunUntilQuiet();
  Mutate(kube::kPods, kNs, "a-2", [](Json& p) { p["status"]["phase"] = "Failed"; });
  Enqueue("team/a");
  RunUntilQuiet();
  Json job = GetJob("a");
  EXPECT_EQ(job["status"]["state"], "Failed");
  EXPECT_TRUE(model::ConditionIsTrue(job, model::kConditionFailed));
  // The running ranks were deleted (the failed one stays for its logs).
  auto pods = PodsOf("a");
  for (const auto& p : pods) EXPECT_EQ(p["metadata"]["name"], "a-2");
}

TEST_F(ReconcilerTest, CordonedAndNotReadyNodesAreNotUsed) {
  AddRacks(1);
  for (int i = 0; i < 3; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "rack0-node%02d", i);
    Mutate(kube::kNodes, "", name, [i](Json& n) {
      if (i == 0) n["spec"]["unschedulable"] = true;
      if (i == 1) n["status"]["conditions"][0]["status"] = "False";
      if (i == 2) n["spec"]["taints"] = {{{"key", "x"}, {"effect", "NoSchedule"}}};
    });
  }
  Apply(Job("fits", 13));  // 18 - 3 unusable - 2 spares
  // 2 healthy nodes are left (the spares; the soft reserve would give them to a gang that fits
  // nowhere else): 3 ranks fit only if an unusable node were counted.
  Apply(Job("nofit", 3));
  RunUntilQuiet();
  for (const auto& r : PlacementOf("fits").ranks) {
    EXPECT_NE(r.node, "rack0-node00");
    EXPECT_NE(r.node, "rack0-node01");
    EXPECT_NE(r.node, "rack0-node02");
  }
  EXPECT_FALSE(model::ConditionIsTrue(GetJob("nofit"), model::kConditionAdmitted));
}

}  // namespace
}  // namespace nvl72::op
