#include "scheduler-plugin/service.h"

namespace nvl72::extender {
namespace {

Response BadRequest(const Status& s) { return {400, ErrorBody(s.message())}; }

}  // namespace

// kube-scheduler's prioritize request for this pod carries, as its NodeNames, exactly the nodes
// this filter reply passes, in the same order (and Go encodes each name as it did in the filter
// request). Cached with its resolution, that request skips the scan and the name lookups. When
// every node passed, the filter request's own array is already cached.
void Service::RememberPassed(const ClusterView& view, const NodeNameList& nodes,
                             const std::vector<int>& passed) const {
  {
    std::lock_guard<std::mutex> l(nodes.resolved_mu);
    if (nodes.passed_generation == view.generation && nodes.passed == passed) return;
    nodes.passed_generation = view.generation;
    nodes.passed = passed;
  }
  std::string raw;
  std::shared_ptr<NodeNameList> subset = nodes.Subset(passed, &raw);
  const auto ids = view.Resolve(nodes);  // memoised by Extender::Filter for this view
  auto sub_ids = std::make_shared<std::vector<placement::NodeId>>();
  sub_ids->reserve(passed.size());
  for (int i : passed) sub_ids->push_back((*ids)[static_cast<size_t>(i)]);
  subset->resolved_generation = view.generation;  // not shared yet: no lock needed
  subset->resolved = std::move(sub_ids);
  node_names_.Insert(raw, std::move(subset));
}

Response Service::Filter(std::string_view body) const {
  auto args = ParseExtenderArgs(body, extender_->options().gpu_resource, &node_names_);
  if (!args.ok()) return BadRequest(args.status());
  const auto view = views_->View();
  const FilterDecision d = extender_->Filter(*view, *args);
  if (metrics_ != nullptr) {
    metrics_->ObserveFilter(d.passed.size(), d.failed.size());
    if (args->node_cache_capable) metrics_->ObserveNodeNames("filter", args->node_names_cached);
  }
  const NodeNameList& nodes = *args->nodes;
  FilterReply reply;
  reply.names_are_literals = true;
  reply.failed.reserve(d.failed.size());
  for (const auto& [i, reason] : d.failed) {
    reply.failed.emplace_back(nodes.Literal(static_cast<size_t>(i)), *reason);
  }
  if (args->node_cache_capable || !args->has_nodes) {
    reply.passed.reserve(d.passed.size());
    for (int i : d.passed) reply.passed.emplace_back(nodes.Literal(static_cast<size_t>(i)));
    if (args->node_cache_capable && !d.failed.empty()) RememberPassed(*view, nodes, d.passed);
    return {200, SerializeFilterResult(reply)};
  }
  // Full-Nodes mode (slow path): the reply carries the passed node objects themselves.
  const Json full = Json::parse(body.begin(), body.end(), nullptr, false);
  const Json* items = nullptr;
  if (full.is_object()) {
    for (auto it = full.begin(); it != full.end(); ++it) {
      std::string k = it.key();
      for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (k == "nodes" && it->is_object()) {
        auto items_it = it->find("items");
        if (items_it != it->end() && items_it->is_array()) items = &*items_it;
      }
    }
  }
  std::vector<const Json*> passed;
  if (items != nullptr) {
    std::vector<bool> ok(nodes.size(), false);
    for (int i : d.passed) ok[static_cast<size_t>(i)] = true;
    size_t k = 0;  // node_names holds the named items in order
    for (const Json& n : *items) {
      const Json& name = kube::AtPath(n, "/metadata/name");
      if (!name.is_string()) continue;
      if (k < ok.size() && ok[k]) passed.push_back(&n);
      ++k;
    }
  }
  return {200, SerializeFilterResultFullNodes(passed, reply)};
}

Response Service::Prioritize(std::string_view body) const {
  auto args = ParseExtenderArgs(body, extender_->options().gpu_resource, &node_names_);
  if (!args.ok()) return BadRequest(args.status());
  const auto view = views_->View();
  const std::vector<int> scores = extender_->Prioritize(*view, *args);
  if (metrics_ != nullptr && args->node_cache_capable) {
    metrics_->ObserveNodeNames("prioritize", args->node_names_cached);
  }
  return {200, SerializeHostPriorities(*args->nodes, scores)};
}

Response Service::Bind(std::string_view body) const {
  auto args = ParseBindingArgs(body);
  if (!args.ok()) return BadRequest(args.status());
  const auto view = views_->View();
  PodInfo cached;
  const PodInfo* pod = nullptr;
  if (kube::ObjectPtr obj = views_->GetPod(args->pod_namespace, args->pod_name);
      obj != nullptr && (args->pod_uid.empty() || kube::Uid(*obj) == args->pod_uid)) {
    cached = PodInfoFromJson(*obj, extender_->options().gpu_resource);
    pod = &cached;
  }
  std::string job;
  const std::string error = extender_->Bind(*view, pod, *args, *client_, &job);
  if (error.empty()) {
    views_->Assume(args->pod_namespace + "/" + args->pod_name, args->node);
  } else {
    const bool refused = error.starts_with("refusing");
    if (refused && metrics_ != nullptr) metrics_->IncBindRefusals();
    if (log_) {
      LogKeys keys = {{"pod", args->pod_namespace + "/" + args->pod_name}, {"node", args->node}};
      if (!job.empty()) keys.emplace_back("job", job);
      log_(refused ? 1 : 2, error, keys);
    }
  }
  return {200, SerializeBindingResult(error)};
}

Response Service::Preempt(std::string_view body) const {
  auto args = ParsePreemptionArgs(body, extender_->options().gpu_resource);
  if (!args.ok()) return BadRequest(args.status());
  const auto view = views_->View();
  return {200, SerializePreemptionResult(extender_->Preempt(*view, *args))};
}

Response Service::Handle(std::string_view verb, std::string_view body) const {
  if (verb == "filter") return Filter(body);
  if (verb == "prioritize") return Prioritize(body);
  if (verb == "bind") return Bind(body);
  if (verb == "preempt") return Preempt(body);
  return {404, ErrorBody("unknown verb \"" + std::string(verb) + "\"")};
}

}  // namespace nvl72::extender
