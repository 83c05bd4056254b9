#include "model/job_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <set>

#include "common/numbers.h"
#include "model/names.h"

namespace nvl72::model {
namespace {

Status FieldError(std::string_view field, const std::string& what) {
  return InvalidArgumentError(std::string(field) + ": " + what);
}

// Reads an optional integer field; absent/null keeps *out. Rejects non-integers and out-of-int
// range.
Status ReadInt(const Json& parent, const char* key, std::string_view path, int* out) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  int64_t v = 0;
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (d != std::trunc(d)) return FieldError(path, "must be an integer");
    if (!WholeDoubleToInt64(d, &v)) return FieldError(path, "out of range");
  } else if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return FieldError(path, "out of range");
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else {
    return FieldError(path, "must be an integer");
  }
  if (v < INT32_MIN || v > INT32_MAX) return FieldError(path, "out of range");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadBool(const Json& parent, const char* key, std::string_view path, bool* out) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return FieldError(path, "must be a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadObject(const Json& parent, const char* key, std::string_view path, const Json** out) {
  *out = nullptr;
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return FieldError(path, "must be an object");
  *out = &*it;
  return Status::Ok();
}

Status ReadString(const Json& parent, const char* key, std::string_view path, std::string* out) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return FieldError(path, "must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

const Json& NullJson() {
  static const Json kNull;
  return kNull;
}

const Json& Child(const Json& obj, const char* key) {
  if (!obj.is_object()) return NullJson();
  auto it = obj.find(key);
  return it == obj.end() ? NullJson() : *it;
}

// MASTER_PORT as the template's containers set it: a literal port number in 1..65535, the same in
// every container that sets it (the headless Service and every rank use one port).
StatusOr<std::optional<int>> TemplateMasterPort(const Json& tmpl) {
  const Json& containers = Child(Child(tmpl, "spec"), "containers");
  if (!containers.is_array()) return std::optional<int>();
  std::optional<int> port;
  for (size_t i = 0; i < containers.size(); ++i) {
    const Json& env = Child(containers[i], "env");
    if (!env.is_array()) continue;
    for (const auto& e : env) {
      if (!e.is_object() || e.value("name", "") != kEnvMasterPort) continue;
      const std::string path = "spec.template.spec.containers[" + std::to_string(i) + "].env[" +
                               std::string(kEnvMasterPort) + "]";
      const Json& v = Child(e, "value");
      const std::string value = v.is_string() ? v.get<std::string>() : "";
      int p = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), p);
      if (ec != std::errc() || end != value.data() + value.size() || p < 1 || p > 65535) {
        return FieldError(path,
                          "must be a literal port number 1-65535 (the operator gives it to "
                          "the headless Service and every rank; got \"" +
                              value + "\")");
      }
      if (port.has_value() && *port != p) {
        return FieldError(path, "is " + value + " here but " + std::to_string(*port) +
                                    " in an earlier container: every rank uses one port");
      }
      port = p;
    }
  }
  return port;
}

// spec.replicas (required, >= 1) and spec.gpusPerReplica (1..limits.max_gpus_per_node).
Status ReadGangSize(const Json& spec, const SpecLimits& limits, JobSpec* out) {
  if (!spec.contains("replicas") || spec["replicas"].is_null()) {
    return FieldError("spec.replicas", "is required");
  }
  NVL72_RETURN_IF_ERROR(ReadInt(spec, "replicas", "spec.replicas", &out->replicas));
  if (out->replicas < 1) {
    return FieldError("spec.replicas", "must be >= 1 (got " + std::to_string(out->replicas) + ")");
  }
  NVL72_RETURN_IF_ERROR(
      ReadInt(spec, "gpusPerReplica", "spec.gpusPerReplica", &out->gpus_per_replica));
  if (out->gpus_per_replica < 1 || out->gpus_per_replica > limits.max_gpus_per_node) {
    return FieldError("spec.gpusPerReplica",
                      "must be between 1 and " + std::to_string(limits.max_gpus_per_node) +
                          " (got " + std::to_string(out->gpus_per_replica) + ")");
  }
  return Status::Ok();
}

Status ParseTopologyMode(const std::string& mode, placement::TopologyMode* out) {
  if (mode == "Required") {
    *out = placement::TopologyMode::kRequired;
  } else if (mode == "Preferred") {
    *out = placement::TopologyMode::kPreferred;
  } else if (mode == "Unconstrained") {
    *out = placement::TopologyMode::kUnconstrained;
  } else {
    return FieldError("spec.topology.mode",
                      "must be one of Required, Preferred, Unconstrained (got \"" + mode + "\")");
  }
  return Status::Ok();
}

