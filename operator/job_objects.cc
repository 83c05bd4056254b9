#include "operator/job_objects.h"

#include <algorithm>
#include <ctime>
#include <functional>
#include <initializer_list>

#include "model/cluster_state.h"
#include "model/names.h"

namespace nvl72::op {
namespace {

using model::kJobLabel;
using model::kRankLabel;

std::string Str(std::string_view s) { return std::string(s); }

std::string FormatTime(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void SetEnv(Json& container, const std::string& name, const std::string& value) {
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (auto& e : env) {
    if (e.is_object() && e.value("name", "") == name) {
      e = {{"name", name}, {"value", value}};
      return;
    }
  }
  env.push_back({{"name", name}, {"value", value}});
}

// Rank pods get model::RankTolerations: the GPU resource's NoSchedule taint, and the node lifecycle
// NoExecute taints without a time limit (the job's notReadyGraceSeconds is the one knob; see
// model::kRankToleratedNoExecuteTaints). A template toleration with the same key and effect is
// replaced; other tolerations stay.
void SetRankTolerations(Json& podspec, std::string_view gpu_resource) {
  const std::vector<model::Toleration> ours = model::RankTolerations(gpu_resource);
  auto replaced = [&](const Json& t) {
    if (!t.is_object()) return false;
    for (const auto& o : ours) {
      if (t.value("key", "") == o.key && t.value("effect", "") == o.effect) return true;
    }
    return false;
  };
  Json kept = Json::array();
  const Json& tolerations = podspec.contains("tolerations") ? podspec["tolerations"] : Json();
  if (tolerations.is_array()) {
    for (const auto& t : tolerations) {
      if (!replaced(t)) kept.push_back(t);
    }
  }
  for (const auto& o : ours) {
    kept.push_back({{"key", o.key}, {"operator", o.op}, {"effect", o.effect}});
  }
  podspec["tolerations"] = std::move(kept);
}

// The template's metadata with the rank pod's name, namespace, labels, planned-node annotation and
// controller ownerReference.
Json RankPodMetadata(const Json& job, const model::JobSpec& spec,
                     const model::RankAssignment& rank) {
  const std::string job_name = job["metadata"].value("name", "");
  Json meta = spec.pod_template.contains("metadata") && spec.pod_template["metadata"].is_object()
                  ? spec.pod_template["metadata"]
                  : Json::object();
  meta.erase("name");
  meta.erase("generateName");
  meta.erase("resourceVersion");
  meta.erase("uid");
  meta["name"] = model::RankPodName(job_name, rank.rank);
  meta["namespace"] = job["metadata"].value("namespace", "");
  if (!meta["labels"].is_object()) meta["labels"] = Json::object();
  meta["labels"][Str(kJobLabel)] = job_name;
  meta["labels"][Str(kRankLabel)] = std::to_string(rank.rank);
  if (!meta["annotations"].is_object()) meta["annotations"] = Json::object();
  meta["annotations"][Str(model::kNodeAnnotation)] = rank.node;
  meta["ownerReferences"] = Json::array({JobOwnerReference(job)});
  return meta;
}

// Required node affinity on the planned node, ANDed into every existing required term.
void SetPlannedNodeAffinity(Json& podspec, const std::string& node) {
  Json expr = {{"key", Str(model::kHostnameLabel)}, {"operator", "In"}, {"values", {node}}};
  Json& required =
      podspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  Json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  for (auto& term : terms) {
    if (!term["matchExpressions"].is_array()) term["matchExpressions"] = Json::array();
    term["matchExpressions"].push_back(expr);
  }
}

// The template's pod spec, scheduled by nvl72-scheduler onto the planned node, with rank DNS and
// the rank tolerations.
Json RankPodSpec(const Json& job, const model::JobSpec& spec, const model::RankAssignment& rank,
                 std::string_view gpu_resource) {
  const std::string job_name = job["metadata"].value("name", "");
  Json podspec = spec.pod_template.contains("spec") && spec.pod_template["spec"].is_object()
                     ? spec.pod_template["spec"]
                     : Json::object();
  podspec.erase("nodeName");
  podspec["schedulerName"] = Str(model::kSchedulerName);
  podspec["hostname"] = model::RankPodName(job_name, rank.rank);
  podspec["subdomain"] = job_name;
  if (!podspec.contains("restartPolicy")) podspec["restartPolicy"] = "Never";
  // A hostNetwork pod with the default DNS policy gets the node's resolver, where MASTER_ADDR (a
  // name of the headless Service) does not resolve; an explicit Default or None stays.
  if (podspec.value("hostNetwork", false) &&
      podspec.value("dnsPolicy", "ClusterFirst") == "ClusterFirst") {
    podspec["dnsPolicy"] = "ClusterFirstWithHostNet";
  }
  SetRankTolerations(podspec, gpu_resource);
  SetPlannedNodeAffinity(podspec, rank.node);
  return podspec;
}

// NVL72_RANK, NVL72_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in every container.
void SetRankEnv(Json& podspec, const Json& job, const model::JobSpec& spec,
                const model::RankAssignment& rank, int master_port) {
  const std::string job_name = job["metadata"].value("name", "");
  const std::string ns = job["metadata"].value("namespace", "");
  const std::string world = std::to_string(spec.replicas);
  const std::string master = model::RankPodName(job_name, 0) + "." + job_name + "." + ns + ".svc";
  if (!podspec["containers"].is_array()) podspec["containers"] = Json::array();
  for (auto& c : podspec["containers"]) {
    SetEnv(c, Str(model::kEnvRank), std::to_string(rank.rank));
    SetEnv(c, Str(model::kEnvWorldSize), world);
    SetEnv(c, Str(model::kEnvMasterAddr), master);
    SetEnv(c, Str(model::kEnvMasterPort), std::to_string(spec.EffectiveMasterPort(master_port)));
  }
}

// `gpus_per_replica` GPUs on the first container when no container asks for any.
void SetDefaultGpus(Json& pod, const model::JobSpec& spec, std::string_view gpu_resource) {
  if (model::PodGpuRequest(pod, gpu_resource) == 0 && !pod["spec"]["containers"].empty()) {
    Json& res = pod["spec"]["containers"][0]["resources"];
    res["requests"][Str(gpu_resource)] = std::to_string(spec.gpus_per_replica);
    res["limits"][Str(gpu_resource)] = std::to_string(spec.gpus_per_replica);
  }
}

void SetState(Json& status, std::string_view state, bool* changed) {
  if (status.value("state", "") != state) {
    status["state"] = Str(state);
    *changed = true;
  }
}

void SetObserved(Json& status, int64_t generation, bool* changed) {
  if (!status.contains("observedGeneration") || status["observedGeneration"] != generation) {
    status["observedGeneration"] = generation;
    *changed = true;
  }
}

// The first non-empty `detail(status)` over the container statuses of `pod`, lists in the given
// order; "" when none.
std::string FirstContainerDetail(const Json& pod, std::initializer_list<const char*> lists,
                                 const std::function<std::string(const Json&)>& detail) {
  const Json& st = kube::AtPath(pod, "/status");
  for (const char* list : lists) {
    const Json& statuses = st.is_object() && st.contains(list) ? st[list] : Json();
    if (!statuses.is_array()) continue;
    for (const auto& cs : statuses) {
      std::string d = detail(cs);
      if (!d.empty()) return d;
    }
  }
  return "";
}

// ": <message>" (at most 200 characters) of a container state, or "".
std::string MessageSuffix(const Json& state) {
  const std::string msg = state.value("message", "");
  return msg.empty() ? "" : ": " + msg.substr(0, 200);
}

}  // namespace

Json JobOwnerReference(const Json& job) {
  return {{"apiVersion", Str(model::kApiVersion)},
          {"kind", Str(model::kKind)},
          {"name", job["metadata"].value("name", "")},
          {"uid", job["metadata"].value("uid", "")},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

bool StatusConditionTrue(const Json& status, std::string_view type, std::string* reason) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return false;
  }
  for (const auto& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") {
      if (reason != nullptr) *reason = c.value("reason", "");
      return true;
    }
  }
  return false;
}

bool SyncRecoveringState(Json& status) {
  if (!status.is_object()) return false;
  const std::string state = status.value("state", "");
  if (state == "Failed" || state == "Succeeded") return false;
  const bool recovering = StatusConditionTrue(status, model::kConditionRecovering);
  const std::string want = recovering ? "Recovering" : state == "Recovering" ? "Admitted" : state;
  if (want == state) return false;
  status["state"] = want;
  return true;
}

std::string FailedPodDetail(const Json& pod) {
  std::string out = FirstContainerDetail(
      pod, {"containerStatuses", "initContainerStatuses"}, [](const Json& cs) -> std::string {
        const Json& term = kube::AtPath(cs, "/state/terminated");
        if (!term.is_object() || term.value("exitCode", 0) == 0) return "";
        std::string d = "container " + cs.value("name", "?") + " exited with code " +
                        std::to_string(term.value("exitCode", 0));
        const std::string reason = term.value("reason", "");
        if (!reason.empty()) d += " (" + reason + ")";
        return d + MessageSuffix(term);
      });
  if (!out.empty()) return out;
  const Json& st = kube::AtPath(pod, "/status");
  const std::string reason = st.is_object() ? st.value("reason", "") : "";
  std::string msg = st.is_object() ? st.value("message", "") : "";
  if (reason.empty()) return msg;
  return msg.empty() ? reason : reason + ": " + msg;
}

std::string JoinDomains(const std::vector<std::string>& domains) {
  std::string out;
  for (const auto& d : domains) {
    if (!out.empty()) out += ",";
    out += d;
  }
  return out;
}

Json BuildRankPod(const Json& job, const model::JobSpec& spec, const model::RankAssignment& rank,
                  int master_port, std::string_view gpu_resource) {
  Json pod = Json::object();
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"] = RankPodMetadata(job, spec, rank);
  Json podspec = RankPodSpec(job, spec, rank, gpu_resource);
  SetRankEnv(podspec, job, spec, rank, master_port);
  pod["spec"] = std::move(podspec);
  SetDefaultGpus(pod, spec, gpu_resource);
  return pod;
}

Json BuildHeadlessService(const Json& job, int master_port) {
  const std::string job_name = job["metadata"].value("name", "");
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", job_name},
            {"namespace", job["metadata"].value("namespace", "")},
            {"labels", {{Str(kJobLabel), job_name}}},
            {"ownerReferences", Json::array({JobOwnerReference(job)})}}},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", {{Str(kJobLabel), job_name}}},
            {"publishNotReadyAddresses", true},
            {"ports", Json::array({{{"name", "master"}, {"port", master_port}}})}}}};
}

