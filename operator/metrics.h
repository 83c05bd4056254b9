// Prometheus metrics of nvl72-operator: every metric lives here (names start with nvl72_operator_;
// docs/observability.md lists them with their meaning, the alerts and the dashboard built on them).
//
// Writers: the Reconciler (admission pass: jobs, waits, decisions, per-domain capacity),
// JobRecovery (recoveries), the Controller (reconciles, work queue, informers, leader) and the kube
// client's request observer (API latency). Defragmentation calls CountDefragMove().
//
// Labelled series whose label values are known upfront (reconcile kinds and results, job states,
// recovery outcomes, defragmentation results, informer resources, API verbs) exist from the start
// with value 0, so that rate() and alerts see a series before the first event. Per-domain series
// follow the domains of the last admission pass: a domain that disappears loses its series.
//
// Scrape-time values (work-queue depth, informer counters, leader) come from a collect hook the
// Controller installs: Collectable() runs it before every collection.
//
// Thread-safety: every method is safe from any thread. The collect hook runs on the scraping
// thread.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/informer.h"
#include "kube/informer_metrics.h"
#include "placement/fragmentation.h"
#include "placement/snapshot.h"

namespace nvl72::op {

class Metrics {
 public:
  // Label values known upfront (zero-initialised series).
  static constexpr std::array<std::string_view, 2> kReconcileKinds = {"job", "admission"};
  static constexpr std::array<std::string_view, 3> kReconcileResults = {"ok", "error", "requeue"};
  // JobMetricState() values.
  static constexpr std::array<std::string_view, 8> kJobStates = {
      "Pending", "Waiting", "Admitted", "Running", "Recovering", "Succeeded", "Failed", "Invalid"};
  static constexpr std::array<std::string_view, 3> kRecoveryOutcomes = {"in_place", "moved",
                                                                        "failed"};
  static constexpr std::array<std::string_view, 3> kDefragResults = {"started", "completed",
                                                                     "failed"};
  static constexpr std::array<std::string_view, 3> kInformerResources = {"nvl72jobs", "pods",
                                                                         "nodes"};

  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // What the /metrics exposer serves: runs the collect hook, then collects the registry.
  std::shared_ptr<prometheus::Collectable> Collectable() const { return collectable_; }
  // Prometheus text format of Collectable() (tests, benchmarks).
  std::string Serialize() const;

  // Runs before every collection, e.g. to call SetWorkQueue/SetInformer/SetLeader. {} removes it;
  // removal waits for a collection in progress, so the hook's captures may die right after.
  void SetCollectHook(std::function<void()> hook);

  // --- reconciles and the work queue (Controller, Reconciler)
  // kind: kReconcileKinds; result: kReconcileResults.
  void CountReconcile(std::string_view kind, std::string_view result, double seconds);
  void CountRetry();  // a key re-queued with backoff after a failed reconcile
  void SetWorkQueue(size_t ready, size_t delayed);
  void SetLeader(bool leading);
  // Cumulative informer counters (kube::InformerStats) and cache size of one resource; the
  // counters only move forward (a lower value, e.g. a new informer, is taken as a restart).
  void SetInformer(std::string_view resource, const kube::InformerStats& stats, size_t objects);

  // --- admission (Reconciler)
  // A placement committed; `wait_seconds` from the job's creation to the commit.
  void CountAdmitted(double wait_seconds);
  void ObserveDecision(double seconds);  // one PlaceGang call
  // Jobs per JobMetricState() after an admission pass; states not in the map are set to 0.
  void SetJobStates(const std::map<std::string, int, std::less<>>& counts);
  // Stuck jobs per reason (CountStuckJobs); reasons seen before and not in the map are set to 0.
  void SetStuckJobs(const std::map<std::string, int, std::less<>>& counts);
  // Jobs waiting for capacity and the age (since creation) of the oldest of them (0: none).
  void SetWaiting(int jobs, double longest_wait_seconds);
  void SetAdmittedJobs(int n);  // jobs holding a reservation
  // Per-domain capacity, health and fragmentation of the snapshot of an admission pass.
  // REQUIRES: stats computed from `snapshot` (stats.domains parallel to snapshot.domains).
  void SetClusterStats(const placement::Snapshot& snapshot, const placement::ClusterStats& stats);

  // --- recovery (JobRecovery) and defragmentation
  // outcome: kRecoveryOutcomes. `seconds` (completed recoveries): from the recovery decision to
  // every rank running again.
  void CountRecovery(std::string_view outcome, std::optional<double> seconds);
  // result: kDefragResults ("started" when a move is issued, then "completed" or "failed").
  void CountDefragMove(std::string_view result);
  // A gang re-planned by the safety net (operator/safety_net.h).
  void CountReplan();

