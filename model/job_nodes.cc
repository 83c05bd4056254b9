#include "model/job_nodes.h"

#include <algorithm>

#include "model/names.h"

namespace nvl72::model {
namespace {

std::string Plural(int n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

// The group a refusal is counted under: one per taint (its text names it), else one per filter.
std::pair<std::string, std::string> CauseOf(const Fit& fit) {
  switch (fit.misfit) {
    case Misfit::kUnschedulable:
      return {"cordon (spec.unschedulable)", ""};
    case Misfit::kNodeSelector:
      return {fit.detail, ""};
    case Misfit::kNodeAffinity:
      return {"required node affinity", ""};
    case Misfit::kTaint:
      return {fit.detail + " (not tolerated)", ""};
    case Misfit::kResources:
      return {"resources", fit.detail};
    case Misfit::kNone:
      break;
  }
  return {"", ""};
}

void Count(std::vector<JobNodes::Excluded>& excluded, std::pair<std::string, std::string> cause) {
  for (auto& e : excluded) {
    if (e.cause == cause.first) {
      ++e.nodes;
      return;
    }
  }
  excluded.push_back({std::move(cause.first), 1, std::move(cause.second)});
}

// Most nodes one domain offers the gang (allowed, and big enough for one rank), and that domain.
std::pair<int, placement::DomainId> BestDomain(const placement::Snapshot& s,
                                               const placement::GangRequest& r) {
  std::pair<int, placement::DomainId> best{0, placement::kNoDomain};
  for (placement::DomainId d = 0; d < static_cast<placement::DomainId>(s.domains.size()); ++d) {
    int n = 0;
    for (placement::NodeId id : s.domains[static_cast<size_t>(d)].nodes) {
      const bool allowed = r.allowed_nodes.empty() || r.allowed_nodes[static_cast<size_t>(id)];
      if (allowed && s.nodes[static_cast<size_t>(id)].gpu_capacity >= r.gpus_per_replica) ++n;
    }
    if (n > best.first) best = {n, d};
  }
  return best;
}

// The ComputeDomain a node serves (kComputeDomainNodeLabel), "" when none.
std::string_view ComputeDomainOf(const NodeFacts& facts) {
  for (const auto& [key, value] : facts.labels) {
    if (key == kComputeDomainNodeLabel) return value;
  }
  return "";
}

}  // namespace

StatusOr<PodConstraints> RankPodConstraints(const JobSpec& spec, std::string_view gpu_resource) {
  static const Json kEmpty = Json::object();
  const Json* pod_spec = &kEmpty;
  if (spec.pod_template.is_object()) {
    auto it = spec.pod_template.find("spec");
    if (it != spec.pod_template.end() && it->is_object()) pod_spec = &*it;
  }
  auto pod = PodConstraintsOf(*pod_spec, {std::string(gpu_resource)});
  if (!pod.ok()) {
    return InvalidArgumentError("spec.template.spec: " + std::string(pod.status().message()));
  }
  for (Toleration& t : RankTolerations(gpu_resource)) pod->tolerations.push_back(std::move(t));
  return pod;
}

std::string JobNodes::Summary() const {
  if (excluded.empty()) return "";
  std::string out = "the rank pod's constraints rule out " + std::to_string(total - allowed_count) +
                    " of " + Plural(total, "node") + ":";
  for (size_t i = 0; i < excluded.size(); ++i) {
    const auto& e = excluded[i];
    out += (i == 0 ? " " : ", ") + std::to_string(e.nodes) + " by " + e.cause;
    if (!e.example.empty()) out += " (e.g. " + e.example + ")";
  }
  return out;
}

JobNodes EvaluateJobNodes(const ClusterState& state, const PodConstraints& pod,
                          const std::vector<std::string>& refused) {
  JobNodes out;
  const auto& nodes = state.snapshot().nodes;
  out.total = static_cast<int>(nodes.size());
  out.allowed.assign(nodes.size(), false);
  for (placement::NodeId id = 0; id < out.total; ++id) {
    const Fit fit = CheckNode(pod, state.Facts(id), state.Usage(id));
    if (!fit.ok()) {
      Count(out.excluded, CauseOf(fit));
    } else if (std::find(refused.begin(), refused.end(), state.NodeName(id)) != refused.end()) {
      Count(out.excluded, {"kube-scheduler's earlier refusal (status.refusedNodes)", ""});
    } else if (!nodes[static_cast<size_t>(id)].gang_reserved &&
               !ComputeDomainOf(state.Facts(id)).empty()) {
      Count(out.excluded, {"a ComputeDomain still on the node (node label " +
                               std::string(kComputeDomainNodeLabel) + ")",
                           state.NodeName(id)});
    } else {
      out.allowed[static_cast<size_t>(id)] = true;
      ++out.allowed_count;
    }
  }
  return out;
}

placement::GangRequest JobGangRequest(const JobSpec& spec, std::string key, int priority,
                                      const JobNodes& nodes) {
  placement::GangRequest r = ToGangRequest(spec, std::move(key), priority);
  r.allowed_nodes = nodes.allowed;
  return r;
}

std::string WaitingReason(const placement::Snapshot& s, const placement::GangRequest& r,
                          const JobNodes& nodes, const placement::GangDecision& d) {
  if (std::string never = placement::NeverFitsReason(s, r); !never.empty()) return never;
  const std::string summary = nodes.Summary();
  if (summary.empty()) return d.reason;
  const auto [best, dom] = BestDomain(s, r);
  const bool required = r.mode == placement::TopologyMode::kRequired;
  const int want = required ? r.EffectiveSegmentSize() : r.replicas;
  const int have = required ? best : nodes.allowed_count;
  if (have >= want) return d.reason + "; " + summary;
  std::string out = "needs " + Plural(want, "node") + (required ? " in one NVLink domain" : "") +
                    " where the rank pod can run; ";
  if (have == 0) return out + "there is none: " + summary;
  out += required ? "the most in one domain is " + std::to_string(have) + " (" +
                        s.domains[static_cast<size_t>(dom)].name + ")"
                  : "the cluster has " + std::to_string(have);
  return out + ": " + summary;
}

std::vector<std::string> RefusedNodes(const Json& job) {
  std::vector<std::string> out;
  auto st = job.find("status");
  if (st == job.end() || !st->is_object()) return out;
  // Refusals count for the generation they were seen at: a changed spec starts afresh.
  auto gen = st->find("replanGeneration");
  auto meta = job.find("metadata");
  const int64_t generation = meta != job.end() && meta->is_object() &&
                                     meta->contains("generation") &&
                                     (*meta)["generation"].is_number_integer()
                                 ? (*meta)["generation"].get<int64_t>()
                                 : 0;
  if (gen == st->end() || !gen->is_number_integer() || gen->get<int64_t>() != generation)
    return out;
  auto it = st->find("refusedNodes");
  if (it == st->end() || !it->is_array()) return out;
  for (const auto& n : *it) {
    if (n.is_string()) out.push_back(n.get<std::string>());
  }
  return out;
}

JobVerdict JudgeJob(const ClusterState& state, const Json& job, const JobSpec& spec,
                    std::string key, int priority, std::string_view gpu_resource) {
  JobVerdict v;
  auto pod = RankPodConstraints(spec, gpu_resource);
  if (!pod.ok()) {
    v.error = std::string(pod.status().message());
    v.request = ToGangRequest(spec, std::move(key), priority);
    return v;
  }
  v.nodes = EvaluateJobNodes(state, *pod, RefusedNodes(job));
  v.request = JobGangRequest(spec, std::move(key), priority, v.nodes);
  return v;
}

}  // namespace nvl72::model