bool SetCondition(Json& status, std::string_view type, std::string_view cond_status,
                  std::string_view reason, std::string_view message, int64_t generation,
                  std::chrono::system_clock::time_point now) {
  if (!status.is_object()) status = Json::object();
  Json& conds = status["conditions"];
  if (!conds.is_array()) conds = Json::array();
  Json* found = nullptr;
  for (auto& c : conds) {
    if (c.is_object() && c.value("type", "") == type) found = &c;
  }
  if (found == nullptr) {
    conds.push_back({{"type", Str(type)}});
    found = &conds.back();
  }
  Json& c = *found;
  bool changed = false;
  if (c.value("status", "") != cond_status) {
    c["status"] = Str(cond_status);
    c["lastTransitionTime"] = FormatTime(now);
    changed = true;
  } else if (!c.contains("lastTransitionTime")) {
    c["lastTransitionTime"] = FormatTime(now);
    changed = true;
  }
  if (c.value("reason", "") != reason) {
    c["reason"] = Str(reason);
    changed = true;
  }
  if (c.value("message", "") != message) {
    c["message"] = Str(message);
    changed = true;
  }
  if (!c.contains("observedGeneration") || c["observedGeneration"] != generation) {
    c["observedGeneration"] = generation;
    changed = true;
  }
  return changed;
}

