#include "scheduler-plugin/extender.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "kube/object.h"

namespace nvl72::extender {

using placement::kNoNode;
using placement::NodeId;

std::shared_ptr<const ClusterView> BuildView(const std::vector<const Json*>& nodes,
                                             const std::vector<const Json*>& pods,
                                             const std::vector<const Json*>& jobs,
                                             const ViewOptions& options, bool synced) {
  const model::PodFactsList facts = model::PodFactsOfAll(pods, options.cluster.gpu_resource);
  return BuildViewFromFacts(nodes, facts.ptrs, jobs, options, synced);
}

std::shared_ptr<const ClusterView> BuildViewFromFacts(
    const std::vector<const Json*>& nodes, const std::vector<const model::PodFacts*>& pods,
    const std::vector<const Json*>& jobs, const ViewOptions& options, bool synced) {
  static std::atomic<uint64_t> next_generation{1};
  auto view = std::make_shared<ClusterView>();
  view->synced = synced;
  view->generation = next_generation.fetch_add(1);
  view->state = model::ClusterState::BuildFromFacts(nodes, pods, jobs, options.cluster);
  const placement::Snapshot& snap = view->state.snapshot();
  view->node_ids.reserve(snap.nodes.size());
  for (size_t i = 0; i < snap.nodes.size(); ++i) {
    view->node_ids.emplace(snap.nodes[i].name, static_cast<NodeId>(i));
  }
  view->spare = placement::DesignatedSpares(snap, options.spares_per_domain);
  view->reserved_for.assign(snap.nodes.size(), std::string());
  for (const auto& [key, r] : view->state.reservations()) {
    for (NodeId id : r.rank_nodes) {
      if (id != kNoNode && view->reserved_for[static_cast<size_t>(id)].empty()) {
        view->reserved_for[static_cast<size_t>(id)] = key;
      }
    }
  }
  for (const model::PodFacts* pod : pods) {
    if (pod->terminated || pod->job.empty()) continue;
    if (pod->node_name.empty()) continue;  // an unbound rank breaks nothing when it goes
    if (pod->uid.empty()) continue;
    const std::string key = pod->ns + "/" + pod->job;
    view->gang_of_uid.emplace(pod->uid, key);
    view->gang_uids[key].push_back(pod->uid);
  }
  return view;
}

std::shared_ptr<const std::vector<NodeId>> ClusterView::Resolve(const NodeNameList& list) const {
  {
    std::lock_guard<std::mutex> l(list.resolved_mu);
    if (list.resolved_generation == generation && list.resolved != nullptr) return list.resolved;
  }
  auto ids = std::make_shared<std::vector<NodeId>>();
  ids->reserve(list.size());
  for (const std::string& name : list.names) ids->push_back(FindNode(name));
  std::lock_guard<std::mutex> l(list.resolved_mu);
  list.resolved_generation = generation;
  list.resolved = ids;
  return ids;
}

std::vector<int> RankNormalizeScores(std::span<const int64_t> raw) {
  std::vector<int> out(raw.size(), 0);
  // Feasible (score, index) pairs sorted by score with an LSD radix sort (11-bit digits, only as
  // many passes as the largest score needs): linear in the node count, where a comparison sort of
  // 5,000 scores took a third of a prioritize call. Then one walk gives each score its rank among
  // the distinct values.
  std::vector<std::pair<uint64_t, uint32_t>> items, scratch;
  items.reserve(raw.size());
  uint64_t max = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0) continue;
    items.emplace_back(static_cast<uint64_t>(raw[i]), static_cast<uint32_t>(i));
    max = std::max(max, static_cast<uint64_t>(raw[i]));
  }
  if (items.empty()) return out;
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  scratch.resize(items.size());
  std::vector<uint32_t> count(kBuckets);
  for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (const auto& it : items) ++count[(it.first >> shift) & (kBuckets - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : count) {
      const uint32_t n = c;
      c = sum;
      sum += n;
    }
    for (const auto& it : items) scratch[count[(it.first >> shift) & (kBuckets - 1)]++] = it;
    items.swap(scratch);
  }
  int64_t top = 0;  // number of distinct values - 1
  for (size_t k = 1; k < items.size(); ++k) top += items[k].first != items[k - 1].first;
  int64_t rank = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k > 0 && items[k].first != items[k - 1].first) ++rank;
    out[items[k].second] = top == 0 ? 10 : 1 + static_cast<int>(rank * 9 / top);
  }
  return out;
}

