// Prometheus metrics of nvl72-operator (prefix nvl72_operator_). All metrics live here so a later
// pass can add the full set in one place.
// Thread-safety: every method is safe from any thread (prometheus-cpp metrics are atomic; the
// per-domain gauge map is guarded).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace nvl72::op {

class Metrics {
 public:
  Metrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // kind: "job" | "admission"; result: "ok" | "error" | "requeue".
  void CountReconcile(std::string_view kind, std::string_view result, double seconds);
  void CountAdmitted();               // a placement committed
  void SetWaitingJobs(int n);
  void SetAdmittedJobs(int n);        // jobs holding a reservation
  void SetDomainFreeGpus(const std::string& domain, int gpus);
  // Seconds one admission decision (PlaceGang) took.
  void ObserveDecision(double seconds);

  // For tests: current values.
  double ReconcileCount(std::string_view kind, std::string_view result) const;
  double AdmittedTotal() const { return admitted_total_->Value(); }
  double WaitingJobs() const { return waiting_->Value(); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Family<prometheus::Histogram>* reconcile_seconds_;
  prometheus::Histogram* decision_seconds_;
  prometheus::Counter* admitted_total_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* admitted_;
  prometheus::Family<prometheus::Gauge>* domain_free_;
  mutable std::mutex mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> reconcile_counters_;
};

}  // namespace nvl72::op