namespace {

// "rank 3: container trainer ImagePullBackOff: <message>" for the first container of `pod` waiting
// with a reason other than the normal ContainerCreating / PodInitializing, else "".
std::string WaitingContainerDetail(const Json& pod, int rank) {
  return FirstContainerDetail(
      pod, {"initContainerStatuses", "containerStatuses"}, [&](const Json& cs) -> std::string {
        const Json& waiting = kube::AtPath(cs, "/state/waiting");
        const std::string reason = waiting.is_object() ? waiting.value("reason", "") : "";
        if (reason.empty() || reason == "ContainerCreating" || reason == "PodInitializing")
          return "";
        return "rank " + std::to_string(rank) + ": container " + cs.value("name", "?") + " " +
               reason + MessageSuffix(waiting);
      });
}

// Whether status.resourceClaimStatuses (`made`) has an entry for the pod's claim `name`.
bool ClaimMade(const Json& made, const std::string& name) {
  if (!made.is_array()) return false;
  return std::any_of(made.begin(), made.end(),
                     [&](const Json& m) { return m.is_object() && m.value("name", "") == name; });
}

// "rank 3: resource claim nvl72-channel not created yet (from ResourceClaimTemplate T)" for the
// first claim of `pod` made from a template that kube-controller-manager has not made yet (the
// pod's status.resourceClaimStatuses has no entry for it), else "".
std::string PendingClaimDetail(const Json& pod, int rank) {
  const Json& claims = kube::AtPath(pod, "/spec/resourceClaims");
  if (!claims.is_array()) return "";
  const Json& made = kube::AtPath(pod, "/status/resourceClaimStatuses");
  for (const Json& c : claims) {
    const std::string tmpl = c.is_object() ? c.value("resourceClaimTemplateName", "") : "";
    if (tmpl.empty()) continue;
    const std::string name = c.value("name", "");
    if (ClaimMade(made, name)) continue;
    std::string out = "rank " + std::to_string(rank) + ": resource claim ";
    out += name;
    out += " not created yet (from ResourceClaimTemplate ";
    out += tmpl;
    out += ")";
    return out;
  }
  return "";
}

}  // namespace