StatusOr<std::unique_ptr<Extender>> Extender::Create(const ExtenderOptions& options) {
  placement::PolicyOptions po;
  po.spares_per_domain = options.spares_per_domain;
  auto policy = placement::MakePolicy(options.policy, po);
  if (policy == nullptr) {
    std::string known;
    for (const auto& n : placement::PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgumentError("unknown policy \"" + options.policy + "\" (known: " + known + ")");
  }
  return std::unique_ptr<Extender>(new Extender(options, std::move(policy)));
}

std::optional<std::string> Extender::PlannedNode(const ClusterView& view,
                                                 const PodInfo& pod) const {
  if (!pod.IsGang()) return std::nullopt;
  if (!pod.planned_node.empty()) return pod.planned_node;
  if (pod.rank < 0) return std::nullopt;
  const model::Reservation* r = view.state.FindReservation(pod.ns + "/" + pod.job);
  if (r == nullptr) return std::nullopt;
  const model::RankAssignment* a = r->placement.FindRank(pod.rank);
  if (a == nullptr || a->node.empty()) return std::nullopt;
  return a->node;
}

FilterDecision Extender::Filter(const ClusterView& view, const ExtenderArgs& args) const {
  FilterDecision d;
  const auto& names = args.node_names();
  const int n = static_cast<int>(names.size());
  auto add_reason = [&d](std::string text) {
    d.reasons.push_back(std::make_unique<std::string>(std::move(text)));
    return d.reasons.back().get();
  };

  if (args.pod.IsGang()) {
    const std::optional<std::string> planned = PlannedNode(view, args.pod);
    const std::string* reason =
        planned ? add_reason("pod " + args.pod.Key() + " is planned for node " + *planned)
                : add_reason("pod " + args.pod.Key() + " of job " + args.pod.job +
                             " has no planned node yet");
    d.failed.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (planned && names[static_cast<size_t>(i)] == *planned) {
        d.passed.push_back(i);
      } else {
        d.failed.emplace_back(i, reason);
      }
    }
    return d;
  }

  d.passed.reserve(static_cast<size_t>(n));
  if (args.pod.gpus <= 0) {
    for (int i = 0; i < n; ++i) d.passed.push_back(i);
    return d;
  }

  // One reason per kind, the same text on every node: kube-scheduler groups a pod's failure
  // reasons by their exact text ("0/5000 nodes are available: 1776 <reason>, 556 <reason>."), so
  // naming the job or the domain here would turn that event into hundreds of entries. Which job
  // holds a node is in the NVL72Job's status.placement and `kubectl nvl72 racks`.
  const std::string* reserved_reason = nullptr;
  const std::string* spare_reason = nullptr;
  const placement::Snapshot& snap = view.state.snapshot();
  const auto resolved = view.Resolve(*args.nodes);
  const std::vector<NodeId>& ids = *resolved;
  for (int i = 0; i < n; ++i) {
    const NodeId id = ids[static_cast<size_t>(i)];
    if (id == kNoNode) {  // not a node we know (no GPUs or not seen yet): no opinion
      d.passed.push_back(i);
      continue;
    }
    const auto idx = static_cast<size_t>(id);
    if (snap.nodes[idx].gang_reserved) {
      if (reserved_reason == nullptr) reserved_reason = add_reason(kReservedReason);
      d.failed.emplace_back(i, reserved_reason);
    } else if (options_.keep_off_spares && view.spare[idx]) {
      if (spare_reason == nullptr) spare_reason = add_reason(kSpareReason);
      d.failed.emplace_back(i, spare_reason);
    } else {
      d.passed.push_back(i);
    }
  }
  return d;
}