// spec.topology: mode (default Required) and segmentSize (>= 0, dividing spec.replicas).
Status ReadTopology(const Json& spec, JobSpec* out) {
  const Json* topology = nullptr;
  NVL72_RETURN_IF_ERROR(ReadObject(spec, "topology", "spec.topology", &topology));
  if (topology == nullptr) return Status::Ok();
  std::string mode = "Required";
  NVL72_RETURN_IF_ERROR(ReadString(*topology, "mode", "spec.topology.mode", &mode));
  NVL72_RETURN_IF_ERROR(ParseTopologyMode(mode, &out->mode));
  NVL72_RETURN_IF_ERROR(
      ReadInt(*topology, "segmentSize", "spec.topology.segmentSize", &out->segment_size));
  if (out->segment_size < 0) {
    return FieldError("spec.topology.segmentSize", "must be >= 0");
  }
  if (out->segment_size > 0 && out->replicas % out->segment_size != 0) {
    return FieldError("spec.topology.segmentSize", std::to_string(out->segment_size) +
                                                       " does not divide spec.replicas " +
                                                       std::to_string(out->replicas));
  }
  return Status::Ok();
}

// A segment, and a Required gang that is not segmented, must fit in one domain.
Status CheckSegmentFitsDomain(const JobSpec& out, const SpecLimits& limits) {
  if (out.segment_size > limits.domain_nodes) {
    return FieldError("spec.topology.segmentSize",
                      std::to_string(out.segment_size) + " is larger than a domain (" +
                          std::to_string(limits.domain_nodes) + " nodes)");
  }
  if (out.mode == placement::TopologyMode::kRequired &&
      out.EffectiveSegmentSize() > limits.domain_nodes) {
    return FieldError("spec.topology.segmentSize",
                      "a Required gang of " + std::to_string(out.replicas) +
                          " replicas is larger than a domain (" +
                          std::to_string(limits.domain_nodes) + " nodes) and must be segmented");
  }
  return Status::Ok();
}

Status ParseRecoveryPolicy(const std::string& policy, RecoveryPolicy* out) {
  if (policy == "InPlace") {
    *out = RecoveryPolicy::kInPlace;
  } else if (policy == "RestartGang") {
    *out = RecoveryPolicy::kRestartGang;
  } else if (policy == "None") {
    *out = RecoveryPolicy::kNone;
  } else {
    return FieldError("spec.recovery.policy",
                      "must be one of InPlace, RestartGang, None (got \"" + policy + "\")");
  }
  return Status::Ok();
}

// spec.recovery: policy (default InPlace), notReadyGraceSeconds, maxRecoveries and
// waitForDomainSeconds, all >= 0.
Status ReadRecovery(const Json& spec, RecoverySpec* out) {
  const Json* recovery = nullptr;
  NVL72_RETURN_IF_ERROR(ReadObject(spec, "recovery", "spec.recovery", &recovery));
  if (recovery == nullptr) return Status::Ok();
  std::string policy = "InPlace";
  NVL72_RETURN_IF_ERROR(ReadString(*recovery, "policy", "spec.recovery.policy", &policy));
  NVL72_RETURN_IF_ERROR(ParseRecoveryPolicy(policy, &out->policy));
  NVL72_RETURN_IF_ERROR(ReadInt(*recovery, "notReadyGraceSeconds",
                                "spec.recovery.notReadyGraceSeconds",
                                &out->not_ready_grace_seconds));
  if (out->not_ready_grace_seconds < 0) {
    return FieldError("spec.recovery.notReadyGraceSeconds", "must be >= 0");
  }
  NVL72_RETURN_IF_ERROR(
      ReadInt(*recovery, "maxRecoveries", "spec.recovery.maxRecoveries", &out->max_recoveries));
  if (out->max_recoveries < 0) {
    return FieldError("spec.recovery.maxRecoveries", "must be >= 0");
  }
  if (auto it = recovery->find("waitForDomainSeconds"); it != recovery->end() && !it->is_null()) {
    int wait = 0;
    NVL72_RETURN_IF_ERROR(
        ReadInt(*recovery, "waitForDomainSeconds", "spec.recovery.waitForDomainSeconds", &wait));
    if (wait < 0) return FieldError("spec.recovery.waitForDomainSeconds", "must be >= 0");
    out->wait_for_domain_seconds = wait;
  }
  return Status::Ok();
}