PodSummary SummarizePods(const model::JobPlacement& placement,
                         const std::vector<const Json*>& pods) {
  PodSummary s;
  s.ranks = static_cast<int>(placement.ranks.size());
  for (const Json* p : pods) {
    const model::RankAssignment* a = model::CurrentRankOf(*p, placement);
    if (a == nullptr) continue;
    const int rank = a->rank;
    ++s.created;
    std::string node;
    if (p->contains("spec")) node = (*p)["spec"].value("nodeName", "");
    if (!node.empty()) {
      if (node == a->node) {
        ++s.bound;
      } else {
        ++s.misplaced;
      }
    }
    if (const Json* c = model::UnschedulableCondition(*p); c != nullptr && s.refused.empty()) {
      s.refused =
          "rank " + std::to_string(rank) + " on " + a->node + ": " + c->value("message", "");
    }
    std::string phase;
    if (p->contains("status")) phase = (*p)["status"].value("phase", "");
    if (node.empty() && s.claim_pending.empty()) s.claim_pending = PendingClaimDetail(*p, rank);
    if (phase == "Pending" && !node.empty() && s.waiting.empty()) {
      s.waiting = WaitingContainerDetail(*p, rank);
    }
    if (phase == "Running") ++s.running;
    if (phase == "Succeeded") ++s.succeeded;
    if (phase == "Failed") {
      ++s.failed;
      if (s.first_failed_pod.empty()) {
        s.first_failed_pod = a->pod;
        s.first_failed_detail = FailedPodDetail(*p);
      }
    }
  }
  return s;
}

