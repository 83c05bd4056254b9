// Service: the extender verbs as functions of a request body, returning an HTTP status and a body.
//
// This is what the HTTP server (scheduler-plugin/server.h) calls for POST <prefix>/<verb>, and what
// benchmarks call to measure server-side handling without a socket. It parses the request
// (scheduler-plugin/wire.h), takes the current ClusterView, asks the Extender and serialises the
// reply. A malformed request is a 400 with {"Error": "..."}; a decision that fails for the pod
// (e.g. bind refused) is a 200 whose result carries Error, as the scheduler expects.
//
// Thread-safety: all methods may run concurrently; the pointed-to objects must outlive the service.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/client.h"
#include "scheduler-plugin/cluster_cache.h"
#include "scheduler-plugin/extender.h"
#include "scheduler-plugin/metrics.h"

namespace nvl72::extender {

struct Response {
  int code = 200;
  std::string body;
};

class Service {
 public:
  // `metrics` may be null.
  Service(const Extender* extender, ViewSource* views, kube::Client* client, Metrics* metrics)
      : extender_(extender), views_(views), client_(client), metrics_(metrics) {}

  Response Filter(std::string_view body) const;
  Response Prioritize(std::string_view body) const;
  Response Bind(std::string_view body) const;
  Response Preempt(std::string_view body) const;
  // Dispatch by verb name; 404 for an unknown verb.
  Response Handle(std::string_view verb, std::string_view body) const;

  bool Ready() const { return views_->Ready(); }

  // Where decisions worth a log line go (bind refusals and failures): a level (1 info, 2 warning),
  // the message and structured keys ("pod", "job", "node"). Unset: not logged. Set before serving.
  using LogKeys = std::vector<std::pair<std::string, std::string>>;
  using LogFn = std::function<void(int level, const std::string& message, const LogKeys& keys)>;
  void SetLog(LogFn log) { log_ = std::move(log); }
  // Requests whose NodeNames were parsed before (kube-scheduler repeats them cycle after cycle).
  int64_t NodeNamesCacheHits() const { return node_names_.hits(); }

 private:
  const Extender* extender_;
  ViewSource* views_;
  kube::Client* client_;
  Metrics* metrics_;
  LogFn log_;
  // Recent NodeNames arrays: the filter's (all nodes) and the prioritize's (those that passed), for
  // a pod or two in flight.
  mutable NodeNamesCache node_names_{4};

  void RememberPassed(const ClusterView& view, const NodeNameList& nodes,
                      const std::vector<int>& passed) const;
};

}  // namespace nvl72::extender
