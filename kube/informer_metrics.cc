#include "kube/informer_metrics.h"

namespace nvl72::kube {

InformerMetrics::InformerMetrics(prometheus::Registry& registry, const std::string& prefix,
                                 std::initializer_list<std::string_view> resources)
    : watch_restarts_(prometheus::BuildCounter()
                          .Name(prefix + "_watch_restarts_total")
                          .Help("Informer watches started again after the first, by resource")
                          .Register(registry)),
      relists_(prometheus::BuildCounter()
                   .Name(prefix + "_relists_total")
                   .Help("Informer lists after the first (410 Gone), by resource")
                   .Register(registry)),
      watch_errors_(prometheus::BuildCounter()
                        .Name(prefix + "_watch_errors_total")
                        .Help("Informer list/watch calls that failed, by resource")
                        .Register(registry)),
      cache_objects_(prometheus::BuildGauge()
                         .Name(prefix + "_cache_objects")
                         .Help("Objects in the informer cache, by resource")
                         .Register(registry)) {
  std::lock_guard<std::mutex> l(mu_);
  for (std::string_view r : resources) SeriesLocked(r);
}

InformerMetrics::Series& InformerMetrics::SeriesLocked(std::string_view resource) {
  auto it = series_.find(resource);
  if (it == series_.end()) {
    const prometheus::Labels l = {{"resource", std::string(resource)}};
    it = series_
             .emplace(std::string(resource), Series{&watch_restarts_.Add(l),
                                                    &relists_.Add(l),
                                                    &watch_errors_.Add(l),
                                                    &cache_objects_.Add(l),
                                                    {}})
             .first;
  }
  return it->second;
}

void InformerMetrics::Set(std::string_view resource, const InformerStats& stats, size_t objects) {
  std::lock_guard<std::mutex> l(mu_);
  Series& s = SeriesLocked(resource);
  // A smaller value than last time is a new informer (a restarted controller): all of it is new.
  auto advance = [](prometheus::Counter* c, int64_t now, int64_t before) {
    const int64_t d = now >= before ? now - before : now;
    if (d > 0) c->Increment(static_cast<double>(d));
  };
  advance(s.watch_restarts, stats.watch_restarts, s.last.watch_restarts);
  advance(s.relists, stats.relists, s.last.relists);
  advance(s.watch_errors, stats.watch_errors, s.last.watch_errors);
  s.last = stats;
  s.objects->Set(static_cast<double>(objects));
}

}  // namespace nvl72::kube
