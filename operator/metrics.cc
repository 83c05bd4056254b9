#include "operator/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "kube/http_client.h"

namespace nvl72::op {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

// Work of the operator itself: 0.5 ms .. 5 s.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  return kBuckets;
}

// Waits of people and jobs: 1 s .. 1 day.
const Histogram::BucketBoundaries& WaitBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {1,   5,    15,   30,   60,    120,   300,
                                                       600, 1800, 3600, 7200, 14400, 43200, 86400};
  return kBuckets;
}

// Recovery: a replacement takes seconds, a gang moved after the wait bound minutes.
const Histogram::BucketBoundaries& RecoveryBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {0.5, 1,   2,   5,   10,   20,  30,
                                                       60,  120, 300, 600, 1800, 3600};
  return kBuckets;
}

std::string Key(std::string_view a, std::string_view b) {
  std::string k(a);
  k += '/';
  k += b;
  return k;
}

template <typename T>
prometheus::Family<T>& Build(prometheus::Registry& r, const char* name, const char* help);

template <>
prometheus::Family<prometheus::Counter>& Build(prometheus::Registry& r, const char* name,
                                               const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}
template <>
prometheus::Family<prometheus::Gauge>& Build(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}
template <>
prometheus::Family<Histogram>& Build(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

}  // namespace

class Metrics::HookedCollectable : public prometheus::Collectable {
 public:
  explicit HookedCollectable(const Metrics* m) : m_(m) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    m_->RunHook();
    return m_->registry_->Collect();
  }

 private:
  const Metrics* m_;
};

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  collectable_ = std::make_shared<HookedCollectable>(this);
  RegisterReconcileMetrics(*registry_);
  RegisterAdmissionMetrics(*registry_);
  RegisterDomainMetrics(*registry_);
  RegisterRecoveryMetrics(*registry_);
  RegisterApiMetrics(*registry_);
}

// Reconciles, the work queue, the leader flag and the informers.
void Metrics::RegisterReconcileMetrics(prometheus::Registry& r) {
  reconciles_ =
      &Build<Counter>(r, "nvl72_operator_reconciles_total",
                      "Reconciles by kind (job, admission) and result (ok, error, requeue)");
  reconcile_seconds_ = &Build<Histogram>(r, "nvl72_operator_reconcile_duration_seconds",
                                         "Wall time of one reconcile, API calls included");
  retries_ = &Build<Counter>(r, "nvl72_operator_workqueue_retries_total",
                             "Keys re-queued with backoff after a failed reconcile")
                  .Add({});
  queue_depth_ = &Build<Gauge>(r, "nvl72_operator_workqueue_depth",
                               "Keys ready in the work queue, waiting for a worker")
                      .Add({});
  queue_delayed_ = &Build<Gauge>(r, "nvl72_operator_workqueue_delayed",
                                 "Keys in the work queue waiting for a backoff or requeue delay")
                        .Add({});
  leader_ = &Build<Gauge>(r, "nvl72_operator_leader",
                          "1 while this replica holds the leader lease (or runs without election)")
                 .Add({});
  informers_ = std::make_unique<kube::InformerMetrics>(
      r, "nvl72_operator",
      std::initializer_list<std::string_view>{kInformerResources[0], kInformerResources[1],
                                              kInformerResources[2]});

  for (auto kind : kReconcileKinds) {
    reconcile_histograms_[std::string(kind)] =
        &reconcile_seconds_->Add({{"kind", std::string(kind)}}, LatencyBuckets());
    for (auto result : kReconcileResults) {
      reconcile_counters_[Key(kind, result)] =
          &reconciles_->Add({{"kind", std::string(kind)}, {"result", std::string(result)}});
    }
  }
}