// spec.template (required) and the MASTER_PORT its containers set.
Status ReadTemplate(const Json& spec, JobSpec* out) {
  const Json* tmpl = nullptr;
  NVL72_RETURN_IF_ERROR(ReadObject(spec, "template", "spec.template", &tmpl));
  if (tmpl == nullptr) return FieldError("spec.template", "is required");
  out->pod_template = *tmpl;
  auto port = TemplateMasterPort(*tmpl);
  if (!port.ok()) return port.status();
  out->master_port = *port;
  return Status::Ok();
}

// spec.fabric: ComputeDomain | None; absent = the operator's default.
Status ReadFabric(const Json& spec, std::optional<Fabric>* out) {
  if (auto it = spec.find("fabric"); it == spec.end() || it->is_null()) return Status::Ok();
  std::string fabric;
  NVL72_RETURN_IF_ERROR(ReadString(spec, "fabric", "spec.fabric", &fabric));
  if (fabric == "ComputeDomain") {
    *out = Fabric::kComputeDomain;
  } else if (fabric == "None") {
    *out = Fabric::kNone;
  } else {
    return FieldError("spec.fabric", "must be ComputeDomain or None (got \"" + fabric + "\")");
  }
  return Status::Ok();
}

}  // namespace

std::string_view FabricName(Fabric fabric) {
  return fabric == Fabric::kComputeDomain ? "ComputeDomain" : "None";
}

std::string_view RecoveryPolicyName(RecoveryPolicy policy) {
  switch (policy) {
    case RecoveryPolicy::kInPlace:
      return "InPlace";
    case RecoveryPolicy::kRestartGang:
      return "RestartGang";
    case RecoveryPolicy::kNone:
      return "None";
  }
  return "None";
}

StatusOr<JobSpec> ParseJobSpec(const Json& spec, const SpecLimits& limits) {
  if (!spec.is_object()) return FieldError("spec", "must be an object");
  JobSpec out;
  NVL72_RETURN_IF_ERROR(ReadGangSize(spec, limits, &out));
  NVL72_RETURN_IF_ERROR(ReadTopology(spec, &out));
  NVL72_RETURN_IF_ERROR(CheckSegmentFitsDomain(out, limits));
  NVL72_RETURN_IF_ERROR(ReadBool(spec, "preemptible", "spec.preemptible", &out.preemptible));
  NVL72_RETURN_IF_ERROR(ReadFabric(spec, &out.fabric));
  NVL72_RETURN_IF_ERROR(ReadRecovery(spec, &out.recovery));
  NVL72_RETURN_IF_ERROR(ReadTemplate(spec, &out));
  return out;
}

placement::GangRequest ToGangRequest(const JobSpec& spec, std::string key, int priority) {
  placement::GangRequest r;
  r.key = std::move(key);
  r.replicas = spec.replicas;
  r.gpus_per_replica = spec.gpus_per_replica;
  r.mode = spec.mode;
  r.segment_size = spec.segment_size;
  r.priority = priority;
  r.preemptible = spec.preemptible;
  return r;
}

const RankAssignment* JobPlacement::FindRank(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(ranks.size()) && ranks[rank].rank == rank) {
    return &ranks[rank];
  }
  for (const auto& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

bool JobPlacement::operator==(const JobPlacement& o) const {
  if (domains != o.domains || ranks.size() != o.ranks.size()) return false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != o.ranks[i].rank || ranks[i].node != o.ranks[i].node ||
        ranks[i].pod != o.ranks[i].pod) {
      return false;
    }
  }
  return true;
}

StatusOr<JobPlacement> ParsePlacement(const Json& placement) {
  if (!placement.is_object()) return FieldError("status.placement", "must be an object");
  JobPlacement out;
  const Json& domains = Child(placement, "domains");
  if (!domains.is_null()) {
    if (!domains.is_array()) return FieldError("status.placement.domains", "must be an array");
    for (size_t i = 0; i < domains.size(); ++i) {
      if (!domains[i].is_string()) {
        return FieldError("status.placement.domains[" + std::to_string(i) + "]",
                          "must be a string");
      }
      out.domains.push_back(domains[i].get<std::string>());
    }
  }
  const Json& ranks = Child(placement, "ranks");
  if (!ranks.is_null()) {
    if (!ranks.is_array()) return FieldError("status.placement.ranks", "must be an array");
    std::set<int> seen;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const std::string path = "status.placement.ranks[" + std::to_string(i) + "]";
      if (!ranks[i].is_object()) return FieldError(path, "must be an object");
      RankAssignment a;
      a.rank = -1;
      NVL72_RETURN_IF_ERROR(ReadInt(ranks[i], "rank", path + ".rank", &a.rank));
      if (a.rank < 0) return FieldError(path + ".rank", "must be >= 0");
      if (!seen.insert(a.rank).second) {
        return FieldError(path + ".rank", "duplicate rank " + std::to_string(a.rank));
      }
      NVL72_RETURN_IF_ERROR(ReadString(ranks[i], "node", path + ".node", &a.node));
      if (a.node.empty()) return FieldError(path + ".node", "is required");
      NVL72_RETURN_IF_ERROR(ReadString(ranks[i], "pod", path + ".pod", &a.pod));
      out.ranks.push_back(std::move(a));
    }
    std::sort(out.ranks.begin(), out.ranks.end(),
              [](const RankAssignment& a, const RankAssignment& b) { return a.rank < b.rank; });
  }
  return out;
}

