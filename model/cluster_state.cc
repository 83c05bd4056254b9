#include "model/cluster_state.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <set>

#include "common/numbers.h"
#include "common/rfc3339.h"

namespace nvl72::model {
namespace {

const Json& NullJson() {
  static const Json kNull;
  return kNull;
}

const Json& Child(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return NullJson();
  auto it = obj.find(key);
  return it == obj.end() ? NullJson() : *it;
}

std::string StringAt(const Json& obj, std::string_view key) {
  const Json& v = Child(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string Label(const Json& obj, std::string_view key) {
  return StringAt(Child(Child(obj, "metadata"), "labels"), key);
}

// Integer quantity ("4", 4, "4.0" not accepted); 0 when absent or unparsable. GPUs are whole.
int ParseCount(const Json& q) {
  if (q.is_number()) {
    int64_t n = 0;
    if (q.is_number_float()) {
      if (!WholeDoubleToInt64(q.get<double>(), &n)) return 0;
    } else if (q.is_number_unsigned() && q.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) {
      return 0;
    } else {
      n = q.get<int64_t>();
    }
    return n < INT32_MIN || n > INT32_MAX ? 0 : static_cast<int>(n);
  }
  if (!q.is_string()) return 0;
  const std::string& s = q.get_ref<const std::string&>();
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return 0;
  std::string_view suffix(ptr, s.data() + s.size() - ptr);
  if (suffix.empty()) return v;
  if (suffix == "k") return v > INT32_MAX / 1000 || v < INT32_MIN / 1000 ? 0 : v * 1000;
  return 0;
}

// A node with fewer allocatable GPUs than the fullest node of its domain is degraded too (the
// racks of an NVLink domain are built of identical nodes).
void MarkDegraded(placement::Snapshot& snap) {
  for (const placement::Domain& d : snap.domains) {
    int full = 0;
    for (placement::NodeId id : d.nodes) {
      full = std::max(full, snap.nodes[static_cast<size_t>(id)].gpu_capacity);
    }
    for (placement::NodeId id : d.nodes) {
      placement::Node& n = snap.nodes[static_cast<size_t>(id)];
      n.degraded = n.degraded || n.gpu_capacity < full;
    }
  }
}

int ContainersGpu(const Json& containers, std::string_view resource, bool sum) {
  if (!containers.is_array()) return 0;
  int total = 0;
  for (const auto& c : containers) {
    const Json& res = Child(c, "resources");
    const Json* q = &Child(Child(res, "requests"), resource);
    if (q->is_null()) q = &Child(Child(res, "limits"), resource);
    int n = ParseCount(*q);
    total = sum ? total + n : std::max(total, n);
  }
  return total;
}

struct NodeIn {
  std::string domain, name;
  const Json* obj;
};

// The nodes that take part, with their domain (the domain label, else the fallback label, else
// "node/<name>" for a GPU node), sorted by domain, then name.
std::vector<NodeIn> NodesByDomain(const std::vector<const Json*>& nodes,
                                  const ClusterOptions& options) {
  std::vector<NodeIn> in;
  in.reserve(nodes.size());
  for (const Json* n : nodes) {
    std::string name = StringAt(Child(*n, "metadata"), "name");
    if (name.empty()) continue;
    std::string domain = Label(*n, options.domain_label);
    if (domain.empty() && !options.domain_label_fallback.empty()) {
      domain = Label(*n, options.domain_label_fallback);
    }
    int gpus = ParseCount(Child(Child(Child(*n, "status"), "allocatable"), options.gpu_resource));
    if (domain.empty()) {
      if (gpus <= 0) continue;
      domain = "node/" + name;
    }
    in.push_back({std::move(domain), std::move(name), n});
  }
  std::sort(in.begin(), in.end(), [](const NodeIn& a, const NodeIn& b) {
    return a.domain != b.domain ? a.domain < b.domain : a.name < b.name;
  });
  return in;
}

// The node's Ready condition (NodeHealth::ready_condition, not_ready_since) from its status.
NodeHealth ReadyHealth(const Json& status) {
  NodeHealth health;
  const Json& conds = Child(status, "conditions");
  if (!conds.is_array()) return health;
  for (const auto& c : conds) {
    if (StringAt(c, "type") != "Ready") continue;
    health.ready_condition = StringAt(c, "status") == "True";
    if (!health.ready_condition) {
      const auto since = ParseRfc3339(StringAt(c, "lastTransitionTime"));
      if (since.ok()) health.not_ready_since = *since;
    }
  }
  return health;
}

// A node whose Ready condition is not True still counts as ready within options.not_ready_grace.
bool InNotReadyGrace(const NodeHealth& health, const ClusterOptions& options) {
  return options.not_ready_grace.count() > 0 && health.not_ready_since &&
         options.now - *health.not_ready_since < options.not_ready_grace;
}

// NoSchedule/NoExecute taints: `tainted` (new work) and `no_execute_taint` (running ranks).
void JudgeTaints(const std::vector<Taint>& taints, const std::vector<Toleration>& rank_tolerations,
                 bool mark_tainted, placement::Node* node, NodeHealth* health) {
  for (const Taint& t : taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    // New work: only the GPU taint is tolerated (a node lifecycle taint comes with a Ready
    // condition that is not True, and keeps new gangs off as well).
    if (!Tolerates(rank_tolerations.front(), t)) node->tainted = mark_tainted;
    bool tolerated = false;
    for (const Toleration& tol : rank_tolerations) tolerated = tolerated || Tolerates(tol, t);
    if (!tolerated && t.effect == "NoExecute") health->no_execute_taint = true;
  }
}

}  // namespace

int PodGpuRequest(const Json& pod, std::string_view resource) {
  const Json& spec = Child(pod, "spec");
  return std::max(ContainersGpu(Child(spec, "containers"), resource, true),
                  ContainersGpu(Child(spec, "initContainers"), resource, false));
}

bool PodTerminated(const Json& pod) {
  std::string phase = StringAt(Child(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

const Json* UnschedulableCondition(const Json& pod) {
  if (!StringAt(Child(pod, "spec"), "nodeName").empty()) return nullptr;
  const Json* c = FindCondition(pod, "PodScheduled");
  if (c == nullptr || StringAt(*c, "status") != "False" ||
      StringAt(*c, "reason") != "Unschedulable") {
    return nullptr;
  }
  return c;
}

bool GangRankOf(const Json& pod, std::string* job, int* rank) {
  std::string j = Label(pod, kJobLabel);
  std::string r = Label(pod, kRankLabel);
  if (j.empty() || r.empty()) return false;
  int v = -1;
  auto [ptr, ec] = std::from_chars(r.data(), r.data() + r.size(), v);
  if (ec != std::errc() || ptr != r.data() + r.size() || v < 0) return false;
  if (job != nullptr) *job = std::move(j);
  if (rank != nullptr) *rank = v;
  return true;
}

const RankAssignment* CurrentRankOf(const Json& pod, const JobPlacement& placement) {
  int rank = -1;
  if (!GangRankOf(pod, nullptr, &rank)) return nullptr;
  const RankAssignment* a = placement.FindRank(rank);
  const Json& meta = Child(pod, "metadata");
  if (a == nullptr || StringAt(meta, "name") != a->pod ||
      StringAt(Child(meta, "annotations"), kNodeAnnotation) != a->node) {
    return nullptr;
  }
  return a;
}

ClusterState ClusterState::Build(const std::vector<Json>& nodes, const std::vector<Json>& pods,
                                 const std::vector<Json>& jobs, const ClusterOptions& options) {
  auto ptrs = [](const std::vector<Json>& v) {
    std::vector<const Json*> out;
    out.reserve(v.size());
    for (const auto& j : v) out.push_back(&j);
    return out;
  };
  return Build(ptrs(nodes), ptrs(pods), ptrs(jobs), options);
}

std::vector<Toleration> RankTolerations(std::string_view gpu_resource) {
  std::vector<Toleration> out;  // the GPU taint's first: ClusterState::Build reads it so
  out.push_back({std::string(gpu_resource), "Exists", "", "NoSchedule"});
  for (std::string_view key : kRankToleratedNoExecuteTaints) {
    out.push_back({std::string(key), "Exists", "", "NoExecute"});
  }
  return out;
}

bool RankToleratesNoExecute(std::string_view taint_key) {
  for (std::string_view k : kRankToleratedNoExecuteTaints) {
    if (k == taint_key) return true;
  }
  return false;
}

PodFacts PodFactsOf(const Json& pod, std::string_view gpu_resource) {
  PodFacts f;
  const Json& meta = Child(pod, "metadata");
  f.ns = StringAt(meta, "namespace");
  f.uid = StringAt(meta, "uid");
  f.node_name = StringAt(Child(pod, "spec"), "nodeName");
  f.nominated = StringAt(Child(pod, "status"), "nominatedNodeName");
  if (!GangRankOf(pod, &f.job, &f.rank)) {
    f.job.clear();
    f.rank = -1;
  }
  f.gpus = PodGpuRequest(pod, gpu_resource);
  f.terminated = PodTerminated(pod);
  f.requests = PodRequests(Child(pod, "spec"));
  return f;
}

PodFactsList PodFactsOfAll(const std::vector<const Json*>& pods, std::string_view gpu_resource) {
  PodFactsList out;
  out.facts.reserve(pods.size());
  for (const Json* p : pods) {
    if (p != nullptr) out.facts.push_back(PodFactsOf(*p, gpu_resource));
  }
  out.ptrs.reserve(out.facts.size());
  for (const PodFacts& f : out.facts) out.ptrs.push_back(&f);
  return out;
}

ClusterState ClusterState::Build(const std::vector<const Json*>& nodes,
                                 const std::vector<const Json*>& pods,
                                 const std::vector<const Json*>& jobs,
                                 const ClusterOptions& options) {
  return BuildFromFacts(nodes, PodFactsOfAll(pods, options.gpu_resource).ptrs, jobs, options);
}

ClusterState ClusterState::BuildFromFacts(const std::vector<const Json*>& nodes,
                                          const std::vector<const PodFacts*>& pods,
                                          const std::vector<const Json*>& jobs,
                                          const ClusterOptions& options) {
  ClusterState st;
  st.AddNodes(nodes, options);
  st.AddReservations(jobs);
  st.CountPods(pods, options);
  return st;
}

// ---- nodes, grouped by domain, ordered by name ----
void ClusterState::AddNodes(const std::vector<const Json*>& nodes, const ClusterOptions& options) {
  const std::vector<NodeIn> in = NodesByDomain(nodes, options);
  snapshot_.nodes.reserve(in.size());
  health_.reserve(in.size());
  facts_.reserve(in.size());
  const std::vector<Toleration> rank_tolerations = RankTolerations(options.gpu_resource);
  for (const auto& n : in) {
    if (snapshot_.domains.empty() || snapshot_.domains.back().name != n.domain) {
      snapshot_.domains.push_back({n.domain, {}});
      domain_ids_[n.domain] = static_cast<placement::DomainId>(snapshot_.domains.size() - 1);
    }
    AddNode(n.name, *n.obj, options, rank_tolerations);
  }
  MarkDegraded(snapshot_);
  reserved_ranks_.assign(snapshot_.nodes.size(), 0);
  if (options.node_facts) usage_.assign(snapshot_.nodes.size(), NodeUsage{});
}

// Adds the node to the last domain of the snapshot.
void ClusterState::AddNode(const std::string& name, const Json& obj, const ClusterOptions& options,
                           const std::vector<Toleration>& rank_tolerations) {
  placement::Node node;
  node.name = name;
  node.domain = static_cast<placement::DomainId>(snapshot_.domains.size() - 1);
  const Json& status = Child(obj, "status");
  node.gpu_capacity = ParseCount(Child(Child(status, "allocatable"), options.gpu_resource));
  // The device plugin keeps unhealthy GPUs in capacity and drops them from allocatable.
  node.degraded =
      node.gpu_capacity < ParseCount(Child(Child(status, "capacity"), options.gpu_resource));
  NodeHealth health = ReadyHealth(status);
  node.ready = health.ready_condition || InNotReadyGrace(health, options);
  const Json& unsched = Child(Child(obj, "spec"), "unschedulable");
  node.cordoned = unsched.is_boolean() && unsched.get<bool>();
  NodeFacts facts = NodeFactsOf(obj);
  JudgeTaints(facts.taints, rank_tolerations, options.mark_tainted, &node, &health);
  if (options.node_facts) facts_.push_back(std::move(facts));
  node_ids_[node.name] = static_cast<placement::NodeId>(snapshot_.nodes.size());
  snapshot_.domains.back().nodes.push_back(static_cast<placement::NodeId>(snapshot_.nodes.size()));
  snapshot_.nodes.push_back(std::move(node));
  health_.push_back(health);
}

// ---- reservations of admitted jobs ----
void ClusterState::AddReservations(const std::vector<const Json*>& jobs) {
  for (const Json* j : jobs) {
    if (!HoldsReservation(*j)) continue;
    auto placement = PlacementOf(*j);
    if (!placement.ok() || !placement->has_value()) continue;
    const Json& meta = Child(*j, "metadata");
    std::string key = StringAt(meta, "namespace") + "/" + StringAt(meta, "name");
    int gpus = 4;
    const Json& g = Child(Child(*j, "spec"), "gpusPerReplica");
    if (g.is_number_integer()) gpus = g.get<int>();
    Reserve(key, gpus, **placement);
  }
}

// ---- pods ----
void ClusterState::CountPods(const std::vector<const PodFacts*>& pods,
                             const ClusterOptions& options) {
  for (const PodFacts* p : pods) {
    if (p->terminated) continue;
    const bool bound = !p->node_name.empty();
    if (bound && options.node_facts) CountOnNode(*p);
    const std::string& node_name = bound ? p->node_name : p->nominated;
    if (!p->job.empty() && !reservations_.empty()) {
      const Reservation* r = FindReservation(p->ns + "/" + p->job);
      if (r != nullptr) {
        const RankAssignment* a = r->placement.FindRank(p->rank);
        // Counted by the reservation: on its planned node, or not bound anywhere yet.
        if (a != nullptr && (!bound || a->node == node_name)) continue;
      }
    }
    if (node_name.empty()) continue;
    placement::NodeId id = FindNode(node_name);
    if (id == placement::kNoNode) continue;
    snapshot_.nodes[id].gpu_used += p->gpus;
  }
}

placement::NodeId ClusterState::FindNode(std::string_view name) const {
  auto it = node_ids_.find(std::string(name));
  return it == node_ids_.end() ? placement::kNoNode : it->second;
}

placement::DomainId ClusterState::FindDomain(std::string_view name) const {
  auto it = domain_ids_.find(std::string(name));
  return it == domain_ids_.end() ? placement::kNoDomain : it->second;
}

std::optional<std::string> ClusterState::PlannedNode(const Json& pod) const {
  std::string ann = StringAt(Child(Child(pod, "metadata"), "annotations"), kNodeAnnotation);
  if (!ann.empty()) return ann;
  std::string job;
  int rank = -1;
  if (!GangRankOf(pod, &job, &rank)) return std::nullopt;
  const Reservation* r = FindReservation(StringAt(Child(pod, "metadata"), "namespace") + "/" + job);
  if (r == nullptr) return std::nullopt;
  const RankAssignment* a = r->placement.FindRank(rank);
  if (a == nullptr) return std::nullopt;
  return a->node;
}

const Reservation* ClusterState::FindReservation(std::string_view job_key) const {
  auto it = reservations_.find(std::string(job_key));
  return it == reservations_.end() ? nullptr : &it->second;
}

std::vector<std::string> ClusterState::JobsOnNode(placement::NodeId node) const {
  std::vector<std::string> out;
  for (const auto& [key, r] : reservations_) {
    if (std::find(r.rank_nodes.begin(), r.rank_nodes.end(), node) != r.rank_nodes.end()) {
      out.push_back(key);
    }
  }
  return out;
}

void ClusterState::CountOnNode(const PodFacts& pod) {
  placement::NodeId id = FindNode(pod.node_name);
  if (id == placement::kNoNode) return;
  NodeUsage& u = usage_[static_cast<size_t>(id)];
  AddResources(u.requested, pod.requests);
  ++u.pods;
}

void ClusterState::ApplyReservation(const Reservation& r, int sign) {
  for (placement::NodeId id : r.rank_nodes) {
    if (id == placement::kNoNode) continue;
    auto& node = snapshot_.nodes[id];
    node.gpu_used += sign * r.gpus_per_replica;
    reserved_ranks_[id] += sign;
    node.gang_reserved = reserved_ranks_[id] > 0;
  }
}

void ClusterState::Reserve(const std::string& job_key, int gpus_per_replica,
                           const JobPlacement& placement) {
  Release(job_key);
  Reservation r;
  r.job_key = job_key;
  r.gpus_per_replica = gpus_per_replica;
  r.placement = placement;
  r.rank_nodes.reserve(placement.ranks.size());
  for (const auto& a : placement.ranks) r.rank_nodes.push_back(FindNode(a.node));
  ApplyReservation(r, +1);
  reservations_.emplace(job_key, std::move(r));
}

void ClusterState::Release(const std::string& job_key) {
  auto it = reservations_.find(job_key);
  if (it == reservations_.end()) return;
  ApplyReservation(it->second, -1);
  reservations_.erase(it);
}

}  // namespace nvl72::model