// Admission: jobs admitted, waiting, stuck and by state; admission waits; placement decisions.
void Metrics::RegisterAdmissionMetrics(prometheus::Registry& r) {
  admitted_total_ = &Build<Counter>(r, "nvl72_operator_admitted_jobs_total",
                                    "Placements committed to status.placement")
                         .Add({});
  admission_wait_ = &Build<Histogram>(r, "nvl72_operator_admission_wait_seconds",
                                      "Time from a job's creation to its committed placement")
                         .Add({}, WaitBuckets());
  decision_seconds_ =
      &Build<Histogram>(r, "nvl72_operator_placement_decision_duration_seconds",
                        "Time of one gang placement decision of the placement core (no API calls)")
           .Add({}, LatencyBuckets());
  jobs_ = &Build<Gauge>(r, "nvl72_operator_jobs",
                        "NVL72Jobs by state after the last admission pass (Pending: not yet "
                        "looked at; Recovering: Recovering condition True)");
  stuck_ = &Build<Gauge>(r, "nvl72_operator_stuck_jobs",
                         "Jobs holding a reservation whose ranks have not all run for "
                         "--stuck-seconds, by the reason of their Running condition");
  waiting_ = &Build<Gauge>(r, "nvl72_operator_waiting_jobs",
                           "Jobs waiting for capacity after the last admission pass")
                  .Add({});
  longest_wait_ = &Build<Gauge>(r, "nvl72_operator_longest_wait_seconds",
                                "Age since creation of the oldest job still waiting for capacity "
                                "at the last admission pass (0: none waits)")
                       .Add({});
  admitted_ = &Build<Gauge>(r, "nvl72_operator_admitted_jobs",
                            "Jobs holding a reservation after the last admission pass")
                   .Add({});

  for (auto s : kJobStates) job_states_[std::string(s)] = &jobs_->Add({{"state", std::string(s)}});
}

// Per-domain capacity, health and fragmentation; the per-domain series follow the domains of the
// last admission pass (SetClusterStats).
void Metrics::RegisterDomainMetrics(prometheus::Registry& r) {
  domain_nodes_ = &Build<Gauge>(r, "nvl72_operator_domain_nodes", "GPU nodes per NVLink domain");
  domain_healthy_ = &Build<Gauge>(r, "nvl72_operator_domain_healthy_nodes",
                                  "Schedulable nodes (Ready, not cordoned, no untolerated "
                                  "NoSchedule/NoExecute taint) per NVLink domain");
  domain_gpus_ = &Build<Gauge>(r, "nvl72_operator_domain_gpus",
                               "Allocatable GPUs of all nodes per NVLink domain");
  domain_allocated_ = &Build<Gauge>(r, "nvl72_operator_domain_allocated_gpus",
                                    "GPUs used by pods or reserved by admitted gangs per domain");
  domain_free_ =
      &Build<Gauge>(r, "nvl72_operator_domain_free_gpus",
                    "Free GPUs on schedulable nodes per NVLink domain (spares included)");
  domain_spare_ = &Build<Gauge>(r, "nvl72_operator_domain_spare_gpus",
                                "Free GPUs on the nodes held back as spares per NVLink domain");
  domain_largest_gang_ =
      &Build<Gauge>(r, "nvl72_operator_domain_largest_gang_nodes",
                    "Whole-node ranks a new gang can still get in the domain (empty, "
                    "schedulable, unreserved nodes minus the spare reserve)");
  domain_stranded_ = &Build<Gauge>(r, "nvl72_operator_domain_stranded_gpus",
                                   "Free GPUs no waiting job shape can use, per NVLink domain");
  fragmentation_ = &Build<Gauge>(r, "nvl72_operator_cluster_fragmentation",
                                 "1 - largest free whole-node block / all free whole nodes "
                                 "(0: all free capacity in one domain, or none free)")
                        .Add({});
}

// Recoveries, safety-net replans and defragmentation moves.
void Metrics::RegisterRecoveryMetrics(prometheus::Registry& r) {
  recoveries_ = &Build<Counter>(r, "nvl72_operator_recoveries_total",
                                "Finished recoveries of jobs on failed nodes by outcome "
                                "(in_place, moved, failed)");
  recovery_seconds_ = &Build<Histogram>(
      r, "nvl72_operator_recovery_duration_seconds",
      "From the recovery decision to every rank running again, by outcome (in_place, moved)");
  replans_ =
      &Build<Counter>(r, "nvl72_operator_replans_total",
                      "Gangs whose reservation the safety net released because kube-scheduler "
                      "refused a rank on its planned node (docs/operator.md)")
           .Add({});
  defrag_moves_ = &Build<Counter>(r, "nvl72_operator_defrag_moves_total",
                                  "Defragmentation moves by result (started, completed, failed)");

  for (auto o : kRecoveryOutcomes) {
    recovery_counters_[std::string(o)] = &recoveries_->Add({{"outcome", std::string(o)}});
    if (o != "failed") {
      recovery_histograms_[std::string(o)] =
          &recovery_seconds_->Add({{"outcome", std::string(o)}}, RecoveryBuckets());
    }
  }
  for (auto d : kDefragResults) {
    defrag_counters_[std::string(d)] = &defrag_moves_->Add({{"result", std::string(d)}});
  }
}

