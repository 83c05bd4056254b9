// Prometheus series of informers, shared by nvl72-operator and nvl72-extender:
//
//   <prefix>_watch_restarts_total{resource}  counter: watches started again after the first
//   <prefix>_relists_total{resource}         counter: lists after the first (410 Gone)
//   <prefix>_watch_errors_total{resource}    counter: list/watch calls that failed
//   <prefix>_cache_objects{resource}         gauge: objects in the informer cache
//
// Informers count cumulatively (kube::InformerStats); Set() moves the counters by the increase
// since the previous call for that resource, so it can be called at any rate (each scrape, each
// second). A library of its own (nvl72_kube_metrics) so that nvl72_kube does not depend on
// prometheus-cpp. Thread-safety: Set() may be called from any thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/informer.h"

namespace nvl72::kube {

class InformerMetrics {
 public:
  // Registers the four families as `<prefix>_...` in `registry` (which must outlive this object);
  // the series of `resources` exist from the start at 0.
  InformerMetrics(prometheus::Registry& registry, const std::string& prefix,
                  std::initializer_list<std::string_view> resources);

  void Set(std::string_view resource, const InformerStats& stats, size_t objects);

 private:
  struct Series {
    prometheus::Counter* watch_restarts;
    prometheus::Counter* relists;
    prometheus::Counter* watch_errors;
    prometheus::Gauge* objects;
    InformerStats last;
  };
  Series& SeriesLocked(std::string_view resource);

  prometheus::Family<prometheus::Counter>& watch_restarts_;
  prometheus::Family<prometheus::Counter>& relists_;
  prometheus::Family<prometheus::Counter>& watch_errors_;
  prometheus::Family<prometheus::Gauge>& cache_objects_;
  std::mutex mu_;
  std::map<std::string, Series, std::less<>> series_;
};

}  // namespace nvl72::kube
