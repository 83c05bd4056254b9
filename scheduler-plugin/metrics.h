// Metrics of nvl72-extender (Prometheus text exposition on /metrics of the extender's listener).
//
//   nvl72_extender_requests_total{verb,code}               counter
//   nvl72_extender_request_duration_seconds{verb}          histogram, server-side handling time
//   nvl72_extender_filter_nodes_total{result}              counter: nodes passed / failed by filter
//   nvl72_extender_node_names_total{verb,cache}            counter: filter/prioritize requests with
//                                                           NodeNames, whether the array was cached
//   nvl72_extender_bind_refusals_total                      counter: gang pods refused off their
//   plan nvl72_extender_view_rebuilds_total                      counter
//   nvl72_extender_api_request_duration_seconds{verb,code} histogram of its API server requests
//   nvl72_extender_watch_restarts_total{resource}          counter: informer watches started again
//   nvl72_extender_relists_total{resource}                 counter: informer lists after the first
//   nvl72_extender_watch_errors_total{resource}            counter: failed list/watch calls
//   nvl72_extender_cache_objects{resource}                 gauge: objects in the informer cache
//
// The verbs' success series (code 200) and the API verbs' success series exist from the start.
// Add new metrics here (one place) so that a later pass can extend them without touching the
// server. Thread-safety: all methods may be called concurrently.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "kube/informer_metrics.h"

namespace nvl72::extender {

class Metrics {
 public:
  Metrics();

  // One finished HTTP request. `verb` is "filter", "prioritize", "bind", "preempt" or "other".
  void ObserveRequest(std::string_view verb, int code, double seconds);
  void ObserveFilter(size_t passed, size_t failed);
  // A filter or prioritize request with NodeNames: `cached` when its array was a recent one
  // (NodeNamesCache), so it was neither scanned nor (in the same view) resolved again.
  void ObserveNodeNames(std::string_view verb, bool cached);
  void IncBindRefusals();
  void IncViewRebuilds(int64_t n = 1);
  // One API server request (kube::HttpClient's RequestObserver).
  void ObserveApiRequest(std::string_view verb, int code, double seconds);
  // Cumulative counters (kube::InformerStats) and cache size of one informer ("nodes", "pods",
  // "nvl72jobs"): the counters move by the increase since the last call.
  void SetInformer(std::string_view resource, const kube::InformerStats& stats, size_t objects);

  // Prometheus text format of everything registered.
  std::string Serialize() const;
  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Counter& filter_passed_;
  prometheus::Counter& filter_failed_;
  prometheus::Counter* node_names_[2][2];  // [verb: filter, prioritize][cached]
  prometheus::Counter& bind_refusals_;
  prometheus::Counter& view_rebuilds_;
  prometheus::Family<prometheus::Histogram>& api_duration_;

  std::mutex mu_;  // guards the lookup maps below (families are thread-safe; lookups are cached)
  std::map<std::pair<std::string, int>, prometheus::Counter*> request_counters_;
  std::map<std::string, prometheus::Histogram*, std::less<>> histograms_;
  std::map<std::string, prometheus::Histogram*, std::less<>> api_histograms_;  // "verb/code"

  kube::InformerMetrics informers_;
};

}  // namespace nvl72::extender