void ApplyAdmittedStatus(Json& status, const model::JobPlacement& placement, int64_t generation,
                         std::chrono::system_clock::time_point now) {
  if (!status.is_object()) status = Json::object();
  status["placement"] = model::PlacementToJson(placement);
  status["domains"] = JoinDomains(placement.domains);
  status["state"] = "Admitted";
  status["observedGeneration"] = generation;
  SetCondition(status, model::kConditionAdmitted, "True", "Admitted",
               "placed " + std::to_string(placement.ranks.size()) + " ranks in " +
                   JoinDomains(placement.domains),
               generation, now);
  SetCondition(status, model::kConditionPlaced, "False", "PodsPending",
               "0 of " + std::to_string(placement.ranks.size()) + " rank pods bound", generation,
               now);
}

bool ApplyWaitingStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now) {
  if (!status.is_object()) status = Json::object();
  bool changed =
      SetCondition(status, model::kConditionAdmitted, "False", "Waiting", message, generation, now);
  SetState(status, "Waiting", &changed);
  SetObserved(status, generation, &changed);
  return changed;
}

bool ApplyInvalidStatus(Json& status, std::string_view message, int64_t generation,
                        std::chrono::system_clock::time_point now) {
  if (!status.is_object()) status = Json::object();
  bool changed = SetCondition(status, model::kConditionAdmitted, "False", "InvalidSpec", message,
                              generation, now);
  SetState(status, "Invalid", &changed);
  SetObserved(status, generation, &changed);
  return changed;
}

bool ApplyPlacedStatus(Json& status, const model::JobPlacement& placement, const PodSummary& s,
                       int64_t generation, std::chrono::system_clock::time_point now) {
  if (!status.is_object()) status = Json::object();
  bool changed = false;
  const std::string n = std::to_string(s.ranks);
  changed |=
      SetCondition(status, model::kConditionAdmitted, "True", "Admitted",
                   "placed " + n + " ranks in " + JoinDomains(placement.domains), generation, now);
  if (s.bound == s.ranks && s.ranks > 0) {
    changed |=
        SetCondition(status, model::kConditionPlaced, "True", "AllRanksBound",
                     "all " + n + " rank pods bound to their planned nodes", generation, now);
  } else {
    std::string msg = std::to_string(s.bound) + " of " + n + " rank pods bound";
    if (s.created < s.ranks) msg += ", " + std::to_string(s.ranks - s.created) + " not created yet";
    if (s.misplaced > 0) msg += ", " + std::to_string(s.misplaced) + " bound to another node";
    if (!s.refused.empty()) msg += "; kube-scheduler refuses " + s.refused;
    if (!s.rejected.empty()) msg += "; the API server rejects " + s.rejected;
    const std::string_view reason = !s.rejected.empty()  ? "PodRejected"
                                    : s.misplaced > 0    ? "Misplaced"
                                    : !s.refused.empty() ? "Unschedulable"
                                                         : "PodsPending";
    changed |= SetCondition(status, model::kConditionPlaced, "False", reason, msg, generation, now);
  }
  std::string state = "Admitted";
  // A recovery owns the Running condition while it lasts (operator/recovery.h).
  const bool recovering = StatusConditionTrue(status, model::kConditionRecovering);
  if (s.failed > 0) {
    state = "Failed";
    const std::string msg = "rank pod " + s.first_failed_pod + " failed" +
                            (s.first_failed_detail.empty() ? "" : ": " + s.first_failed_detail);
    changed |=
        SetCondition(status, model::kConditionFailed, "True", "RankFailed", msg, generation, now);
    changed |=
        SetCondition(status, model::kConditionRunning, "False", "RankFailed", msg, generation, now);
  } else if (s.succeeded == s.ranks && s.ranks > 0) {
    state = "Succeeded";
    changed |= SetCondition(status, model::kConditionSucceeded, "True", "AllRanksSucceeded",
                            "all " + n + " ranks succeeded", generation, now);
    changed |= SetCondition(status, model::kConditionRunning, "False", "Completed",
                            "all ranks completed", generation, now);
  } else if (s.running == s.ranks && s.ranks > 0) {
    state = "Running";
    changed |= SetCondition(status, model::kConditionRunning, "True", "AllRanksRunning",
                            "all " + n + " ranks running", generation, now);
  } else if (!recovering) {
    const NotRunning why = NotRunningReason(s);
    changed |= SetCondition(status, model::kConditionRunning, "False", why.reason, why.message,
                            generation, now);
  }
  SetState(status, state, &changed);
  changed |= SyncRecoveringState(status);
  std::string domains = JoinDomains(placement.domains);
  if (status.value("domains", "") != domains) {
    status["domains"] = domains;
    changed = true;
  }
  SetObserved(status, generation, &changed);
  return changed;
}

