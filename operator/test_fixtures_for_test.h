// Shared fixture of the operator's unit tests: a Reconciler over kube::FakeClient driven the way
// the controller drives it (a work queue drained synchronously, delayed requeues recorded, a wall
// clock the test moves), 18-node racks with 4 GPUs per node, and the operator tests' object
// builders (on model/test_objects_for_test.h).
// Test-only; include from *_test.cc files.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kube/fake_client.h"
#include "kube/object.h"
#include "model/names.h"
#include "model/test_objects_for_test.h"
#include "operator/object_store.h"
#include "operator/reconciler.h"
#include "operator/recovery.h"

namespace nvl72::op::test_fixtures {

using kube::FakeClient;
using std::chrono::seconds;

inline constexpr const char* kNs = "team";

inline std::string NodeName(int rack, int i) {
  char name[32];
  std::snprintf(name, sizeof(name), "rack%d-node%02d", rack, i);
  return name;
}

// Node i of rack `rack`: a 4-GPU node of domain "clique-<rack>", Ready.
inline Json Node(int rack, int i) {
  return model::testing::Node(
      {.name = NodeName(rack, i), .domain = "clique-" + std::to_string(rack)});
}

// An NVL72Job in kNs of `replicas` 4-GPU ranks (topology Required) with spec.recovery.
inline Json Job(const std::string& name, int replicas, const std::string& policy = "InPlace",
                int grace = 30, int max_recoveries = 10) {
  return model::testing::Job({.ns = kNs,
                              .name = name,
                              .replicas = replicas,
                              .recovery = {{"policy", policy},
                                           {"notReadyGraceSeconds", grace},
                                           {"maxRecoveries", max_recoveries}}});
}

// A single 4-GPU pod bound to `node` (not a gang rank); `preemptible` adds the lender label.
inline Json SinglePod(const std::string& name, const std::string& node, bool preemptible) {
  Json p = model::testing::Pod({.ns = "other", .name = name, .node = node, .gpus = 4, .phase = ""});
  p["metadata"]["labels"] = Json::object();
  if (preemptible) p["metadata"]["labels"]["nvl72.dev/preemptible"] = "true";
  return p;
}

// An informer cache that lags for jobs only: pods and nodes come from `inner`, the jobs shown are
// the subclass's (the two-worker and stale-cache races of the reconciler and the recovery).
class JobCacheView : public ObjectStore {
 public:
  explicit JobCacheView(ObjectStore* inner) : inner_(inner) {}
  std::vector<ObjectPtr> Pods() const override { return inner_->Pods(); }
  std::vector<ObjectPtr> PodsOfJob(const std::string& ns, const std::string& n) const override {
    return inner_->PodsOfJob(ns, n);
  }
  std::vector<ObjectPtr> Nodes() const override { return inner_->Nodes(); }
  ObjectPtr Node(const std::string& name) const override { return inner_->Node(name); }

 protected:
  ObjectStore* inner_;
};

// Shows one job as it was before it was admitted; every other job as `inner` has it.
class StaleStore : public JobCacheView {
 public:
  StaleStore(ObjectStore* inner, Json stale_job)
      : JobCacheView(inner), stale_(std::move(stale_job)) {}
  std::vector<ObjectPtr> Jobs() const override {
    auto jobs = inner_->Jobs();
    for (auto& j : jobs) {
      if (kube::Name(*j) == kube::Name(stale_)) j = std::make_shared<const Json>(stale_);
    }
    return jobs;
  }
  ObjectPtr Job(const std::string& key) const override {
    auto j = inner_->Job(key);
    if (j && kube::Name(*j) == kube::Name(stale_)) return std::make_shared<const Json>(stale_);
    return j;
  }

 private:
  Json stale_;
};

// Stops showing job updates at Freeze(): what a second worker sees right after the first one wrote
// a recovery.
class JobCacheLag : public JobCacheView {
 public:
  using JobCacheView::JobCacheView;
  void Freeze() { frozen_ = inner_->Jobs(); }
  std::vector<ObjectPtr> Jobs() const override { return frozen_; }
  ObjectPtr Job(const std::string& key) const override {
    for (const auto& j : frozen_) {
      if (kube::KeyOf(*j) == key) return j;
    }
    return nullptr;
  }

 private:
  std::vector<ObjectPtr> frozen_;
};

// Drives a Reconciler over a FakeClient the way the controller would, synchronously, with a wall
// clock the test moves. Tests set `options_` before calling Restart() to change the operator's
// settings.
class OperatorFixture : public ::testing::Test {
 public:  // test helpers (free functions of the tests use them too)
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
        options_, [this] { return now_; });
    reconciler_->defrag()->SetMoveHook(
        [this](std::string_view result) { moves_.emplace_back(result); });
    reconciler_->SetEnqueueAfter(
        [this](const std::string& key, std::chrono::milliseconds d) { RecordDelay(key, d); });
  }

  // Like the work queue: of the delays asked for since the key was last reconciled, the earliest
  // wins.
  void RecordDelay(const std::string& key, std::chrono::milliseconds d) {
    auto [it, added] = delayed_.emplace(key, d);
    if (!added && d < it->second) it->second = d;
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
      delayed_.erase(key);
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
  ReconcilerOptions options_;
  std::vector<std::string> moves_;  // results reported to the defragmentation move hook
  std::unique_ptr<ClientStore> store_;
  std::unique_ptr<Reconciler> reconciler_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  std::map<std::string, std::chrono::milliseconds> delayed_;
  std::chrono::system_clock::time_point now_;
};

}  // namespace nvl72::op::test_fixtures