std::vector<int> Extender::Prioritize(const ClusterView& view, const ExtenderArgs& args) const {
  const auto& names = args.node_names();
  std::vector<int> out(names.size(), 0);
  if (args.pod.IsGang()) {
    const std::optional<std::string> planned = PlannedNode(view, args.pod);
    if (planned) {
      for (size_t i = 0; i < names.size(); ++i) out[i] = names[i] == *planned ? 10 : 0;
    }
    return out;
  }
  // Unknown nodes are left out of the call and score 0.
  std::vector<NodeId> ids;
  std::vector<size_t> where;
  ids.reserve(names.size());
  where.reserve(names.size());
  const auto resolved = view.Resolve(*args.nodes);
  for (size_t i = 0; i < names.size(); ++i) {
    const NodeId id = (*resolved)[i];
    if (id == kNoNode) continue;
    ids.push_back(id);
    where.push_back(i);
  }
  if (ids.empty()) return out;
  std::vector<int64_t> raw(ids.size(), -1);
  policy_->ScorePods(view.state.snapshot(), std::max(args.pod.gpus, 0), ids, raw);
  const std::vector<int> norm = options_.normalization == ScoreNormalization::kLinear
                                    ? placement::NormalizeScores(raw)
                                    : RankNormalizeScores(raw);
  for (size_t k = 0; k < ids.size(); ++k) out[where[k]] = norm[k];
  return out;
}

std::string Extender::Bind(const ClusterView& view, const PodInfo* cached, const BindingArgs& args,
                           kube::Client& client, std::string* job_key) const {
  PodInfo fetched;
  const PodInfo* pod = cached;
  if (pod == nullptr) {
    auto obj = client.Get(kube::kPods, args.pod_namespace, args.pod_name);
    if (!obj.ok()) {
      return "cannot read pod " + args.pod_namespace + "/" + args.pod_name + ": " +
             obj.status().ToString();
    }
    fetched = PodInfoFromJson(*obj, options_.gpu_resource);
    pod = &fetched;
  }
  if (pod->IsGang()) {
    if (job_key != nullptr) *job_key = pod->ns + "/" + pod->job;
    const std::optional<std::string> planned = PlannedNode(view, *pod);
    if (!planned) {
      return "refusing to bind gang pod " + args.pod_namespace + "/" + args.pod_name +
             ": it has no planned node";
    }
    if (*planned != args.node) {
      return "refusing to bind gang pod " + args.pod_namespace + "/" + args.pod_name + " to node " +
             args.node + ": it is planned for node " + *planned;
    }
  }
  Status s = client.Bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node);
  if (!s.ok()) {
    return "binding " + args.pod_namespace + "/" + args.pod_name + " to " + args.node + ": " +
           s.ToString();
  }
  return "";
}

std::vector<std::pair<std::string, NodeVictims>> Extender::Preempt(
    const ClusterView& view, const PreemptionArgs& args) const {
  std::vector<std::pair<std::string, NodeVictims>> out;
  std::optional<std::string> planned;
  if (args.pod.IsGang()) {
    planned = PlannedNode(view, args.pod);
    if (!planned) return out;  // a rank without a plan has nowhere to go
  }
  for (const auto& [node, victims] : args.victims) {
    if (planned && node != *planned) continue;
    if (!planned && args.pod.gpus > 0) {
      // Freeing a node the filter keeps this pod off would evict for nothing.
      const NodeId id = view.FindNode(node);
      if (id != kNoNode && view.state.snapshot().nodes[static_cast<size_t>(id)].gang_reserved)
        continue;
    }
    // Every gang touched by the victims must go whole: all of its live ranks among the victims.
    std::unordered_set<std::string_view> victim_set(victims.pod_uids.begin(),
                                                    victims.pod_uids.end());
    bool breaks_gang = false;
    for (const std::string& uid : victims.pod_uids) {
      auto g = view.gang_of_uid.find(uid);
      if (g == view.gang_of_uid.end()) continue;
      auto members = view.gang_uids.find(g->second);
      if (members == view.gang_uids.end()) continue;
      for (const std::string& m : members->second) {
        if (!victim_set.contains(m)) {
          breaks_gang = true;
          break;
        }
      }
      if (breaks_gang) break;
    }
    if (!breaks_gang) out.emplace_back(node, victims);
  }
  return out;
}

}  // namespace nvl72::extender