NotRunning NotRunningReason(const PodSummary& s) {
  const std::string head =
      std::to_string(s.running) + " of " + std::to_string(s.ranks) + " ranks running; ";
  if (!s.rejected.empty()) return {"PodRejected", head + "the API server rejects " + s.rejected};
  if (!s.refused.empty()) return {"Unschedulable", head + "kube-scheduler refuses " + s.refused};
  if (s.misplaced > 0) {
    return {"Misplaced", head + std::to_string(s.misplaced) + " rank pods bound to another node"};
  }
  if (!s.claim_pending.empty()) return {"ClaimPending", head + s.claim_pending};
  if (!s.waiting.empty()) return {"ContainerWaiting", head + s.waiting};
  if (s.bound + s.misplaced < s.ranks) {
    const int unbound = s.ranks - s.bound - s.misplaced;
    return {"PodsPending", head + std::to_string(unbound) + " rank pods not bound to a node yet"};
  }
  return {"RanksNotRunning", head + "the others are starting"};
}

std::optional<Stuck> StuckOf(const Json& job, std::chrono::system_clock::time_point now,
                             std::chrono::seconds bound,
                             std::optional<std::chrono::seconds>* recheck_in) {
  if (recheck_in != nullptr) recheck_in->reset();
  if (bound.count() <= 0 || !model::HoldsReservation(job) || model::JobFinished(job)) {
    return std::nullopt;
  }
  const Json* c = model::FindCondition(job, model::kConditionRunning);
  if (c == nullptr || c->value("status", "") != "False") return std::nullopt;
  const std::string since = c->value("lastTransitionTime", "");
  auto t = kube::ParseTime(since);
  if (!t.ok()) return std::nullopt;
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - *t);
  if (age < bound) {
    if (recheck_in != nullptr) *recheck_in = bound - age;
    return std::nullopt;
  }
  return Stuck{c->value("reason", ""), c->value("message", ""), since, age};
}

std::map<std::string, int, std::less<>> CountStuckJobs(const std::vector<kube::ObjectPtr>& jobs,
                                                       std::chrono::system_clock::time_point now,
                                                       std::chrono::seconds bound) {
  std::map<std::string, int, std::less<>> out;
  for (const auto& j : jobs) {
    if (auto stuck = StuckOf(*j, now, bound)) ++out[stuck->reason];
  }
  return out;
}

std::string JobMetricState(const Json& job) {
  const Json& st = kube::AtPath(job, "/status/state");
  std::string state = st.is_string() ? st.get<std::string>() : "";
  if (state.empty()) state = "Pending";
  if (state != "Succeeded" && state != "Failed" &&
      model::ConditionIsTrue(job, model::kConditionRecovering)) {
    return "Recovering";
  }
  return state;
}

std::map<std::string, int, std::less<>> CountJobStates(const std::vector<kube::ObjectPtr>& jobs) {
  std::map<std::string, int, std::less<>> out;
  for (const auto& j : jobs) ++out[JobMetricState(*j)];
  return out;
}

}  // namespace nvl72::op
