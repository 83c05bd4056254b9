#include "cli/views.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/job_spec.h"
#include "model/names.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace nvl72::cli {
namespace {

using placement::DomainId;
using placement::NodeId;

// Left-aligned columns separated by two spaces; the last column is not padded.
class Table {
 public:
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render(std::string_view indent = "") const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line(indent);
      for (size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string Str(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

int IntOr(const Json& v, int fallback) {
  if (v.is_number_integer()) return static_cast<int>(v.get<int64_t>());
  return fallback;
}

std::string JobKey(const Json& job) { return kube::Namespace(job) + "/" + kube::Name(job); }

// The job as its owner reads it: the name alone in the current namespace, else namespace/name.
std::string DisplayJob(std::string_view key, std::string_view current_namespace) {
  auto [ns, name] = kube::SplitKey(key);
  return ns == current_namespace ? name : std::string(key);
}

// Raw spec fields for display (also for specs the model rejects).
struct SpecSummary {
  int replicas = 0;
  int gpus_per_replica = 4;
  std::string mode = "Required";
  int segment_size = 0;
  int Segment() const { return segment_size > 0 ? segment_size : replicas; }
};

SpecSummary Summarize(const Json& job) {
  SpecSummary s;
  const Json& spec = kube::AtPath(job, "/spec");
  s.replicas = IntOr(kube::AtPath(spec, "/replicas"), 0);
  s.gpus_per_replica = IntOr(kube::AtPath(spec, "/gpusPerReplica"), 4);
  std::string mode = Str(kube::AtPath(spec, "/topology/mode"));
  if (!mode.empty()) s.mode = mode;
  s.segment_size = IntOr(kube::AtPath(spec, "/topology/segmentSize"), 0);
  return s;
}

std::string TopologyText(const SpecSummary& s) {
  if (s.segment_size > 0 && s.segment_size < s.replicas) {
    return s.mode + "/" + std::to_string(s.segment_size);
  }
  return s.mode;
}

std::string NodeStateText(const placement::Node& n) {
  if (!n.ready) return "NotReady";
  if (n.tainted) return "Tainted";
  if (n.cordoned) return "Cordoned";
  return "Ready";
}

std::string Plural(int n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

// The placement of a job, if it has a well-formed one.
std::optional<model::JobPlacement> PlacementOrNone(const Json& job) {
  auto p = model::PlacementOf(job);
  if (!p.ok() || !p->has_value()) return std::nullopt;
  return **p;
}

class DomainNamer {
 public:
  explicit DomainNamer(const placement::Snapshot& snap)
      : names_(ShortDomainNames(snap, &prefix_)) {}
  // Short name of domain `id`.
  const std::string& operator()(DomainId id) const { return names_[id]; }
  // Short form of a full domain name (possibly of a domain that is no longer in the snapshot).
  std::string Shorten(const std::string& full) const {
    if (!prefix_.empty() && full.size() > prefix_.size() &&
        full.compare(0, prefix_.size(), prefix_) == 0) {
      return full.substr(prefix_.size());
    }
    return full;
  }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  std::vector<std::string> names_;
};

// A row of the nodes of `domain` marking the ranks of one job: '#' a rank on a healthy node, '!' a
// rank on a failed node, 'X' another failed node, '.' any other node.
std::string JobRow(const placement::Snapshot& snap, DomainId domain,
                   const std::set<NodeId>& ranks) {
  std::string row;
  for (NodeId id : snap.domains[domain].nodes) {
    const placement::Node& n = snap.nodes[id];
    bool mine = ranks.count(id) > 0;
    if (mine) {
      row += n.Schedulable() ? '#' : '!';
    } else {
      row += n.Schedulable() ? '.' : 'X';
    }
  }
  return row;
}

// The ranks of a placement that `keep` selects, grouped by the domain of their node: the job's
// nodes there and its sorted ranks. `lost` holds, in placement order, the ranks on nodes no longer
// in the cluster.
struct RanksByDomain {
  std::map<DomainId, std::pair<std::set<NodeId>, std::vector<int>>> domains;
  std::vector<int> lost;
};

template <typename Keep>
RanksByDomain GroupRanks(const ClusterView& view, const model::JobPlacement& placement, Keep keep) {
  const placement::Snapshot& snap = view.state.snapshot();
  RanksByDomain out;
  for (const auto& a : placement.ranks) {
    if (!keep(a)) continue;
    NodeId id = view.state.FindNode(a.node);
    if (id == placement::kNoNode) {
      out.lost.push_back(a.rank);
      continue;
    }
    auto& e = out.domains[snap.nodes[id].domain];
    e.first.insert(id);
    e.second.push_back(a.rank);
  }
  for (auto& [domain, e] : out.domains) std::sort(e.second.begin(), e.second.end());
  return out;
}

}  // namespace

ClusterView BuildView(const std::vector<Json>& nodes, std::vector<Json> pods,
                      std::vector<Json> jobs, const ViewOptions& options) {
  ClusterView view;
  std::sort(jobs.begin(), jobs.end(),
            [](const Json& a, const Json& b) { return JobKey(a) < JobKey(b); });
  view.state = model::ClusterState::Build(nodes, pods, jobs, options.cluster);
  view.jobs = std::move(jobs);
  view.pods = std::move(pods);
  view.spares_per_domain = options.spares_per_domain;
  view.spare_reserve = options.spare_reserve;
  view.gpu_resource = options.cluster.gpu_resource;
  return view;
}

char NodeGlyph(const placement::Node& node, bool designated_spare) {
  if (!node.Schedulable()) return 'X';
  if (node.gang_reserved) return '#';
  // Lost GPUs (allocatable below capacity or below the domain's fullest node): schedulable, but
  // never a spare or part of a free block (model/cluster_state.h).
  if (node.degraded) return 'd';
  if (designated_spare) return 's';
  if (node.gpu_used > 0) return '+';
  return '.';
}

std::vector<std::string> ShortDomainNames(const placement::Snapshot& snapshot,
                                          std::string* common_prefix) {
  std::vector<std::string> names;
  for (const auto& d : snapshot.domains) names.push_back(d.name);
  std::string prefix;
  if (!names.empty()) {
    prefix = names[0];
    for (const auto& n : names) {
      size_t i = 0;
      while (i < prefix.size() && i < n.size() && prefix[i] == n[i]) ++i;
      prefix.resize(i);
    }
    size_t dot = prefix.rfind('.');
    prefix = dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
    // Only worth it when something remains of every name.
    for (const auto& n : names) {
      if (n.size() <= prefix.size()) prefix.clear();
    }
  }
  if (!prefix.empty()) {
    for (auto& n : names) n = n.substr(prefix.size());
  }
  if (common_prefix != nullptr) *common_prefix = prefix;
  return names;
}

std::string FormatRanges(const std::vector<int>& sorted) {
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(sorted[i]);
    if (j > i) out += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out;
}

std::string JobState(const Json& job) {
  if (kube::IsBeingDeleted(job)) return "Terminating";
  std::string state = Str(kube::AtPath(job, "/status/state"));
  if (!state.empty()) return state;
  using namespace model;  // condition names
  for (std::string_view t : {kConditionFailed, kConditionSucceeded, kConditionRecovering,
                             kConditionRunning, kConditionPlaced, kConditionAdmitted}) {
    if (ConditionIsTrue(job, t)) return std::string(t);
  }
  const Json* admitted = FindCondition(job, kConditionAdmitted);
  if (admitted != nullptr) return "Waiting";
  return "Pending";
}

std::string RenderRacks(const ClusterView& view, std::string_view current_namespace) {
  const placement::Snapshot& snap = view.state.snapshot();
  std::ostringstream out;
  if (snap.domains.empty()) {
    out << "No GPU nodes found (NVLink domains come from the node label "
        << model::kDefaultDomainLabel << " or --domain-label).\n";
    return out.str();
  }
  placement::ClusterStats stats = placement::ComputeStats(snap, view.spares_per_domain, {});
  std::vector<bool> spares = placement::DesignatedSpares(snap, view.spares_per_domain);
  DomainNamer namer(snap);

  // Jobs per domain, from the reservations (the same ones the operator and the extender see).
  std::vector<std::set<std::string>> jobs_in(snap.domains.size());
  for (const auto& [key, r] : view.state.reservations()) {
    for (NodeId id : r.rank_nodes) {
      if (id != placement::kNoNode) jobs_in[snap.nodes[id].domain].insert(key);
    }
  }

  if (!namer.prefix().empty()) {
    out << "NVLink domains " << namer.prefix() << "*\n";
  }
  Table t;
  t.Add({"DOMAIN", "NODES", "HEALTHY", "USED", "SPARE", "FAILED", "FREE GPUS", "LARGEST GANG",
         "JOBS"});
  int total_nodes = 0, total_healthy = 0, total_gpus = 0;
  for (size_t d = 0; d < snap.domains.size(); ++d) {
    const placement::DomainStats& s = stats.domains[d];
    std::string glyphs;
    int used = 0;
    for (NodeId id : snap.domains[d].nodes) {
      const placement::Node& n = snap.nodes[id];
      glyphs += NodeGlyph(n, spares[id]);
      if (n.Schedulable() && n.gpu_used > 0) ++used;
    }
    std::vector<std::string> jobs;
    for (const auto& k : jobs_in[d]) jobs.push_back(DisplayJob(k, current_namespace));
    t.Add({namer(static_cast<DomainId>(d)), glyphs,
           std::to_string(s.healthy_nodes) + "/" + std::to_string(s.nodes), std::to_string(used),
           std::to_string(s.spare_nodes), std::to_string(s.nodes - s.healthy_nodes),
           std::to_string(s.gpus_free) + "/" + std::to_string(s.gpus_total),
           Plural(s.largest_gang_nodes, "node"), jobs.empty() ? "-" : Join(jobs, ",")});
    total_nodes += s.nodes;
    total_healthy += s.healthy_nodes;
    total_gpus += s.gpus_total;
  }
  out << t.Render();
  char frag[32];
  std::snprintf(frag, sizeof frag, "%.2f", stats.fragmentation);
  out << "\n"
      << Plural(static_cast<int>(snap.domains.size()), "domain") << ", " << total_healthy << "/"
      << total_nodes << " nodes healthy, " << stats.gpus_free << "/" << total_gpus
      << " GPUs free, largest gang that fits: " << Plural(stats.largest_gang_nodes, "node")
      << ", fragmentation " << frag << ", "
      << Plural(static_cast<int>(view.state.reservations().size()), "job") << " holding GPUs\n";
  out << "# gang rank  + used by other pods  . free  s spare (" << view.spares_per_domain
      << " held back per domain)  d lost GPUs  X failed / cordoned / tainted\n";
  return out.str();
}

namespace {

// The jobs of `ns`, or of every namespace when `ns` is empty.
std::vector<const Json*> JobsIn(const ClusterView& view, std::string_view ns) {
  std::vector<const Json*> jobs;
  for (const auto& j : view.jobs) {
    if (ns.empty() || kube::Namespace(j) == ns) jobs.push_back(&j);
  }
  return jobs;
}

std::vector<std::string> JobsHeader(bool all_namespaces) {
  std::vector<std::string> header = {"NAME",     "STATE",   "RANKS",     "GPUS",
                                     "TOPOLOGY", "DOMAINS", "RECOVERIES"};
  if (all_namespaces) header.insert(header.begin(), "NAMESPACE");
  return header;
}

// The line of one job: state, size, topology, the domains it was placed in and its recoveries.
std::vector<std::string> JobsRow(const Json& job,
                                 const std::optional<model::JobPlacement>& placement,
                                 const DomainNamer& namer, bool all_namespaces) {
  SpecSummary s = Summarize(job);
  std::vector<std::string> domains;
  if (placement) {
    for (const auto& d : placement->domains) domains.push_back(namer.Shorten(d));
  }
  std::vector<std::string> row = {
      kube::Name(job),
      JobState(job),
      std::to_string(s.replicas) + "x" + std::to_string(s.gpus_per_replica),
      std::to_string(s.replicas * s.gpus_per_replica),
      TopologyText(s),
      domains.empty() ? "-" : Join(domains, ","),
      std::to_string(IntOr(kube::AtPath(job, "/status/recoveries"), 0))};
  if (all_namespaces) row.insert(row.begin(), kube::Namespace(job));
  return row;
}

// One row per domain the job holds: its ranks among the domain's nodes.
void AddPlacementRows(Table& rows, const ClusterView& view, const model::JobPlacement& placement,
                      const std::string& label, const DomainNamer& namer) {
  const placement::Snapshot& snap = view.state.snapshot();
  const RanksByDomain ranks = GroupRanks(view, placement, [](const auto&) { return true; });
  for (const auto& [d, e] : ranks.domains) {
    rows.Add(
        {label, namer(d), "[" + JobRow(snap, d, e.first) + "]", "ranks " + FormatRanges(e.second)});
  }
  if (!ranks.lost.empty()) {
    rows.Add(
        {label, "?", "",
         Plural(static_cast<int>(ranks.lost.size()), "rank") + " on nodes that no longer exist"});
  }
}

}  // namespace

std::string RenderJobs(const ClusterView& view, std::string_view ns) {
  DomainNamer namer(view.state.snapshot());
  const std::vector<const Json*> jobs = JobsIn(view, ns);
  std::ostringstream out;
  if (jobs.empty()) {
    if (ns.empty()) {
      out << "No NVL72Jobs found.\n";
    } else {
      out << "No NVL72Jobs in namespace " << ns << ".\n";
    }
    return out.str();
  }
  const bool all_namespaces = ns.empty();
  Table t;
  t.Add(JobsHeader(all_namespaces));
  Table rows;  // placement rows, after the table
  for (const Json* j : jobs) {
    auto placement = PlacementOrNone(*j);
    t.Add(JobsRow(*j, placement, namer, all_namespaces));
    if (!placement || !model::HoldsReservation(*j)) continue;
    AddPlacementRows(rows, view, *placement, all_namespaces ? JobKey(*j) : kube::Name(*j), namer);
  }
  out << t.Render();
  std::string placements = rows.Render("  ");
  if (!placements.empty()) {
    out << "\nPlacements (# rank of the job, ! rank on a failed node, X other failed node, . other "
           "node):\n"
        << placements;
  }
  return out.str();
}

// What a waiting job could get now, per domain, as the policy's waiting reason counts it: the
// domains with room for a rank, largest first (at most 4).
std::string FreeBlocksLine(const placement::PlacementPolicy& policy,
                           const placement::Snapshot& snap, const placement::GangRequest& request,
                           const ClusterView& view, const DomainNamer& namer) {
  const std::vector<int> free = policy.FreeBlocks(snap, request);
  std::vector<std::pair<int, DomainId>> blocks;
  for (size_t i = 0; i < free.size(); ++i) blocks.emplace_back(free[i], static_cast<DomainId>(i));
  std::sort(blocks.begin(), blocks.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> top;
  for (size_t i = 0; i < blocks.size() && i < 4; ++i) {
    top.push_back(namer(blocks[i].second) + ": " + Plural(blocks[i].first, "node"));
  }
  const int seg = request.EffectiveSegmentSize();
  std::string out =
      "needs " + Plural(seg, "node") + " with " + std::to_string(request.gpus_per_replica) +
      " free GPUs" +
      (request.mode == placement::TopologyMode::kRequired ? " in one domain per segment"
                                                          : " per segment, any domains") +
      "; nodes that can take a rank now: " + (top.empty() ? "none" : Join(top, ", "));
  if (view.spares_per_domain > 0) {
    out +=
        view.spare_reserve == placement::SpareReserve::kSoft
            ? " (spares included: under the soft reserve a gang that fits nowhere else takes them)"
            : " (" + std::to_string(view.spares_per_domain) + " spare nodes per domain held back)";
  }
  return out;
}

namespace {

// "Spec:": size, topology, segments, recovery and preemption of the job, or why the spec is
// invalid.
void WriteSpec(std::ostream& out, const StatusOr<model::JobSpec>& spec) {
  if (!spec.ok()) {
    out << "  Spec:        invalid: " << spec.status().message() << "\n";
    return;
  }
  int k = spec->EffectiveSegmentSize();
  int segments = (spec->replicas + k - 1) / k;
  out << "  Spec:        " << spec->replicas << " ranks x " << spec->gpus_per_replica << " GPUs ("
      << spec->replicas * spec->gpus_per_replica << " GPUs), topology "
      << placement::TopologyModeName(spec->mode) << ", " << Plural(segments, "segment") << " of "
      << k << " ranks, recovery " << model::RecoveryPolicyName(spec->recovery.policy) << ", "
      << (spec->preemptible ? "preemptible" : "not preemptible")
      << (spec->fabric ? ", fabric " + std::string(model::FabricName(*spec->fabric)) : "") << "\n";
}

// One row per segment and domain: the segment's ranks among the nodes of each domain it uses
// (a Preferred or Unconstrained segment may span domains).
std::string SegmentRows(const ClusterView& view, const Json& job,
                        const model::JobPlacement& placement, const DomainNamer& namer) {
  const placement::Snapshot& snap = view.state.snapshot();
  const SpecSummary s = Summarize(job);
  const int k = std::max(1, s.Segment());
  const int segments = (std::max(1, s.replicas) + k - 1) / k;
  Table seg;
  for (int i = 0; i < segments; ++i) {
    const RanksByDomain ranks =
        GroupRanks(view, placement, [&](const auto& a) { return a.rank / k == i; });
    for (const auto& [domain, e] : ranks.domains) {
      seg.Add({"segment " + std::to_string(i), "ranks " + FormatRanges(e.second),
               "domain " + namer(domain), "[" + JobRow(snap, domain, e.first) + "]"});
    }
    if (!ranks.lost.empty()) {
      seg.Add({"segment " + std::to_string(i), "ranks " + FormatRanges(ranks.lost), "domain ?",
               "(node not in the cluster)"});
    }
  }
  return seg.Render("    ");
}

// The POD PHASE of rank `a`'s pod, with where it stands against its planned node; a pod
// kube-scheduler refused adds a "Refused:" line to `refusals`.
std::string PodPhase(const Json& pod, const model::RankAssignment& a, std::string& refusals) {
  std::string phase = Str(kube::AtPath(pod, "/status/phase"));
  if (kube::IsBeingDeleted(pod)) phase = "Terminating";
  std::string on = Str(kube::AtPath(pod, "/spec/nodeName"));
  if (const Json* refused = model::UnschedulableCondition(pod)) {
    phase += " (unschedulable)";
    refusals += "  Refused:     rank " + std::to_string(a.rank) + " on " + a.node + ": " +
                Str(kube::AtPath(*refused, "/message")) + "\n";
  } else if (on.empty()) {
    phase += " (unscheduled)";
  } else if (on != a.node) {
    phase += " (on " + on + ")";
  }
  return phase;
}

// Every rank with its node's state and its pod's phase, then the "Refused:" lines.
void WriteRanks(std::ostream& out, const ClusterView& view, const Json& job,
                const model::JobPlacement& placement) {
  const placement::Snapshot& snap = view.state.snapshot();
  // Pods by namespace/name, to show each rank's pod.
  std::map<std::string, const Json*> pods;
  for (const auto& p : view.pods) pods[kube::Namespace(p) + "/" + kube::Name(p)] = &p;
  Table ranks;
  ranks.Add({"RANK", "NODE", "NODE STATE", "POD", "POD PHASE"});
  std::string refusals;  // kube-scheduler's message per refused rank (the safety net's input)
  for (const auto& a : placement.ranks) {
    NodeId id = view.state.FindNode(a.node);
    std::string node_state = id == placement::kNoNode ? "Missing" : NodeStateText(snap.nodes[id]);
    std::string pod_name = a.pod.empty() ? model::RankPodName(kube::Name(job), a.rank) : a.pod;
    auto it = pods.find(kube::Namespace(job) + "/" + pod_name);
    std::string phase = it == pods.end() ? "-" : PodPhase(*it->second, a, refusals);
    ranks.Add({std::to_string(a.rank), a.node, node_state, pod_name, phase});
  }
  out << ranks.Render("    ") << refusals;
}

// "Why here:": the message of the condition that placed the job: Recovering, else Placed, else
// Admitted.
void WriteWhyHere(std::ostream& out, const Json& job) {
  for (std::string_view t :
       {model::kConditionRecovering, model::kConditionPlaced, model::kConditionAdmitted}) {
    const Json* c = model::FindCondition(job, t);
    if (c != nullptr && Str(kube::AtPath(*c, "/status")) == "True" &&
        !Str(kube::AtPath(*c, "/message")).empty()) {
      out << "  Why here:    " << Str(kube::AtPath(*c, "/message")) << "\n";
      return;
    }
  }
}

void WriteRecoveries(std::ostream& out, const Json& job) {
  int recoveries = IntOr(kube::AtPath(job, "/status/recoveries"), 0);
  if (recoveries <= 0) return;
  out << "  Recoveries:  " << recoveries;
  std::string last = Str(kube::AtPath(job, "/status/lastRecoveryTime"));
  if (!last.empty()) out << " (last at " << last << ")";
  out << "\n";
}

// "Fabric:": for a job admitted with ComputeDomains, their names and the ComputeDomainReady
// condition (the operator's word on them).
void WriteFabric(std::ostream& out, const Json& job, const model::JobPlacement& placement) {
  if (Str(kube::AtPath(job, "/status/fabric")) != "ComputeDomain") return;
  auto spec = model::ParseJobSpec(kube::AtPath(job, "/spec"));
  const int segments = spec.ok() ? spec->replicas / spec->EffectiveSegmentSize()
                                 : static_cast<int>(placement.domains.size());
  out << "  Fabric:      IMEX ComputeDomain " << kube::Name(job) << "-seg-"
      << (segments > 1 ? "{0.." + std::to_string(segments - 1) + "}" : std::string("0"));
  const Json* c = model::FindCondition(job, model::kConditionComputeDomainReady);
  if (c == nullptr) {
    out << " (not checked yet)\n";
    return;
  }
  out << ": " << (Str(kube::AtPath(*c, "/status")) == "True" ? "Ready" : "not Ready") << " ("
      << Str(kube::AtPath(*c, "/reason")) << ": " << Str(kube::AtPath(*c, "/message")) << ")\n";
}

// A placed job: its domains, each segment's domain with the job's nodes marked, every rank, the
// message of the condition that placed it and its recoveries.
void ExplainPlaced(std::ostream& out, const ClusterView& view, const Json& job,
                   const model::JobPlacement& placement, const DomainNamer& namer) {
  std::vector<std::string> domains;
  for (const auto& d : placement.domains) domains.push_back(namer.Shorten(d));
  out << "  Placement:   " << Plural(static_cast<int>(placement.domains.size()), "domain") << ": "
      << Join(domains, ",") << (model::HoldsReservation(job) ? "" : " (released: job finished)")
      << "\n";
  out << SegmentRows(view, job, placement, namer);
  WriteRanks(out, view, job, placement);
  WriteFabric(out, job, placement);
  WriteWhyHere(out, job);
  WriteRecoveries(out, job);
}

// The operator's reason the job waits: the Admitted condition's message, else its reason.
std::string WaitReason(const Json& job) {
  const Json* admitted = model::FindCondition(job, model::kConditionAdmitted);
  std::string why = admitted == nullptr ? "" : Str(kube::AtPath(*admitted, "/message"));
  if (why.empty()) {
    why = admitted == nullptr ? "the operator has not admitted it yet (no Admitted condition: is "
                                "nvl72-operator running?)"
                              : Str(kube::AtPath(*admitted, "/reason"));
  }
  return why;
}

// The short names of the domains of `nodes`, in order of first appearance.
std::vector<std::string> DomainsOf(const placement::Snapshot& snap,
                                   const std::vector<NodeId>& nodes, const DomainNamer& namer) {
  std::vector<std::string> domains;
  for (NodeId id : nodes) {
    const std::string& n = namer(snap.nodes[id].domain);
    if (std::find(domains.begin(), domains.end(), n) == domains.end()) domains.push_back(n);
  }
  return domains;
}

// "Now:" and "Free blocks:": a fresh decision of the nvl72 policy on the current snapshot, with
// the job's own constraints, against the operator's reason `why`.
void WriteDecisionNow(std::ostream& out, const ClusterView& view, const Json& job,
                      const model::JobSpec& spec, const std::string& why,
                      const DomainNamer& namer) {
  const placement::Snapshot& snap = view.state.snapshot();
  auto policy = placement::MakePolicy(
      "nvl72", {.spares_per_domain = view.spares_per_domain, .spare_reserve = view.spare_reserve});
  const model::JobVerdict verdict =
      model::JudgeJob(view.state, job, spec, JobKey(job), 0, view.gpu_resource);
  placement::GangDecision d;
  if (verdict.error.empty()) d = policy->PlaceGang(snap, verdict.request);
  if (!d.placed) {
    d.reason = verdict.error.empty() ? model::WaitingReason(snap, verdict.request, verdict.nodes, d)
                                     : verdict.error;
  }
  if (d.placed && why.rfind(model::kFabricUnavailable, 0) == 0) {
    out << "  Now:         the nodes are there ("
        << Join(DomainsOf(snap, d.placement.rank_nodes, namer), ",")
        << "), but it waits for ComputeDomains: see above\n";
  } else if (d.placed) {
    out << "  Now:         it fits: the nvl72 policy would place it in "
        << Join(DomainsOf(snap, d.placement.rank_nodes, namer), ",")
        << " (the operator admits it on its next pass)\n";
  } else if (d.reason == why) {
    out << "  Now:         still so on the current snapshot\n";
  } else {
    out << "  Now:         " << d.reason << "\n";
  }
  if (verdict.error.empty()) {
    out << "  Free blocks: " << FreeBlocksLine(*policy, snap, verdict.request, view, namer) << "\n";
  }
}

// A job without a placement: why it waits, and what the policy decides now.
void ExplainWaiting(std::ostream& out, const ClusterView& view, const Json& job,
                    const StatusOr<model::JobSpec>& spec, const DomainNamer& namer) {
  out << "  Placement:   none (no GPUs reserved)\n";
  const std::string why = WaitReason(job);
  out << "  Why it waits: " << why << "\n";
  if (spec.ok() && !model::JobFinished(job)) WriteDecisionNow(out, view, job, *spec, why, namer);
}

void WriteConditions(std::ostream& out, const Json& job) {
  const Json& conditions = kube::AtPath(job, "/status/conditions");
  if (!conditions.is_array() || conditions.empty()) return;
  out << "  Conditions:\n";
  Table t;
  t.Add({"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"});
  for (const auto& c : conditions) {
    t.Add({Str(kube::AtPath(c, "/type")), Str(kube::AtPath(c, "/status")),
           Str(kube::AtPath(c, "/reason")), Str(kube::AtPath(c, "/lastTransitionTime")),
           Str(kube::AtPath(c, "/message"))});
  }
  out << t.Render("    ");
}

}  // namespace

std::string RenderExplain(const ClusterView& view, const Json& job) {
  DomainNamer namer(view.state.snapshot());
  std::ostringstream out;
  out << "NVL72Job " << JobKey(job) << ": " << JobState(job) << "\n";
  auto spec = model::ParseJobSpec(kube::AtPath(job, "/spec"));
  WriteSpec(out, spec);
  auto placement = model::PlacementOf(job);
  if (!placement.ok()) {
    out << "  Placement:   malformed status.placement: " << placement.status().message() << "\n";
  } else if (placement->has_value()) {
    ExplainPlaced(out, view, job, **placement, namer);
  } else {
    ExplainWaiting(out, view, job, spec, namer);
  }
  WriteConditions(out, job);
  return out.str();
}

}  // namespace nvl72::cli
