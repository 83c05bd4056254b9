#include "scheduler-plugin/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

#include "kube/http_client.h"

namespace nvl72::extender {
namespace {

prometheus::Histogram::BucketBoundaries DurationBuckets() {
  // 25 us .. ~6.5 s, factor 2: resolves the sub-millisecond hot path and the scheduler's timeout.
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 25e-6; v < 7.0; v *= 2) b.push_back(v);
  return b;
}

prometheus::Histogram::BucketBoundaries ApiBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
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
                         .Add({})),
      api_duration_(prometheus::BuildHistogram()
                        .Name("nvl72_extender_api_request_duration_seconds")
                        .Help("API server requests of the extender (bind, lists) by verb and HTTP "
                              "code (0: no response)")
                        .Register(*registry_)),
      informers_(*registry_, "nvl72_extender", {"nodes", "pods", "nvl72jobs"}) {
  // Every verb's success series exists from the start (rate() and alerts see 0, not nothing).
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    request_counters_[{verb, 200}] = &requests_.Add({{"verb", verb}, {"code", "200"}});
    histograms_[verb] = &duration_.Add({{"verb", verb}}, DurationBuckets());
  }
  auto& node_names =
      prometheus::BuildCounter()
          .Name("nvl72_extender_node_names_total")
          .Help(
              "Filter and prioritize requests with NodeNames, by verb and by whether "
              "the array was a recent one (cache hit: not scanned or resolved again)")
          .Register(*registry_);
  for (int v = 0; v < 2; ++v) {
    for (int c = 0; c < 2; ++c) {
      node_names_[v][c] = &node_names.Add(
          {{"verb", v == 0 ? "filter" : "prioritize"}, {"cache", c == 0 ? "miss" : "hit"}});
    }
  }
  for (auto verb : kube::kRequestVerbs) {
    const std::string code = verb == "create" ? "201" : "200";
    api_histograms_[std::string(verb) + "/" + code] =
        &api_duration_.Add({{"verb", std::string(verb)}, {"code", code}}, ApiBuckets());
  }
}

void Metrics::ObserveApiRequest(std::string_view verb, int code, double seconds) {
  const std::string code_text = std::to_string(code);
  const std::string key = std::string(verb) + "/" + code_text;
  prometheus::Histogram* h;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = api_histograms_.find(key);
    if (it == api_histograms_.end()) {
      it = api_histograms_
               .emplace(key, &api_duration_.Add({{"verb", std::string(verb)}, {"code", code_text}},
                                                ApiBuckets()))
               .first;
    }
    h = it->second;
  }
  h->Observe(seconds);
}

void Metrics::SetInformer(std::string_view resource, const kube::InformerStats& stats,
                          size_t objects) {
  informers_.Set(resource, stats, objects);
}

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

void Metrics::ObserveNodeNames(std::string_view verb, bool cached) {
  node_names_[verb == "prioritize" ? 1 : 0][cached ? 1 : 0]->Increment();
}

void Metrics::IncBindRefusals() { bind_refusals_.Increment(); }
void Metrics::IncViewRebuilds(int64_t n) { view_rebuilds_.Increment(static_cast<double>(n)); }

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace nvl72::extender
