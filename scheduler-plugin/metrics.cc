#include "scheduler-plugin/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace nvl72::extender {
namespace {

prometheus::Histogram::BucketBoundaries DurationBuckets() {
  // 25 us .. ~6.5 s, factor 2: resolves the sub-millisecond hot path and the scheduler's timeout.
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 25e-6; v < 7.0; v *= 2) b.push_back(v);
  return b;
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("nvl72_extender_requests_total")
                    .Help("HTTP requests handled by nvl72-extender, by verb and HTTP status code")
                    .Register(*registry_)),
      duration_(prometheus::BuildHistogram()
                    .Name("nvl72_extender_request_duration_seconds")
                    .Help("Server-side handling time of extender requests, by verb")
                    .Register(*registry_)),
      filter_passed_(prometheus::BuildCounter()
                         .Name("nvl72_extender_filter_nodes_total")
                         .Help("Nodes judged by the filter verb, by result")
                         .Register(*registry_)
                         .Add({{"result", "passed"}})),
      filter_failed_(prometheus::BuildCounter()
                         .Name("nvl72_extender_filter_nodes_total")
                         .Help("Nodes judged by the filter verb, by result")
                         .Register(*registry_)
                         .Add({{"result", "failed"}})),
      bind_refusals_(prometheus::BuildCounter()
                         .Name("nvl72_extender_bind_refusals_total")
                         .Help("Gang pods the bind verb refused to bind off their planned node")
                         .Register(*registry_)
                         .Add({})),
      view_rebuilds_(prometheus::BuildCounter()
                         .Name("nvl72_extender_view_rebuilds_total")
                         .Help("Cluster views rebuilt from the informer caches")
                         .Register(*registry_)
                         .Add({})) {}

void Metrics::ObserveRequest(std::string_view verb, int code, double seconds) {
  prometheus::Counter* c = nullptr;
  prometheus::Histogram* h = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto key = std::make_pair(std::string(verb), code);
    auto it = request_counters_.find(key);
    if (it == request_counters_.end()) {
      c = &requests_.Add({{"verb", key.first}, {"code", std::to_string(code)}});
      request_counters_.emplace(key, c);
    } else {
      c = it->second;
    }
    auto hit = histograms_.find(verb);
    if (hit == histograms_.end()) {
      h = &duration_.Add({{"verb", std::string(verb)}}, DurationBuckets());
      histograms_.emplace(std::string(verb), h);
    } else {
      h = hit->second;
    }
  }
  c->Increment();
  h->Observe(seconds);
}

void Metrics::ObserveFilter(size_t passed, size_t failed) {
  filter_passed_.Increment(static_cast<double>(passed));
  filter_failed_.Increment(static_cast<double>(failed));
}

void Metrics::IncBindRefusals() { bind_refusals_.Increment(); }
void Metrics::IncViewRebuilds(int64_t n) { view_rebuilds_.Increment(static_cast<double>(n)); }

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace nvl72::extender