// API server requests.
void Metrics::RegisterApiMetrics(prometheus::Registry& r) {
  api_seconds_ = &Build<Histogram>(r, "nvl72_operator_api_request_duration_seconds",
                                   "API server requests by verb and HTTP code (0: no response)");

  // The success code of each verb: the series a healthy operator has.
  for (auto verb : kube::kRequestVerbs) {
    const std::string code = verb == "create" ? "201" : "200";
    api_histograms_[Key(verb, code)] =
        &api_seconds_->Add({{"verb", std::string(verb)}, {"code", code}}, LatencyBuckets());
  }
}

Metrics::~Metrics() { SetCollectHook({}); }

void Metrics::SetCollectHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> l(hook_mu_);
  hook_ = std::move(hook);
}

void Metrics::RunHook() const {
  std::lock_guard<std::mutex> l(hook_mu_);
  if (hook_) hook_();
}

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collectable_->Collect());
  return out.str();
}

// ---------------------------------------------------------------------------------------------

void Metrics::CountReconcile(std::string_view kind, std::string_view result, double seconds) {
  const std::string key = Key(kind, result);
  prometheus::Counter* c;
  prometheus::Histogram* h;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = reconcile_counters_.find(key);
    if (it == reconcile_counters_.end()) {
      it = reconcile_counters_
               .emplace(key, &reconciles_->Add(
                                 {{"kind", std::string(kind)}, {"result", std::string(result)}}))
               .first;
    }
    c = it->second;
    auto hit = reconcile_histograms_.find(kind);
    if (hit == reconcile_histograms_.end()) {
      hit = reconcile_histograms_
                .emplace(std::string(kind),
                         &reconcile_seconds_->Add({{"kind", std::string(kind)}}, LatencyBuckets()))
                .first;
    }
    h = hit->second;
  }
  c->Increment();
  h->Observe(seconds);
}

double Metrics::ReconcileCount(std::string_view kind, std::string_view result) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = reconcile_counters_.find(Key(kind, result));
  return it == reconcile_counters_.end() ? 0 : it->second->Value();
}

void Metrics::CountRetry() { retries_->Increment(); }

void Metrics::CountReplan() { replans_->Increment(); }

void Metrics::SetWorkQueue(size_t ready, size_t delayed) {
  queue_depth_->Set(static_cast<double>(ready));
  queue_delayed_->Set(static_cast<double>(delayed));
}

void Metrics::SetLeader(bool leading) { leader_->Set(leading ? 1 : 0); }

void Metrics::SetInformer(std::string_view resource, const kube::InformerStats& stats,
                          size_t objects) {
  informers_->Set(resource, stats, objects);
}

// ---------------------------------------------------------------------------------------------

void Metrics::CountAdmitted(double wait_seconds) {
  admitted_total_->Increment();
  admission_wait_->Observe(wait_seconds < 0 ? 0 : wait_seconds);
}

void Metrics::ObserveDecision(double seconds) { decision_seconds_->Observe(seconds); }

void Metrics::SetCountsLocked(prometheus::Family<prometheus::Gauge>* family, const char* label,
                              std::map<std::string, prometheus::Gauge*, std::less<>>& series,
                              const std::map<std::string, int, std::less<>>& counts) {
  for (auto& [key, gauge] : series) {
    auto it = counts.find(key);
    gauge->Set(it == counts.end() ? 0 : it->second);
  }
  for (const auto& [key, n] : counts) {
    if (series.count(key) == 0)
      series.emplace(key, &family->Add({{label, key}})).first->second->Set(n);
  }
}

void Metrics::SetJobStates(const std::map<std::string, int, std::less<>>& counts) {
  std::lock_guard<std::mutex> l(mu_);
  SetCountsLocked(jobs_, "state", job_states_, counts);
}

void Metrics::SetStuckJobs(const std::map<std::string, int, std::less<>>& counts) {
  std::lock_guard<std::mutex> l(mu_);
  SetCountsLocked(stuck_, "reason", stuck_reasons_, counts);
}

void Metrics::SetWaiting(int jobs, double longest_wait_seconds) {
  waiting_->Set(jobs);
  longest_wait_->Set(longest_wait_seconds);
}

void Metrics::SetAdmittedJobs(int n) { admitted_->Set(n); }