Json PlacementToJson(const JobPlacement& placement) {
  Json ranks = Json::array();
  for (const auto& r : placement.ranks) {
    ranks.push_back({{"rank", r.rank}, {"node", r.node}, {"pod", r.pod}});
  }
  return Json{{"domains", placement.domains}, {"ranks", std::move(ranks)}};
}

StatusOr<std::optional<JobPlacement>> PlacementOf(const Json& job) {
  const Json& p = Child(Child(job, "status"), "placement");
  if (p.is_null()) return std::optional<JobPlacement>();
  auto parsed = ParsePlacement(p);
  if (!parsed.ok()) return parsed.status();
  if (parsed->ranks.empty()) return std::optional<JobPlacement>();
  return std::optional<JobPlacement>(std::move(parsed).value());
}

std::string RankPodName(std::string_view job_name, int rank) {
  return std::string(job_name) + "-" + std::to_string(rank);
}

JobPlacement MakeJobPlacement(const placement::Snapshot& snapshot,
                              const placement::GangPlacement& decision, std::string_view job_name,
                              int segment_size) {
  JobPlacement out;
  const int n = static_cast<int>(decision.rank_nodes.size());
  const int seg = segment_size > 0 ? segment_size : std::max(n, 1);
  for (int start = 0; start < n; start += seg) {
    std::vector<std::string> seg_domains;
    for (int r = start; r < std::min(n, start + seg); ++r) {
      const auto& node = snapshot.nodes[decision.rank_nodes[r]];
      const std::string& d =
          node.domain == placement::kNoDomain ? std::string() : snapshot.domains[node.domain].name;
      if (std::find(seg_domains.begin(), seg_domains.end(), d) == seg_domains.end()) {
        seg_domains.push_back(d);
      }
    }
    out.domains.insert(out.domains.end(), seg_domains.begin(), seg_domains.end());
  }
  for (int r = 0; r < n; ++r) {
    out.ranks.push_back({r, snapshot.nodes[decision.rank_nodes[r]].name, RankPodName(job_name, r)});
  }
  return out;
}

const Json* FindCondition(const Json& obj, std::string_view type) {
  const Json& conds = Child(Child(obj, "status"), "conditions");
  if (!conds.is_array()) return nullptr;
  for (const auto& c : conds) {
    if (c.is_object()) {
      auto t = c.find("type");
      if (t != c.end() && t->is_string() && t->get_ref<const std::string&>() == type) return &c;
    }
  }
  return nullptr;
}

bool ConditionIsTrue(const Json& obj, std::string_view type) {
  const Json* c = FindCondition(obj, type);
  if (c == nullptr) return false;
  auto s = c->find("status");
  return s != c->end() && s->is_string() && s->get_ref<const std::string&>() == "True";
}

bool JobFinished(const Json& job) {
  return ConditionIsTrue(job, kConditionSucceeded) || ConditionIsTrue(job, kConditionFailed);
}

bool HoldsReservation(const Json& job) {
  if (JobFinished(job)) return false;
  auto p = PlacementOf(job);
  return p.ok() && p->has_value();
}

int JobPriority(const Json& job, std::optional<int> priority_class_value) {
  const Json& ann = Child(Child(job, "metadata"), "annotations");
  const Json& v = Child(ann, std::string(kPriorityAnnotation).c_str());
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    int out = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && ptr == s.data() + s.size()) return out;
  }
  return priority_class_value.value_or(0);
}

std::string PriorityClassName(const Json& job) {
  const Json& v = Child(Child(Child(Child(job, "spec"), "template"), "spec"), "priorityClassName");
  return v.is_string() ? v.get<std::string>() : std::string();
}

}  // namespace nvl72::model
