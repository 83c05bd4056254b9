// ClusterCache: informers on Nodes, Pods and NVL72Jobs, and the ClusterView the verbs read.
//
// Requests never touch the informer caches or JSON of the cluster: they read an immutable
// ClusterView (scheduler-plugin/extender.h) that a background thread rebuilds after informer
// events, at most once per `min_rebuild_interval`, and publishes by swapping a shared_ptr. A
// request holds its view for its whole life, so a rebuild never races a request.
//
// Bindings made by this extender are "assumed" (as kube-scheduler's own cache does): the next view
// counts the pod's GPUs on its node before the informer has seen the pod bound, so consecutive pods
// are scored against up-to-date usage.
//
// Thread-safety: all public methods may be called from any thread after construction.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kube/client.h"
#include "kube/clock.h"
#include "kube/informer.h"
#include "scheduler-plugin/extender.h"

namespace nvl72::extender {

// Where the verbs get their view and pods from; ClusterCache in production, a fixed view in tests.
class ViewSource {
 public:
  virtual ~ViewSource() = default;
  // Never null.
  virtual std::shared_ptr<const ClusterView> View() const = 0;
  // Caches have synced and a view of them is published.
  virtual bool Ready() const = 0;
  // The cached pod ns/name, or nullptr.
  virtual kube::ObjectPtr GetPod(std::string_view ns, std::string_view name) const = 0;
  // Records that this extender bound `pod_key` ("ns/name") to `node`.
  virtual void Assume(const std::string& pod_key, const std::string& node) = 0;
};

// A fixed view: tests and benchmarks.
class StaticViewSource : public ViewSource {
 public:
  explicit StaticViewSource(std::shared_ptr<const ClusterView> view) : view_(std::move(view)) {}
  std::shared_ptr<const ClusterView> View() const override;
  bool Ready() const override { return view_->synced; }
  kube::ObjectPtr GetPod(std::string_view ns, std::string_view name) const override;
  void Assume(const std::string& pod_key, const std::string& node) override;
  void SetView(std::shared_ptr<const ClusterView> view);
  void AddPod(const Json& pod);
  std::map<std::string, std::string> assumed() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const ClusterView> view_;
  std::map<std::string, kube::ObjectPtr> pods_;
  std::map<std::string, std::string> assumed_;
};

struct ClusterCacheOptions {
  ViewOptions view;
  kube::ResourceRef jobs_resource =
      kube::ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs", "NVL72Job", true);
  // false: no NVL72Job informer (the CRD is not installed); gang ranks then come from pod
  // annotations alone and no node counts as reserved.
  bool watch_jobs = true;
  std::chrono::milliseconds min_rebuild_interval{20};
  std::chrono::seconds assume_ttl{60};
  kube::InformerOptions informer_template;  // backoff and timeouts; resource/selectors are set here
  // Each informer's list/watch failures and recoveries (kube::InformerOptions::on_error), with the
  // resource it watches. Empty = counted in the informers' stats only.
  std::function<void(const kube::ResourceRef& resource, const Status& status,
                     int64_t failures_in_a_row)>
      on_informer_error;
};

class ClusterCache : public ViewSource {
 public:
  // `client` and `clock` must outlive the cache.
  ClusterCache(kube::Client* client, kube::Clock* clock, ClusterCacheOptions options);
  ~ClusterCache() override;  // Stop()s.

  void Start();
  void Stop();

  std::shared_ptr<const ClusterView> View() const override;
  bool Ready() const override;
  kube::ObjectPtr GetPod(std::string_view ns, std::string_view name) const override;
  void Assume(const std::string& pod_key, const std::string& node) override;

  // Rebuilds the view now from the caches (tests; the thread does this on its own).
  void RebuildNow();
  // Counters and cache size of each informer, by resource ("nodes", "pods", "nvl72jobs").
  struct InformerReport {
    std::string resource;
    kube::InformerStats stats;
    size_t objects = 0;
  };
  std::vector<InformerReport> Informers() const;
  int64_t rebuilds() const;

 private:
  void MarkDirty();
  bool AllSynced() const;
  void Run(std::stop_token stop);

  kube::Client* client_;
  kube::Clock* clock_;
  ClusterCacheOptions options_;
  std::unique_ptr<kube::Informer> nodes_;
  std::unique_ptr<kube::Informer> pods_;
  std::unique_ptr<kube::Informer> jobs_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = true;
  std::shared_ptr<const ClusterView> view_;
  struct Assumed {
    std::string node;
    kube::Clock::TimePoint at;
  };
  std::map<std::string, Assumed> assumed_;
  int64_t rebuilds_ = 0;
  std::mutex rebuild_mu_;  // one rebuild at a time
  // The facts of each cached pod object, by object: an informer replaces an object on every change,
  // so an unchanged pod keeps its entry and a rebuild reads no pod JSON but that of changed pods.
  struct PodMemo {
    kube::ObjectPtr obj;  // holds the address while it keys the entry
    std::string key;      // kube::KeyOf
    model::PodFacts facts;
  };
  std::unordered_map<const Json*, PodMemo> pod_memo_;  // guarded by rebuild_mu_
  std::jthread thread_;

  // Steps of RebuildNow(), under rebuild_mu_.
  // The memo entry of pod `obj`, put in `memo`: moved from pod_memo_, or made from the pod's JSON
  // if the object is new since the last rebuild.
  const PodMemo& MemoOf(const kube::ObjectPtr& obj, std::unordered_map<const Json*, PodMemo>& memo);
  // The facts of `pods` (pointers into the new pod_memo_, or into `*overridden` for pods bound by
  // Assume() that the cache still shows unbound; the caller reserves `assumed.size()` entries in
  // it). The keys of the `assumed` entries to forget go to `*settled`.
  std::vector<const model::PodFacts*> PodFactsWithAssumed(
      const std::vector<kube::ObjectPtr>& pods, const std::map<std::string, Assumed>& assumed,
      std::vector<model::PodFacts>* overridden, std::vector<std::string>* settled);
};

}  // namespace nvl72::extender