Metrics::DomainSeries& Metrics::DomainLocked(const std::string& name) {
  auto it = domains_.find(name);
  if (it != domains_.end()) return it->second;
  const prometheus::Labels l = {{"domain", name}};
  DomainSeries s{&domain_nodes_->Add(l),        &domain_healthy_->Add(l), &domain_gpus_->Add(l),
                 &domain_allocated_->Add(l),    &domain_free_->Add(l),    &domain_spare_->Add(l),
                 &domain_largest_gang_->Add(l), &domain_stranded_->Add(l)};
  return domains_.emplace(name, s).first->second;
}

void Metrics::RemoveDomainLocked(const std::string& name) {
  auto it = domains_.find(name);
  if (it == domains_.end()) return;
  DomainSeries& s = it->second;
  domain_nodes_->Remove(s.nodes);
  domain_healthy_->Remove(s.healthy_nodes);
  domain_gpus_->Remove(s.gpus);
  domain_allocated_->Remove(s.allocated);
  domain_free_->Remove(s.free);
  domain_spare_->Remove(s.spare);
  domain_largest_gang_->Remove(s.largest_gang);
  domain_stranded_->Remove(s.stranded);
  domains_.erase(it);
}

void Metrics::SetClusterStats(const placement::Snapshot& snapshot,
                              const placement::ClusterStats& stats) {
  std::lock_guard<std::mutex> l(mu_);
  std::set<std::string, std::less<>> seen;
  const size_t n = std::min(snapshot.domains.size(), stats.domains.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = snapshot.domains[i].name;
    const placement::DomainStats& d = stats.domains[i];
    DomainSeries& s = DomainLocked(name);
    s.nodes->Set(d.nodes);
    s.healthy_nodes->Set(d.healthy_nodes);
    s.gpus->Set(d.gpus_total);
    s.allocated->Set(d.gpus_used);
    s.free->Set(d.gpus_free);
    s.spare->Set(d.gpus_spare);
    s.largest_gang->Set(d.largest_gang_nodes);
    s.stranded->Set(d.stranded_gpus);
    seen.insert(name);
  }
  std::vector<std::string> gone;
  for (const auto& [name, _] : domains_) {
    if (seen.count(name) == 0) gone.push_back(name);
  }
  for (const auto& name : gone) RemoveDomainLocked(name);
  fragmentation_->Set(stats.fragmentation);
}

// ---------------------------------------------------------------------------------------------

void Metrics::CountRecovery(std::string_view outcome, std::optional<double> seconds) {
  prometheus::Counter* c;
  prometheus::Histogram* h = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = recovery_counters_.find(outcome);
    if (it == recovery_counters_.end()) {
      it =
          recovery_counters_
              .emplace(std::string(outcome), &recoveries_->Add({{"outcome", std::string(outcome)}}))
              .first;
    }
    c = it->second;
    if (seconds.has_value()) {
      auto hit = recovery_histograms_.find(outcome);
      if (hit == recovery_histograms_.end()) {
        hit = recovery_histograms_
                  .emplace(std::string(outcome),
                           &recovery_seconds_->Add({{"outcome", std::string(outcome)}},
                                                   RecoveryBuckets()))
                  .first;
      }
      h = hit->second;
    }
  }
  c->Increment();
  if (h != nullptr) h->Observe(*seconds < 0 ? 0 : *seconds);
}

double Metrics::RecoveryCount(std::string_view outcome) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = recovery_counters_.find(outcome);
  return it == recovery_counters_.end() ? 0 : it->second->Value();
}

void Metrics::CountDefragMove(std::string_view result) {
  prometheus::Counter* c;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = defrag_counters_.find(result);
    if (it == defrag_counters_.end()) {
      it = defrag_counters_
               .emplace(std::string(result), &defrag_moves_->Add({{"result", std::string(result)}}))
               .first;
    }
    c = it->second;
  }
  c->Increment();
}

double Metrics::DefragMoves(std::string_view result) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = defrag_counters_.find(result);
  return it == defrag_counters_.end() ? 0 : it->second->Value();
}

void Metrics::ObserveApiRequest(std::string_view verb, int code, double seconds) {
  const std::string code_text = std::to_string(code);
  const std::string key = Key(verb, code_text);
  prometheus::Histogram* h;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = api_histograms_.find(key);
    if (it == api_histograms_.end()) {
      it = api_histograms_
               .emplace(key, &api_seconds_->Add({{"verb", std::string(verb)}, {"code", code_text}},
                                                LatencyBuckets()))
               .first;
    }
    h = it->second;
  }
  h->Observe(seconds);
}

}  // namespace nvl72::op
