#include "operator/metrics.h"

namespace nvl72::op {
namespace {
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  return kBuckets;
}
}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  reconciles_ = &prometheus::BuildCounter()
                     .Name("nvl72_operator_reconciles_total")
                     .Help("Reconciles by kind (job, admission) and result (ok, error, requeue)")
                     .Register(*registry_);
  reconcile_seconds_ = &prometheus::BuildHistogram()
                            .Name("nvl72_operator_reconcile_duration_seconds")
                            .Help("Wall time of one reconcile, API calls included")
                            .Register(*registry_);
  decision_seconds_ = &prometheus::BuildHistogram()
                           .Name("nvl72_operator_admission_decision_seconds")
                           .Help("Time of one gang placement decision (no API calls)")
                           .Register(*registry_)
                           .Add({}, LatencyBuckets());
  admitted_total_ = &prometheus::BuildCounter()
                         .Name("nvl72_operator_admitted_jobs_total")
                         .Help("Placements committed to status.placement")
                         .Register(*registry_)
                         .Add({});
  waiting_ = &prometheus::BuildGauge()
                  .Name("nvl72_operator_waiting_jobs")
                  .Help("Jobs waiting for capacity after the last admission pass")
                  .Register(*registry_)
                  .Add({});
  admitted_ = &prometheus::BuildGauge()
                   .Name("nvl72_operator_admitted_jobs")
                   .Help("Jobs holding a reservation after the last admission pass")
                   .Register(*registry_)
                   .Add({});
  domain_free_ = &prometheus::BuildGauge()
                      .Name("nvl72_operator_domain_free_gpus")
                      .Help("Free GPUs on schedulable nodes per NVLink domain")
                      .Register(*registry_);
}

void Metrics::CountReconcile(std::string_view kind, std::string_view result, double seconds) {
  std::string key = std::string(kind) + "/" + std::string(result);
  prometheus::Counter* c;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = reconcile_counters_.find(key);
    if (it == reconcile_counters_.end()) {
      c = &reconciles_->Add({{"kind", std::string(kind)}, {"result", std::string(result)}});
      reconcile_counters_.emplace(key, c);
    } else {
      c = it->second;
    }
  }
  c->Increment();
  reconcile_seconds_->Add({{"kind", std::string(kind)}}, LatencyBuckets()).Observe(seconds);
}

double Metrics::ReconcileCount(std::string_view kind, std::string_view result) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = reconcile_counters_.find(std::string(kind) + "/" + std::string(result));
  return it == reconcile_counters_.end() ? 0 : it->second->Value();
}

void Metrics::CountAdmitted() { admitted_total_->Increment(); }
void Metrics::SetWaitingJobs(int n) { waiting_->Set(n); }
void Metrics::SetAdmittedJobs(int n) { admitted_->Set(n); }
void Metrics::SetDomainFreeGpus(const std::string& domain, int gpus) {
  domain_free_->Add({{"domain", domain}}).Set(gpus);
}
void Metrics::ObserveDecision(double seconds) { decision_seconds_->Observe(seconds); }

}  // namespace nvl72::op