  // --- API server requests (kube::HttpClient's RequestObserver)
  void ObserveApiRequest(std::string_view verb, int code, double seconds);

  // For tests: current values (0 for a series that does not exist).
  double ReconcileCount(std::string_view kind, std::string_view result) const;
  double AdmittedTotal() const { return admitted_total_->Value(); }
  double WaitingJobs() const { return waiting_->Value(); }
  double RecoveryCount(std::string_view outcome) const;
  double DefragMoves(std::string_view result) const;
  double Replans() const { return replans_->Value(); }

 private:
  class HookedCollectable;
  struct DomainSeries {
    prometheus::Gauge* nodes;
    prometheus::Gauge* healthy_nodes;
    prometheus::Gauge* gpus;
    prometheus::Gauge* allocated;
    prometheus::Gauge* free;
    prometheus::Gauge* spare;
    prometheus::Gauge* largest_gang;
    prometheus::Gauge* stranded;
  };
  // Constructor steps, in registration order: the metric families of one group and their series
  // whose label values are known upfront.
  void RegisterReconcileMetrics(prometheus::Registry& r);
  void RegisterAdmissionMetrics(prometheus::Registry& r);
  void RegisterDomainMetrics(prometheus::Registry& r);
  void RegisterRecoveryMetrics(prometheus::Registry& r);
  void RegisterApiMetrics(prometheus::Registry& r);
  DomainSeries& DomainLocked(const std::string& name);
  void RemoveDomainLocked(const std::string& name);
  void RunHook() const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> collectable_;

  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Family<prometheus::Histogram>* reconcile_seconds_;
  prometheus::Counter* retries_;
  prometheus::Counter* replans_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* queue_delayed_;
  prometheus::Gauge* leader_;
  std::unique_ptr<kube::InformerMetrics> informers_;

  prometheus::Counter* admitted_total_;
  prometheus::Histogram* admission_wait_;
  prometheus::Histogram* decision_seconds_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* longest_wait_;
  prometheus::Gauge* admitted_;

  prometheus::Family<prometheus::Gauge>* domain_nodes_;
  prometheus::Family<prometheus::Gauge>* domain_healthy_;
  prometheus::Family<prometheus::Gauge>* domain_gpus_;
  prometheus::Family<prometheus::Gauge>* domain_allocated_;
  prometheus::Family<prometheus::Gauge>* domain_free_;
  prometheus::Family<prometheus::Gauge>* domain_spare_;
  prometheus::Family<prometheus::Gauge>* domain_largest_gang_;
  prometheus::Family<prometheus::Gauge>* domain_stranded_;
  prometheus::Gauge* fragmentation_;

  prometheus::Family<prometheus::Counter>* recoveries_;
  prometheus::Family<prometheus::Histogram>* recovery_seconds_;
  prometheus::Family<prometheus::Counter>* defrag_moves_;
  prometheus::Family<prometheus::Histogram>* api_seconds_;

  mutable std::mutex mu_;  // guards the lookup maps below (prometheus-cpp metrics are atomic)
  std::map<std::string, prometheus::Counter*, std::less<>> reconcile_counters_;  // "kind/result"
  std::map<std::string, prometheus::Histogram*, std::less<>> reconcile_histograms_;  // kind
  std::map<std::string, prometheus::Gauge*, std::less<>> job_states_;
  prometheus::Family<prometheus::Gauge>* stuck_;
  std::map<std::string, prometheus::Gauge*, std::less<>> stuck_reasons_;
  // Sets one gauge of `family` per key of `counts` (label `label`); keys of `series` missing from
  // `counts` go to 0. Call with mu_ held.
  void SetCountsLocked(prometheus::Family<prometheus::Gauge>* family, const char* label,
                       std::map<std::string, prometheus::Gauge*, std::less<>>& series,
                       const std::map<std::string, int, std::less<>>& counts);
  std::map<std::string, DomainSeries, std::less<>> domains_;
  std::map<std::string, prometheus::Counter*, std::less<>> recovery_counters_;
  std::map<std::string, prometheus::Histogram*, std::less<>> recovery_histograms_;
  std::map<std::string, prometheus::Counter*, std::less<>> defrag_counters_;
  std::map<std::string, prometheus::Histogram*, std::less<>> api_histograms_;  // "verb/code"

  mutable std::mutex hook_mu_;  // guards hook_; held while the hook runs
  std::function<void()> hook_;
};

}  // namespace nvl72::op
